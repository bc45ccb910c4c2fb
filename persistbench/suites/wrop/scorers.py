"""WROP's scorer, ``wrop-cont-v1``: continuation frames against the target, beside holding the last input frame."""

from __future__ import annotations

from persistbench.core.protocol import Protocol
from persistbench.core.scorer import Scorer
from persistbench.core.suite import ScoreContext
from persistbench.suites.wrop import scoring


class ContinuationScorer(Scorer):
    """Per sample: each metric per scored target frame, full and in the changed region, and its gain over hold."""

    name = "continuation"
    schema = scoring.SCHEMA
    report = "persistbench.suites.wrop.report"

    def score_case(self, suite, case, pred, protocol: Protocol, ctx: ScoreContext) -> dict:
        preds, targets, last, scored, ids = suite.continuation(case, pred, protocol)
        return scoring.score_frames(preds, targets, last, scored, protocol, ctx, ids).to_json()

    def scored_metrics(self, record: dict) -> set[str]:
        values = record.get("values")
        full = values.get("full") if isinstance(values, dict) else None
        return set(full) if isinstance(full, dict) else set()

    def merge(self, new: dict, old: dict) -> dict:
        return scoring.merge(new, old)

    def summarise(self, suite, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        body = scoring.summarise(results, protocol.config["exclude_tasks"]).to_json()
        return {"dataset_options": suite.dataset_options()}, body

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return scoring.tables(summary)


CONTINUATION = ContinuationScorer()
SCORERS = {"wrop-cont-v1": CONTINUATION}
