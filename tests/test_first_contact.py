"""What a new user meets first (issue 38): every required option, a wrong output folder, the figures' colours."""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from clirun import refused, run_cli

from persistbench.cli import main
from persistbench.io.files import sha256_file


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(main)
    return [(name, main.get_command(ctx, name)) for name in main.list_commands(ctx)]


def _valid(param: click.Parameter, folder: str) -> list[str]:
    """A value ``param`` accepts, so that only the missing one is refused."""
    kind = param.type
    if isinstance(kind, click.Choice):
        return [str(kind.choices[0])]
    if isinstance(kind, (click.IntRange, click.FloatRange)) or kind in (click.INT, click.FLOAT):
        return [str(getattr(kind, "min", None) or 1)]
    return [folder]


REQUIRED = [
    (name, p.name)
    for name, command in _commands()
    for p in command.params
    if p.required and isinstance(p, click.Option)
]


def test_every_command_has_been_walked():
    assert {"infer", "synth", "fetch", "pack", "arena", "score"} <= {name for name, _ in REQUIRED}


@pytest.mark.parametrize(("command_name", "missing"), REQUIRED)
def test_a_missing_required_option_is_clicks_own_line(command_name, missing, tmp_path):
    """Each required option left out, every other one given a valid value: click's ``Missing option``, exit 2."""
    command = dict(_commands())[command_name]
    args: list[str] = [command_name]
    for p in command.params:
        if isinstance(p, click.Option) and p.required and p.name != missing:
            args += [p.opts[0], *_valid(p, str(tmp_path))]
        if isinstance(p, click.Argument) and p.required:
            args.append(str(tmp_path))
    result = CliRunner().invoke(main, args)
    opt = next(p for p in command.params if p.name == missing).opts[0]
    assert result.exit_code == 2, result.output
    assert f"Missing option '{opt}'" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


# ---------------------------------------------------------------- no command destroys its input


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def sample_copy(sample_ds, tmp_path) -> Path:
    return Path(shutil.copytree(sample_ds, tmp_path / "ds"))


def test_infer_into_its_dataset_is_refused_and_changes_nothing(sample_copy, tmp_path):
    before = _tree(sample_copy)
    for output in (sample_copy, sample_copy / "runs" / "hold", tmp_path):
        result = run_cli("infer", "--model", "hold", "--dataset", sample_copy, "--output", output, "--no-progress")
        refused(result, str(output), "--output", "the dataset it reads")
    assert _tree(sample_copy) == before
    assert not (sample_copy / "runs").exists()
    assert run_cli("verify", sample_copy).returncode == 0


def test_a_folder_of_another_kind_is_refused(sample_copy, tmp_path):
    run = tmp_path / "runs" / "hold"
    assert (
        run_cli("infer", "--model", "hold", "--dataset", sample_copy, "--output", run, "--no-progress").returncode == 0
    )
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(sample_copy / "cases.jsonl", other / "cases.jsonl")
    run_before, other_before = _tree(run), _tree(other)
    refused(
        run_cli("infer", "--model", "hold", "--dataset", sample_copy, "--output", other), "holds a persistbench dataset"
    )
    refused(run_cli("download", "--output", run, "--no-progress"), "holds a run, not a persistbench dataset")
    refused(run_cli("synth", "--output", other), "holds a persistbench dataset, not synthetic data")
    refused(run_cli("fetch", "--output", run), "holds a run")
    refused(run_cli("pack", sample_copy, "--output", run), "holds a run")
    refused(run_cli("pack", sample_copy, "--output", sample_copy / "dist"), "lies inside the dataset")
    refused(run_cli("score", "--pred", sample_copy), "holds a persistbench dataset, not a run")
    refused(run_cli("report", run, "--output", run / "run.json"), "not a .html file")
    refused(run_cli("package", "--pred", run, "--output", run / "run.json"), "not a .zip file")
    refused(run_cli("arena", run, sample_copy, "-o", run / "study"), "lies inside the run")
    assert _tree(run) == run_before and _tree(other) == other_before


def test_download_rebuilds_a_completed_case_whose_files_are_gone(sample_ds, sample_copy):
    """A case marked complete whose folder was replaced is redone, not skipped on trust."""
    victim = next(p for p in sorted((sample_copy / "dynamic").iterdir()) if p.is_dir())
    shutil.rmtree(victim / "center")
    assert run_cli("verify", sample_copy).returncode != 0
    cache = sample_ds.parent / "cache"
    result = run_cli("download", "--output", sample_copy, "--cache", cache, "--no-progress")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "done 1" in result.stdout, result.stdout
    assert _tree(sample_copy / "dynamic") == _tree(sample_ds / "dynamic")
    assert run_cli("verify", sample_copy).returncode == 0
