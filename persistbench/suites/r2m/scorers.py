"""R2M-Bench's scorer: relative revisit scores of each generated video on its pre-sampled pairs, NMR
summaries (the protocols differ in their pair sampler, definitions and rounding, not in how they score)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.protocol import Protocol
from persistbench.core.scorer import Scorer
from persistbench.core.suite import ScoreContext
from persistbench.io.names import name_problem, remove_tree
from persistbench.metrics.registry import METRICS
from persistbench.suites.r2m import layout, scoring, upstream_results


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
        question = None
        if "persistent_state" in ctx.wanted:
            try:
                question = scoring.state_question(suite.checkout, protocol)
            except PersistbenchError as e:  # unavailable, with the reason, unless the protocol requires every model
                if protocol.config["models"] == "required":
                    raise
                ctx = replace(ctx, unavailable={**ctx.unavailable, "persistent_state": str(e)})
        return scoring.score_video(frames, n_video, n_poses, pair_file, protocol, ctx, ids, question).to_json()

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
        body = scoring.summarise(
            results, suite.checkout.trajectories, protocol.config["epsilon"], ctx.allow_partial, protocol.metrics
        )
        return {"partial_reasons": body.overall_partial, **suite.reference_of(results)}, body.to_json()

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return scoring.tables(summary)

    def write_files(self, summary: dict, results: list[dict], scores_dir: Path) -> None:
        """Upstream's result layout under ``scores_dir/upstream/`` (:mod:`persistbench.suites.r2m.upstream_results`),
        its tasks named after the run's model (the run's name where the model's is not a usable file name)."""
        model = summary["model"] if name_problem(summary["model"]) is None else summary["run"]
        folder = scores_dir / layout.UPSTREAM_DIR
        remove_tree(scores_dir, folder)  # a scoring replaces the whole tree: no file of an earlier one is left
        upstream_results.write(folder, model, results)


NMR = NmrScorer()
SCORERS = {"r2m-v2": NMR, "r2m-paper-v1": NMR, "r2m-v1": NMR}
