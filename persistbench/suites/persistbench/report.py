"""PersistBench's sections of the report: leaderboards per subset (visible, invisible, gap), bar charts,
memory curves (each metric against the frames since the object left the input view, mean and 95%
interval over cases) and contact sheets of the best and worst cases per subset."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.core.figures import data_uri, figure_png, fmt, note_missing, pyplot, run_legend, table
from persistbench.core.layout import RunLayout
from persistbench.core.markup import Markup, join, tag
from persistbench.io.images import encode_image, list_images, outline, read_image
from persistbench.metrics.frame import PSNR_CAP
from persistbench.metrics.registry import METRICS, order
from persistbench.suites.persistbench import leaderboard
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.layout import SPLITS
from persistbench.suites.persistbench.tracked import TRACKED_METRICS

SHEET_COLUMNS = 5
Z95 = 1.959963984540054


# ---------------------------------------------------------------- numbers (pure)


def frames_since_left(frame_indices: list[int], visible: list[bool], invisible: list[bool]) -> list[int | None]:
    """Per scored frame: source frames since the last visible one, for invisible frames (None elsewhere)."""
    out, last = [], None
    for t, vis, inv in zip(frame_indices, visible, invisible):
        if vis:
            last = t
        out.append(t - last if inv and last is not None else None)
    return out


# The range each metric's values can take: curve bands never leave it. Presence is a rate (0 or 1 per
# frame): its band is Wilson's score interval, which stays in [0, 1] and is not zero-width at 0 or 1.
def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval ``(low, high)`` of a rate of ``successes`` in ``n`` trials."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def memory_curve(cases: list[dict], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets, mean, low, high, n_cases)`` of ``metric`` against frames since the object left the view.

    Each case contributes at most one value per offset. The 95% band is the normal approximation
    ``mean ± 1.96 sd / sqrt(n)`` (zero width where n = 1) clipped to the metric's range
    (the registry's ``value_range``), or Wilson's interval for rates (the registry's ``rate``).
    """
    per_offset: dict[int, list[float]] = {}
    for case in cases:
        values = case["metrics"].get(metric)
        if values is None:
            continue
        for off, v in zip(frames_since_left(case["frame_indices"], case["visible"], case["invisible"]), values):
            if off is not None and v is not None:
                per_offset.setdefault(off, []).append(v)
    offsets = np.array(sorted(per_offset), dtype=np.int64)
    spec = METRICS.get(metric)
    lo_range, hi_range = spec.value_range if spec else (-math.inf, math.inf)
    mean, low, high, n = [], [], [], []
    for o in offsets:
        values = per_offset[o]
        m = float(np.mean(values))
        if spec is not None and spec.rate:
            lo, hi = wilson(sum(values), len(values))
        else:
            half = Z95 * float(np.std(values, ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
            lo, hi = m - half, m + half
        mean.append(m)
        low.append(max(lo, lo_range))
        high.append(min(hi, hi_range))
        n.append(len(values))
    return offsets, np.array(mean), np.array(low), np.array(high), np.array(n, dtype=np.int64)


# ---------------------------------------------------------------- images


SPLIT_STYLE = {"visible": {"alpha": 1.0}, "invisible": {"alpha": 0.45, "hatch": "///"}}


def bar_figure(runs: list[dict], subset: str, metrics: list[str]):
    """Per metric, each run's visible (solid) and invisible (hatched) mean, in the run's colour, with its 95 %
    interval as an error bar where the summary has one."""
    plt = pyplot()
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(1, len(metrics), figsize=(2.6 * len(metrics), 2.8), squeeze=False)
    x = np.arange(len(runs))
    for ax, m in zip(axes[0], metrics):
        for k, split in enumerate(SPLITS):
            vals = [r["summary"]["subsets"].get(subset, {}).get(split, {}).get(m, {}).get("mean") for r in runs]
            intervals = [
                ((r["summary"].get("intervals") or {}).get("values") or {}).get(f"{subset}/{split}/{m}") for r in runs
            ]
            low = [v - iv[0] if v is not None and iv and iv[0] is not None else 0.0 for v, iv in zip(vals, intervals)]
            high = [iv[1] - v if v is not None and iv and iv[1] is not None else 0.0 for v, iv in zip(vals, intervals)]
            ax.bar(
                x + (k - 0.5) * 0.38,
                [np.nan if v is None else v for v in vals],
                0.38,
                color=[r["colour"] for r in runs],
                edgecolor="#333",
                lw=0.4,
                label=split,
                yerr=[low, high],
                error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#222"},
                **SPLIT_STYLE[split],
            )
        ax.set_title(m)
        ax.set_xticks(x, [r["name"] for r in runs], rotation=30, ha="right", fontsize=8)
        for tick, r in zip(ax.get_xticklabels(), runs):
            tick.set_color(r["colour"])
        note_missing(
            ax,
            [r["name"] for r in runs if r["summary"]["subsets"].get(subset, {}).get("invisible", {}).get(m) is None],
        )
    axes[0][0].legend(
        handles=[Patch(facecolor="#bbb", edgecolor="#333", label=s, **SPLIT_STYLE[s]) for s in SPLITS], fontsize=8
    )
    fig.suptitle(f"{subset}: visible vs invisible (off-screen)", y=1.06)
    return fig


def bar_charts(runs: list[dict], subset: str, metrics: list[str]) -> bytes:
    return figure_png(bar_figure(runs, subset, metrics))


def curves_figure(runs: list[dict], metrics: list[str], min_cases: int = 1):
    """One panel per metric: each run's memory curve in the run's colour, with its band; offsets where fewer
    than ``min_cases`` cases have a value are left out, and the cases behind each offset are drawn below
    (n, grey steps on a second axis). A panel names the runs it has no values of."""
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(3.4 * len(metrics), 3.1), squeeze=False, gridspec_kw={"wspace": 0.45}
    )
    for ax, m in zip(axes[0], metrics):
        missing, counts = [], {}
        for r in runs:
            off, mean, low, high, n = memory_curve(r["results"]["cases"], m)
            keep = n >= min_cases
            if not keep.any():
                missing.append(r["name"])
                continue
            ax.plot(off[keep], mean[keep], label=r["name"], lw=1.5, color=r["colour"])
            ax.fill_between(off[keep], low[keep], high[keep], color=r["colour"], alpha=0.2, lw=0)
            for o, k in zip(off[keep], n[keep]):
                counts[int(o)] = max(counts.get(int(o), 0), int(k))
        if counts:
            twin = ax.twinx()
            xs = sorted(counts)
            twin.step(xs, [counts[o] for o in xs], where="mid", color="#999", lw=0.8, ls=":")
            twin.set_ylim(0, 4 * max(counts.values()))
            twin.set_ylabel("cases (n)", fontsize=6, color="#777")
            twin.tick_params(labelsize=6, colors="#777")
        ax.set_title(m)
        ax.set_xlabel("frames since the object left the input view", fontsize=7)
        note_missing(ax, missing)
    run_legend(fig, runs)
    return fig


def curves(runs: list[dict], metrics: list[str]) -> bytes:
    return figure_png(curves_figure(runs, metrics))


def contact_sheet(case, run: RunLayout, result: dict, height: int = 96) -> bytes:
    """Rows: input view, ground-truth target, prediction, prediction with the ground-truth mask (green)
    and the model's mask (red, when it gave one); columns sampled across the off-screen frames."""
    import cv2

    positions = [i for i, inv in enumerate(result["invisible"]) if inv] or list(range(len(result["frame_indices"])))
    picks = [positions[round(k)] for k in np.linspace(0, len(positions) - 1, min(SHEET_COLUMNS, len(positions)))]
    pred_frames = list_images(run.frames_dir(case.subset, case.case_id)) or list_images(
        run.public_prediction_dir(case.case_id)
    )
    pred_masks = list_images(run.masks_dir(case.subset, case.case_id))
    wanted = {result["frame_indices"][i] for i in picks}
    views = {
        name: {t: f for t, f in enumerate(case.view(name).frames()) if t in wanted} for name in ("view_0", "center")
    }
    rows: list[list[np.ndarray]] = [[], [], [], []]
    for i in picks:
        t = result["frame_indices"][i]
        gt = views["center"][t]
        h, w = gt.shape[:2]
        pred = cv2.resize(read_image(pred_frames[i]), (w, h), interpolation=cv2.INTER_AREA)
        overlay = outline(pred.copy(), case.view("center").mask(t) > 0, (0, 200, 0))
        if pred_masks:
            m = cv2.resize(read_image(pred_masks[i], gray=True), (w, h), interpolation=cv2.INTER_NEAREST_EXACT) > 0
            overlay = outline(overlay, m, (230, 0, 0))
        for row, image in zip(rows, (views["view_0"][t], gt, pred, overlay)):
            row.append(cv2.resize(image, (round(w * height / h), height), interpolation=cv2.INTER_AREA))
    gap = lambda img: np.full((img.shape[0], 4, 3), 255, np.uint8)  # noqa: E731
    lines = [np.concatenate([x for img in row for x in (img, gap(img))][:-1], axis=1) for row in rows]
    sheet = np.concatenate([x for line in lines for x in (line, np.full((4, line.shape[1], 3), 255, np.uint8))][:-1])
    return encode_image(sheet, "png")


# ---------------------------------------------------------------- sections


def _table(runs: list[dict], subset: str, metrics: list[str], table_id: str) -> Markup:
    head = ["run", "model"] + [f"{m} {s}" for m in metrics for s in ("vis", "inv", "gap")]
    rows = []
    for r in runs:
        block = r["summary"]["subsets"].get(subset, {})
        cells = [r["name"], str(r["summary"].get("model"))]
        for m in metrics:
            cells += [
                fmt(block.get("visible", {}).get(m, {}).get("mean")),
                fmt(block.get("invisible", {}).get(m, {}).get("mean")),
                fmt(block.get("gap", {}).get(m)),
            ]
        rows.append(cells)
    return table(table_id, head, rows)


def capped_share(run: dict, split: str = "visible", cap: float = PSNR_CAP) -> tuple[int, int]:
    """``(frames at the PSNR cap, frames with a PSNR)`` among a run's ``split`` frames (identical inside the
    mask: the cap stands in for an infinite PSNR and pulls the mean towards it)."""
    at, n = 0, 0
    for case in run["results"]["cases"]:
        for v, inside in zip(case["metrics"].get("psnr") or [], case[split]):
            if inside and v is not None:
                n += 1
                at += v >= cap
    return at, n


def cap_notes(runs: list[dict]) -> list[Markup]:
    """A note per run whose visible PSNR stands on frames at the cap."""
    notes = []
    for r in runs:
        at, n = capped_share(r)
        if at:
            notes.append(
                tag(
                    "p",
                    f"{r['name']}: {at} of {n} visible frames are identical to the truth inside the mask and score "
                    f"the PSNR cap ({PSNR_CAP:g} dB), which dominates its visible PSNR mean; compare visible PSNR "
                    "with that in mind (SSIM has no cap).",
                    class_="note",
                )
            )
    return notes


def steps(runs: list[dict]) -> int:
    """Slow steps (figures and contact sheets) the sections take, for the progress bar."""
    subsets = len([s for s in runs[0]["summary"]["subsets"] if s != "all"])
    return subsets + 1 + subsets * len([r for r in runs if r.get("sheets", True)])


def paper_sections(runs: list[dict], advance: Callable[[int], object]) -> tuple[str, list[Markup], list[Markup]]:
    """``paper-v3``: the published layout, three scores x visible / invisible, overall and per group."""
    keys = [f"{spec.name}_{s}" for spec in TRACKED_METRICS for s in SPLITS]
    board = []
    for group in ("overall", "static", "dynamic", "unknown"):
        rows = []
        for r in runs:
            block = r["summary"] if group == "overall" else r["summary"]["groups"].get(group, {})
            if not block.get("cases"):
                continue
            cells = [r["name"], str(r["summary"].get("model")), str(block["cases"])]
            cells += [f"{fmt(block['averages'].get(k))} ({block['valid_counts'].get(k, 0)})" for k in keys]
            rows.append(cells + [str(r["summary"].get("judge_failures", 0))])
        if rows:
            head = ["run", "model", "cases", *keys, "judge failures"]
            board += [tag("h3", group), table(f"leaderboard-{group}", head, rows)]
    note = (
        "Protocol paper-v3 (the public toolkit's default-three-paper-v3): means over cases of each case's mean over "
        "its visible / invisible frames from the first visible one; (n) = cases with a value."
    )
    return note, [tag("h2", "Leaderboard"), *board, *published_sections(runs)], []


def published_sections(runs: list[dict]) -> list[Markup]:
    """The published leaderboard per subset with the runs placed among its models (scores in its form)."""
    published = leaderboard.published()
    parts = [
        tag("h2", "Beside the published leaderboard"),
        tag(
            "p",
            "Scores x 100 in the published leaderboard's form: motion continuity per case exp(-mean d), not the mean "
            "of the frames' exp(-d) above (docs/metrics.md); ranked by memory. Published rows: "
            f"{published.source}, read {published.read}. A run scored on fewer cases than the benchmark is placed "
            "by its memory but not ranked: its numbers stand on other cases.",
            class_="note",
        ),
    ]
    stale = [r["name"] for r in runs if "published" not in r["summary"]]
    if stale:
        parts.append(
            tag(
                "p",
                f"Not shown (scored before the leaderboard's form was kept; score again): {', '.join(stale)}.",
                class_="warning",
            )
        )
    for subset in leaderboard.GROUPS:
        rows = [
            row
            for r in runs
            if (row := leaderboard.run_row(r["name"], str(r["summary"].get("model")), r["summary"], subset, published))
        ]
        placed = leaderboard.table(published, subset, rows)
        note = leaderboard.different_cases(rows)
        parts += [tag("p", note, class_="warning")] if note else []
        cells, classes = [c for _, c in placed], ["published" if r.run is None else "yours" for r, _ in placed]
        parts += [tag("h3", subset), table(f"published-{subset}", leaderboard.head(), cells, classes=classes)]
    return parts


def sections(runs: list[dict], advance: Callable[[int], object]) -> tuple[str, list[Markup], list[Markup]]:
    """``classic-v1``: ``(note, leaderboard parts, figure parts)`` of the page."""
    metrics = order({m for r in runs for m in r["summary"]["subsets"]["all"]["visible"]})
    subsets = [s for s in runs[0]["summary"]["subsets"] if s != "all"]
    note = (
        "Visible: the object is in the input view; invisible: it is off-screen, the frames that test memory. "
        "gap = visible - invisible."
    )
    board = [tag("h2", "Leaderboard (all cases)"), _table(runs, "all", metrics, "leaderboard")]
    board += cap_notes(runs) if "psnr" in metrics else []
    for s in subsets:
        board += [tag("h3", s), _table(runs, s, metrics, f"leaderboard-{s}")]
    figures = [tag("h2", "Visible vs invisible")]
    for s in subsets:
        figures.append(tag("img", alt=f"bars {s}", src=data_uri(bar_charts(runs, s, metrics))))
        advance(1)
    figures += [
        tag("h2", "Memory curves"),
        tag(
            "p",
            "Each metric on the off-screen frames against the frames since the object left the input view: "
            "mean over cases and 95% interval, each run in its colour; dotted grey (right axis): the cases behind "
            "each offset, which thin out as the window lengthens.",
            class_="note",
        ),
        tag("img", alt="memory curves", src=data_uri(curves(runs, metrics))),
    ]
    advance(1)
    figures += [_sheets(r, subsets, advance) for r in runs if r.get("sheets", True)]
    return note, board, figures


def _sheets(run: dict, subsets: list[str], advance: Callable[[int], object] = lambda n: None) -> Markup:
    """Best and worst cases per subset of ``run`` by invisible PSNR (else the first metric)."""
    root = (run["info"] or {}).get("dataset", {}).get("root")
    if not root or not Path(root).is_dir():
        return join(
            tag("h2", f"Contact sheets ({run['name']})"),
            tag("p", "The run's dataset is not here; no contact sheets.", class_="note"),
        )
    ds = Dataset(root)
    parts = [
        tag("h2", f"Contact sheets ({run['name']})"),
        tag(
            "p",
            "Rows: input view, ground-truth target, prediction, prediction with the ground-truth mask (green) and "
            "the model's mask (red). Columns: frames across the off-screen window.",
            class_="note",
        ),
    ]
    for s in subsets:
        advance(1)
        cases = [c for c in run["results"]["cases"] if c["subset"] == s]
        metric = (
            "psnr" if all("psnr" in c["means"]["invisible"] for c in cases) else next(iter(cases[0]["metrics"]), None)
        )
        scored = [c for c in cases if metric and c["means"]["invisible"].get(metric) is not None]
        if not scored:
            continue
        good = METRICS[metric].higher_is_better if metric in METRICS else True
        ranked = sorted(scored, key=lambda c: c["means"]["invisible"][metric], reverse=good)
        for label, c in (("best", ranked[0]), ("worst", ranked[-1])):
            heading = f"{s}, {label}: {c['uid']} (invisible {metric} {fmt(c['means']['invisible'][metric])})"
            try:  # a case the run names but the dataset does not have (or cannot name) gets a note, not a sheet
                png = contact_sheet(ds.case(s, c["uid"]), run["layout"], c)
            except PersistbenchError as e:
                parts += [tag("h3", heading), tag("p", f"no contact sheet: {e}", class_="note")]
                continue
            parts += [tag("h3", heading), tag("img", alt=f"{label} {s}", src=data_uri(png))]
    return join(*parts)
