"""WROP's sections of the report: the continuation leaderboard (Overall and per category, full frame and
changed region, with the gain over hold) and per-frame curves (score and gain against frames into the
continuation)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from persistbench.core.figures import data_uri, figure_png, fmt, note_missing, pyplot, run_legend, table
from persistbench.core.markup import Markup, tag
from persistbench.metrics.registry import order
from persistbench.suites.wrop.layout import REGIONS
from persistbench.suites.wrop.taxonomy import taxonomy

_ORDER = {"categories": list(taxonomy().family_names), "dimensions": list(taxonomy().dimension_names)}


def _metrics(runs: list[dict]) -> list[str]:
    return order({m for r in runs for m in r["summary"]["overall"]["full"]})


def curves(runs: list[dict], metric: str) -> bytes:
    """Two panels per region: the mean model score and the mean gain over hold per target frame index."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2 * len(REGIONS), figsize=(3.2 * 2 * len(REGIONS), 2.8), squeeze=False)
    for j, region in enumerate(REGIONS):
        for k, what in enumerate(("model", "gain")):
            ax = axes[0][2 * j + k]
            missing = []
            for r in runs:
                series = r["summary"]["curves"][region].get(metric, {}).get(what, [])
                y = np.array([np.nan if v is None else v for v in series], float)
                if not np.isfinite(y).any():
                    missing.append(r["name"])
                    continue
                ax.plot(np.arange(1, len(y) + 1), y, lw=1.2, label=r["name"], color=r["colour"])
            note_missing(ax, missing)
            if what == "gain":
                ax.axhline(0.0, color="#444", lw=0.8)
            ax.set_xlabel("frames into the continuation", fontsize=8)
            ax.set_title(f"{metric} {'gain over hold' if what == 'gain' else ''} ({region})", fontsize=9)
    run_legend(fig, runs)
    return figure_png(fig)


def steps(runs: list[dict]) -> int:
    return len(_metrics(runs))


def sections(runs: list[dict], advance: Callable[[int], object]) -> tuple[str, list[Markup], list[Markup]]:
    metrics = _metrics(runs)
    note = (
        "Continuation scores of our protocol wrop-cont-v1: each target frame against the target video, on the "
        "full frame and inside the changed region (where the target differs from the last input frame). Gain: "
        "the model's score minus that of holding the last input frame, on the same frames (LPIPS negated), so "
        "positive is better than copying and the hold baseline scores 0. Categories and Overall weigh each task "
        "equally."
    )
    head = ["run", "model", "tasks", "cases"]
    head += [f"{m} {region} {what}" for region in REGIONS for m in metrics for what in ("", "gain")]
    rows = []
    for r in runs:
        s = r["summary"]
        cells = [r["name"], str(s.get("model")), str(s["overall"]["tasks"]), str(s["overall"]["cases"])]
        for region in REGIONS:
            for m in metrics:
                block = s["overall"][region].get(m, {})
                cells += [fmt(block.get("model")), fmt(block.get("gain"))]
        rows.append(cells)
    board = [tag("h2", "Leaderboard (Overall)"), table("leaderboard", [h.replace("  ", " ") for h in head], rows)]
    cat_head = ["run", "category", "tasks"] + [f"{m} {region} gain" for region in REGIONS for m in metrics]
    for level, title in (("categories", "Per category"), ("dimensions", "Per dimension")):
        keys = [k for k in _ORDER[level] if any(k in r["summary"].get(level, {}) for r in runs)]
        rows = [
            [r["name"], r["summary"][level][k].get("name", k), str(r["summary"][level][k]["tasks"])]
            + [fmt(r["summary"][level][k][region].get(m, {}).get("gain")) for region in REGIONS for m in metrics]
            for r in runs
            for k in keys
            if k in r["summary"].get(level, {})
        ]
        board += [
            tag("h2", title),
            table(level, cat_head if level == "categories" else ["run", "dimension", *cat_head[2:]], rows),
        ]
    excluded = sorted({t for r in runs for t in r["summary"].get("excluded_tasks", [])})
    if excluded:
        board.append(tag("p", f"Excluded by the protocol: {', '.join(excluded)}", class_="note"))
    unavailable = {m: why for r in runs for m, why in r["summary"].get("unavailable", {}).items()}
    board += [tag("p", f"{m} unavailable: {why}", class_="note") for m, why in unavailable.items()]
    figures = [
        tag("h2", "Per-frame curves"),
        tag("p", "Mean over the cases that score each target frame.", class_="note"),
    ]
    for m in metrics:
        figures.append(tag("img", alt=f"curves {m}", src=data_uri(curves(runs, m))))
        advance(1)
    return note, board, figures
