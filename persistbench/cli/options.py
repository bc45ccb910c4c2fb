"""Options that several commands share, each defined once, and how a command takes its suite's options.

A command that takes suite options is a :class:`SuiteCommand`: ``--<name> VALUE`` tokens it does not
know are set aside before click parses the rest, ``-S name=VALUE`` is an option of its own, and
:func:`suite_options` converts both with the options the suite declares
(:class:`~persistbench.core.options.SuiteOption`), once the suite is known.
"""

from __future__ import annotations

import functools

import click

from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.options import FiniteFloat


def _shard(ctx: click.Context, param: click.Parameter, value: str | None):
    from persistbench.executors import Shard

    try:
        return Shard.parse(value) if value else None
    except PersistbenchError as e:
        raise click.BadParameter(str(e)) from None


LIMIT = click.option(
    "--limit", type=click.IntRange(1), default=None, help="Only the first N cases of the deterministic order."
)


SUBSET = click.option(
    "--subset", default=None, help="Only this subset of the cases (`persistbench suites` lists each suite's)."
)


def suite_name_option(default: str = "recognised from the dataset root"):
    """``--suite NAME``; ``default`` says what a command takes without it."""
    return click.option(
        "--suite",
        default=None,
        metavar="NAME",
        help=f"The benchmark (default: {default}); `persistbench suites` lists them.",
    )


SUITE = suite_name_option()
NO_PROGRESS = click.option("--no-progress", is_flag=True, help="No progress bars.")
DEVICE = click.option(
    "--device",
    default="auto",
    show_default=True,
    help="Where networks run (infer: the model; score: LPIPS and the backends): cpu, cuda, cuda:1, or auto "
    "(CUDA when torch sees a GPU).",
)


def _dataset_root(ctx, param, value):
    """A dataset folder that exists (a Path), or a URL (a str) for suites that read remote data."""
    if value is None or "://" in value:
        return value
    from pathlib import Path

    if not Path(value).is_dir():
        raise click.BadParameter(f"{value}: no such folder", param=param)
    return Path(value)


def json_file_option(name: str, dest: str, help: str):
    """An option naming a JSON file that exists (its content is read, strictly, by the command)."""
    return click.option(name, dest, type=click.Path(dir_okay=False, exists=True), default=None, help=help)


def dataset_option(
    required: bool = True,
    help: str = "Dataset root: a folder, or a URL (http(s)://, hf://datasets/<repo>[@rev]) for a suite that reads remote data.",
):
    # click ignores required=True when default=None is passed explicitly: pass no default at all.
    return click.option("--dataset", required=required, callback=_dataset_root, help=help)


def output_option(help: str, default: str | None = None, file: bool = False):
    """``--output`` (alias ``--out``): where a command writes; a folder unless ``file``."""
    kind = click.Path(dir_okay=False) if file else click.Path(file_okay=False)
    if default is None:  # no default= at all: click ignores required=True beside an explicit None
        return click.option("--output", "--out", "-o", "output", required=True, type=kind, help=help)
    return click.option("--output", "--out", "-o", "output", default=default, show_default=True, type=kind, help=help)


def _number(name: str, kind: click.ParamType, default: float, help: str):
    return click.option(name, type=kind, default=default, show_default=True, help=help)


def executor_options(f):
    """``--executor``, ``--workers``, ``--ray-address``, ``--cpus-per-task``, ``--gpus-per-task`` and
    ``--max-retries``, handed to the command as one ``executor`` (:class:`~persistbench.executors.ExecutorOptions`)."""

    @functools.wraps(f)
    def command(*args, executor, workers, ray_address, cpus_per_task, gpus_per_task, max_retries, **kwargs):
        from persistbench.executors import ExecutorOptions

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
            help="Cases at once: N > 1 runs N local processes (default: 1, in this process; --executor processes "
            "alone: one per core; ray: what the cluster's resources allow).",
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
    from persistbench.backends import BACKENDS

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
        from persistbench.backends import BackendOptions, JudgeOptions

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
        DEVICE,
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


def finish(result, shard, again: str) -> bool:
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


# ---------------------------------------------------------------- a suite's options


SUITE_OPTION = click.option(
    "-S",
    "--suite-option",
    "suite_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="An option of the suite (`persistbench suites` lists them); also given as --KEY VALUE.",
)


def declared_suite_flags(command: str) -> set[str]:
    """Every ``--name`` a registered suite declares for ``command``."""
    from persistbench.core.suites import SUITES

    return {o.flag for name in SUITES for o in SUITES[name].option_specs if command in o.commands}


class SuiteCommand(click.Command):
    """A command that also takes its suite's options: ``--name VALUE`` and ``--name=VALUE`` tokens that some
    registered suite declares for this command are set aside (``ctx.meta["suite_args"]``) before click parses
    the rest; any other unknown ``--name`` is click's ``No such option``, with the closest names."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        import difflib

        own = {o for p in self.params for o in (*p.opts, *p.secondary_opts)} | set(ctx.help_option_names)
        declared = declared_suite_flags(self.name or "")
        kept, pulled, i = [], [], 0
        while i < len(args):
            token = args[i]
            if token == "--":
                kept += args[i:]
                break
            name, eq, value = token.partition("=")
            if token.startswith("--") and len(token) > 2 and name not in own:
                if name not in declared:
                    close = difflib.get_close_matches(name, sorted(own | declared), n=3)
                    raise click.NoSuchOption(name, possibilities=close, ctx=ctx)
                if not eq:
                    if i + 1 >= len(args):
                        raise click.UsageError(f"{token}: needs a value", ctx)
                    value, i = args[i + 1], i + 1
                pulled.append((name[2:], value))
            else:
                kept.append(token)
            i += 1
        ctx.meta["suite_args"] = pulled
        return super().parse_args(ctx, kept)


def suite_options(ctx: click.Context, suite: str, command: str, given: tuple[str, ...]) -> dict:
    """The options of ``suite`` for ``command`` from the set-aside ``--name VALUE`` tokens and the ``-S``
    values ``given``, converted by the suite's declarations; a usage error for anything it does not take."""
    from persistbench.core.options import parse
    from persistbench.core.suites import SUITES

    pairs = list(ctx.meta.get("suite_args", []))
    for item in given:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"-S {item}: expected KEY=VALUE")
        pairs.append((key, value))
    return parse(SUITES[suite].option_specs, suite, command, pairs)


def report_skipped(skipped: dict[str, str], shown: int = 5) -> None:
    """One stderr line per sample the dataset leaves out (the first ``shown`` of them) and how many in all."""
    for key, why in list(skipped.items())[:shown]:
        click.echo(f"left out {key}: {why}", err=True)
    if skipped:
        click.echo(f"left out {len(skipped)} sample(s) of the dataset (incomplete or failed to render)", err=True)
