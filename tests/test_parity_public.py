"""``scripts/parity_public.py``: the public toolkit's scorer and ours on the same cases, stub networks and
judge, agreeing per frame and on every intermediate input. Runs where the pinned public wheel and the three
packages its scorer imports are found offline (``.ci/run`` puts them in ``.ci/wheels``); the whole matrix is
the script's own run (its table is in the closing note of issue 25), four of its scenarios run here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.public_toolkit import wheel

ROOT = Path(__file__).resolve().parents[1]
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


def test_the_public_scorer_and_ours_agree_on_the_harness_scenarios(tmp_path):
    wheels = _wheels()
    listed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "parity_public.py"), "--list"], capture_output=True, text=True
    )
    assert all(name in listed.stdout for name in SCENARIOS), listed.stdout
    args = [f"-k{name}" for name in SCENARIOS]
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "parity_public.py"), *args, "--venv", str(tmp_path / "venv")]
        + ["--wheels", str(wheels)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "ALL AGREE (4 scenarios" in out.stdout
    assert "imported from " + str(tmp_path / "venv") in out.stdout  # theirs ran in its own interpreter
    for name in SCENARIOS:
        assert f"## {name}: " in out.stdout and "| NO " not in out.stdout
