"""The README's figure, ``docs/memory-curves.png``: the memory curves of the demo's three runs, drawn by the
report's own code (each run in its report colour, the panels naming the runs without data there).

    persistbench demo --output persistbench-demo
    python scripts/readme_figure.py persistbench-demo
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("demo", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=Path("docs/memory-curves.png"))
def cli(demo: Path, output: Path) -> None:
    from persistbench.core.figures import figure_png
    from persistbench.core.report import load_runs
    from persistbench.io.files import write_bytes
    from persistbench.metrics.registry import order
    from persistbench.suites.persistbench.report import curves_figure

    runs = load_runs([demo / "runs" / name for name in ("hold", "reproject", "oracle")])
    metrics = order({m for r in runs for m in r["summary"]["subsets"]["all"]["visible"]})
    write_bytes(output, figure_png(curves_figure(runs, metrics)))
    click.echo(f"wrote {output}")


if __name__ == "__main__":
    cli()
