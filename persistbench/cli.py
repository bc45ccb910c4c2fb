"""The ``persistbench`` command: argument parsing only; the work happens in the modules.

Heavy modules (numpy, cv2, torch) are imported inside the commands, so
``persistbench --help`` starts fast.
"""

from __future__ import annotations

import functools

import click

from . import __version__
from .errors import PersistbenchError, UsageError, os_error_line
from .suites import SUITES

DEFAULT_CACHE = "cache/youtube"  # download's source cache, also what doctor checks


def _network_error(e: BaseException) -> bool:
    """An HTTP client's connection error (httpx, requests, urllib3): the network, not a bug."""
    names = {c.__name__ for c in type(e).__mro__}
    return type(e).__module__.startswith(("httpx", "requests", "urllib3", "huggingface_hub")) and bool(
        names & {"ConnectError", "ConnectionError", "ConnectTimeout", "TimeoutException", "NetworkError", "ProxyError"}
    )


def _host(e: BaseException) -> str:
    """``host:port`` of the request that failed, when the client says."""
    try:
        url = e.request.url  # httpx and requests errors carry their request
    except (AttributeError, RuntimeError):
        return "unknown host"
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    if host is None:
        from urllib.parse import urlsplit

        parts = urlsplit(str(url))
        host, port = parts.hostname, parts.port
    return f"{host}:{port}" if port else str(host)


class _Group(click.Group):
    """Turns bad input and environment errors into one ``Error: ...`` line and exit code 1.

    :class:`PersistbenchError` carries its own message; operating-system errors (a read-only or
    missing output, a file where a folder should be) name their path; an HTTP client's
    connection error names its host. Anything else is a bug and keeps its traceback.
    """

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UsageError as e:
            raise click.UsageError(str(e), ctx) from None
        except PersistbenchError as e:
            raise click.ClickException(str(e)) from None
        except OSError as e:
            raise click.ClickException(os_error_line(e)) from None
        except Exception as e:
            if _network_error(e):
                raise click.ClickException(
                    f"{_host(e)}: network unreachable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
                ) from None
            raise


def _size(text: str, first: str, second: str) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in text.lower().split("x"))
        if a <= 0 or b <= 0:
            raise ValueError
    except ValueError:
        raise click.BadParameter(f"{text!r} is not {first}x{second}") from None
    return a, b


def _wh(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, int]:
    """``WIDTHxHEIGHT`` -> (width, height)."""
    return _size(value, "WIDTH", "HEIGHT")


def _hw(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    """``HEIGHTxWIDTH`` -> (height, width)."""
    return None if value is None else _size(value, "HEIGHT", "WIDTH")


def _shard(ctx: click.Context, param: click.Parameter, value: str | None):
    from .executors import Shard

    try:
        return Shard.parse(value) if value else None
    except PersistbenchError as e:
        raise click.BadParameter(str(e)) from None


# Options that several commands share, defined once.
LIMIT = click.option(
    "--limit", type=click.IntRange(1), default=None, help="Only the first N cases of the deterministic order."
)
SUBSET = click.option(
    "--subset", default=None, help="Only this subset (PersistBench: dynamic, static; R2M-Bench: the trajectory)."
)
SUITE = click.option(
    "--suite",
    type=click.Choice(list(SUITES)),
    default=None,
    help="The benchmark (default: recognised from the dataset root).",
)
NO_PROGRESS = click.option("--no-progress", is_flag=True, help="No progress bars.")


def _dataset_root(ctx, param, value):
    """A dataset folder that exists (a Path), or a URL (a str) for suites that read remote data."""
    if value is None or "://" in value:
        return value
    from pathlib import Path

    if not Path(value).is_dir():
        raise click.BadParameter(f"{value}: no such folder", param=param)
    return Path(value)


def dataset_option(
    required: bool = True, help: str = "Dataset root (WROP: a folder, http(s):// URL or hf://datasets/<repo>[@rev])."
):
    return click.option("--dataset", required=required, default=None, callback=_dataset_root, help=help)


def selection_options(f):
    """WROP's case selection: ``--tasks``, ``--per-task``, ``--categories`` (recorded in run.json)."""
    f = click.option(
        "--categories",
        "categories",
        default=None,
        type=click.Path(dir_okay=False, exists=True),
        help="WROP: a JSON file {task: category} for tasks whose metadata names no category.",
    )(f)
    f = click.option(
        "--per-task",
        type=click.IntRange(1),
        default=None,
        help="WROP: N samples per task, the same N whatever other tasks are chosen (default: all).",
    )(f)
    return click.option(
        "--tasks", default=None, metavar="LIST", help="WROP: comma-separated task names or globs (default: all)."
    )(f)


def selection(tasks: str | None, per_task: int | None, categories: str | None) -> dict:
    """The suite options of :func:`selection_options` that were given."""
    out: dict = {}
    if tasks:
        out["tasks"] = [t.strip() for t in tasks.split(",") if t.strip()]
    if per_task is not None:
        out["per_task"] = per_task
    if categories:
        import os

        out["categories"] = os.path.abspath(categories)  # absolute, links kept: errors name what was given
    return out


def output_option(help: str, default: str | None = None, file: bool = False):
    """``--output`` (alias ``--out``): where a command writes; a folder unless ``file``."""
    kind = click.Path(dir_okay=False) if file else click.Path(file_okay=False)
    required = default is None
    return click.option(
        "--output",
        "--out",
        "output",
        required=required,
        default=default,
        show_default=not required,
        type=kind,
        help=help,
    )


class FiniteFloat(click.FloatRange):
    """A float range that also refuses ``nan`` and ``inf`` (which every comparison of a plain range lets through)."""

    def convert(self, value, param, ctx):
        out = super().convert(value, param, ctx)
        if out != out or out in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return out


def _number(name: str, kind: click.ParamType, default: float, help: str):
    return click.option(name, type=kind, default=default, show_default=True, help=help)


def executor_options(f):
    """``--executor``, ``--workers``, ``--ray-address``, ``--cpus-per-task``, ``--gpus-per-task`` and
    ``--max-retries``, handed to the command as one ``executor`` (:class:`~persistbench.executors.ExecutorOptions`)."""

    @functools.wraps(f)
    def command(*args, executor, workers, ray_address, cpus_per_task, gpus_per_task, max_retries, **kwargs):
        from .executors import ExecutorOptions

        options = ExecutorOptions(executor, workers, ray_address, cpus_per_task, gpus_per_task, max_retries)
        return f(*args, executor=options, **kwargs)

    options = [
        click.option(
            "--executor",
            type=click.Choice(["serial", "processes", "ray"]),
            default=None,
            help="Where cases run: in this process, in local processes, or on Ray "
            "(default: serial, or processes with --workers > 1).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(1),
            default=None,
            help="Cases at once (processes: at most one per core; ray: at most what the cluster's resources allow; default: that many).",
        ),
        click.option(
            "--ray-address",
            default=None,
            metavar="ADDR",
            help="A running Ray cluster (auto, HOST:6379, ray://HOST:10001); default: a local one for this run.",
        ),
        _number(
            "--cpus-per-task",
            FiniteFloat(0, min_open=True),
            1.0,
            "Ray: CPUs each worker reserves (fractions allowed).",
        ),
        _number("--gpus-per-task", FiniteFloat(0), 0.0, "Ray: GPUs each worker reserves (0.5: two workers per GPU)."),
        _number(
            "--max-retries",
            click.IntRange(0),
            2,
            "Times a case is given to a new worker after its worker died (killed, out of memory).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _weights(ctx, param, values) -> tuple[tuple[str, str], ...]:
    from .backends import BACKENDS

    out = []
    for v in values:
        name, sep, where = v.partition("=")
        if not sep or name not in BACKENDS or name == "judge" or not where:
            known = ", ".join(n for n in BACKENDS if n != "judge")
            raise click.BadParameter(f"{v!r}: expected NAME=DIR_OR_REPO with NAME one of {known}")
        out.append((name, where))
    return tuple(out)


def _judge_url(ctx, param, value: str | None) -> str | None:
    from urllib.parse import urlsplit

    if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
        raise click.BadParameter(f"{value!r}: must be an http:// or https:// URL")
    return value


JUDGE_URL = click.option(
    "--judge-url", default=None, metavar="URL", callback=_judge_url, help="An OpenAI-compatible endpoint (…/v1)."
)
JUDGE_MODEL = click.option(
    "--judge-model", default="Qwen/Qwen3.8-27B", show_default=True, help="The judge's model name at that endpoint."
)
JUDGE_KEY_ENV = click.option(
    "--judge-key-env",
    default="PERSISTBENCH_JUDGE_KEY",
    show_default=True,
    metavar="VAR",
    help="The environment variable holding the endpoint's API key (never written anywhere).",
)


def judge_timeout(default: float):
    """``--judge-timeout``: 120 s for a judgment in a run; ``doctor``'s quick check waits less."""
    return click.option(
        "--judge-timeout",
        type=FiniteFloat(1.0),
        default=default,
        show_default=True,
        metavar="S",
        help="The most one judgment may take, every request, retry and wait included.",
    )


def backend_options(f):
    """``--device``, ``--allow-download``, ``--weights``, ``--batch-size`` and the judge's ``--judge-*``
    options, handed to the command as one ``backends`` (:class:`~persistbench.backends.BackendOptions`)."""

    @functools.wraps(f)
    def command(
        *args,
        device,
        allow_download,
        weights,
        batch_size,
        judge_url,
        judge_model,
        judge_key_env,
        judge_concurrency,
        judge_timeout,
        judge_max_failures,
        **kw,
    ):
        from .backends import BackendOptions, JudgeOptions

        judge = (
            JudgeOptions(
                judge_url,
                judge_model,
                judge_key_env,
                judge_concurrency,
                judge_timeout,
                max_failures=judge_max_failures,
            )
            if judge_url
            else None
        )
        options = BackendOptions(device, weights, allow_download, batch_size, judge)
        return f(*args, backends=options, **kw)

    options = [
        click.option(
            "--device",
            default="auto",
            show_default=True,
            help="Where networks run (LPIPS, backends): cpu, cuda, cuda:1, or auto (CUDA when present).",
        ),
        click.option(
            "--allow-download",
            is_flag=True,
            help="Download missing weights (LPIPS's AlexNet, backends' checkpoints from the Hub) into their caches.",
        ),
        click.option(
            "--weights",
            multiple=True,
            metavar="NAME=DIR",
            callback=_weights,
            help="A backend's checkpoint: a folder with config.json and *.safetensors, or a Hub repository id "
            "(default: its repository in the Hugging Face cache; `persistbench doctor` lists them).",
        ),
        click.option(
            "--batch-size", type=click.IntRange(1), default=8, show_default=True, help="Frames per forward pass."
        ),
        JUDGE_URL,
        JUDGE_MODEL,
        JUDGE_KEY_ENV,
        click.option("--judge-concurrency", type=click.IntRange(1, 256), default=4, show_default=True),
        judge_timeout(120.0),
        click.option(
            "--judge-max-failures",
            type=click.IntRange(0),
            default=10,
            show_default=True,
            metavar="N",
            help="Stop asking the judge after N judgments in a row failed (0: never); the rest fail at once, counted.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


AGGREGATE_ONLY = click.option(
    "--aggregate-only", is_flag=True, help="After the --shard runs: combine and check their outputs; run nothing."
)


def _finish(result, shard, again: str) -> bool:
    """Print a stage's outcomes; exit 1 when a case failed. Returns whether the stage's output is complete
    (False for a shard, after saying how to combine the shards)."""
    head, *failures = result.text().split("\n")
    if len(failures) == 1:  # on stderr after "Error:", one line per failed case
        raise click.ClickException(f"{failures[0].strip()} ({head})")
    if failures:
        raise click.ClickException("\n".join([f"{len(failures)} cases failed ({head}):", *failures]))
    click.echo(head)
    if shard is not None:
        click.echo(f"shard {shard} done; when every shard is: {again} --aggregate-only")
        return False
    return True


def resume_option(help: str):
    return click.option("--resume", is_flag=True, help=help)


def shard_option(help: str = "Only shard K of N (0-based) of the selected cases."):
    return click.option("--shard", default=None, metavar="K/N", callback=_shard, help=help)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="persistbench")
def main() -> None:
    """Benchmark visual memory of video and 4D models on reprojected 360-degree videos."""


@main.command()
@output_option("Output directory.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="JSON of the suite's synth configuration (e.g. configs/sample.json); options given here override it.",
)
@click.option(
    "--scenes", default=4, show_default=True, type=click.IntRange(1), help="Scenes (even: dynamic, odd: static)."
)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--base-url", default=None, help="Source URL prefix, e.g. http://127.0.0.1:8000 (default: relative file paths)."
)
@click.option("--pano-size", default="1024x512", show_default=True, callback=_wh, help="Source clip size WxH (W = 2H).")
@click.option("--size", "view_size", default="256x192", show_default=True, callback=_wh, help="Output view size WxH.")
@click.option(
    "--hfov",
    "hfov_deg",
    default=90.0,
    show_default=True,
    type=FiniteFloat(1, 179),
    help="Horizontal field of view, degrees.",
)
@click.option("--frames", "n_frames", default=60, show_default=True, type=click.IntRange(2), help="Frames per scene.")
@click.option("--fps", default=10.0, show_default=True, type=FiniteFloat(0, min_open=True))
@click.option(
    "--speed",
    "speed_deg_s",
    default=15.0,
    show_default=True,
    type=float,
    help="Angular speed of dynamic objects, degrees/s.",
)
@click.option(
    "--radius",
    "radius_deg",
    default=12.0,
    show_default=True,
    type=FiniteFloat(0.5, 45),
    help="Object angular radius, degrees.",
)
@SUITE
@click.pass_context
def synth(ctx: click.Context, output, config_file, suite, **options) -> None:
    """Write synthetic test data with exact ground truth: PersistBench's procedural 360-degree scenes (source
    clips, recipes.jsonl, analytic truth), or with --suite r2m an R2M-Bench tree and videos of known scores,
    or with --suite wrop a WROP corpus of tars (--scenes samples per task, --size WxH).

    \b
    Example:
      persistbench synth --output synth --scenes 4 --seed 0
      persistbench synth --config configs/sample.json --output sample
      persistbench synth --suite r2m --output r2m-synth
      persistbench synth --suite wrop --output wrop-synth --scenes 3
    """
    from pathlib import Path

    from .suites import suite_class

    given = {k: v for k, v in options.items() if ctx.get_parameter_source(k) != click.core.ParameterSource.DEFAULT}
    cls = suite_class(suite or "persistbench")  # the options' defaults are the configurations' own
    click.echo(cls.synthesize(Path(output), config_file, given))


@main.command()
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
    """
    from pathlib import Path

    from .download import DownloadOptions, aggregate, resolve_recipes
    from .download import download as run_download
    from .download import dry_run as plan_lines
    from .executors import Selection
    from .sources import SourceOptions

    if shard is not None and aggregate_only:
        raise click.UsageError(
            "--shard runs cases; --aggregate-only then combines all shards: use them in separate calls"
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
        return
    if aggregate_only:
        result = aggregate(source, opts)
    else:
        with executor.build() as ex:
            result = run_download(source, opts, ex)
    if _finish(result, shard, "persistbench download ...the same options, without --shard...") and not download_only:
        click.echo(f"dataset: {output}")


@main.command()
@click.option(
    "--model",
    "model_spec",
    required=True,
    help="hold | reproject | oracle | an entry point name | file.py:Class | module:Class | 'cmd:PROGRAM {input} {output}'",
)
@dataset_option()
@SUITE
@selection_options
@output_option("Run directory, e.g. runs/NAME.")
@click.option(
    "--model-config",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="JSON object of keyword arguments for the model's constructor.",
)
@click.option("--device", default="cpu", show_default=True, help="Handed to the model.")
@LIMIT
@SUBSET
@shard_option()
@AGGREGATE_ONLY
@executor_options
@resume_option("Continue a run: cases without case.json are (re)done.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run.")
@NO_PROGRESS
def infer(
    model_spec,
    dataset,
    suite,
    tasks,
    per_task,
    categories,
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
    no_progress,
) -> None:
    """Run a model over the cases and write its predictions (runs/NAME/...). Each worker (process or Ray actor)
    loads the model once and keeps it for every case it runs.

    \b
    Examples:
      persistbench infer --model reproject --dataset reconstructed --output runs/reproject
      persistbench infer --model examples/my_model.py:MyModel --dataset reconstructed --output runs/mine
      persistbench infer --model "cmd:python my_adapter.py {input} {output}" --dataset reconstructed --output runs/ext
      persistbench infer --model my_model.py:MyModel --dataset reconstructed --output runs/mine \\
          --executor ray --ray-address auto --gpus-per-task 0.5 --device cuda
    """
    from pathlib import Path

    from .executors import Selection
    from .files import read_json
    from .infer import InferOptions, check_complete
    from .infer import infer as run_infer

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
    opts = InferOptions(
        dataset=dataset,
        output=Path(output),
        model=model_spec,
        device=device,
        config=config,
        suite=suite,
        suite_options=selection(tasks, per_task, categories),
    )
    if shard is not None and aggregate_only:
        raise click.UsageError(
            "--shard runs cases; --aggregate-only then checks all shards: use them in separate calls"
        )
    selected = Selection(limit, subset, shard)
    if aggregate_only:
        result = check_complete(opts, selected)
    else:
        with executor.build() as ex:
            result = run_infer(opts, selected, ex, resume=resume, overwrite=overwrite, progress=not no_progress)
    if _finish(result, shard, f"persistbench infer ... --output {output}"):
        click.echo(f"predictions: {output}")


@main.command()
@click.option(
    "--pred", required=True, type=click.Path(file_okay=False, exists=True), help="A run directory (runs/NAME)."
)
@dataset_option(required=False, help="Default: the one in run.json (with its WROP selection).")
@SUITE
@selection_options
@click.option(
    "--protocol",
    default=None,
    help="Protocol name or JSON file (default: the suite's: classic-v1, r2m-v1, wrop-cont-v1).",
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
    "--pairs",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="R2M-Bench: a folder of upstream's pair files (<T>.json for each trajectory) instead of sampling them.",
)
@click.option(
    "--eval-size",
    default=None,
    metavar="HxW",
    callback=_hw,
    help="Evaluation size, height x width (default: the protocol's, 384x512); scores go to scores/<protocol>-<hash>/.",
)
@click.option(
    "--lpips-weights",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="torchvision AlexNet weights (default: $TORCH_HOME/hub/checkpoints/alexnet-owt-7be5be79.pth).",
)
@backend_options
@executor_options
@shard_option("Score every N-th case from the K-th; then --aggregate-only.")
@resume_option("Keep per-case scores that are up to date (same protocol, metrics, prediction).")
@click.option(
    "--allow-partial", is_flag=True, help="Score the predicted cases even if some are missing (stated in every output)."
)
@AGGREGATE_ONLY
@NO_PROGRESS
def score(
    pred,
    dataset,
    suite,
    tasks,
    per_task,
    categories,
    protocol,
    metric_list,
    pairs,
    eval_size,
    lpips_weights,
    backends,
    executor,
    shard,
    resume,
    allow_partial,
    aggregate_only,
    no_progress,
) -> None:
    """Score a run with its suite's protocol.

    PersistBench: masked PSNR/SSIM/LPIPS, IoU, presence and continuity on visible and off-screen
    frames (classic-v1); or the published protocol (--protocol paper-v3: object permanence, motion
    continuity and appearance preservation on model backends and a judge, see --weights and
    --judge-url; also written in the public toolkit's result.json form); reads our layout (runs/NAME from `persistbench infer`) and the public toolkit's
    inference output (<uid>/prediction/00000.png; pass --dataset). R2M-Bench: relative revisit
    scores (NMR) of generated videos; reads our runs and upstream's <root>/<T>/<id>.mp4. WROP:
    continuation PSNR/SSIM/LPIPS per target frame, full and in the changed region, and the gain
    over holding the last input frame.

    \b
    Examples:
      persistbench score --pred runs/reproject
      persistbench score --pred runs/reproject --shard 0/2 & persistbench score --pred runs/reproject --shard 1/2
      persistbench score --pred runs/reproject --aggregate-only
    """
    from pathlib import Path

    from .layout import RunLayout
    from .score import ScoreOptions, dataset_of
    from .score import score as run_score

    wanted = None if metric_list is None else tuple(m.strip() for m in metric_list.split(",") if m.strip())
    options = {**selection(tasks, per_task, categories), **({"pairs": pairs} if pairs else {})}
    opts = ScoreOptions(
        pred=Path(pred),
        dataset=dataset if dataset is not None else dataset_of(pred),
        protocol=protocol,
        metrics=wanted,
        device=backends.device,
        lpips_weights=lpips_weights,
        allow_download=backends.allow_download,
        eval_size=eval_size,
        suite=suite,
        suite_options=options,
        backends=backends,
    )
    with executor.build() as ex:
        result = run_score(
            opts,
            ex,
            shard=shard,
            resume=resume,
            allow_partial=allow_partial,
            aggregate_only=aggregate_only,
            progress=not no_progress,
        )
    if not _finish(result, shard, f"persistbench score --pred {pred}"):
        return
    summary = result.value
    click.echo(RunLayout(Path(pred)).summary_md(summary["scores_dir"]).read_text(), nl=False)
    click.echo(f"scores: {RunLayout(Path(pred)).scores_dir(summary['scores_dir'])}")
    failed = summary.get("failed_metrics") or {}  # requested, attempted, and without a value in any case
    if failed:
        raise click.ClickException("; ".join(f"{m} could not be computed: {why}" for m, why in failed.items()))


@main.command()
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

    from .files import check_writable
    from .pack import pack as run_pack
    from .pack import parse_size

    check_writable(Path(output).absolute().parent)
    with executor.build() as ex:
        result = run_pack(
            root, output, parse_size(shard_size), samples, date, ex, shard, aggregate_only, progress=not no_progress
        )
    if _finish(result, shard, f"persistbench pack {root} --output {output}"):
        dist = result.value
        click.echo(f"packed {root} into {dist.root}: {len(list(dist.shards_dir.glob('shard-*.tar')))} shard(s)")


@main.command()
@output_option("Dataset root to extract into.")
@click.option(
    "--repo", default=None, help="Hugging Face dataset repository (default: persistbench/persistbench, GD-ML/R2MBench)."
)
@click.option("--revision", default=None, help="Branch, tag or commit; resolved to a commit and recorded.")
@click.option(
    "--from",
    "from_dir",
    default=None,
    callback=_dataset_root,
    help="Take the files from a local copy of the distribution instead (WROP: a folder or an http(s):// URL).",
)
@click.option("--include", type=click.Choice(["samples", "all"]), default="all", show_default=True)
@click.option("--tasks", default=None, metavar="LIST", help="WROP: comma-separated task names or globs (default: all).")
@SUITE
@executor_options
@shard_option("Fetch every N-th file from the K-th; then --aggregate-only.")
@AGGREGATE_ONLY
@NO_PROGRESS
def fetch(
    output, repo, revision, from_dir, include, tasks, suite, executor, shard, aggregate_only, no_progress
) -> None:
    """Fetch a suite's published data. PersistBench: the sharded distribution (each shard's sha256 verified,
    extracted safely; resumable). R2M-Bench: the conditioning images (GD-ML/R2MBench, test_imgs/) into a
    checkout of its repository. WROP: whole task archives (Hokin/object-permanence), each checked against
    checksums.txt (sha256, member count); resumable.

    \b
    Examples:
      persistbench fetch --include samples --output data
      persistbench fetch --repo ORG/NAME --revision v1 --output data
      persistbench fetch --from /mnt/dist --output data
      persistbench fetch --suite r2m --output R2MBench
      persistbench fetch --suite wrop --tasks 'ball_*' --output wrop
    """
    from pathlib import Path

    from .files import check_writable
    from .suites import suite_class

    if from_dir and (repo or revision):
        raise click.UsageError("--from takes the files from a directory; --repo/--revision name a Hub repository")
    check_writable(output)
    cls = suite_class(suite or "persistbench")
    chosen = selection(tasks, None, None).get("tasks")
    if chosen and "tasks" not in cls.case_options:
        raise click.UsageError(f"--tasks: does not apply to --suite {cls.name}")
    if isinstance(from_dir, str) and not cls.remote:
        raise click.UsageError(f"--from {from_dir}: --suite {cls.name} fetches from a folder, not a URL")
    kwargs = {"tasks": chosen} if chosen else {}
    with executor.build() as ex:
        result = cls.fetch(
            Path(output),
            repo,
            revision,
            from_dir,
            include,
            progress=not no_progress,
            executor=ex,
            shard=shard,
            aggregate_only=aggregate_only,
            **kwargs,
        )
    if _finish(result, shard, f"persistbench fetch ... --output {output}"):
        click.echo(result.value)


@main.command()
@click.option(
    "--for",
    "wanted",
    type=click.Choice(["all", "download", "infer", "score", "pack", "fetch", "synth", "report", "demo"]),
    default="all",
    show_default=True,
    help="Exit non-zero only when something this command needs is missing.",
)
@click.option("--cache", default=DEFAULT_CACHE, show_default=True, type=click.Path(file_okay=False))
@output_option("Where the commands will write (checked for write access).", default=".")
@click.option("--lpips-weights", default=None, type=click.Path(dir_okay=False))
@JUDGE_URL
@JUDGE_MODEL
@JUDGE_KEY_ENV
@judge_timeout(15.0)
def doctor(wanted, cache, output, lpips_weights, judge_url, judge_model, judge_key_env, judge_timeout) -> None:
    """Check Python, packages, ffmpeg, yt-dlp, a JavaScript runtime, torch/lpips and their weights, CUDA, write
    access; with --judge-url, the judge's endpoint (the models it lists, one tiny request and its time).

    \b
    Examples:
      persistbench doctor
      persistbench doctor --for score
      persistbench doctor --for score --judge-url http://localhost:8000/v1 --judge-model Qwen/Qwen3.8-27B
    """
    from .backends import JudgeOptions
    from .doctor import failing, run_checks

    judge = JudgeOptions(judge_url, judge_model, judge_key_env, timeout_s=judge_timeout) if judge_url else None
    checks = run_checks(cache, output, lpips_weights, judge)
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


@main.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
@output_option("The HTML file to write.", default="report.html", file=True)
@click.option("--protocol", default=None, help="The scores' folder (default: each run's only one).")
def report(runs, output, protocol) -> None:
    """One self-contained HTML report of scored runs of one suite: leaderboard, provenance, the suite's charts
    (PersistBench: memory curves and contact sheets; R2M-Bench: NMR profiles, MG-vs-DR scatters; WROP:
    score and gain over hold against frames into the continuation).

    \b
    Example:
      persistbench report runs/hold runs/reproject --output report.html
    """
    from pathlib import Path

    from .files import check_writable
    from .report import build_report

    check_writable(Path(output).absolute().parent)
    click.echo(f"report: {build_report(list(runs), output, protocol, progress=True)}")


@main.command()
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
    from .demo import demo as run_demo
    from .files import check_writable

    check_writable(output)
    run_demo(output, workers=workers, progress=not no_progress, echo=click.echo)


@main.command()
@click.argument("root")
@SUITE
@selection_options
@NO_PROGRESS
def verify(root, suite, tasks, per_task, categories, no_progress) -> None:
    """Check a dataset against its suite's contract; one line per problem.

    Example: persistbench verify reconstructed/
    """
    from .suites import open_suite

    problems, n = open_suite(root, suite, selection(tasks, per_task, categories)).verify(progress=not no_progress)
    for line in problems:
        click.echo(line)
    if problems:
        raise click.ClickException(f"{len(problems)} problem(s) in {n} case(s) under {root}")
    click.echo(f"ok: {n} cases verified under {root}")
