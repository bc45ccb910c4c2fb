"""The README's flows as a new user runs them, mistakes included, each checked as a user would read it.

Every command runs as ``python -m persistbench ...`` in a fresh folder. A step fails when its output holds a
traceback, when a command meant to work exits non-zero or exits 0 without doing its job, when a mistake is
not refused in one ``Error:`` line, or when any output names an option or a command that does not exist.
The dataset's bytes are compared before and after the mistakes.

    python scripts/walkthrough.py            # the bundled sample: download, infer, score, report, the mistakes
    python scripts/walkthrough.py --demo     # first the README's first command, twice

Prints one line per step and exits 1 when a step failed.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from persistbench.cli import main


def known_names() -> tuple[set[str], set[str]]:
    """Every option of every command (and of the group), and every command name."""
    ctx = click.Context(main)
    options = {o for p in main.params for o in p.opts} | {"--help", "--version"}
    commands = set(main.list_commands(ctx))
    for name in commands:
        command = main.get_command(ctx, name)
        options |= {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    from persistbench.core.suites import SUITES

    for name in commands:
        options |= {o.flag for suite in SUITES for o in SUITES[suite].option_specs if name in o.commands}
    return options, commands


@dataclass
class Step:
    args: list[str]
    refused: str | None = None  # a mistake: the text its one Error: line must hold
    did: Callable[[Path, str], bool] | None = None  # a command meant to work: what shows it did its job
    env: dict[str, str] | None = None


def tree(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def steps(demo: bool) -> list[Step]:
    out: list[Step] = []
    if demo:
        out += [
            Step(["demo", "--no-progress"], did=lambda w, o: (w / "persistbench-demo" / "report.html").is_file()),
            Step(["demo", "--no-progress"], refused="--output persistbench-demo-2"),
        ]
    ran = lambda *files: lambda w, o: all((w / f).exists() for f in files)  # noqa: E731
    out += [
        Step(["--help"], did=lambda w, o: "Commands:" in o),
        Step(["download", "--output", "ds", "--cache", "cache", "--no-progress"], did=ran("ds/cases.jsonl")),
        Step(["download", "--output", "ds", "--cache", "cache", "--no-progress"], did=lambda w, o: "skipped 8" in o),
        Step(["verify", "ds"], did=lambda w, o: "ok" in o.lower() or "problem" not in o.lower()),
        # the mistakes of a first day
        Step(["infer", "--model", "hold", "--dataset", "ds", "--output", "ds"], refused="the dataset it reads"),
        Step(["infer", "--model", "hold", "--dataset", "ds", "--output", "ds/runs/hold"], refused="lies inside"),
        Step(["infer", "--model", "hold"], refused="Missing option"),
        Step(["infer", "--modle", "hold", "--dataset", "ds", "-o", "runs/x"], refused="Did you mean '--model'"),
        Step(["infer", "--model", "hold", "--dataset", "ds", "-o", "runs/x", "--resme"], refused="--resume"),
        Step(["infer", "--model", "holdd", "--dataset", "ds", "-o", "runs/x"], refused="unknown model"),
        Step(["infer", "--model", "hold", "--dataset", "ds", "-o", "runs/x", "--no-progres"], refused="--no-progress"),
        Step(["pack"], refused="Missing argument"),
        Step(["pack", "ds"], refused="Missing option '--output'"),
        Step(["fetch"], refused="Missing option '--output'"),
        Step(["synth"], refused="Missing option '--output'"),
        Step(["synth", "--output", "ds"], refused="holds a persistbench dataset"),
        Step(["score", "--pred", "ds"], refused="not a run"),
        # the work
        Step(["infer", "--model", "hold", "--dataset", "ds", "-o", "runs/hold", "--no-progress"], did=ran("runs/hold")),
        Step(["infer", "--model", "reproject", "--dataset", "ds", "-o", "runs/reproject", "--no-progress"]),
        Step(["infer", "--model", "hold", "--dataset", "ds", "-o", "runs/hold", "--no-progress"], refused="--resume"),
        Step(["score", "--pred", "runs/hold", "--no-progress"], did=ran("runs/hold/scores/classic-v1/summary.json")),
        Step(["score", "--pred", "runs/hold", "--no-progress"], did=lambda w, o: "scored again: 8 case(s)" in o),
        Step(["score", "--pred", "runs/reproject", "--no-progress"]),
        Step(["download", "--output", "runs/hold", "--no-progress"], refused="holds a run"),
        Step(["fetch", "--output", "runs/hold"], refused="holds a run"),
        Step(["pack", "ds", "--output", "ds/dist"], refused="lies inside the dataset"),
        Step(["report", "runs/hold", "-o", "runs/hold/run.json"], refused="not a .html file"),
        Step(["report", "runs/hold", "runs/reproject", "-o", "report.html"], did=ran("report.html")),
        Step(["report", "runs/hold/scores/classic-v1", "-o", "one.html"], did=ran("one.html")),
        Step(["report", "runs/hold", "--sheets", "nope", "-o", "x.html"], refused="no such run"),
        Step(["verify", "ds"]),
    ]
    return out


def check(step: Step, result: subprocess.CompletedProcess, work: Path, options: set[str], commands: set[str]) -> str:
    """What is wrong with a step's outcome ('' when nothing)."""
    text = result.stdout + result.stderr
    if "Traceback" in text or "internal error" in text:
        return "a traceback"
    typed = {a.split("=")[0] for a in step.args if a.startswith("--")}  # a typo is named back, rightly
    for option in set(re.findall(r"(?<![\w/.-])(--[a-z][a-z0-9-]*)", text)) - typed:
        if option not in options:
            return f"names an option that does not exist: {option}"
    for command in set(re.findall(r"(?<!\ba )(?<!\ban )\bpersistbench ([a-z]+)\b", text)):
        if command not in commands:
            return f"names a command that does not exist: persistbench {command}"
    if step.refused is not None:
        errors = [line for line in text.splitlines() if line.startswith("Error:")]
        if result.returncode == 0:
            return "a mistake was accepted (exit 0)"
        if len(errors) != 1 or step.refused not in errors[0]:
            return f"not one Error: line holding {step.refused!r}: {errors}"
        return ""
    if result.returncode != 0:
        return f"exit {result.returncode}: {text.strip().splitlines()[-1:]}"
    if step.did is not None and not step.did(work, text):
        return "exit 0, but it did not do its job"
    return ""


def walk(work: Path, demo: bool = False, echo: Callable[[str], object] = print) -> list[str]:
    """Run every step in ``work``; returns the failures (one line each)."""
    options, commands = known_names()
    failures, before = [], None
    for step in steps(demo):
        if step.args[:1] == ["infer"] and before is None and (work / "ds").is_dir():
            before = tree(work / "ds")
        result = subprocess.run(
            [sys.executable, "-m", "persistbench", *step.args],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, **(step.env or {})},
        )
        problem = check(step, result, work, options, commands)
        echo(
            f"{'FAIL' if problem else 'ok  '} persistbench {' '.join(step.args)}" + (f": {problem}" if problem else "")
        )
        if problem:
            failures.append(f"persistbench {' '.join(step.args)}: {problem}")
    if before is not None and tree(work / "ds") != before:
        failures.append("the dataset's bytes changed during the mistakes")
    return failures


@click.command()
@click.option("--demo", is_flag=True, help="Run the README's first command (twice) first.")
@click.option("--keep", type=click.Path(file_okay=False), default=None, help="Work here (default: a temporary folder).")
def cli(demo: bool, keep: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        failures = walk(work, demo)
    click.echo(f"{len(failures)} step(s) failed" if failures else "every step as a user would want it")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    cli()
