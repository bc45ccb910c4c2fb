"""Scoring protocols and their scorers.

A protocol is a JSON file, the single source of every scoring parameter: shipped (a suite's
``protocol_dir``, ``persistbench/data/protocols/<name>.json`` for the built-ins, linked from
``configs/``) or a file the user passes; either way it is untrusted JSON, checked against the schema
of its :class:`Scorer` (:mod:`persistbench.core.schema`): every field is declared there, and each one
acts on the scores. A suite maps its shipped protocols to scorers
(:attr:`persistbench.core.suite.Suite.scorers`); the scorer is chosen here and only here
(:func:`choose_scorer`): a shipped protocol's name names it, any other file gets the suite's scorer
whose schema its fields match best. The protocol carries it (:attr:`Protocol.scorer`): ``score`` and
``report`` ask it and never branch on a protocol; the scores header records the suite's and the
scorer's names, which is how ``report`` finds them again. A protocol whose content differs from the
shipped one of its name scores into ``scores/<name>-<sha256[:8]>/``.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from persistbench.core.errors import PersistbenchError
from persistbench.core.schema import Check, problems
from persistbench.io.files import read_json
from persistbench.io.names import name_problem
from persistbench.metrics.registry import METRICS

if TYPE_CHECKING:
    from persistbench.core.calibration import Item
    from persistbench.core.case import CaseRef, Prediction, ScoreContext
    from persistbench.core.markup import Markup
    from persistbench.core.stats import Estimands

S = TypeVar("S")  # the suite a scorer scores


@dataclass(frozen=True)
class Protocol:
    name: str
    config: dict
    sha256: str  # of the canonical JSON: recorded in every output
    dirname: str  # scores/<dirname>/: the name, or name-<sha256[:8]> for a protocol changed from the shipped one
    scorer: Scorer | None = field(default=None, compare=False, repr=False)  # who scores it (chosen when loaded)

    @property
    def metrics(self) -> tuple[str, ...]:
        """What the protocol scores by default."""
        return tuple(self.config["metrics"])

    @property
    def on_request(self) -> tuple[str, ...]:
        """What it scores only when asked (``--metrics``): the protocol's ``extras`` field, where its scorer has one."""
        return tuple(self.config.get("extras", ()))

    def params(self, metric: str) -> dict:
        """The parameters of ``metric`` (its section of the protocol; empty when it has none)."""
        section = METRICS[metric].params
        return dict(self.config.get(section, {})) if section else {}


class Scorer(ABC, Generic[S]):
    """One protocol family's scoring, of the suite ``S`` (a scorer's methods get the suite instance whose cases
    they score). ``name`` is recorded in every aggregate file's header. Scorers are stateless: one instance serves
    every case, in any process."""

    name: ClassVar[str]
    schema: ClassVar[dict[str, Check]]  # every protocol field and its check (``name`` is checked for all)

    def config_problems(self, config: dict) -> list[str]:
        """What is wrong with a protocol's content across fields, once every field passed :attr:`schema`."""
        return []

    def backends_needed(self, protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
        """The model backends (:data:`persistbench.backends.BACKENDS`) scoring ``wanted`` loads."""
        return []

    @abstractmethod
    def score_case(self, suite: S, case: CaseRef, pred: Prediction, protocol: Protocol, ctx: ScoreContext) -> dict:
        """The per-case scores record of ``case`` (JSON form documented in docs/data-format.md)."""

    def scored_metrics(self, record: dict) -> set[str]:
        """The metrics a per-case record holds (``--resume`` keeps a record that holds all those asked for)."""
        values = record.get("metrics")
        return set(values) if isinstance(values, dict) else set()

    @abstractmethod
    def merge(self, new: dict, old: dict) -> dict:
        """``new`` plus the metrics ``old`` (an earlier scoring of the same prediction and protocol) has and it lacks."""

    @abstractmethod
    def summarise(self, suite: S, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        """``(header fields, body)``: the scorer's additions to every aggregate file's header, and the body of
        ``summary.json``, from the per-case records."""

    @abstractmethod
    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        """``(summary.md table lines, leaderboard.csv columns)`` of a summary."""

    def judge_battery(self, suite: S, protocol: Protocol, wanted: tuple[str, ...]) -> list[Item]:
        """The judge's calibration battery for this protocol on ``suite``'s dataset (:mod:`persistbench.core.calibration`):
        questions whose answers hold by construction; none when none of ``wanted`` asks a judge."""
        return []

    def estimands(self, results: list[dict], summary: dict) -> Estimands | None:
        """The summary's numbers as expressions over the units a bootstrap resamples (:mod:`persistbench.core.stats`),
        named by their ``leaderboard.csv`` columns, for their intervals; None: this scorer's numbers have none."""
        return None

    def write_files(self, summary: dict, results: list[dict], scores_dir: Path) -> None:
        """Files of the scorer's own beside the aggregates of a scoring (R2M-Bench: upstream's result layout);
        ``summary`` is ``summary.json``'s content, header included."""

    def report_steps(self, runs: list[dict]) -> int:
        """How many slow steps :meth:`report_sections` reports through ``advance`` (the progress bar's total)."""
        return 0

    @abstractmethod
    def report_sections(
        self, runs: list[dict], advance: Callable[[int], object]
    ) -> tuple[str, list[Markup], list[Markup]]:
        """``(a note on what the numbers mean, leaderboard HTML parts, figure HTML parts)`` for scored runs
        (each ``{"name", "path", "summary", "results", "info", "layout"}``)."""

    def foreign_results(self, suite: type[S], path: Path) -> list[dict] | None:
        """Another toolkit's result files at ``path`` read as scored runs for ``report`` (each ``{"name", "path",
        "summary", "results", "info", "layout"}``, summarised by this scorer), or None when ``path`` holds none
        it reads (R2M-Bench: upstream's result layout)."""
        return None


# ---------------------------------------------------------------- loading


def _canonical_sha256(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


SHIPPED = Path(
    str(resources.files(__name__.partition(".")[0]) / "data" / "protocols")
)  # the built-in suites' protocols


def shipped_path(name: str, directory: Path = SHIPPED) -> Path:
    return directory / f"{name}.json"


def choose_scorer(config: object, scorers: Mapping[str, Scorer]) -> Scorer:
    """The scorer of a protocol's content: the one of its shipped name, else the one whose schema shares the
    most fields with it (fewest unknown ones breaking a tie; then the first)."""
    if isinstance(config, dict) and isinstance(config.get("name"), str) and config["name"] in scorers:
        return scorers[config["name"]]
    keys = set(config) - {"name"} if isinstance(config, dict) else set()
    unique = list(dict.fromkeys(scorers.values()))
    return max(unique, key=lambda s: (len(keys & set(s.schema)), -len(keys - set(s.schema))))


def load_protocol(
    spec: str, scorers: Mapping[str, Scorer], overrides: dict | None = None, directory: Path = SHIPPED
) -> Protocol:
    """A protocol by shipped name (a file ``<name>.json`` in ``directory``) or JSON path, its scorer chosen from
    ``scorers`` (shipped protocol name -> scorer: the suite's) and its content checked against that scorer's
    schema; ``overrides`` replace top-level fields."""
    shipped = tuple(scorers)
    path = Path(spec)
    if not path.is_file():
        path = shipped_path(spec, directory) if name_problem(spec) is None and spec in shipped else path
    if not path.is_file():
        raise PersistbenchError(f"--protocol {spec}: no such protocol (shipped: {', '.join(shipped)}) or file")
    config = read_json(path)
    if overrides and isinstance(config, dict):
        config = {**config, **overrides}
    scorer = choose_scorer(config, scorers)
    problem = next(problems(config, scorer.schema), None) or next(iter(scorer.config_problems(config)), None)
    if problem:
        raise PersistbenchError(f"{path}: {problem}")
    if config["name"] not in shipped and shipped_path(config["name"]).is_file():
        raise PersistbenchError(f"{path}: name {config['name']!r} is another suite's shipped protocol; choose another")
    sha = _canonical_sha256(config)
    original = shipped_path(config["name"], directory if config["name"] in shipped else SHIPPED)
    same = not original.is_file() or _canonical_sha256(read_json(original)) == sha
    dirname = config["name"] if same else f"{config['name']}-{sha[:8]}"
    return Protocol(config["name"], config, sha, dirname, scorer)
