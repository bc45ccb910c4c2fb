"""``persistbench report``: one self-contained HTML page of scored runs."""

from __future__ import annotations

import click

from persistbench.cli.options import output_option


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
@output_option("The HTML file to write.", default="report.html", file=True)
@click.option("--protocol", default=None, help="The scores' folder (default: each run's only one).")
@click.option(
    "--arena",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="An arena study folder whose ratings.json (persistbench arena --close) is added as a section.",
)
@click.option(
    "--sheets",
    multiple=True,
    metavar="RUN",
    help="Contact sheets for this run only (its name or folder; repeatable; default: every run).",
)
def report(runs, output, protocol, arena, sheets) -> None:
    """One self-contained HTML report of scored runs of one suite: leaderboard, provenance, the suite's charts
    (PersistBench: memory curves and contact sheets; R2M-Bench: NMR profiles, MG-vs-DR scatters; WROP:
    score and gain over hold against frames into the continuation).

    \b
    Example:
      persistbench report runs/hold runs/reproject --output report.html
    """
    from pathlib import Path

    from persistbench.core.outputs import check_output_file
    from persistbench.core.report import build_report
    from persistbench.io.files import check_writable

    check_output_file(output, ".html")
    check_writable(Path(output).absolute().parent)
    click.echo(
        f"report: {build_report(list(runs), output, protocol, progress=True, arena=arena, sheets=sheets or None)}"
    )
