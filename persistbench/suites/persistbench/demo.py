"""PersistBench's demo: synth (both subsets) -> a loopback HTTP server -> download through yt-dlp (range
requests) -> infer with ``hold``, ``reproject`` and ``oracle`` -> score -> report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from persistbench.core.demo import cell, checked
from persistbench.core.suite import DemoResult
from persistbench.executors import Executor
from persistbench.metrics.registry import order

MODELS = ("hold", "reproject", "oracle")
DEMO_SCENES = {"scenes": 4, "seed": 7, "pano_size": (1024, 512), "view_size": (256, 192), "n_frames": 48, "fps": 10.0}


def run(out: Path, ex: Executor, progress: bool, step: Callable[[str], None]) -> DemoResult:
    """The chain into ``out``: ``sources/``, ``dataset/``, ``runs/<model>/`` and ``report.html``."""
    from persistbench.core.infer import InferOptions, infer
    from persistbench.core.report import build_report
    from persistbench.core.score import ScoreOptions, score
    from persistbench.io.serve import FileServer
    from persistbench.suites.persistbench.build.download import DownloadOptions, RecipeSource, download
    from persistbench.suites.persistbench.build.sources import SourceOptions
    from persistbench.suites.persistbench.synth import SynthConfig, generate

    step(f"synth: {DEMO_SCENES['scenes']} scenes (dynamic and static) into {out / 'sources'}")
    with FileServer(out) as server:
        recipes = generate(out / "sources", SynthConfig(**DEMO_SCENES), base_url=f"{server.url}/sources/sources")
        step(f"download: yt-dlp from {server.url} (loopback), reprojection into {out / 'dataset'}")
        opts = DownloadOptions(output=out / "dataset", sources=SourceOptions(cache=out / "cache"), progress=progress)
        step(checked(download(RecipeSource(recipes, str(recipes)), opts, ex)).text())
    summaries = {}
    for model in MODELS:
        run = out / "runs" / model
        step(f"infer: {model} -> {run}")
        checked(infer(InferOptions(dataset=out / "dataset", output=run, model=model), executor=ex, progress=progress))
        step(f"score: {model}")
        opts = ScoreOptions(pred=run, dataset=out / "dataset")
        summaries[model] = checked(score(opts, None, ex, progress=progress)).value
    step("report")
    report = build_report([out / "runs" / m for m in MODELS], out / "report.html")
    return DemoResult(report, summaries, summary_table(summaries))


def summary_table(summaries: dict[str, dict]) -> str:
    """All cases, one row per model: each metric (registry order) on the visible and the invisible (off-screen) frames."""
    shown = order({m for s in summaries.values() for m in s["subsets"]["all"]["visible"]})
    widths = [max(11, len(m) + 6) for m in shown]
    head = "model      " + "".join(f"{m + ' vis':>{w}s}{m + ' inv':>{w}s}" for m, w in zip(shown, widths))
    lines = [head, "-" * len(head)]
    for model, s in summaries.items():
        block = s["subsets"]["all"]
        cells = [block[split][m]["mean"] for m in shown for split in ("visible", "invisible")]
        lines.append(f"{model:11s}" + "".join(cell(v, w) for v, w in zip(cells, [w for w in widths for _ in (0, 1)])))
    notes = sorted({(m, why) for s in summaries.values() for m, why in s.get("unavailable", {}).items()})
    return "\n".join(lines + [f"{m} unavailable: {why}" for m, why in notes])
