"""R2M-Bench's scorer: relative revisit scores of each generated video on its pre-sampled pairs, NMR
summaries (``r2m-v1`` and ``r2m-paper-v1`` differ in their pair sampler, not in how they score)."""

from __future__ import annotations

from persistbench.core.protocol import Protocol
from persistbench.core.scorer import Scorer
from persistbench.core.suite import ScoreContext
from persistbench.metrics.registry import METRICS
from persistbench.suites.r2m import scoring


class NmrScorer(Scorer):
    """Per video: each metric on its revisit and motion pairs, relative to its own distribution; per run: NMR."""

    name = "nmr"
    schema = scoring.SCHEMA
    report = "persistbench.suites.r2m.report"

    def backends_needed(self, protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
        return scoring.backends_needed(protocol, wanted)

    def score_case(self, suite, case, pred, protocol: Protocol, ctx: ScoreContext) -> dict:
        found, frames, n_video, n_poses, pair_file = suite.pair_frames(case, pred, protocol, ctx.scores_dir)
        ids = (found.subset, found.case_id, pred.digest)
        return scoring.score_video(frames, n_video, n_poses, pair_file, protocol, ctx, ids).to_json()

    def scored_metrics(self, record: dict) -> set[str]:
        """Metrics with values, and those reported unavailable because a model backend of their protocol section
        was missing (``--resume`` does not retry them; ``--metrics NAME`` once the backend is there does; the
        metrics with backends of their own are judged by ``score`` against what is unavailable now); a metric
        with failed judgments is not done (``--resume`` asks again; answers given are cached)."""
        values, unavailable, judge = record.get("values"), record.get("unavailable"), record.get("judge")
        done = set(values) if isinstance(values, dict) else set()
        if isinstance(judge, dict):
            done -= {m for m, t in judge.items() if isinstance(t, dict) and t.get("failed")}
        if isinstance(unavailable, dict):
            done |= {m for m in unavailable if m in METRICS and not METRICS[m].optional_backends}
        return done

    def merge(self, new: dict, old: dict) -> dict:
        return scoring.merge(new, old)

    def summarise(self, suite, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        body = scoring.summarise(results, suite.checkout.trajectories, protocol.config["epsilon"], ctx.allow_partial)
        return {}, body.to_json()

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return scoring.tables(summary)


NMR = NmrScorer()
SCORERS = {"r2m-v1": NMR, "r2m-paper-v1": NMR}
