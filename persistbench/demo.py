"""``persistbench demo``: the three suites' whole chains, offline, on data made on the spot.

PersistBench: synth (both subsets) -> a loopback HTTP server -> download through yt-dlp (range
requests) -> infer with ``hold``, ``reproject`` and ``oracle`` -> score -> report. R2M-Bench
(``r2m/``): a synthetic checkout -> infer with ``warp`` and ``hold`` -> score (NMR) beside the
synthetic pose-rendered videos (a reference that remembers perfectly) -> report. WROP (``wrop/``):
a corpus of tars -> a loopback HTTP server -> infer with ``hold`` and ``flow`` reading the tars in
place through Range requests -> score (``wrop-cont-v1``, gain over hold) -> report. Everything
lands in one output directory; the servers are stopped before returning, whatever happens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .errors import PersistbenchError
from .executors import Executor, RunResult
from .registry import order

MODELS = ("hold", "reproject", "oracle")
R2M_MODELS = ("warp", "hold")
R2M_METRICS = ("frame_psnr", "frame_ssim", "sift_match_ratio", "sift_inlier_ratio")  # the CPU families
WROP_MODELS = ("hold", "flow")
WROP_METRICS = ("psnr", "ssim")  # LPIPS needs AlexNet weights, which the demo does not fetch
DEMO_SCENES = {"scenes": 4, "seed": 7, "pano_size": (1024, 512), "view_size": (256, 192), "n_frames": 48, "fps": 10.0}


def demo(
    out: str | Path = "persistbench-demo", workers: int = 2, progress: bool = True, echo: Callable[[str], None] = print
) -> dict:
    """Run the three chains into ``out`` (new or empty); returns ``{"report", "summaries", "r2m_report",
    "r2m_summaries", "wrop_report", "wrop_summaries"}``."""
    from .download import DownloadOptions, RecipeSource, download
    from .executors import ExecutorOptions
    from .infer import InferOptions, infer
    from .report import build_report
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

    with ExecutorOptions(workers=workers).build() as ex:  # one pool of workers for every stage
        step(f"synth: {DEMO_SCENES['scenes']} scenes (dynamic and static) into {out / 'sources'}")
        with FileServer(out) as server:
            recipes = generate(out / "sources", SynthConfig(**DEMO_SCENES), base_url=f"{server.url}/sources/sources")
            step(f"download: yt-dlp from {server.url} (loopback), reprojection into {out / 'dataset'}")
            opts = DownloadOptions(
                output=out / "dataset", sources=SourceOptions(cache=out / "cache"), progress=progress
            )
            step(checked(download(RecipeSource(recipes, str(recipes)), opts, ex)).text())
        summaries = {}
        for model in MODELS:
            run = out / "runs" / model
            step(f"infer: {model} -> {run}")
            checked(
                infer(InferOptions(dataset=out / "dataset", output=run, model=model), executor=ex, progress=progress)
            )
            step(f"score: {model}")
            opts = ScoreOptions(pred=run, dataset=out / "dataset")
            summaries[model] = checked(score(opts, ex, progress=progress)).value
        step("report")
        report = build_report([out / "runs" / m for m in MODELS], out / "report.html")
        echo(summary_table(summaries))
        r2m = _r2m(out / "r2m", ex, progress, step)
        echo(r2m_table(r2m["summaries"]))
        wrop = _wrop(out / "wrop", ex, progress, step)
        echo(wrop_table(wrop["summaries"]))
    step(f"done: open {report}, {r2m['report']} and {wrop['report']}")
    return {
        "report": report,
        "summaries": summaries,
        "r2m_report": r2m["report"],
        "r2m_summaries": r2m["summaries"],
        "wrop_report": wrop["report"],
        "wrop_summaries": wrop["summaries"],
    }


def checked(result: RunResult) -> RunResult:
    """The result; an error when a case failed."""
    if not result.ok:
        raise PersistbenchError(f"demo: {result.stage} failed:\n{result.text()}")
    return result


def _r2m(out: Path, ex: Executor, progress: bool, step: Callable[[str], None]) -> dict:
    """R2M-Bench: a synthetic checkout, the built-in models and the pose-rendered reference, scored and reported."""
    import shutil

    from .infer import InferOptions, infer
    from .report import build_report
    from .score import ScoreOptions, score
    from .suites.r2m.synth import R2MSynthConfig, make

    step(f"r2m synth: a checkout with one image per trajectory into {out / 'checkout'}")
    tree = make(out / "checkout", R2MSynthConfig(cases=1))
    runs = {"pose-rendered": out / "runs" / "pose-rendered"}
    shutil.copytree(tree / "videos" / "pose", runs["pose-rendered"])  # upstream's <T>/<id>.mp4 layout
    for model in R2M_MODELS:
        runs[model] = out / "runs" / model
        step(f"r2m infer: {model} -> {runs[model]}")
        checked(infer(InferOptions(dataset=tree, output=runs[model], model=model), executor=ex, progress=progress))
    summaries = {}
    for name, run in runs.items():
        step(f"r2m score: {name}")
        opts = ScoreOptions(pred=run, dataset=tree, metrics=R2M_METRICS)
        summaries[name] = checked(score(opts, ex, allow_partial=True, progress=progress)).value
    step("r2m report")
    return {"report": build_report(list(runs.values()), out / "report.html"), "summaries": summaries}


def _wrop(out: Path, ex: Executor, progress: bool, step: Callable[[str], None]) -> dict:
    """WROP: a corpus of tars served on loopback, read in place over HTTP by the built-in continuation models."""
    from .infer import InferOptions, infer
    from .report import build_report
    from .score import ScoreOptions, score
    from .serve import FileServer
    from .suites.wrop.synth import WropSynthConfig, make

    step(f"wrop synth: two tasks of three samples, one tar each, into {out / 'corpus'}")
    make(out / "corpus", WropSynthConfig(samples=3))
    runs, summaries = {m: out / "runs" / m for m in WROP_MODELS}, {}
    with FileServer(out / "corpus") as server:
        for model, run in runs.items():
            step(f"wrop infer: {model} -> {run}, the tars read in place from {server.url}")
            opts = InferOptions(dataset=server.url, output=run, model=model, suite="wrop")
            checked(infer(opts, executor=ex, progress=progress))
            step(f"wrop score: {model}")
            opts = ScoreOptions(pred=run, dataset=server.url, suite="wrop", metrics=WROP_METRICS)
            summaries[model] = checked(score(opts, ex, progress=progress)).value
    step("wrop report")
    return {"report": build_report(list(runs.values()), out / "report.html"), "summaries": summaries}


def wrop_table(summaries: dict[str, dict]) -> str:
    """One row per run: Overall of each metric on the full frame and in the changed region, and its gain over hold."""
    first = next(iter(summaries.values()))
    metrics = list(first["overall"]["full"])
    cols = [(r, m, k) for r in ("full", "changed") for m in metrics for k in ("model", "gain")]
    names = [f"{m} {r}" + (" gain" if k == "gain" else "") for r, m, k in cols]
    head = f"{'WROP':15s}" + "".join(f"{n:>19s}" for n in names)
    lines = [head, "-" * len(head)]
    for name, s in summaries.items():
        lines.append(f"{name:15s}" + "".join(_cell(s["overall"][r][m][k], 19) for r, m, k in cols))
    notes = {s["lpips_unavailable"] for s in summaries.values() if s.get("lpips_unavailable")}
    return "\n".join(lines + [f"LPIPS unavailable: {n}" for n in sorted(notes)])


def r2m_table(summaries: dict[str, dict]) -> str:
    """One row per run: Overall NMR, each family's and each metric's (registry order)."""
    first = next(iter(summaries.values()))
    families = list(first["families"])
    metrics = order({m for s in summaries.values() for m in s["metrics"]})
    head = f"{'R2M-Bench NMR':15s}{'Overall':>10s}" + "".join(f"{f:>12s}" for f in families)
    head += "".join(f"{m:>19s}" for m in metrics)
    lines = [head, "-" * len(head)]
    for name, s in summaries.items():
        cells = [s["overall"]] + [s["families"][f]["nmr"] for f in families]
        row = f"{name:15s}{_cell(cells[0], 10)}" + "".join(_cell(v, 12) for v in cells[1:])
        lines.append(row + "".join(_cell(s["metrics"].get(m, {}).get("nmr"), 19) for m in metrics))
    return "\n".join(lines)


def _cell(v: float | None, width: int) -> str:
    return f"{'n/a' if v is None else f'{v:.4f}':>{width}s}"


def summary_table(summaries: dict[str, dict]) -> str:
    """All cases, one row per model: each metric (registry order) on the visible and the invisible (off-screen) frames."""
    shown = order({m for s in summaries.values() for m in s["subsets"]["all"]["visible"]})
    widths = [max(11, len(m) + 6) for m in shown]
    head = "model      " + "".join(f"{m + ' vis':>{w}s}{m + ' inv':>{w}s}" for m, w in zip(shown, widths))
    lines = [head, "-" * len(head)]
    for model, s in summaries.items():
        block = s["subsets"]["all"]
        cells = [block[split][m]["mean"] for m in shown for split in ("visible", "invisible")]
        lines.append(f"{model:11s}" + "".join(_cell(v, w) for v, w in zip(cells, [w for w in widths for _ in (0, 1)])))
    notes = {s["lpips_unavailable"] for s in summaries.values() if s.get("lpips_unavailable")}
    return "\n".join(lines + [f"LPIPS unavailable: {n}" for n in sorted(notes)])
