"""Synthetic scenes: exact masks, the motion and camera schedules, determinism, and the chain to a valid dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SMALL
from fakes import ROOT

from persistbench.cli import main
from persistbench.geometry import sphere
from persistbench.suites.persistbench.build.recipes import decode_mask, load_recipes
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.synth import generate
from persistbench.suites.persistbench.verify import verify_dataset


def truth(synth_dir, case_id):
    return json.loads((synth_dir / "truth" / f"{case_id}.json").read_text())


@pytest.mark.slow
def test_masks_are_the_exact_cap(synth_dir):
    w, h = SMALL.pano_size
    lon, lat = np.meshgrid(((np.arange(w) + 0.5) / w - 0.5) * 2 * np.pi, (0.5 - (np.arange(h) + 0.5) / h) * np.pi)
    dirs = np.stack([np.cos(lat) * np.sin(lon), -np.sin(lat), np.cos(lat) * np.cos(lon)], -1)
    for r in load_recipes(synth_dir / "recipes.jsonl"):
        t = truth(synth_dir, r.case_id)
        for i in (0, 7, 23):
            c = sphere.direction_from_lonlat(np.deg2rad(t["object_lon_deg"][i]), np.deg2rad(t["object_lat_deg"][i]))
            dot = dirs @ c
            want = dot >= np.cos(np.deg2rad(t["radius_deg"]))
            got = decode_mask(r.masks[i]).astype(bool)
            borderline = np.abs(dot - np.cos(np.deg2rad(t["radius_deg"]))) < 1e-6
            assert want.sum() > 50
            assert (got == want)[~borderline].all()


@pytest.mark.slow
def test_motion_and_camera_schedules(synth_dir):
    for r in load_recipes(synth_dir / "recipes.jsonl"):
        t = truth(synth_dir, r.case_id)
        centers = sphere.direction_from_lonlat(np.deg2rad(t["object_lon_deg"]), np.deg2rad(t["object_lat_deg"]))
        steps = np.degrees(np.arccos(np.clip(np.sum(centers[1:] * centers[:-1], -1), -1, 1)))
        speed = SMALL.speed_deg_s / SMALL.fps if r.subset == "dynamic" else 0.0
        np.testing.assert_allclose(steps, speed, atol=1e-4)
        # center tracks the object.
        np.testing.assert_allclose(
            r.views["center"]["yaw_deg"], (np.array(t["object_lon_deg"]) + 180) % 360 - 180, atol=1e-5
        )
        # view_0 starts on it, loses it completely for the window, and comes back.
        vis = np.array(t["view_0_visibility"])
        assert vis[0] == 1.0 and vis[-1] == 1.0
        hidden = np.flatnonzero(vis == 0.0)
        assert hidden.size >= round(SMALL.window_ratio * SMALL.n_frames)
        assert np.all(np.diff(hidden) == 1), "one contiguous off-screen window"
        assert r.window["window_ratio"] == pytest.approx(round(SMALL.window_ratio * SMALL.n_frames) / SMALL.n_frames)


@pytest.mark.slow
def test_synth_cli_is_byte_reproducible(tmp_path):
    runner = CliRunner()
    for name in ("a", "b"):
        result = runner.invoke(main, ["synth", "--out", str(tmp_path / name), "--scenes", "4", "--seed", "0"])
        assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 4 + 4 + 2  # clips, truth files, recipes.jsonl, synth.json
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    subsets = [json.loads(x)["subset"] for x in (tmp_path / "a" / "recipes.jsonl").read_text().splitlines()]
    assert subsets == ["dynamic", "static", "dynamic", "static"]


@pytest.mark.slow
def test_synth_to_dataset_matches_analytic_visibility(synth_dir, dataset_dir):
    assert verify_dataset(dataset_dir) == ([], 2)
    for case in Dataset(dataset_dir).cases():
        vis = case.visibility()
        want = truth(synth_dir, case.case_id)["view_0_visibility"]
        np.testing.assert_allclose(vis["view_0_visibility"], want, atol=0.01)
        assert vis["view_1_visibility"].all()
        assert all(m.any() for m in case.view("center").masks()), "center sees the object on every frame"


def test_bad_config_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["synth", "--out", str(tmp_path), "--pano-size", "100x100"])
    assert result.exit_code == 2 and "2H x H" in result.output


@pytest.mark.slow
def test_bundled_sample_is_what_its_config_makes(tmp_path):
    """The shipped sample is reproducible: its first scene regenerated from configs/sample.json matches."""
    from dataclasses import replace

    from persistbench.suites.persistbench.build.download import bundled_recipes
    from persistbench.suites.persistbench.synth import SynthConfig

    root = ROOT
    cfg = json.loads((root / "configs" / "sample.json").read_text())
    cfg = SynthConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()})
    generate(tmp_path, replace(cfg, scenes=1))
    sample = bundled_recipes().parent
    first = (tmp_path / "recipes.jsonl").read_text().splitlines()[0]
    assert first == (sample / "recipes.jsonl").read_text().splitlines()[0]
    clip = json.loads(first)["source"]["id"] + ".mp4"
    assert (tmp_path / "sources" / clip).read_bytes() == (sample / "sources" / clip).read_bytes()
