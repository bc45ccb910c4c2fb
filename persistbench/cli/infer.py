"""``persistbench infer``: a model over a dataset's cases, its predictions written as a run."""

from __future__ import annotations

import click

from persistbench.cli.options import (
    AGGREGATE_ONLY,
    DEVICE,
    LIMIT,
    NO_PROGRESS,
    SUBSET,
    SUITE,
    SUITE_OPTION,
    SuiteCommand,
    dataset_option,
    executor_options,
    finish,
    json_file_option,
    output_option,
    report_skipped,
    resume_option,
    shard_option,
    suite_options,
)
from persistbench.core.errors import PersistbenchError
from persistbench.models.registry import MODELS


@click.command(cls=SuiteCommand)
@click.option(
    "--model",
    "model_spec",
    required=True,
    help=" | ".join(MODELS) + " | an installed model's name | file.py:Class | module:Class | "
    "'cmd:PROGRAM {input} {output}'",
)
@dataset_option()
@SUITE
@SUITE_OPTION
@output_option("Run directory, e.g. runs/NAME.")
@json_file_option("--model-config", "model_config", "JSON object of keyword arguments for the model's constructor.")
@DEVICE
@LIMIT
@SUBSET
@shard_option()
@AGGREGATE_ONLY
@executor_options
@resume_option("Continue a run: cases without case.json are (re)done.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run.")
@click.option(
    "--seed",
    type=click.IntRange(0, 2**32 - 1),
    default=None,
    help="The run's seed, recorded in run.json; each case gets one derived from it (ModelInput.seed). Runs of one "
    "model with different seeds form a group in report and compare.",
)
@NO_PROGRESS
@click.pass_context
def infer(
    ctx: click.Context,
    model_spec,
    dataset,
    suite,
    suite_option,
    output,
    model_config,
    device,
    limit,
    subset,
    shard,
    aggregate_only,
    executor,
    resume,
    overwrite,
    seed,
    no_progress,
) -> None:
    """Run a model over the cases and write its predictions (runs/NAME/...). Each worker (process or Ray actor)
    loads the model once and keeps it for every case it runs. The suite's case options (WROP: --tasks,
    --per-task, --categories) are recorded in run.json for `persistbench score`.

    \b
    Examples:
      persistbench infer --model reproject --dataset reconstructed --output runs/reproject
      persistbench infer --model examples/my_model.py:MyModel --dataset reconstructed --output runs/mine
      persistbench infer --model "cmd:python my_adapter.py {input} {output}" --dataset reconstructed --output runs/ext
      persistbench infer --model my_model.py:MyModel --dataset reconstructed --output runs/mine \\
          --executor ray --ray-address auto --gpus-per-task 0.5 --device cuda
    """
    from pathlib import Path

    from persistbench.backends import resolve_device
    from persistbench.core.infer import InferOptions, check_complete
    from persistbench.core.infer import infer as run_infer
    from persistbench.core.suites import detect
    from persistbench.executors import Selection, check_sharding
    from persistbench.io.files import read_json

    if resume and overwrite:
        raise click.UsageError("--resume and --overwrite exclude each other")
    config = None
    if model_config:
        try:
            config = read_json(model_config)
        except PersistbenchError as e:
            raise click.BadParameter(str(e), param_hint="--model-config") from None
        if not isinstance(config, dict):
            raise click.BadParameter(f"{model_config}: must hold a JSON object", param_hint="--model-config")
    suite = suite or detect(dataset)
    opts = InferOptions(
        dataset=dataset,
        output=Path(output),
        model=model_spec,
        device=resolve_device(device),
        config=config,
        suite=suite,
        suite_options=suite_options(ctx, suite, "infer", suite_option),
        seed=seed,
    )
    check_sharding(shard, aggregate_only)
    selected = Selection(limit, subset, shard)
    if aggregate_only:
        result = check_complete(opts, selected)
    else:
        with executor.build() as ex:
            result = run_infer(opts, selected, ex, resume=resume, overwrite=overwrite, progress=not no_progress)
    report_skipped(opts.open_suite().skipped())
    if finish(result, shard, f"persistbench infer ... --output {output}"):
        click.echo(f"predictions: {output}")
