"""WROP's demo: a corpus of tars -> a loopback HTTP server -> infer with ``hold`` and ``flow`` reading the
tars in place through Range requests -> score (``wrop-cont-v1``, gain over hold) -> report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from persistbench.core.demo import cell, checked
from persistbench.core.suite import DemoResult
from persistbench.executors import Executor

MODELS = ("hold", "flow")


def run(out: Path, ex: Executor, progress: bool, step: Callable[[str], None]) -> DemoResult:
    """WROP: a corpus of tars served on loopback, read in place over HTTP by the built-in continuation models."""
    from persistbench.core.infer import InferOptions, infer
    from persistbench.core.report import build_report
    from persistbench.core.score import ScoreOptions, score
    from persistbench.io.serve import FileServer
    from persistbench.suites.wrop.synth import WropSynthConfig, make

    step(f"wrop synth: three real tasks of three samples, one tar each, into {out / 'corpus'}")
    make(out / "corpus", WropSynthConfig(samples=3))
    runs, summaries = {m: out / "runs" / m for m in MODELS}, {}
    with FileServer(out / "corpus") as server:
        for model, run in runs.items():
            step(f"wrop infer: {model} -> {run}, the tars read in place from {server.url}")
            opts = InferOptions(dataset=server.url, output=run, model=model, suite="wrop")
            checked(infer(opts, executor=ex, progress=progress))
            step(f"wrop score: {model}")
            # The protocol's metrics: LPIPS where torch and AlexNet's weights are here, else said unavailable.
            opts = ScoreOptions(pred=run, dataset=server.url, suite="wrop")
            summaries[model] = checked(score(opts, None, ex, progress=progress)).value
    step("wrop report")
    return DemoResult(build_report(list(runs.values()), out / "report.html"), summaries, wrop_table(summaries))


def wrop_table(summaries: dict[str, dict]) -> str:
    """One row per run: Overall of each metric on the full frame and in the changed region, and its gain over hold."""
    first = next(iter(summaries.values()))
    metrics = list(first["overall"]["full"])
    cols = [(r, m, k) for r in ("full", "changed") for m in metrics for k in ("model", "gain")]
    names = [f"{m} {r}" + (" gain" if k == "gain" else "") for r, m, k in cols]
    head = f"{'WROP':15s}" + "".join(f"{n:>19s}" for n in names)
    lines = [head, "-" * len(head)]
    for name, s in summaries.items():
        lines.append(f"{name:15s}" + "".join(cell(s["overall"][r][m][k], 19) for r, m, k in cols))
    notes = sorted({(m, why) for s in summaries.values() for m, why in s.get("unavailable", {}).items()})
    return "\n".join(lines + [f"{m} unavailable: {why}" for m, why in notes])
