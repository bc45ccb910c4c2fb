"""``persistbench demo``: every suite's chain, offline, on data it makes."""

from __future__ import annotations

import click

from persistbench.cli.options import NO_PROGRESS, output_option


@click.command()
@output_option("A new (or empty) directory for everything the demo makes.", default="persistbench-demo")
@click.option("--workers", type=click.IntRange(1), default=2, show_default=True, help="Cases in parallel processes.")
@NO_PROGRESS
def demo(output, workers, no_progress) -> None:
    """Run the three suites offline: synth -> loopback server -> download (yt-dlp) -> infer -> score -> report
    (PersistBench), the same from a synthetic checkout (R2M-Bench) and from tars read over HTTP (WROP).

    \b
    Example:
      persistbench demo --output persistbench-demo
    """
    from persistbench.core.demo import demo as run_demo
    from persistbench.io.files import check_writable

    check_writable(output)
    run_demo(output, workers=workers, progress=not no_progress, echo=click.echo)
