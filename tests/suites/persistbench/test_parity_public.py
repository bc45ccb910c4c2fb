"""``scripts/parity_public.py``: the public toolkit's scorer and ours on the same cases, stub networks and
judge, agreeing per frame and on every intermediate input. Runs where the pinned public wheel and the three
packages its scorer imports are found offline (``.ci/run`` puts them in ``.ci/wheels``); the whole matrix is
the script's own run (its table is in the closing note of issue 25), four of its scenarios run here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fakes import ROOT
from fakes.public_toolkit import wheel

pytestmark = pytest.mark.slow  # every test here takes seconds: the public toolkit's own interpreter runs beside ours

DEPS = ("easydict-1.14-", "loguru-0.7.3-", "pyzmq-27.3.0-")
SCENARIOS = ("base", "b1_empty_gt_mask", "c3_invalid_always", "f2_reso_wide_len")


def _wheels() -> Path:
    found = wheel()
    if found is None:
        pytest.skip("the public toolkit's wheel is not here offline (.ci/run downloads it to .ci/wheels)")
    names = [p.name for p in found.parent.iterdir()]
    missing = [d for d in DEPS if not any(n.startswith(d) for n in names)]
    if missing:
        pytest.skip(f"{found.parent} lacks the public scorer's imports: {', '.join(d.rstrip('-') for d in missing)}")
    return found.parent


def _parity(tmp_path, scenarios: tuple[str, ...]) -> str:
    """The harness's report on ``scenarios``, checked to agree everywhere."""
    wheels = _wheels()
    listed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "parity_public.py"), "--list"], capture_output=True, text=True
    )
    assert all(name in listed.stdout for name in scenarios), listed.stdout
    args = [f"-k{name}" for name in scenarios]
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "parity_public.py"), *args, "--venv", str(tmp_path / "venv")]
        + ["--wheels", str(wheels)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert f"ALL AGREE ({len(scenarios)} scenarios" in out.stdout
    assert "imported from " + str(tmp_path / "venv") in out.stdout  # theirs ran in its own interpreter
    for name in scenarios:
        assert f"## {name}: " in out.stdout and "| NO " not in out.stdout
    return out.stdout


def test_the_public_scorer_and_ours_agree_on_the_harness_scenarios(tmp_path):
    _parity(tmp_path, SCENARIOS)


def test_the_real_sam2_package_tracks_alike_in_the_public_scorer_and_ours(tmp_path):
    """SAM 2.1 (hiera-tiny, random weights) through the public model server's predictor and our backend."""
    pytest.importorskip("sam2", reason="the sam2 package: pip install -e '.[sam2]'")
    report = _parity(tmp_path, ("h_real_sam2",))
    assert "| tracked masks " in report and "sha256 equal" in report
