"""The suite interface: what a benchmark owns, so that ``infer``, ``score``, ``verify`` and ``report`` don't branch on it.

A suite owns its on-disk format (recognised from a dataset root by :meth:`Suite.detect`), its
case list, what the model gets for a case (:meth:`Suite.request`), how a run's prediction of a
case is found (:meth:`Suite.read_prediction`), the options it takes (:attr:`Suite.option_specs`),
and its protocols, each scored by a :class:`~persistbench.core.protocol.Scorer` (:attr:`Suite.scorers`).
Everything else (the case loop, the run layout, resume, workers, shards, coverage, the output
files) is shared.

Adding a suite: a folder with a :class:`Suite` subclass, registered by a line in
:data:`persistbench.suites.BUILTIN` or by an entry point of the group ``persistbench.suites``;
see docs/architecture.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from persistbench.core.case import CaseRef, Prediction, Request
from persistbench.core.errors import UsageError
from persistbench.core.options import SuiteOption
from persistbench.core.protocol import SHIPPED, Protocol, Scorer, load_protocol
from persistbench.core.registry import Registry
from persistbench.executors import Executor, RunResult, Shard

if TYPE_CHECKING:
    from persistbench.core.checks import Check


@dataclass(frozen=True)
class DemoResult:
    """What one suite's demo made: its report, the summary of each run, and the table it prints."""

    report: Path
    summaries: dict[str, dict]
    table: str


class Suite(ABC):
    """One benchmark's data, model input, prediction layout and scoring. Instances are bound to a dataset root."""

    name: ClassVar[str]
    title: ClassVar[str]
    # shipped protocol name -> its scorer, or ``module:attr`` naming it (imported when first used); the first is
    # the default protocol. A subclass gives a dict; it is made a Registry.
    scorers: ClassVar[Mapping[str, Scorer | str]]
    protocols: ClassVar[tuple[str, ...]]  # the shipped protocol names (from scorers)
    protocol_dir: ClassVar[Path] = SHIPPED  # where the shipped protocols are, as <name>.json
    subsets: ClassVar[tuple[str, ...]]
    external_label: ClassVar[str] = "external predictions"  # the model name of a run without run.json
    remote: ClassVar[bool] = False  # whether the dataset root may be a URL (WROP's corpus)
    option_specs: ClassVar[tuple[SuiteOption, ...]] = ()  # what the suite takes on the command line, per command
    gives_cameras: ClassVar[bool] = True  # whether a request holds input and target cameras
    has_ground_truth: ClassVar[bool] = True  # whether a request can hold the target (for an oracle model)
    question: ClassVar[str] = "Which prediction is better?"  # what the arena's page asks of two predictions

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "scorers" in cls.__dict__:
            if not isinstance(cls.scorers, Registry):
                cls.scorers = Registry("protocol", cls.scorers, option="--protocol")
            cls.protocols = tuple(cls.scorers)

    def __init__(self, root: str | Path, options: dict | None = None):
        self.root = Path(root)
        self.options = dict(options or {})

    # ---------------------------------------------------------------- data

    @classmethod
    @abstractmethod
    def detect(cls, root: Path) -> bool:
        """Whether ``root`` holds this suite's dataset (cheap: names and a few small files)."""

    def dataset_id(self) -> str:
        """How ``run.json`` names the dataset (an absolute path, or a URL pinned to a revision)."""
        return str(self.root.resolve())

    def dataset_options(self) -> dict:
        """The options given that decide which cases exist (``SuiteOption.case``; WROP: ``tasks``,
        ``per_task``), recorded in ``run.json`` so that ``score`` opens the dataset the same way."""
        cases = [o.name for o in self.option_specs if o.case]
        return {k: self.options[k] for k in cases if self.options.get(k) is not None}

    @abstractmethod
    def cases(self) -> list[CaseRef]:
        """Every case, in a deterministic order (by subset, then case id)."""

    @abstractmethod
    def fingerprint(self) -> str:
        """A hash of what the cases are (recorded by ``infer``, checked by ``score``)."""

    def case_digest(self, case: CaseRef) -> str | None:
        """A sha256 of what one case is (its files' checksums, its metadata), recorded in each predicted case's
        ``case.json`` so that a run stays valid for the cases it predicted when the dataset grows or changes
        elsewhere; None where the suite cannot say (then the whole :meth:`fingerprint` must match)."""
        return None

    @abstractmethod
    def verify(self, progress: bool = False) -> tuple[list[str], int]:
        """``(one 'path: problem' line per problem, number of cases checked)``."""

    def skipped(self) -> dict[str, str]:
        """Samples of the dataset left out of :meth:`cases` (incomplete or failed ones a suite tolerates): key ->
        why. ``infer`` records them in ``run.json`` and every command that opens the dataset says how many."""
        return {}

    # ---------------------------------------------------------------- inference

    @abstractmethod
    def request(self, case: CaseRef, num_frames: int, resolution: tuple[int, int], oracle: bool) -> Request:
        """What the model gets for ``case`` at its sampling (``num_frames``, ``resolution`` = (h, w), -1 = all/native)."""

    def sampling_note(self) -> str:
        """How :meth:`request` samples, as recorded in ``run.json``."""
        return ""

    # ---------------------------------------------------------------- scoring

    @classmethod
    def load_protocol(cls, spec: str | None = None, overrides: dict | None = None) -> Protocol:
        """The protocol ``spec`` (a shipped name or a file; None: the suite's default) with its scorer (chosen
        from :attr:`scorers`), checked against that scorer's schema; ``overrides`` replace top-level fields."""
        return load_protocol(spec or next(iter(cls.scorers)), cls.scorers, overrides, cls.protocol_dir)

    @abstractmethod
    def read_prediction(self, run: Path, run_info: dict | None, case: CaseRef) -> Prediction | None:
        """The run's prediction of ``case``, or None; its records are checked (untrusted)."""

    @abstractmethod
    def predicted(self, run: Path, run_info: dict | None) -> set[str]:
        """The :meth:`key` of every case the run holds a prediction for (in our layout or another toolkit's)."""

    def key(self, case: CaseRef) -> str:
        """A case's one name, ``<subset>.<case_id>``: in messages, coverage lists, the executor's records, the
        arena's votes; unique in the dataset and a safe file name."""
        return f"{case.subset}.{case.case_id}"

    def on_disk(self, case: CaseRef) -> bool:
        """Whether the case's data is present (a recorded case whose folder is gone is not)."""
        return True

    def availability(self) -> dict | None:
        """Which cases of the benchmark this dataset has, where its sources can disappear (PersistBench): its
        availability manifest (docs/data-format.md: ``total``, ``built``, ``date``, ``fingerprint``, ``cases``:
        key -> ``{status, kind}``); None otherwise."""
        return None

    # ---------------------------------------------------------------- getting the data

    @classmethod
    def fetch(
        cls,
        output: Path,
        repo: str | None,
        revision: str | None,
        from_dir: str | None,
        include: str,
        progress: bool,
        options: dict | None = None,
        executor: Executor | None = None,
        shard: Shard | None = None,
        aggregate_only: bool = False,
    ) -> RunResult:
        """Fetch this suite's published data into ``output`` (from the Hub, or ``from_dir``: a folder, or a URL
        where the suite reads remote data) on ``executor``, one file per call; ``options`` are the suite's
        options for ``fetch`` (WROP: ``tasks``); ``shard`` fetches one part, ``aggregate_only`` then checks them and writes the fetch record.
        The result's ``value`` is a one-line summary with the next command to run (None for a shard)."""
        raise UsageError(f"--suite {cls.name}: nothing to fetch")

    # ---------------------------------------------------------------- synthetic data

    @classmethod
    def synthesize(cls, out: Path, config_file: str | None, options: dict, progress: bool = True) -> str:
        """Write this suite's synthetic test data under ``out`` from a config file and the options given
        (its ``synth`` options, by name); returns a one-line description of what was written."""
        raise UsageError(f"--suite {cls.name}: no synthetic data generator")

    # ---------------------------------------------------------------- offline demo

    @classmethod
    def demo(cls, out: Path, executor: Executor, progress: bool, step: Callable[[str], None]) -> DemoResult | None:
        """Run this suite's offline demo into ``out`` on ``executor`` (``step`` prints a timed line): the data it
        makes, a model run, its scores and a report; None when the suite has no demo."""
        return None

    # ---------------------------------------------------------------- this machine

    @classmethod
    def checks(cls) -> list[Check]:
        """What ``doctor`` checks for this suite's commands beyond the core's (PersistBench: yt-dlp's age, a
        JavaScript runtime, the Google Cloud CLI): each says what was found and the fix."""
        return []
