"""R2M-Bench's sections of the report: the NMR leaderboard (Overall, families, metrics), an NMR profile per
family and trajectory, and a MemoryGain-vs-DynamicRange scatter per metric (one point per video)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from persistbench.core.figures import data_uri, figure_png, fmt, note_missing, pyplot, run_legend, table
from persistbench.core.markup import Markup, tag
from persistbench.metrics.registry import families, order


def _families(runs: list[dict]) -> list[str]:
    """The runs' families in registry order."""
    return list(families([m for r in runs for f in r["summary"]["families"].values() for m in f["metrics"]]))


def _metrics(runs: list[dict]) -> list[str]:
    """The runs' scored metrics in registry order."""
    return order({m for r in runs for m in r["summary"]["metrics"]})


def label(run: dict) -> str:
    """A run's name, marked where it is a reference (the pose-rendered videos) rather than a result."""
    return f"{run['name']} (reference)" if run["summary"].get("oracle") else run["name"]


def overall_cell(summary: dict) -> str:
    """Overall NMR, marked ``(partial)`` where it stands on fewer families or trajectories than the protocol's."""
    value = fmt(summary["overall"])
    return f"{value} (partial)" if summary["overall"] is not None and summary.get("overall_partial") else value


def profile_figure(runs: list[dict]):
    """One panel per run: NMR per family (bars) for each trajectory; a family's trajectory value is the
    mean of its metrics' NMR there. A panel's title gives the run's Overall (marked when partial)."""
    plt = pyplot()
    families = _families(runs)
    fig, axes = plt.subplots(1, len(runs), figsize=(3.8 * len(runs), 3.2), squeeze=False)
    for ax, r in zip(axes[0], runs):
        s = r["summary"]
        traj = list(s["trajectories"])
        x = np.arange(len(traj))
        width = 0.8 / max(len(families), 1)
        drawn = False
        for k, fam in enumerate(families):
            ms = [m for m in s["families"].get(fam, {}).get("metrics", []) if m in s["metrics"]]
            vals = []
            for t in traj:
                v = [s["trajectories"][t][m]["nmr"] for m in ms if s["trajectories"][t][m]["nmr"] is not None]
                vals.append(float(np.mean(v)) if v else np.nan)
            ax.bar(x + (k - (len(families) - 1) / 2) * width, vals, width, label=fam)
            drawn = drawn or bool(np.isfinite(vals).any())
        ax.axhline(1.0, color="#888", lw=0.8, ls="--")
        ax.axhline(0.0, color="#444", lw=0.8)
        ax.set_xticks(x, traj, fontsize=7, rotation=30, ha="right")
        ax.set_title(f"{label(r)}: Overall {overall_cell(s)}", fontsize=9, color=r["colour"])
        if not drawn:
            ax.text(
                0.5, 0.5, "no family has an NMR here", transform=ax.transAxes, ha="center", fontsize=8, color="#555"
            )
    axes[0][0].legend(fontsize=7)
    return fig


def profile(runs: list[dict]) -> bytes:
    return figure_png(profile_figure(runs))


def scatter(runs: list[dict], metric: str) -> bytes:
    """MemoryGain against DynamicRange of every scored video: NMR = MG / DR is the slope from the origin
    (dashed: NMR = 1); videos at DR <= epsilon are excluded (grey band's left)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(3.6, 3.0))
    top, missing = 0.0, []
    for r in runs:
        pts = [
            (c["relative"][metric]["dynamic_range"], c["relative"][metric]["memory_gain"])
            for c in r["results"]["cases"]
            if metric in c.get("relative", {}) and c["relative"][metric]["dynamic_range"] is not None
        ]
        if pts:
            dr, mg = np.array(pts).T
            ax.scatter(dr, mg, s=12, label=r["name"], color=r["colour"])
            top = max(top, float(np.abs(np.concatenate([dr, mg])).max()))
        else:
            missing.append(r["name"])
    note_missing(ax, missing)
    lim = top * 1.05 or 1.0
    ax.plot([0, lim], [0, lim], color="#888", lw=0.8, ls="--")
    ax.axhline(0, color="#444", lw=0.8)
    ax.axvspan(-lim, 0, color="#eee")
    ax.set_xlabel("DynamicRange (short - baseline)", fontsize=8)
    ax.set_ylabel("MemoryGain (revisit - baseline)", fontsize=8)
    ax.set_title(metric, fontsize=9)
    run_legend(fig, runs)
    return figure_png(fig)


def steps(runs: list[dict]) -> int:
    return 1 + len(_metrics(runs))


def sections(runs: list[dict], advance: Callable[[int], object]) -> tuple[str, list[Markup], list[Markup]]:
    families, metrics = _families(runs), _metrics(runs)
    note = (
        "NMR = MemoryGain / DynamicRange: how much more the return frames of a video match the first visit than "
        "frames the same gap apart that are not revisits, relative to how much nearby frames match. 1: as "
        "consistent as neighbouring frames; 0: no memory. Videos that hardly change (DynamicRange <= epsilon) "
        "are excluded and counted."
    )
    head = ["run", "model", "Overall"] + families + metrics + ["valid videos", "excluded videos"]
    rows = []
    for r in runs:
        s = r["summary"]
        cells = [label(r), str(s.get("model")), overall_cell(s)]
        cells += [fmt(s["families"].get(f, {}).get("nmr")) for f in families]
        cells += [fmt(s["metrics"].get(m, {}).get("nmr")) for m in metrics]
        cells += [str(s.get("valid_videos", "n/a")), str(s.get("excluded_videos", "n/a"))]
        rows.append(cells)
    notes = [
        tag("p", f"{r['name']}: Overall n/a: {r['summary']['overall_note']}", class_="note")
        for r in runs
        if r["summary"]["overall"] is None and r["summary"].get("overall_note")
    ]
    notes += [
        tag("p", f"{r['name']}: Overall partial: {'; '.join(r['summary']['overall_partial'])}", class_="note")
        for r in runs
        if r["summary"]["overall"] is not None and r["summary"].get("overall_partial")
    ]
    notes += [
        tag("p", f"{r['name']} is a reference, not a result: {r['summary']['reference']}", class_="note")
        for r in runs
        if r["summary"].get("oracle") and r["summary"].get("reference")
    ]
    unavailable = {m: why for r in runs for m, why in r["summary"].get("unavailable", {}).items()}
    notes += [tag("p", f"{m} unavailable: {why}", class_="note") for m, why in unavailable.items()]
    board = [tag("h2", "Leaderboard (NMR)"), table("leaderboard", head, rows), *notes]
    figures = [
        tag("h2", "NMR profile"),
        tag("p", "Per family and trajectory; dashed: NMR = 1.", class_="note"),
        tag("img", alt="NMR profile", src=data_uri(profile(runs))),
    ]
    advance(1)
    figures += [tag("h2", "MemoryGain vs DynamicRange"), tag("p", "One point per video and metric.", class_="note")]
    for m in metrics:
        figures.append(tag("img", alt=f"MG vs DR {m}", src=data_uri(scatter(runs, m))))
        advance(1)
    return note, board, figures
