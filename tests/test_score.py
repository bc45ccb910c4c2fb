"""score: the protocol's frame sets, perfect oracle scores, baselines ordered, aggregates and bad predictions."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.core.layout import RunLayout
from persistbench.geometry.sampling import crop_box, crop_resize, sample_indices
from persistbench.io.files import write_json
from persistbench.io.images import write_image
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.scoring import frame_sets
from persistbench.suites.persistbench.suite import PersistBench

load_protocol = PersistBench.load_protocol


def test_frame_sets_start_at_the_first_visible_frame():
    p = load_protocol("classic-v1")
    vis = np.array([0.5, 0.1, 0.8, 1.0, 0.5, 0.2, 0.0, 0.71, 0.3])
    visible, invisible = frame_sets(vis, p)
    assert visible.tolist() == [False, False, True, True, False, False, False, True, False]
    assert invisible.tolist() == [False, False, False, False, False, True, True, False, False]
    assert p.config["eval_size"] == [384, 512] and len(p.sha256) == 64


@pytest.fixture(scope="module")
def runs(sample_ds, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for model in ("oracle", "hold", "reproject"):
        result = CliRunner().invoke(
            main,
            ["infer", "--no-progress", "--model", model, "--dataset", str(sample_ds), "--output", str(root / model)],
        )
        assert result.exit_code == 0, result.output
        result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(root / model)])
        assert result.exit_code == 0, result.output
    return root


def summary(run):
    return json.loads(RunLayout(run).summary_json("classic-v1").read_text())


@pytest.mark.slow
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
    assert s["mask_source"] == ["model"] and summary(runs / "hold")["mask_source"] == ["template-ncc-v2"]


@pytest.mark.slow
def test_reproject_beats_hold_off_screen(runs):
    hold, reproject = summary(runs / "hold"), summary(runs / "reproject")
    for subset in ("dynamic", "static"):
        assert (
            reproject["subsets"][subset]["invisible"]["psnr"]["mean"]
            > hold["subsets"][subset]["invisible"]["psnr"]["mean"]
        )
        assert hold["subsets"][subset]["invisible"]["psnr"]["mean"] < 100
    lb = RunLayout(runs / "reproject").leaderboard_csv("classic-v1").read_text().splitlines()
    assert len(lb) == 2 and "static/invisible/psnr" in lb[0]


@pytest.mark.slow
def test_lpips_unavailability_is_stated_not_zero(runs):
    s = summary(runs / "hold")
    try:
        import lpips  # noqa: F401
    except ImportError:
        assert "lpips" in s["unavailable"]["lpips"] and "pip install" in s["unavailable"]["lpips"]
        assert "lpips" not in s["subsets"]["all"]["visible"]
    else:  # with the extra but without AlexNet weights (none can be downloaded here) it is unavailable too
        assert "lpips" not in s["unavailable"] or "alexnet" in s["unavailable"]["lpips"].lower()
    assert set(s["unavailable"]) <= {"lpips"}


@pytest.mark.slow
def test_aggregates_are_recomputable_from_the_case_files(runs, tmp_path):
    run = shutil.copytree(runs / "reproject", tmp_path / "copy")
    before = RunLayout(run).summary_json("classic-v1").read_bytes()
    RunLayout(run).summary_json("classic-v1").unlink()
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run), "--aggregate-only"])
    assert result.exit_code == 0, result.output
    after = json.loads(RunLayout(run).summary_json("classic-v1").read_text())
    assert after["subsets"] == json.loads(before)["subsets"]


@pytest.mark.slow
def test_eval_size_changes_the_protocol_hash_and_never_overwrites(runs, tmp_path):
    run = shutil.copytree(runs / "oracle", tmp_path / "small")
    before = RunLayout(run).summary_json("classic-v1").read_bytes()
    result = CliRunner().invoke(
        main, ["score", "--no-progress", "--pred", str(run), "--eval-size", "256x192", "--metrics", "psnr,iou"]
    )
    assert result.exit_code == 0, result.output
    derived = load_protocol("classic-v1", {"eval_size": [192, 256]})
    assert (
        derived.sha256 != load_protocol("classic-v1").sha256 and derived.dirname == f"classic-v1-{derived.sha256[:8]}"
    )
    assert str(RunLayout(run).scores_dir(derived.dirname)) in result.output
    assert (
        RunLayout(run).summary_json("classic-v1").read_bytes() == before
    )  # the shipped protocol's scores are untouched
    s = json.loads(RunLayout(run).summary_json(derived.dirname).read_text())
    assert s["protocol_sha256"] == derived.sha256 and s["scores_dir"] == derived.dirname
    assert s["subsets"]["all"]["invisible"]["psnr"]["mean"] == 100.0 and "ssim" not in s["subsets"]["all"]["visible"]
    case = json.loads(next(RunLayout(run).scores_dir(derived.dirname).rglob("Synth_*.json")).read_text())
    assert case["protocol_sha256"] == s["protocol_sha256"]


@pytest.mark.slow
def test_missing_and_bad_predictions_name_the_case(runs, tmp_path):
    run = shutil.copytree(runs / "hold", tmp_path / "partial")
    case_dir = next((run / "static").iterdir())
    (case_dir / "case.json").unlink()
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run)])
    assert result.exit_code == 1 and f"no prediction for {case_dir.parent.name}.{case_dir.name}" in result.output
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run), "--allow-partial"])
    assert (
        result.exit_code == 0 and f"partial: no prediction for {case_dir.parent.name}.{case_dir.name}" in result.output
    )
    assert summary(run)["partial"] is True and summary(run)["missing_cases"] == [
        f"{case_dir.parent.name}.{case_dir.name}"
    ]

    bad = shutil.copytree(runs / "hold", tmp_path / "bad")
    shutil.rmtree(RunLayout(bad).scores_dir("classic-v1"))
    frames = sorted((next((bad / "dynamic").iterdir()) / "frames").iterdir())
    frames[-1].unlink()
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(bad)])
    assert result.exit_code == 1 and "59 predicted frames, expected 60" in result.output


def score_cli(*args):
    result = CliRunner().invoke(main, ["score", "--no-progress", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow
def test_wrong_sizes_name_the_file(runs, tmp_path):
    bad = shutil.copytree(runs / "hold", tmp_path / "bad")
    frame = sorted((next((bad / "static").iterdir()) / "frames").iterdir())[3]
    write_image(frame, np.zeros((10, 12, 3), np.uint8))
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(bad)])
    assert result.exit_code == 1 and f"{frame}: 12x10, expected 256x192" in result.output


def scores_bytes(run):
    d = RunLayout(run).scores_dir("classic-v1")
    return {
        p.relative_to(d).as_posix(): p.read_bytes()
        for p in sorted(d.rglob("*"))
        if p.is_file() and ".state" not in p.parts
    }


@pytest.mark.slow
def test_shards_and_workers_give_byte_identical_scores(runs, tmp_path):
    ref = scores_bytes(runs / "reproject")
    assert "summary.json" in ref and len([k for k in ref if k.count("/") == 1]) == 8
    two = shutil.copytree(
        runs / "reproject", tmp_path / "workers" / "reproject"
    )  # the run is named after its directory
    shutil.rmtree(RunLayout(two).scores_dir("classic-v1"))
    score_cli("--pred", two, "--workers", "2")
    assert scores_bytes(two) == ref
    sharded = shutil.copytree(runs / "reproject", tmp_path / "sharded" / "reproject")
    shutil.rmtree(RunLayout(sharded).scores_dir("classic-v1"))
    out = score_cli("--pred", sharded, "--shard", "1/2").output
    assert "--aggregate-only" in out and not RunLayout(sharded).summary_json("classic-v1").exists()
    score_cli("--pred", sharded, "--shard", "0/2")
    score_cli("--pred", sharded, "--aggregate-only")
    assert scores_bytes(sharded) == ref


@pytest.mark.slow
def test_resume_keeps_up_to_date_scores_only(runs, tmp_path):
    run = shutil.copytree(runs / "hold", tmp_path / "resume" / "hold")
    case_file = sorted(RunLayout(run).scores_dir("classic-v1").glob("static/*.json"))[0]
    tampered = json.loads(case_file.read_text())
    tampered["means"]["invisible"]["psnr"] = 1.5
    case_file.write_text(json.dumps(tampered))
    score_cli("--pred", run, "--resume")  # up to date: kept, and the aggregate shows it
    assert json.loads(case_file.read_text())["means"]["invisible"]["psnr"] == 1.5
    score_cli("--pred", run, "--resume", "--metrics", "psnr,iou")  # a subset of what is there: up to date, kept
    assert json.loads(case_file.read_text())["means"]["invisible"]["psnr"] == 1.5
    result = score_cli("--pred", run, "--metrics", "psnr,iou")  # rescored; the other metrics are kept, not lost
    merged = json.loads(case_file.read_text())
    assert merged["means"]["invisible"]["psnr"] != 1.5 and {"ssim", "presence", "continuity"} <= set(merged["metrics"])
    assert "| ssim |" in result.output
    assert scores_bytes(run) == scores_bytes(runs / "hold")  # merging gives the bytes of scoring everything at once
    score_cli("--pred", run)  # without --resume everything is scored again
    assert scores_bytes(run) == scores_bytes(runs / "hold")


@pytest.mark.slow
def test_public_toolkit_output_is_scored(sample_ds, tmp_path):
    """``<uid>/prediction/00000.png`` + run.json with eval_length/eval_reso: the ground truth, sampled and
    centre-cropped as the public toolkit asks its models, scores perfectly."""
    run = tmp_path / "public"
    length, reso = 16, (192, 192)  # a square centre crop of the 256x192 views, not resized
    write_json(run / "run.json", {"eval_length": length, "eval_reso": list(reso)})
    for case in Dataset(sample_ds).cases():
        view = case.view("center")
        box = crop_box(view.mask(0).shape, reso)
        for i, t in enumerate(sample_indices(case.n_frames, length)):
            write_image(
                RunLayout(run).public_prediction_dir(case.case_id) / f"{i:05d}.png",
                crop_resize(view.frame(t), box, reso),
            )
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(run), "--metrics", "psnr,iou"])
    assert result.exit_code == 2 and "pass --dataset" in result.output
    score_cli("--pred", run, "--dataset", sample_ds, "--metrics", "psnr,iou")
    s = summary(run)
    assert s["model"] == "public toolkit output" and s["mask_source"] == ["template-ncc-v2"]
    for split in ("visible", "invisible"):
        assert s["subsets"]["all"][split]["psnr"]["mean"] == 100.0 and s["subsets"]["all"][split]["psnr"]["cases"] == 8
    case = json.loads(next(RunLayout(run).scores_dir("classic-v1").rglob("Synth_*.json")).read_text())
    assert case["frame_indices"] == sample_indices(60, length).tolist()


@pytest.mark.slow
def test_the_tracker_localises_baseline_predictions(runs, sample_ds):
    """reproject shows the object where the input view saw it: followed (IoU > 0.5) on the visible frames;
    hold shows the input view, which holds no object while it looks away: lost there."""
    cases = {c.case_id: c for c in Dataset(sample_ds).cases()}
    for path in RunLayout(runs / "reproject").scores_dir("classic-v1").glob("*/Synth_*.json"):
        r = json.loads(path.read_text())
        assert r["mask_source"] == "template-ncc-v2"
        assert all(iou > 0.5 for iou, v in zip(r["metrics"]["iou"], r["visible"]) if v), r["uid"]
    for path in RunLayout(runs / "hold").scores_dir("classic-v1").glob("*/Synth_*.json"):
        r = json.loads(path.read_text())
        vis = np.asarray(cases[r["uid"]].visibility()["view_0_visibility"])[r["frame_indices"]]
        assert (vis == 0).sum() > 5
        assert all(lost for lost, v in zip(r["lost"], vis) if v == 0), r["uid"]


@pytest.mark.slow
def test_a_different_dataset_is_refused(runs, sample_ds, synth_dir, tmp_path):
    """Another dataset's cases differ from those the run predicted: refused, naming them (issue 38: a dataset
    that only grew, or changed elsewhere, keeps the run valid for its cases)."""
    other = shutil.copytree(sample_ds, tmp_path / "other")
    lines = (other / "cases.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    name = next(iter(first["files"]))
    first["files"][name] = "0" * 64  # the case as another dataset has it
    (other / "cases.jsonl").write_text(
        "\n".join([json.dumps(first, sort_keys=True, separators=(",", ":")), *lines[1:]]) + "\n"
    )
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(runs / "hold"), "--dataset", str(other)])
    assert result.exit_code == 1 and "1 case(s) changed" in result.output and first["uid"] in result.output
