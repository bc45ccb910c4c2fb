"""score: the protocol's frame sets, perfect oracle scores, baselines ordered, aggregates and bad predictions."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.layout import RunLayout
from persistbench.score import frame_sets, load_protocol


def test_frame_sets_start_at_the_first_visible_frame():
    p = load_protocol("classic-v1")
    vis = np.array([0.5, 0.1, 0.8, 1.0, 0.5, 0.2, 0.0, 0.71, 0.3])
    visible, invisible = frame_sets(vis, p)
    assert visible.tolist() == [False, False, True, True, False, False, False, True, False]
    assert invisible.tolist() == [False, False, False, False, False, True, True, False, False]
    assert p.eval_size == (512, 384) and len(p.sha256) == 64


@pytest.fixture(scope="module")
def runs(sample_ds, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for model in ("oracle", "hold", "reproject"):
        result = CliRunner().invoke(main, ["infer", "--no-progress", "--model", model, "--dataset", str(sample_ds),
                                           "--output", str(root / model)])  # fmt: skip
        assert result.exit_code == 0, result.output
        result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(root / model)])
        assert result.exit_code == 0, result.output
    return root


def summary(run):
    return json.loads(RunLayout(run).summary_json("classic-v1").read_text())


def test_oracle_is_perfect_and_flagged(runs):
    s = summary(runs / "oracle")
    assert s["oracle"] is True and "oracle run" in RunLayout(runs / "oracle").summary_md("classic-v1").read_text()
    for subset in ("dynamic", "static"):
        for split in ("visible", "invisible"):
            block = s["subsets"][subset][split]
            assert block["psnr"]["mean"] == 100.0 and block["ssim"]["mean"] == pytest.approx(1.0, abs=1e-12)
            assert block["iou"]["mean"] == 1.0 and block["continuity"]["mean"] == 1.0
            assert block["psnr"]["cases"] == 4
    # The oracle hands in masks (the ground truth's); hold has none, so the tracker localises.
    assert s["mask_source"] == ["model"] and summary(runs / "hold")["mask_source"] == ["template-ncc-v1"]


def test_reproject_beats_hold_off_screen(runs):
    hold, reproject = summary(runs / "hold"), summary(runs / "reproject")
    for subset in ("dynamic", "static"):
        assert reproject["subsets"][subset]["invisible"]["psnr"]["mean"] > hold["subsets"][subset]["invisible"]["psnr"]["mean"]
        assert hold["subsets"][subset]["invisible"]["psnr"]["mean"] < 100
    lb = RunLayout(runs / "reproject").leaderboard_csv("classic-v1").read_text().splitlines()
    assert len(lb) == 2 and "static/invisible/psnr" in lb[0]


def test_lpips_unavailability_is_stated_not_zero(runs):
    s = summary(runs / "hold")
    try:
        import lpips  # noqa: F401
    except ImportError:
        assert "lpips" in s["lpips_unavailable"] and "pip install" in s["lpips_unavailable"]
        assert "lpips" not in s["subsets"]["all"]["visible"]
    else:  # with the extra but without AlexNet weights (none can be downloaded here) it is unavailable too
        assert s["lpips_unavailable"] is None or "alexnet" in s["lpips_unavailable"].lower()


def test_aggregates_are_recomputable_from_the_case_files(runs, tmp_path):
    run = shutil.copytree(runs / "reproject", tmp_path / "copy")
    before = RunLayout(run).summary_json("classic-v1").read_bytes()
    RunLayout(run).summary_json("classic-v1").unlink()
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run), "--aggregate-only"])
    assert result.exit_code == 0, result.output
    after = json.loads(RunLayout(run).summary_json("classic-v1").read_text())
    assert after["subsets"] == json.loads(before)["subsets"]


def test_eval_size_changes_the_protocol_hash(runs, tmp_path):
    run = shutil.copytree(runs / "oracle", tmp_path / "small")
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run), "--eval-size", "192x256",
                                       "--metrics", "psnr,iou"])  # fmt: skip
    assert result.exit_code == 0, result.output
    s = summary(run)
    assert s["protocol_sha256"] == load_protocol("classic-v1", (192, 256)).sha256 != load_protocol("classic-v1").sha256
    assert s["subsets"]["all"]["invisible"]["psnr"]["mean"] == 100.0 and "ssim" not in s["subsets"]["all"]["visible"]
    case = json.loads(next(RunLayout(run).scores_dir("classic-v1").rglob("Synth_*.json")).read_text())
    assert case["protocol_sha256"] == s["protocol_sha256"]


def test_missing_and_bad_predictions_name_the_case(runs, tmp_path):
    run = shutil.copytree(runs / "hold", tmp_path / "partial")
    case_dir = next((run / "static").iterdir())
    (case_dir / "case.json").unlink()
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run)])
    assert result.exit_code == 1 and f"no prediction for {case_dir.name}" in result.output
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run), "--allow-partial"])
    assert result.exit_code == 0 and "partial: 1 case" in result.output
    assert summary(run)["partial"] is True and summary(run)["missing_cases"] == [case_dir.name]

    bad = shutil.copytree(runs / "hold", tmp_path / "bad")
    shutil.rmtree(RunLayout(bad).scores_dir("classic-v1"))
    frames = sorted((next((bad / "dynamic").iterdir()) / "frames").iterdir())
    frames[-1].unlink()
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(bad)])
    assert result.exit_code == 1 and "59 predicted frames, case.json lists 60" in result.output
