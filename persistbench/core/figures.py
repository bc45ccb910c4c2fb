"""Figures for the HTML report: matplotlib (the ``report`` extra) rendered to PNG and inlined as data URIs."""

from __future__ import annotations

import base64
import io
import os

from persistbench.core.errors import PersistbenchError
from persistbench.core.markup import Markup, tag

# One colour per run, the same in every figure of a report (matplotlib's tab10, then tab20's light shades).
RUN_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
)


def run_colour(index: int) -> str:
    """The colour of the ``index``-th run of a report (cycling after 20 runs)."""
    return RUN_COLOURS[index % len(RUN_COLOURS)]


def note_missing(ax, names: list[str]) -> None:
    """Say in a panel which runs have no data there (nothing when every run has some)."""
    if names:
        text = "no data: " + ", ".join(names)
        ax.text(0.02, 0.02, text, transform=ax.transAxes, fontsize=6, color="#555", va="bottom", wrap=True)


def run_legend(fig, runs: list[dict]) -> None:
    """One legend above the figure naming every run in its colour, whether or not a panel shows it."""
    from matplotlib.lines import Line2D

    fig.legend(
        handles=[Line2D([], [], color=r["colour"], lw=2, label=r["name"]) for r in runs],
        loc="lower center",
        ncol=min(len(runs), 6),
        fontsize=8,
        bbox_to_anchor=(0.5, 1.0),
        frameon=False,
    )


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def figure_png(fig) -> bytes:
    """The figure as PNG bytes (no timestamp in the metadata), closed afterwards."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, or a one-line error naming the extra. Its caches (the font
    list) go to the project's cache folder, not ``~``, unless ``$MPLCONFIGDIR`` says otherwise."""
    from persistbench.core.layout import user_cache

    if not os.environ.get("MPLCONFIGDIR"):
        os.environ["MPLCONFIGDIR"] = str(user_cache("matplotlib"))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PersistbenchError('report needs matplotlib: pip install -e ".[report]"') from None
    return plt


def fmt(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def table(
    table_id: str,
    head: list[str],
    rows: list[list[object]],
    sortable: bool = True,
    classes: list[str | None] | None = None,
) -> Markup:
    """An HTML table (every cell text); sortable by clicking a column when ``sortable``; ``classes`` one CSS
    class (or None) per row."""
    thead = tag("thead", tag("tr", *(tag("th", h, data_col=i) for i, h in enumerate(head))))
    kinds = classes or [None] * len(rows)
    tbody = tag("tbody", *(tag("tr", *(tag("td", c) for c in row), class_=k) for row, k in zip(rows, kinds)))
    return tag("table", thead, tbody, id=table_id, class_="sortable" if sortable else None)
