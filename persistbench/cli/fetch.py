"""``persistbench fetch``: a suite's published data, checked as it arrives."""

from __future__ import annotations

import click

from persistbench.cli.options import (
    AGGREGATE_ONLY,
    NO_PROGRESS,
    SUITE_OPTION,
    SuiteCommand,
    _dataset_root,
    executor_options,
    finish,
    output_option,
    shard_option,
    suite_name_option,
    suite_options,
)


@click.command(cls=SuiteCommand)
@output_option("Dataset root to extract into.")
@click.option(
    "--repo",
    default=None,
    help="Hugging Face dataset repository (default: the suite's own).",
)
@click.option("--revision", default=None, help="Branch, tag or commit; resolved to a commit and recorded.")
@click.option(
    "--from",
    "from_dir",
    default=None,
    callback=_dataset_root,
    help="Take the files from a local copy of the distribution instead (a folder; an http(s):// URL where the suite reads remote data).",
)
@click.option("--include", type=click.Choice(["samples", "all"]), default="all", show_default=True)
@suite_name_option("the first registered suite")
@SUITE_OPTION
@executor_options
@shard_option("Fetch every N-th file from the K-th; then --aggregate-only.")
@AGGREGATE_ONLY
@NO_PROGRESS
@click.pass_context
def fetch(
    ctx: click.Context,
    output,
    repo,
    revision,
    from_dir,
    include,
    suite,
    suite_option,
    executor,
    shard,
    aggregate_only,
    no_progress,
) -> None:
    """Fetch a suite's published data. PersistBench: the sharded distribution (each shard's sha256 verified,
    extracted safely; resumable). R2M-Bench: the conditioning images (GD-ML/R2MBench, test_imgs/) into a
    checkout of its repository. WROP: whole task archives (Hokin/object-permanence), each checked against
    checksums.txt (sha256, member count), --tasks LIST choosing them; resumable.

    \b
    Examples:
      persistbench fetch --include samples --output data
      persistbench fetch --repo ORG/NAME --revision v1 --output data
      persistbench fetch --from /mnt/dist --output data
      persistbench fetch --suite r2m --output R2MBench
      persistbench fetch --suite wrop --tasks 'ball_*' --output wrop
    """
    from pathlib import Path

    from persistbench.core.outputs import check_output, dataset_of
    from persistbench.core.suites import SUITES
    from persistbench.io.files import check_writable

    if from_dir and (repo or revision):
        raise click.UsageError("--from takes the files from a directory; --repo/--revision name a Hub repository")
    name = suite or next(iter(SUITES))
    options = suite_options(ctx, name, "fetch", suite_option)
    check_output(output, inputs=[("distribution", from_dir)], accepts=(dataset_of(name),))
    check_writable(output)
    cls = SUITES[name]
    if isinstance(from_dir, str) and not cls.remote:
        raise click.UsageError(f"--from {from_dir}: --suite {cls.name} fetches from a folder, not a URL")
    with executor.build() as ex:
        result = cls.fetch(
            Path(output),
            repo,
            revision,
            from_dir,
            include,
            progress=not no_progress,
            options=options,
            executor=ex,
            shard=shard,
            aggregate_only=aggregate_only,
        )
    if finish(result, shard, f"persistbench fetch ... --output {output}"):
        click.echo(result.value)
