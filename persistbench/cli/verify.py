"""``persistbench verify``: a dataset checked against its suite's contract."""

from __future__ import annotations

import click

from persistbench.cli.options import NO_PROGRESS, SUITE, SUITE_OPTION, SuiteCommand, report_skipped, suite_options


@click.command(cls=SuiteCommand)
@click.argument("root")
@SUITE
@SUITE_OPTION
@NO_PROGRESS
@click.pass_context
def verify(ctx: click.Context, root, suite, suite_option, no_progress) -> None:
    """Check a dataset against its suite's contract; one line per problem.

    Example: persistbench verify reconstructed/
    """
    from persistbench.core.suites import detect, open_suite

    suite = suite or detect(root)
    options = suite_options(ctx, suite, "verify", suite_option)
    opened = open_suite(root, suite, options)
    problems, n = opened.verify(progress=not no_progress)
    for line in problems:
        click.echo(line)
    report_skipped(opened.skipped())
    manifest = opened.availability()
    if manifest:
        from persistbench.core.intervals import available_line, available_summary

        click.echo(f"availability: {available_line(available_summary(manifest))}")
    if problems:
        raise click.ClickException(f"{len(problems)} problem(s) in {n} case(s) under {root}")
    click.echo(f"ok: {n} cases verified under {root}")
