"""PersistBench's two scorers: ``classic-v1`` (per frame against the ground truth, weight-free) and
``paper-v3`` (the published protocol, on model backends and a judge)."""

from __future__ import annotations

from collections.abc import Callable

from persistbench.core.markup import Markup
from persistbench.core.protocol import Protocol
from persistbench.core.scorer import Scorer
from persistbench.core.suite import ScoreContext
from persistbench.io.files import write_json
from persistbench.suites.persistbench import paper, scoring
from persistbench.suites.persistbench.layout import public_result


class ClassicScorer(Scorer):
    """``classic-v1``: each frame metric inside the ground truth's mask, on visible and off-screen frames."""

    name = "classic"
    schema = scoring.SCHEMA
    report = "persistbench.suites.persistbench.report"

    def config_problems(self, config: dict) -> list[str]:
        return scoring.config_problems(config)

    def score_case(self, suite, case, pred, protocol: Protocol, ctx: ScoreContext) -> dict:
        full = suite.case(case.subset, case.case_id)
        return scoring.score_case(full, pred, protocol, ctx.wanted, ctx.unavailable, ctx.backends).to_json()

    def merge(self, new: dict, old: dict) -> dict:
        return scoring.merge(new, old)

    def summarise(self, suite, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        fields = {
            "mask_source": sorted({r["mask_source"] for r in results}),
            "frames": scoring.frame_rule(protocol.config),
        }
        return fields, scoring.aggregate(results).to_json()

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return scoring.tables(summary)


class PaperScorer(Scorer):
    """``paper-v3``: object permanence (a judge), motion continuity and appearance preservation (backends);
    each case is also written in the public toolkit's ``result.json`` form."""

    name = "paper"
    schema = paper.SCHEMA
    report = "persistbench.suites.persistbench.report"

    def backends_needed(self, protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
        return paper.backends_needed(protocol.config, wanted)

    def score_case(self, suite, case, pred, protocol: Protocol, ctx: ScoreContext) -> dict:
        full = suite.case(case.subset, case.case_id)
        record = paper.score_case(full, pred, protocol, ctx.wanted, ctx.backends).to_json()
        if ctx.scores_dir is not None and not record["judge"]["failed"]:
            cfg = protocol.config
            public = paper.to_public(record, cfg["eval_size"], cfg["matching"]["bbox_margin"])
            public |= {"prediction_sha256": record["prediction_sha256"]}
            write_json(public_result(ctx.scores_dir, case.subset, case.case_id), public)
        return record

    def scored_metrics(self, record: dict) -> set[str]:
        if record.get("judge", {}).get("failed"):  # failed judgments are asked again
            return set(record.get("metrics", {})) - {"object_permanence"}
        return super().scored_metrics(record)

    def merge(self, new: dict, old: dict) -> dict:
        return new  # every metric is scored together: a new record replaces the old one

    def summarise(self, suite, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        return {"procedure": paper.PROCEDURE, "frames": scoring.frame_rule(protocol.config)}, paper.summarise(results)

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return paper.tables(summary)

    def report_steps(self, runs: list[dict]) -> int:
        return 0

    def report_sections(
        self, runs: list[dict], advance: Callable[[int], object]
    ) -> tuple[str, list[Markup], list[Markup]]:
        return self._report().paper_sections(runs)


CLASSIC, PAPER = ClassicScorer(), PaperScorer()
SCORERS = {"classic-v1": CLASSIC, "card-v1": CLASSIC, "paper-v3": PAPER}
