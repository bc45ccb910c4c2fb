"""``persistbench doctor``: what this machine has for each command."""

from __future__ import annotations

import click

from persistbench.cli.options import (
    JUDGE_KEY_ENV,
    JUDGE_MIN_ACCURACY,
    JUDGE_MODEL,
    JUDGE_URL,
    judge_timeout,
    output_option,
)
from persistbench.core.doctor import COMMANDS
from persistbench.core.layout import DEFAULT_CACHE


@click.command()
@click.option(
    "--for",
    "wanted",
    type=click.Choice(["all", *COMMANDS]),
    default="all",
    show_default=True,
    help="Check only what this command needs or uses; exit non-zero when something it needs is missing.",
)
@click.option("--cache", default=DEFAULT_CACHE, show_default=True, type=click.Path(file_okay=False))
@output_option("Where the commands will write (checked for write access).", default=".")
@click.option("--lpips-weights", default=None, type=click.Path(dir_okay=False))
@JUDGE_URL
@JUDGE_MODEL
@JUDGE_KEY_ENV
@judge_timeout(15.0)
@click.option(
    "--dataset",
    default=None,
    type=click.Path(file_okay=False, exists=True),
    help="With --judge-url: ask the judge its calibration battery built from this dataset.",
)
@click.option(
    "--protocol", default=None, help="With --dataset: the protocol whose judge question (default: the suite's)."
)
@JUDGE_MIN_ACCURACY
def doctor(
    wanted,
    cache,
    output,
    lpips_weights,
    judge_url,
    judge_model,
    judge_key_env,
    judge_timeout,
    dataset,
    protocol,
    judge_min_accuracy,
) -> None:
    """Check Python, packages, ffmpeg, yt-dlp, a JavaScript runtime, torch/lpips and their weights, CUDA, write
    access; with --judge-url, the judge's endpoint (the models it lists, one tiny request and its time), and with
    --dataset too, its calibration battery (the questions with known answers score asks first).

    \b
    Examples:
      persistbench doctor
      persistbench doctor --for score
      persistbench doctor --for score --judge-url http://localhost:8000/v1 --judge-model Qwen/Qwen3.8-27B
      persistbench doctor --for score --judge-url URL --judge-model M --dataset reconstructed --protocol paper-v3
    """
    from persistbench.backends import JudgeOptions
    from persistbench.core.doctor import failing, judge_battery, run_checks
    from persistbench.core.errors import UsageError

    if dataset and not judge_url:
        raise UsageError("--dataset asks the judge its calibration battery: pass --judge-url and --judge-model too")
    judge = (
        JudgeOptions(judge_url, judge_model, judge_key_env, timeout_s=judge_timeout, min_accuracy=judge_min_accuracy)
        if judge_url
        else None
    )
    checks = [c for c in run_checks(cache, output, lpips_weights, judge) if c.concerns(wanted)]
    if judge is not None and dataset:
        checks.append(judge_battery(judge, dataset, protocol))
    bad = failing(checks, wanted)
    width = max(len(c.name) for c in checks)
    for c in checks:
        state = "ok" if c.ok else ("MISSING" if c in bad else "missing")  # upper case: needed for --for
        line = f"{state:8s} {c.name:{width}s}  {c.detail}"
        click.echo(line + (f"\n{'':8s} {'':{width}s}  fix: {c.fix}" if c.fix else ""))
    if bad:
        click.echo(f"{len(bad)} missing for {wanted}: {', '.join(c.name for c in bad)}")
        raise SystemExit(1)
    optional = [c.name for c in checks if not c.ok]
    click.echo(f"ready for {wanted}" + (f"; optional, missing: {', '.join(optional)}" if optional else ""))
