"""R2M-Bench's demo: a synthetic checkout -> infer with ``warp`` and ``hold`` -> score (NMR) beside the
synthetic pose-rendered videos (a reference that remembers perfectly) -> report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from persistbench.core.demo import cell, checked
from persistbench.core.suite import DemoResult
from persistbench.executors import Executor
from persistbench.metrics.registry import order

MODELS = ("warp", "hold")
METRICS = ("frame_psnr", "frame_ssim", "sift_match_ratio", "sift_inlier_ratio")  # the CPU families


def run(out: Path, ex: Executor, progress: bool, step: Callable[[str], None]) -> DemoResult:
    """R2M-Bench: a synthetic checkout, the built-in models and the pose-rendered reference, scored and reported."""
    import shutil

    from persistbench.core.infer import InferOptions, infer
    from persistbench.core.report import build_report
    from persistbench.core.score import ScoreOptions, score
    from persistbench.suites.r2m.synth import R2MSynthConfig, make

    step(f"r2m synth: a checkout with one image per trajectory into {out / 'checkout'}")
    tree = make(out / "checkout", R2MSynthConfig(cases=1))
    runs = {"pose-rendered": out / "runs" / "pose-rendered"}
    shutil.copytree(tree / "videos" / "pose", runs["pose-rendered"])  # upstream's <T>/<id>.mp4 layout
    for model in MODELS:
        runs[model] = out / "runs" / model
        step(f"r2m infer: {model} -> {runs[model]}")
        checked(infer(InferOptions(dataset=tree, output=runs[model], model=model), executor=ex, progress=progress))
    summaries = {}
    for name, run in runs.items():
        step(f"r2m score: {name}")
        opts = ScoreOptions(pred=run, dataset=tree, metrics=METRICS)
        summaries[name] = checked(score(opts, None, ex, allow_partial=True, progress=progress)).value
    step("r2m report")
    return DemoResult(build_report(list(runs.values()), out / "report.html"), summaries, r2m_table(summaries))


def r2m_table(summaries: dict[str, dict]) -> str:
    """One row per run: Overall NMR, each family's and each metric's (registry order)."""
    first = next(iter(summaries.values()))
    families = list(first["families"])
    metrics = order({m for s in summaries.values() for m in s["metrics"]})
    head = f"{'R2M-Bench NMR':20s}{'Overall':>10s}" + "".join(f"{f:>12s}" for f in families)
    head += "".join(f"{m:>19s}" for m in metrics)
    lines = [head, "-" * len(head)]
    notes = []
    for name, s in summaries.items():
        cells = [s["overall"]] + [s["families"][f]["nmr"] for f in families]
        mark = "*" if s["overall"] is not None and s.get("overall_partial") else " "
        label = f"{name} (ref)" if s.get("oracle") else name
        row = f"{label:20s}{cell(cells[0], 9)}{mark}" + "".join(cell(v, 12) for v in cells[1:])
        lines.append(row + "".join(cell(s["metrics"].get(m, {}).get("nmr"), 19) for m in metrics))
        notes += [f"* {name}: Overall partial: {'; '.join(s['overall_partial'])}"] if mark == "*" else []
        notes += [f"{name} is a reference, not a result: {s['reference']}"] if s.get("reference") else []
    return "\n".join(lines + notes)
