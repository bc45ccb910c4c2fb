"""The suite interface: what a benchmark owns, so that ``infer``, ``score``, ``verify`` and ``report`` don't branch on it.

A suite owns its on-disk format (recognised from a dataset root by :meth:`Suite.detect`), its
case list, what the model gets for a case (:meth:`Suite.request`), how a run's prediction of a
case is found (:meth:`Suite.read_prediction`), the options it takes (:attr:`Suite.option_specs`),
and its protocols, each scored by a :class:`~persistbench.core.scorer.Scorer` (:attr:`Suite.scorers`).
Everything else (the case loop, the run layout, resume, workers, shards, coverage, the output
files) is shared.

Adding a suite: a folder with a :class:`Suite` subclass, registered by a line in
:data:`persistbench.core.suites.BUILTIN` or by an entry point of the group ``persistbench.suites``;
see docs/architecture.md.
"""

from __future__ import annotations

import functools
import hashlib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

import numpy as np

from persistbench.backends import BackendOptions
from persistbench.core.errors import UsageError
from persistbench.core.options import SuiteOption
from persistbench.core.protocol import SHIPPED, Protocol, load_protocol
from persistbench.core.scorer import Scorer
from persistbench.executors import Executor, RunResult, Shard
from persistbench.io.files import sha256_file
from persistbench.metrics.registry import order


@dataclass(frozen=True)
class CaseRef:
    """A case of any suite: ``subset`` groups cases (PersistBench: dynamic/static; R2M: the trajectory)."""

    subset: str
    case_id: str


@dataclass
class Request:
    """What a model gets for one case and how its answer is written.

    ``fields`` are the keyword arguments of the model interface's
    :class:`~persistbench.models.base.ModelInput`: the suite builds them without importing model
    code, and ``infer`` makes the ``ModelInput``.
    """

    fields: dict  # ModelInput's keyword arguments
    n_frames: int  # frames the model must return
    size: tuple[int, int]  # (h, w) of each returned frame
    record: dict  # written to the case's case.json beside the frames
    ground_truth: tuple[np.ndarray, np.ndarray] | None = None  # (frames, masks) for oracle models only
    video_fps: float | None = None  # write the frames as a lossless gen.mp4 at this rate, not as PNG files


@dataclass(frozen=True)
class Prediction:
    """A run's prediction of one case, as the suite found it (suites subclass it with what they need to score it)."""

    files: tuple[Path, ...]  # frame images, or one video
    record: Path | None  # a record that lists every file's sha256 (its hash identifies the prediction)

    @functools.cached_property
    def digest(self) -> str:
        """Identity of the prediction's files, recorded in the scores (for ``--resume``); hashed on first use."""
        if self.record is not None:
            return sha256_file(self.record)
        h = hashlib.sha256()
        for f in self.files:
            h.update(f.name.encode() + b"\0" + bytes.fromhex(sha256_file(f)))
        return h.hexdigest()


@dataclass
class CaseScores:
    """What every suite's per-case scores record holds (suites subclass it with their values); JSON: :meth:`to_json`."""

    unavailable: dict[str, str]  # metric -> why it was not computed (a backend that cannot run here)
    protocol: str
    protocol_sha256: str
    requested: list[str]  # the metrics asked for, in registry order
    prediction_sha256: str  # identity of what was scored (for --resume and merging)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict):
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    @staticmethod
    def common(protocol: Protocol, wanted, unavailable: dict[str, str], prediction_sha256: str) -> dict:
        """The fields every suite's record holds, as keyword arguments (``requested`` in registry order;
        ``unavailable``: why each metric of ``wanted`` that was not computed was not)."""
        return {
            "unavailable": {m: unavailable[m] for m in order(wanted) if m in unavailable},
            "protocol": protocol.name,
            "protocol_sha256": protocol.sha256,
            "requested": order(wanted),
            "prediction_sha256": prediction_sha256,
        }


def keep_unavailable(new: dict, old: dict, metrics) -> list[str]:
    """Merging a record into an earlier one: the metrics of ``metrics`` that ``old`` recorded unavailable and
    ``new`` did not ask for, their reasons copied into ``new["unavailable"]`` (registry order); returns them."""
    before = old.get("unavailable") or {}
    kept = [m for m in before if m not in new["requested"] and m in metrics]
    reasons = {**new["unavailable"], **{m: before[m] for m in kept}}
    new["unavailable"] = {m: reasons[m] for m in order(list(reasons))}
    return kept


@dataclass
class ScoreContext:
    """What a suite's scorer may use beyond the case and its prediction (loaded once per process)."""

    wanted: tuple[str, ...]  # the metrics to compute now
    unavailable: dict[str, str] = field(default_factory=dict)  # metric of wanted -> why its backend cannot run here
    options: dict = field(default_factory=dict)  # suite options from the command line (e.g. R2M's --pairs)
    allow_partial: bool = False  # score what was predicted even when cases are missing (--allow-partial)
    scores_dir: Path | None = None  # scores/<protocol>/: where a suite may keep files of its own (R2M: pairs/)
    backends: BackendOptions = field(default_factory=BackendOptions)  # how model backends are loaded


class Suite(ABC):
    """One benchmark's data, model input, prediction layout and scoring. Instances are bound to a dataset root."""

    name: ClassVar[str]
    title: ClassVar[str]
    scorers: ClassVar[dict[str, Scorer]]  # shipped protocol name -> its scorer; the first is the default protocol
    protocols: ClassVar[tuple[str, ...]]  # the shipped protocol names (from scorers)
    protocol_dir: ClassVar[Path] = SHIPPED  # where the shipped protocols are, as <name>.json
    subsets: ClassVar[tuple[str, ...]]
    external_label: ClassVar[str] = "external predictions"  # the model name of a run without run.json
    remote: ClassVar[bool] = False  # whether the dataset root may be a URL (WROP's corpus)
    option_specs: ClassVar[tuple[SuiteOption, ...]] = ()  # what the suite takes on the command line, per command
    gives_cameras: ClassVar[bool] = True  # whether a request holds input and target cameras
    has_ground_truth: ClassVar[bool] = True  # whether a request can hold the target (for an oracle model)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "scorers" in cls.__dict__:
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
    def foreign_results(cls, path: Path) -> list[dict] | None:
        """Another toolkit's result files at ``path`` read as scored runs for ``report`` (each ``{"name", "path",
        "summary", "results", "info", "layout"}``, the summary made by this suite's own aggregation), or None
        when ``path`` holds none of this suite's (R2M-Bench: upstream's result layout)."""
        return None

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
        """Keys of every case the run holds a prediction for (see :meth:`keys_of`)."""

    @abstractmethod
    def keys_of(self, case: CaseRef, run_info: dict | None) -> tuple[str, ...]:
        """The keys under which :meth:`predicted` lists ``case``."""

    def key(self, case: CaseRef) -> str:
        """A case's name in messages, coverage lists and the executor's records: unique in the dataset and
        a safe file name (default ``<subset>.<case_id>``)."""
        return f"{case.subset}.{case.case_id}"

    def on_disk(self, case: CaseRef) -> bool:
        """Whether the case's data is present (a recorded case whose folder is gone is not)."""
        return True

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

    # ---------------------------------------------------------------- report

    @classmethod
    def companion(cls, name: str):
        """The module ``name`` beside the suite's class (``suites/<suite>/<name>.py``: ``report``, ``demo``),
        imported now; None when the suite has none."""
        import importlib
        import importlib.util

        module = f"{cls.__module__.rpartition('.')[0]}.{name}"
        return importlib.import_module(module) if importlib.util.find_spec(module) is not None else None
