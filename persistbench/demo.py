"""``persistbench demo``: the whole chain, offline, on scenes made on the spot.

synth (both subsets) -> a loopback HTTP server -> download through yt-dlp
(range requests) -> infer with ``hold``, ``reproject`` and ``oracle`` ->
score -> report. Everything lands in one output directory; the server is
stopped before returning, whatever happens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .errors import PersistbenchError

MODELS = ("hold", "reproject", "oracle")
DEMO_SCENES = {"scenes": 4, "seed": 7, "pano_size": (1024, 512), "view_size": (256, 192), "n_frames": 48, "fps": 10.0}


def demo(
    out: str | Path = "persistbench-demo", workers: int = 2, progress: bool = True, echo: Callable[[str], None] = print
) -> dict:
    """Run the chain into ``out`` (new or empty); returns ``{"report": path, "summaries": {model: summary}}``."""
    from .download import DownloadOptions, RecipeSource, download
    from .infer import InferOptions, infer
    from .report import build_report
    from .runner import summary as outcome_summary
    from .score import ScoreOptions, score
    from .serve import FileServer
    from .sources import SourceOptions
    from .synth import SynthConfig, generate

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PersistbenchError(f"{out}: exists and is not empty; the demo writes into a new directory")
    start = time.perf_counter()

    def step(text: str) -> None:
        echo(f"[{time.perf_counter() - start:6.1f} s] {text}")

    step(f"synth: {DEMO_SCENES['scenes']} scenes (dynamic and static) into {out / 'sources'}")
    with FileServer(out) as server:
        recipes = generate(out / "sources", SynthConfig(**DEMO_SCENES), base_url=f"{server.url}/sources/sources")
        step(f"download: yt-dlp from {server.url} (loopback), reprojection into {out / 'dataset'}")
        opts = DownloadOptions(
            output=out / "dataset", sources=SourceOptions(cache=out / "cache"), workers=workers, progress=progress
        )
        outcomes = download(RecipeSource(recipes, str(recipes)), opts)
    step(outcome_summary(outcomes))
    if any(o.status == "failed" for o in outcomes):
        raise PersistbenchError(f"demo: download failed:\n{outcome_summary(outcomes)}")
    summaries = {}
    for model in MODELS:
        run = out / "runs" / model
        step(f"infer: {model} -> {run}")
        results = infer(
            InferOptions(dataset=out / "dataset", output=run, model=model), workers=workers, progress=progress
        )
        if any(o.status == "failed" for o in results):
            raise PersistbenchError(f"demo: infer {model} failed:\n{outcome_summary(results)}")
        step(f"score: {model}")
        summaries[model] = score(ScoreOptions(pred=run, dataset=out / "dataset"), workers=workers, progress=progress)
    step("report")
    report = build_report([out / "runs" / m for m in MODELS], out / "report.html")
    echo(summary_table(summaries))
    step(f"done: open {report}")
    return {"report": report, "summaries": summaries}


def summary_table(summaries: dict[str, dict], metrics: tuple[str, ...] = ("psnr", "ssim", "lpips", "iou")) -> str:
    """All cases, one row per model: each metric on the visible and the invisible (off-screen) frames."""
    shown = [m for m in metrics if any(m in s["subsets"]["all"]["visible"] for s in summaries.values())]
    head = "model      " + "".join(f"{m + ' vis':>11s}{m + ' inv':>11s}" for m in shown)
    lines = [head, "-" * len(head)]
    for model, s in summaries.items():
        block = s["subsets"]["all"]
        cells = [block[split][m]["mean"] for m in shown for split in ("visible", "invisible")]
        lines.append(f"{model:11s}" + "".join(f"{'n/a' if v is None else f'{v:.4f}':>11s}" for v in cells))
    notes = {s["lpips_unavailable"] for s in summaries.values() if s.get("lpips_unavailable")}
    return "\n".join(lines + [f"LPIPS unavailable: {n}" for n in sorted(notes)])
