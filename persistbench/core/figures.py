"""Figures for the HTML report: matplotlib (the ``report`` extra) rendered to PNG and inlined as data URIs."""

from __future__ import annotations

import base64
import io

from persistbench.core.errors import PersistbenchError
from persistbench.core.markup import Markup, tag


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
    """``matplotlib.pyplot`` on the Agg backend, or a one-line error naming the extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PersistbenchError('report needs matplotlib: pip install -e ".[report]"') from None
    return plt


def fmt(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def table(table_id: str, head: list[str], rows: list[list[object]], sortable: bool = True) -> Markup:
    """An HTML table (every cell text); sortable by clicking a column when ``sortable``."""
    thead = tag("thead", tag("tr", *(tag("th", h, data_col=i) for i, h in enumerate(head))))
    tbody = tag("tbody", *(tag("tr", *(tag("td", c) for c in row)) for row in rows))
    return tag("table", thead, tbody, id=table_id, class_="sortable" if sortable else None)
