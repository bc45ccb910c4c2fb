"""A suite from outside the package (``tests/toy/``), registered only through the entry point group
``persistbench.suites``, runs synth -> verify -> infer -> score -> report through the real command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakes.clirun import run_cli

TOY = Path(__file__).parent / "toy"
PACKAGE = Path(__file__).parent.parent / "persistbench"


def _env() -> dict[str, str]:
    """The toy's folder (its module and its dist-info) first on the path, as an installed plug-in would be."""
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(TOY), os.environ.get("PYTHONPATH")) if p)}


@pytest.mark.slow
def test_a_suite_plugs_in_through_its_entry_point(tmp_path):
    assert not [p for p in PACKAGE.rglob("*") if p.is_file() and b"toysuite" in p.read_bytes()]
    listed = run_cli("suites", env=_env())
    assert listed.returncode == 0, listed.stderr
    assert "toy: Toy (toysuite:Toy)" in listed.stdout and "protocols: toy-v1" in listed.stdout
    assert "toy: Toy" not in run_cli("suites").stdout  # without the entry point on the path: not there

    data, run = tmp_path / "data", tmp_path / "runs" / "hold"
    made = run_cli("synth", "--suite", "toy", "--output", data, "--size", "40x30", env=_env())
    assert made.returncode == 0, made.stderr
    assert json.loads((data / "toy.json").read_text()) == {"levels": [64, 128, 192], "size": [30, 40]}
    checked = run_cli("verify", data, env=_env())
    assert checked.returncode == 0 and "ok: 3 cases verified" in checked.stdout, checked.stderr

    predicted = run_cli("infer", "--model", "hold", "--dataset", data, "--output", run, env=_env())
    assert predicted.returncode == 0, predicted.stderr
    scored = run_cli("score", "--pred", run, env=_env())
    assert scored.returncode == 0, scored.stderr
    summary = json.loads((run / "scores" / "toy-v1" / "summary.json").read_text())
    assert (summary["suite"], summary["scorer"], summary["protocol"]) == ("toy", "constant-psnr", "toy-v1")
    assert summary["cases"] == 3 and summary["psnr"] == 60.0  # hold copies the constant frame: the cap
    case = json.loads((run / "scores" / "toy-v1" / "grey" / "level128.json").read_text())
    assert case["metrics"] == {"psnr": [60.0, 60.0]} and case["requested"] == ["psnr"]

    report = tmp_path / "report.html"
    shown = run_cli("report", run, "--output", report, env=_env())
    assert shown.returncode == 0, shown.stderr
    page = report.read_text()
    assert "persistbench report: Toy" in page and "60.0000" in page


def test_a_suite_option_it_does_not_declare_is_refused(tmp_path):
    assert run_cli("synth", "--suite", "toy", "--output", tmp_path / "d", env=_env()).returncode == 0
    bad = run_cli("synth", "--suite", "toy", "--output", tmp_path / "e", "--scenes", "3", env=_env())
    assert bad.returncode == 2 and "--scenes: does not apply to --suite toy synth (its options: --size)" in bad.stderr
    other = run_cli("synth", "--suite", "toy", "--output", tmp_path / "f", "-S", "size=8x6", env=_env())
    assert other.returncode == 0, other.stderr
    assert json.loads((tmp_path / "f" / "toy.json").read_text())["size"] == [6, 8]
