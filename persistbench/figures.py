"""Figures for the HTML report: matplotlib (the ``report`` extra) rendered to PNG and inlined as data URIs."""

from __future__ import annotations

import base64
import io

from .errors import PersistbenchError


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


def table(table_id: str, head: list[str], rows: list[list[str]], sortable: bool = True) -> str:
    """An HTML table (escaped); sortable by clicking a column when ``sortable``."""
    import html

    cls = ' class="sortable"' if sortable else ""
    out = [f'<table id="{table_id}"{cls}><thead><tr>']
    out += [f'<th data-col="{i}">{html.escape(h)}</th>' for i, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    out += ["<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows]
    out.append("</tbody></table>")
    return "".join(out)
