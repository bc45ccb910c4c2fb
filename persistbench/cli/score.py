"""``persistbench score``: a run scored by a protocol of its suite."""

from __future__ import annotations

import click

from persistbench.cli.options import (
    AGGREGATE_ONLY,
    NO_PROGRESS,
    SUITE,
    SUITE_OPTION,
    SuiteCommand,
    backend_options,
    dataset_option,
    executor_options,
    finish,
    resume_option,
    shard_option,
    suite_options,
)
from persistbench.core.options import Size


@click.command(cls=SuiteCommand)
@click.option(
    "--pred", required=True, type=click.Path(file_okay=False, exists=True), help="A run directory (runs/NAME)."
)
@dataset_option(required=False, help="Default: the one in run.json (with the case options recorded there).")
@SUITE
@SUITE_OPTION
@click.option(
    "--protocol",
    default=None,
    help="Protocol name or JSON file (default: the suite's first; `persistbench suites` lists them).",
)
@click.option(
    "--metrics",
    "metric_list",
    default=None,
    metavar="LIST",
    help="Comma-separated metrics of the protocol (default: all of them); metrics scored before for the same "
    "prediction and protocol are kept.",
)
@click.option(
    "--eval-size",
    default=None,
    metavar="WxH",
    type=Size(),
    help="Evaluation size, width x height as every size on the command line (default: the protocol's); scores go "
    "to scores/<protocol>-<hash>/.",
)
@click.option(
    "--lpips-weights",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="Alias of --weights lpips=FILE: torchvision's AlexNet weights (default: "
    "$TORCH_HOME/hub/checkpoints/alexnet-owt-7be5be79.pth).",
)
@backend_options
@executor_options
@shard_option("Score every N-th case from the K-th; then --aggregate-only.")
@resume_option("Keep per-case scores that are up to date (same protocol, metrics, prediction).")
@click.option(
    "--allow-partial", is_flag=True, help="Score the predicted cases even if some are missing (stated in every output)."
)
@click.option(
    "--bootstrap",
    type=click.IntRange(0, 100_000),
    default=1000,
    show_default=True,
    help="Resamples of each summary number's 95% interval (0: no intervals).",
)
@AGGREGATE_ONLY
@NO_PROGRESS
@click.pass_context
def score(
    ctx: click.Context,
    pred,
    dataset,
    suite,
    suite_option,
    protocol,
    metric_list,
    eval_size,
    lpips_weights,
    backends,
    executor,
    shard,
    resume,
    allow_partial,
    bootstrap,
    aggregate_only,
    no_progress,
) -> None:
    """Score a run with its suite's protocol.

    PersistBench: masked PSNR/SSIM/LPIPS, IoU, presence and continuity on visible and off-screen
    frames (classic-v1); or the published protocol (--protocol paper-v3: object permanence, motion
    continuity and appearance preservation on model backends and a judge, see --weights and
    --judge-url; also written in the public toolkit's result.json form); reads our layout (runs/NAME from `persistbench infer`) and the public toolkit's
    inference output (<uid>/prediction/00000.png; pass --dataset). R2M-Bench: relative revisit
    scores (NMR) of generated videos; reads our runs and upstream's <root>/<T>/<id>.mp4 (--pairs DIR:
    upstream's pair files). WROP: continuation PSNR/SSIM/LPIPS per target frame, full and in the changed
    region, and the gain over holding the last input frame.

    \b
    Examples:
      persistbench score --pred runs/reproject
      persistbench score --pred runs/reproject --shard 0/2 & persistbench score --pred runs/reproject --shard 1/2
      persistbench score --pred runs/reproject --aggregate-only
    """
    from dataclasses import replace
    from pathlib import Path

    from persistbench.core.layout import RunLayout
    from persistbench.core.score import ScoreOptions, dataset_of
    from persistbench.core.score import score as run_score
    from persistbench.core.suites import detect
    from persistbench.executors import Selection

    wanted = None if metric_list is None else tuple(m.strip() for m in metric_list.split(",") if m.strip())
    dataset = dataset if dataset is not None else dataset_of(pred)
    suite = suite or detect(dataset)
    if lpips_weights:
        backends = replace(backends, weights=(*backends.weights, ("lpips", lpips_weights)))
    opts = ScoreOptions(
        pred=Path(pred),
        dataset=dataset,
        protocol=protocol,
        metrics=wanted,
        eval_size=eval_size[::-1] if eval_size else None,  # (h, w), as the protocol holds it
        suite=suite,
        suite_options=suite_options(ctx, suite, "score", suite_option),
        backends=backends,
        bootstrap=bootstrap,
    )
    with executor.build() as ex:
        result = run_score(
            opts,
            Selection(shard=shard),
            ex,
            resume=resume,
            allow_partial=allow_partial,
            aggregate_only=aggregate_only,
            progress=not no_progress,
        )
    if not finish(result, shard, f"persistbench score --pred {pred}"):
        return
    summary = result.value
    if summary.get("rescored"):
        click.echo(
            f"scored again: {summary['rescored']} case(s) had scores of this protocol (--resume keeps those up to date)"
        )
    click.echo(RunLayout(Path(pred)).summary_md(summary["scores_dir"]).read_text(), nl=False)
    click.echo(f"scores: {RunLayout(Path(pred)).scores_dir(summary['scores_dir'])}")
    failed = summary.get("failed_metrics") or {}  # requested, attempted, and without a value in any case
    if failed:
        raise click.ClickException("; ".join(f"{m} could not be computed: {why}" for m, why in failed.items()))
