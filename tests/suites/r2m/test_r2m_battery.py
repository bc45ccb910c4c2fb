"""Issue 44: R2M-Bench's judge answers a calibration battery before it judges persistent state: an image against
itself (kept) and against a copy with its middle changed (changed), each asked again swapped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fakes.judge_server import JudgeServer, completion, state

from persistbench.cli import main
from persistbench.core.layout import RunLayout
from persistbench.suites.r2m import battery

pytestmark = pytest.mark.slow  # the synthetic checkout, and a scoring of its videos


def test_the_changed_copy_differs_in_its_middle_only():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (60, 90, 3), dtype=np.uint8)
    other = battery.changed(image)
    differs = np.any(other != image, axis=2)
    assert differs[20:40, 30:60].mean() > 0.99 and not differs[:20].any() and not differs[:, :30].any()
    assert not differs[40:].any() and not differs[:, 60:].any()


def _score(run: Path, tree: Path, url: str, *extra: str):
    args = ["score", "--no-progress", "--pred", str(run), "--dataset", str(tree), "--protocol", "r2m-v1"]
    args += ["--metrics", "persistent_state", "--judge-url", url, "--judge-model", "judge-x", *extra]
    return CliRunner().invoke(main, args)


def test_the_state_judge_is_calibrated_first(r2m_tree, tmp_path, monkeypatch):
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    run = Path(shutil.copytree(r2m_tree / "videos" / "pose", tmp_path / "run"))
    with JudgeServer(lambda n, body: state(body)) as good:
        result = _score(run, r2m_tree, good.url)
    assert result.exit_code == 0, result.output
    scores = RunLayout(run).scores_dir("r2m-v1")
    summary = json.loads((scores / "summary.json").read_text())
    cal = summary["judge_calibration"]
    assert cal["accuracy"] == 1.0 and cal["consistency"] == 1.0 and cal["items"] % 4 == 0
    answers = json.loads((scores / "judge_battery.json").read_text())["batteries"][0]["answers"]
    assert {k.split("/")[1].split("~")[0] for k in answers} == {"kept", "changed"}

    always = f"<answer>{json.dumps({'score': 5, 'reason': 'scripted'})}</answer>"
    with JudgeServer(lambda n, body: completion(always)) as lenient:  # "kept" whatever it is shown
        stopped = _score(run, r2m_tree, lenient.url)
        asked = len(lenient.requests)
    assert stopped.exit_code == 1 and asked == cal["items"]
    assert "calibration questions, 50% right (--judge-min-accuracy 0.75)" in stopped.output
