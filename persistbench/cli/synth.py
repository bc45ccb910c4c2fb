"""``persistbench synth``: a suite's synthetic test data with known answers."""

from __future__ import annotations

import click

from persistbench.cli.options import (
    NO_PROGRESS,
    SUITE_OPTION,
    SuiteCommand,
    json_file_option,
    output_option,
    suite_name_option,
    suite_options,
)


@click.command(cls=SuiteCommand)
@output_option("Output directory.")
@json_file_option(
    "--config",
    "config_file",
    "JSON of the suite's synth configuration (e.g. configs/sample.json); options given here override it.",
)
@suite_name_option("the first registered suite")
@SUITE_OPTION
@NO_PROGRESS
@click.pass_context
def synth(ctx: click.Context, output, config_file, suite, suite_option, no_progress) -> None:
    """Write synthetic test data with exact ground truth: PersistBench's procedural 360-degree scenes (source
    clips, recipes.jsonl, analytic truth), or with --suite r2m an R2M-Bench tree and videos of known scores,
    or with --suite wrop a WROP corpus of tars. The suite's options (`persistbench suites` lists them:
    --scenes, --seed, --size WxH, --frames, ...) default to its configuration's values.

    \b
    Example:
      persistbench synth --output synth --scenes 4 --seed 0
      persistbench synth --config configs/sample.json --output sample
      persistbench synth --suite r2m --output r2m-synth
      persistbench synth --suite wrop --output wrop-synth --scenes 3
    """
    from pathlib import Path

    from persistbench.core.outputs import SYNTHETIC, check_output
    from persistbench.core.suites import SUITES

    name = suite or next(iter(SUITES))
    given = suite_options(ctx, name, "synth", suite_option)
    check_output(output, accepts=(SYNTHETIC,))
    click.echo(SUITES[name].synthesize(Path(output), config_file, given, progress=not no_progress))
