"""The scorer interface: how one protocol family scores a case, merges, summarises, tabulates and reports.

A suite maps its protocols to scorers (:attr:`persistbench.core.suite.Suite.scorers`); loading a
protocol (:meth:`persistbench.core.suite.Suite.load_protocol`) is the only place a scorer is chosen,
and the protocol carries it (:attr:`persistbench.core.protocol.Protocol.scorer`). ``score`` and
``report`` then ask the protocol's scorer and never branch on a protocol; the scores header records
the suite's and the scorer's names, which is how ``report`` finds them again.

Scorers are stateless: one instance serves every case, in any process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from pathlib import Path

    from persistbench.core.markup import Markup
    from persistbench.core.protocol import Check, Protocol
    from persistbench.core.suite import CaseRef, Prediction, ScoreContext, Suite


class Scorer(ABC):
    """One protocol family's scoring. ``name`` is recorded in every aggregate file's header."""

    name: ClassVar[str]
    schema: ClassVar[dict[str, Check]]  # every protocol field and its check (``name`` is checked for all)

    def config_problems(self, config: dict) -> list[str]:
        """What is wrong with a protocol's content across fields, once every field passed :attr:`schema`."""
        return []

    def backends_needed(self, protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
        """The model backends (:data:`persistbench.backends.BACKENDS`) scoring ``wanted`` loads."""
        return []

    @abstractmethod
    def score_case(self, suite: Suite, case: CaseRef, pred: Prediction, protocol: Protocol, ctx: ScoreContext) -> dict:
        """The per-case scores record of ``case`` (JSON form documented in docs/data-format.md)."""

    def scored_metrics(self, record: dict) -> set[str]:
        """The metrics a per-case record holds (``--resume`` keeps a record that holds all those asked for)."""
        values = record.get("metrics")
        return set(values) if isinstance(values, dict) else set()

    @abstractmethod
    def merge(self, new: dict, old: dict) -> dict:
        """``new`` plus the metrics ``old`` (an earlier scoring of the same prediction and protocol) has and it lacks."""

    @abstractmethod
    def summarise(self, suite: Suite, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        """``(header fields, body)``: the scorer's additions to every aggregate file's header, and the body of
        ``summary.json``, from the per-case records."""

    @abstractmethod
    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        """``(summary.md table lines, leaderboard.csv columns)`` of a summary."""

    def write_files(self, summary: dict, results: list[dict], scores_dir: Path) -> None:  # noqa: B027 (optional hook)
        """Files of the scorer's own beside the aggregates of a scoring (R2M-Bench: upstream's result layout);
        ``summary`` is ``summary.json``'s content, header included."""

    report: ClassVar[str]  # the module whose ``steps(runs)`` and ``sections(runs, advance)`` make its report

    def report_steps(self, runs: list[dict]) -> int:
        """How many slow steps :meth:`report_sections` reports through ``advance`` (the progress bar's total)."""
        return self._report().steps(runs)

    def report_sections(
        self, runs: list[dict], advance: Callable[[int], object]
    ) -> tuple[str, list[Markup], list[Markup]]:
        """``(a note on what the numbers mean, leaderboard HTML parts, figure HTML parts)`` for scored runs
        (each ``{"name", "path", "summary", "results", "info", "layout"}``): :attr:`report`'s ``sections``."""
        return self._report().sections(runs, advance)

    def _report(self):
        import importlib

        return importlib.import_module(self.report)
