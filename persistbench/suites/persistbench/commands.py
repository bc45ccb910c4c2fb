"""PersistBench's own commands: ``download`` (the rebuild from YouTube), ``pack`` (the sharded
distribution) and ``package`` (a leaderboard submission), registered in :data:`persistbench.core.suites.BUILTIN_COMMANDS`."""

from __future__ import annotations

import contextlib
import dataclasses

import click

from persistbench.cli.options import (
    AGGREGATE_ONLY,
    LIMIT,
    NO_PROGRESS,
    SUBSET,
    backend_options,
    dataset_option,
    executor_options,
    finish,
    output_option,
    shard_option,
)
from persistbench.core.layout import DEFAULT_CACHE


def _rate(value: str | None) -> int | None:
    """``--rate-limit``: bytes a second from yt-dlp's notation (``2M``, ``500K``, ``1048576``)."""
    if value is None:
        return None
    from yt_dlp.utils import parse_bytes

    rate = parse_bytes(value)
    if not rate or rate <= 0:
        raise click.BadParameter(f"{value!r}: a rate in bytes a second, such as 2M or 500K", param_hint="--rate-limit")
    return int(rate)


@click.command()
@click.option(
    "--recipes",
    default=None,
    help="Recipes: a path, an http(s):// URL or hf://OWNER/REPO/PATH[@REV]. Default: the bundled sample.",
)
@output_option("Dataset root.", default="reconstructed")
@click.option(
    "--cache", default=DEFAULT_CACHE, show_default=True, type=click.Path(file_okay=False), help="Source clip cache."
)
@LIMIT
@SUBSET
@executor_options
@shard_option()
@AGGREGATE_ONLY
@click.option("--frame-format", type=click.Choice(["png", "jpg"]), default="png", show_default=True)
@click.option("--download-only", is_flag=True, help="Fetch the source clips into the cache; reconstruct nothing.")
@click.option("--dry-run", is_flag=True, help="Print what would be done and exit.")
@click.option(
    "--retries", type=click.IntRange(0), default=3, show_default=True, help="Retries after a transient download error."
)
@click.option("--cookies", type=click.Path(dir_okay=False, exists=True), default=None, help="cookies.txt for yt-dlp.")
@click.option("--proxy", default=None, help="Proxy URL for yt-dlp.")
@click.option(
    "--rate-limit",
    default=None,
    metavar="RATE",
    callback=lambda ctx, param, v: _rate(v),
    help="The most yt-dlp downloads a second, e.g. 2M or 500K (bytes).",
)
@click.option(
    "--sleep-interval",
    type=click.FloatRange(0, 3600),
    default=0.0,
    metavar="S",
    help="Seconds yt-dlp waits before each download (hosts that rate-limit: YouTube).",
)
@click.option(
    "--backend",
    type=click.Choice(["local", "ssh", "gcloud"]),
    default="local",
    show_default=True,
    help="Where yt-dlp runs: here, on --remote over SSH, or on a Compute Engine VM through the gcloud CLI "
    "(clips come back checked; reconstruction stays here). See docs/download.md.",
)
@click.option("--remote", default=None, metavar="USER@HOST[:PORT]", help="The machine of --backend ssh.")
@click.option("--ssh-key", type=click.Path(dir_okay=False, exists=True), default=None, help="An SSH identity file.")
@click.option(
    "--known-hosts",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A known_hosts file to check against.",
)
@click.option("--remote-python", default=None, metavar="PATH", help="A remote Python with yt-dlp and imageio-ffmpeg.")
@click.option(
    "--vm", default=None, metavar="NAME", help="--backend gcloud's VM, made or reused [persistbench-download-USER]."
)
@click.option("--zone", default=None, help="--backend gcloud's zone [gcloud's compute/zone, else us-central1-a].")
@click.option("--project", default=None, help="--backend gcloud's project [gcloud's configured project].")
@click.option(
    "--machine-type",
    default=None,
    metavar="TYPE",
    help="The machine type of a VM --backend gcloud creates [e2-standard-2].",
)
@click.option(
    "--stop-vm-when-done", is_flag=True, help="--backend gcloud: stop the VM after the run (it stays otherwise)."
)
@click.option(
    "--sources-dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Already-downloaded clips named <source id>.<ext>; nothing is downloaded.",
)
@click.option("--accept-changed-sources", is_flag=True, help="Reconstruct even when a source's fingerprint differs.")
@NO_PROGRESS
def download(
    recipes,
    output,
    cache,
    limit,
    subset,
    executor,
    shard,
    aggregate_only,
    frame_format,
    download_only,
    dry_run,
    retries,
    cookies,
    proxy,
    rate_limit,
    sleep_interval,
    backend,
    remote,
    ssh_key,
    known_hosts,
    remote_python,
    vm,
    zone,
    project,
    machine_type,
    stop_vm_when_done,
    sources_dir,
    accept_changed_sources,
    no_progress,
) -> None:
    """Rebuild the benchmark: fetch each case's source range with yt-dlp and reproject it.

    \b
    Examples:
      persistbench download --limit 5                 # bundled sample, no network
      persistbench download --recipes hf://OWNER/REPO/recipes.jsonl --workers 2
      persistbench download --recipes recipes.jsonl --shard 0/4 --cookies cookies.txt
      persistbench download --recipes recipes.jsonl --executor ray --ray-address auto
      persistbench download --recipes recipes.jsonl --backend ssh --remote me@worker.example.org
      persistbench download --recipes recipes.jsonl --backend gcloud --stop-vm-when-done
    """
    from pathlib import Path

    from persistbench.core.outputs import check_output, dataset_of
    from persistbench.executors import Selection, check_sharding
    from persistbench.suites.persistbench.build.download import DownloadOptions, aggregate, resolve_recipes
    from persistbench.suites.persistbench.build.download import download as run_download
    from persistbench.suites.persistbench.build.download import dry_run as plan_lines
    from persistbench.suites.persistbench.build.sources import SourceOptions

    check_sharding(shard, aggregate_only)

    ssh = gcloud = None
    given = {"--remote": remote, "--ssh-key": ssh_key, "--known-hosts": known_hosts, "--remote-python": remote_python}
    given_vm = {"--vm": vm, "--zone": zone, "--project": project, "--machine-type": machine_type}
    given_vm["--stop-vm-when-done"] = stop_vm_when_done
    for flags, needed in ((given, "ssh"), (given_vm, "gcloud")):
        stray = [flag for flag, value in flags.items() if value and backend != needed]
        if stray:
            raise click.UsageError(f"{stray[0]} is for --backend {needed}")
    if backend == "ssh":
        from persistbench.suites.persistbench.build.remote import SshOptions

        if not remote:
            raise click.UsageError("--backend ssh needs --remote USER@HOST[:PORT]")
        ssh = SshOptions(remote, ssh_key, known_hosts, remote_python).target()
    elif backend == "gcloud":
        from persistbench.suites.persistbench.build import gcloud as gc

        gcloud = gc.GcloudOptions(vm, zone, project, machine_type or gc.DEFAULT_MACHINE_TYPE, stop_vm_when_done)
    if not download_only:
        check_output(
            output,
            inputs=[("sources folder", sources_dir)],
            accepts=(dataset_of("persistbench"),),
        )
    source = resolve_recipes(recipes, Path(cache))
    if source.spec == "bundled":
        click.echo(f"using the bundled sample recipes (no --recipes given): {source.path}")
    src_opts = SourceOptions(
        cache=Path(cache),
        sources_dir=Path(sources_dir) if sources_dir else None,
        retries=retries,
        cookies=cookies,
        proxy=proxy,
        rate_limit=rate_limit,
        sleep_interval=sleep_interval,
        remote=ssh,
        progress=not no_progress and executor.resolved == "serial",
    )
    opts = DownloadOptions(
        output=Path(output),
        sources=src_opts,
        selection=Selection(limit, subset, shard),
        frame_format=frame_format,
        download_only=download_only,
        accept_changed_sources=accept_changed_sources,
        progress=not no_progress,
    )
    if dry_run:
        click.echo("\n".join(plan_lines(source, opts)))
        if gcloud is not None:
            from persistbench.suites.persistbench.build.gcloud import resolve

            vm = resolve(gcloud)[1]  # read-only: the CLI's sign-in and configuration
            click.echo(
                f"missing clips would download on VM {vm.name} (zone {vm.zone}, project {vm.project}), made if needed"
            )
        return
    if aggregate_only:
        result = aggregate(source, opts)
    else:
        with executor.build() as ex, _remote_vm(gcloud, source, opts) as opts:
            result = run_download(source, opts, ex)
    if finish(result, shard, "persistbench download ...the same options, without --shard...") and not download_only:
        click.echo(f"dataset: {output}")


@contextlib.contextmanager
def _remote_vm(gcloud, source, opts):
    """``opts`` with its sources downloaded on the gcloud VM when one is asked for and a clip is missing."""
    if gcloud is None:
        yield opts
        return
    from persistbench.suites.persistbench.build import gcloud as gc
    from persistbench.suites.persistbench.build.download import plan, to_download

    cli, vm = gc.resolve(gcloud)  # gcloud there and signed in, whatever the cache holds
    if not to_download(plan(source, opts), opts.sources):
        yield opts
        return
    with gc.session(gcloud, cli, vm, click.echo) as target:
        yield dataclasses.replace(opts, sources=dataclasses.replace(opts.sources, remote=target))


@click.command()
@click.argument("root", type=click.Path(file_okay=False, exists=True))
@output_option("A new directory for the distribution.")
@click.option(
    "--shard-size", default="1.2GB", show_default=True, help="Target bytes per tar shard (pairs are never split)."
)
@click.option(
    "--samples", type=click.IntRange(0), default=4, show_default=True, help="Pairs also kept unarchived in samples/."
)
@click.option(
    "--date", default=None, metavar="YYYY-MM-DD", help="Publication date for croissant.json (default: left out)."
)
@executor_options
@shard_option("Encode every N-th pair from the K-th (staged beside --output); then --aggregate-only.")
@AGGREGATE_ONLY
@NO_PROGRESS
def pack(root, output, shard_size, samples, date, executor, shard, aggregate_only, no_progress) -> None:
    """Pack a reconstructed dataset as the sharded distribution (tar shards, checksums, index, Croissant).

    \b
    Example:
      persistbench pack reconstructed --output dist --shard-size 1.2GB
    """
    from pathlib import Path

    from persistbench.core.outputs import check_output
    from persistbench.io.files import check_writable
    from persistbench.suites.persistbench.dist.pack import pack as run_pack
    from persistbench.suites.persistbench.dist.pack import parse_size

    check_output(output, inputs=[("dataset", root)])
    check_writable(Path(output).absolute().parent)
    with executor.build() as ex:
        result = run_pack(
            root, output, parse_size(shard_size), samples, date, ex, shard, aggregate_only, progress=not no_progress
        )
    if finish(result, shard, f"persistbench pack {root} --output {output}"):
        dist = result.value
        click.echo(f"packed {root} into {dist.root}: {len(list(dist.shards_dir.glob('shard-*.tar')))} shard(s)")


@click.command(name="package")
@click.option(
    "--pred",
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="A run scored with --protocol paper-v3.",
)
@output_option("The submission ZIP (with --check: not written).", default="submission.zip", file=True)
@click.option("--name", default=None, help="The submission's name (default: the run's).")
@click.option(
    "--allow-subset",
    is_flag=True,
    help="Package the scored cases of a partial run (diagnostics: the leaderboard refuses it).",
)
@click.option(
    "--check",
    "check_zip",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="Check this ZIP against --pred: the public checks, the prediction files, and --sample cases re-scored.",
)
@click.option("--sample", type=click.IntRange(0), default=5, show_default=True, help="--check: cases re-scored.")
@click.option("--seed", default=None, help="--check: which cases are drawn (default: the ZIP's sha256).")
@click.option(
    "--tolerance",
    type=click.FloatRange(0),
    default=1e-6,
    show_default=True,
    help="--check: largest accepted difference of a re-scored frame score.",
)
@dataset_option(required=False, help="Default: the one in the run's run.json.")
@backend_options
def package(pred, output, name, allow_subset, check_zip, sample, seed, tolerance, dataset, backends) -> None:
    """Write a paper-v3 run's leaderboard submission, or check one.

    The ZIP holds the public toolkit's run.json, results.json and summary.json (accepted by its own
    validation) and a manifest: the sha256 of every per-case result and prediction file, and the toolkit,
    protocol, weights and judge. --check re-scores sampled cases from the predictions and confirms that the
    claimed results and means follow from them (pass the scoring options: --weights, --judge-url).

    \b
    Examples:
      persistbench package --pred runs/mymodel --output submission.zip
      persistbench package --check submission.zip --pred runs/mymodel --sample 20 --weights sam2-package=FILE.pt ...
    """
    from pathlib import Path

    from persistbench.core.outputs import check_output_file
    from persistbench.suites.persistbench import package as pack_run

    ds = Path(dataset) if dataset else None
    if check_zip is None:
        check_output_file(output, ".zip")
        sub = pack_run.package(Path(pred), Path(output), name, allow_subset, ds)
        click.echo(
            f"submission: {output} ({len(sub.results)} cases, evaluation {sub.manifest['evaluation_run_id'][:12]})"
        )
        if allow_subset:
            click.echo("a subset, for diagnostics: the leaderboard requires all 2,000 published cases")
        return
    problems, checks = pack_run.check(Path(check_zip), Path(pred), sample, seed, tolerance, backends, ds)
    for c in checks:
        click.echo(
            f"re-scored {c.uid}: largest frame difference {c.max_frame_diff:.3g}" + (" (differs)" if c.problems else "")
        )
    if problems:
        raise click.ClickException(f"{check_zip}: {len(problems)} problem(s); first: {problems[0]}")
    click.echo(f"{check_zip}: follows from {pred} ({len(checks)} cases re-scored)")


@click.command()
@click.option(
    "--with",
    "runs",
    multiple=True,
    type=click.Path(file_okay=False, exists=True),
    help="A run scored with paper-v3, placed among the published models (repeatable).",
)
@click.option("--protocol", default=None, help="The runs' paper-v3 scoring, where a run has several.")
@click.option(
    "--subset",
    "subsets",
    type=click.Choice(["static", "dynamic"]),
    multiple=True,
    help="Only this subset (repeatable; default: both).",
)
def leaderboard(runs, protocol, subsets) -> None:
    """Print PersistBench's published leaderboard, with your runs among the published models.

    The published rows are the project page's (shipped with this toolkit, with their source and date); a
    run's are its paper-v3 scores in the leaderboard's form (motion continuity per case exp(-mean d):
    docs/metrics.md). Rows are ranked by memory; a run scored on fewer cases than the benchmark is placed
    by its memory but not ranked.

    \b
    Examples:
      persistbench leaderboard
      persistbench leaderboard --with runs/mymodel --subset static
    """
    from persistbench.suites.persistbench import leaderboard as board

    published = board.published()
    rows = board.runs_rows([str(r) for r in runs], protocol, published)
    click.echo("\n\n".join(board.text(published, s, rows.get(s, [])) for s in subsets or board.GROUPS))
