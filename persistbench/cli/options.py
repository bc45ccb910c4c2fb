"""Options that several commands share, each defined once, and how a command takes its suite's options.

A command that takes suite options is a :class:`SuiteCommand`: the suite is resolved before click parses
(``--suite NAME``, or recognised from the dataset the command names) and its options for the command become
options of the command (in ``--help``; a typo is click's ``No such option`` with the closest names);
``-S name=VALUE`` is an option of its own, and :func:`suite_options` converts both with the options the suite
declares (:class:`~persistbench.core.options.SuiteOption`).
"""

from __future__ import annotations

import functools

import click

from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.options import FiniteFloat
from persistbench.executors.base import EXECUTORS


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
            type=click.Choice(list(EXECUTORS)),
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


JUDGE_MIN_ACCURACY = click.option(
    "--judge-min-accuracy",
    type=click.FloatRange(0.0, 1.0),
    default=0.75,
    show_default=True,
    help="The share of its calibration battery the judge must answer right before it judges.",
)
JUDGE_FORCE = click.option(
    "--judge-force", is_flag=True, help="Judge even below --judge-min-accuracy (said in the output)."
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
        judge_min_accuracy,
        judge_force,
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
                min_accuracy=judge_min_accuracy,
                force=judge_force,
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
        JUDGE_MIN_ACCURACY,
        JUDGE_FORCE,
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


def _suite_named(args: list[str], dataset_flags: tuple[str, ...]) -> str | None:
    """The suite a command line names: ``--suite NAME``, else the one that recognises the dataset a flag of
    ``dataset_flags`` (or the first argument) names; None when neither says (then every suite's options apply)."""
    from persistbench.core.suites import SUITES, detect

    given = {}
    for i, token in enumerate(args):
        if token == "--":
            break
        name, eq, value = token.partition("=")
        if name in ("--suite", *dataset_flags):
            given.setdefault(name, value if eq else (args[i + 1] if i + 1 < len(args) else None))
    if given.get("--suite") in SUITES:
        return given["--suite"]
    roots = [given.get(f) for f in dataset_flags] + ([args[0]] if args and not args[0].startswith("-") else [])
    for root in (r for r in roots if r):
        try:
            return detect(root)
        except PersistbenchError:
            continue
    return None


def _set_aside(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta.setdefault("suite_args", []).append((param.name, value))


class SuiteCommand(click.Command):
    """A command that also takes its suite's options, as options of its own: ``--name VALUE`` for each option the
    suite declares for this command (:attr:`~persistbench.core.suite.Suite.option_specs`), resolved before click
    parses (:func:`_suite_named`); without a suite to resolve, every registered suite's. Their values are set
    aside (``ctx.meta["suite_args"]``) for :func:`suite_options`."""

    dataset_flags = ("--dataset",)  # the options that name a dataset whose suite can be recognised

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from persistbench.core.suites import SUITES

        suite = ctx.meta["suite_name"] = _suite_named(args, self.dataset_flags)
        ctx.meta["suite_args"] = []
        ctx.meta.pop("suite_params", None)  # made for this suite, not for one asked before parsing
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:
            import difflib

            others = {p.opts[0] for p in self._suite_params(None, [])}  # every suite's options for this command
            if suite is not None and e.option_name in others:  # another suite's option: say whose it is not
                own = ", ".join(o.flag for o in SUITES[suite].option_specs if self.name in o.commands) or "none"
                raise click.UsageError(
                    f"{e.option_name}: does not apply to --suite {suite} {self.name} (its options: {own})", ctx
                ) from None
            known = {o for p in self.get_params(ctx) for o in p.opts if o.startswith("--")} | others
            close = difflib.get_close_matches(e.option_name, sorted(known), n=3)
            raise click.NoSuchOption(e.option_name, possibilities=close, ctx=ctx) from None

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        if "suite_params" not in ctx.meta:
            ctx.meta["suite_params"] = self._suite_params(ctx.meta.get("suite_name"), params)
        return params[:-1] + ctx.meta["suite_params"] + params[-1:]  # the help option last

    def _suite_params(self, suite: str | None, own: list[click.Parameter]) -> list[click.Option]:
        from persistbench.core.suites import SUITES

        taken = {o for p in own for o in (*p.opts, *p.secondary_opts)}
        by_flag: dict[str, tuple[object, list[str]]] = {}
        for name in [suite] if suite else list(SUITES):
            for option in SUITES[name].option_specs:
                if self.name in option.commands and option.flag not in taken:
                    by_flag.setdefault(option.flag, (option, []))[1].append(name)
        return [
            click.Option(
                [flag, option.name],
                metavar=option.metavar,
                expose_value=False,
                show_default=False,
                callback=_set_aside,
                help=option.help if suite else f"[--suite {', '.join(names)}] {option.help}",
            )
            for flag, (option, names) in by_flag.items()
        ]


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
