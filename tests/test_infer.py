"""infer: every --model form, the public example, sampling and cropping, equirect output, bad
models, resume after kill -9, and the reproject baseline against hold."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from persistbench import BaseModel, ModelInput, ModelOutput
from persistbench.cli import main
from persistbench.core import layout
from persistbench.geometry.camera import Camera
from persistbench.geometry.sampling import crop_box, crop_resize, fit_camera, sample_indices
from persistbench.io.files import write_json
from persistbench.io.images import list_images, read_image
from persistbench.suites.persistbench.build.download import resolve_recipes
from persistbench.suites.persistbench.build.recipes import load_recipes
from persistbench.suites.persistbench.build.reconstruct import clip_frames
from persistbench.suites.persistbench.dataset import Dataset

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()


def infer_cli(*args, env=None):
    return CliRunner().invoke(main, ["infer", "--no-progress", *map(str, args)], env=env)


def predictions(run: Path) -> dict[str, bytes]:
    return {
        p.relative_to(run).as_posix(): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and layout.STATE_DIR not in p.parts and p.name != "run.json"
    }


# ------------------------------------------------------------------ test models (loaded as tests/test_infer.py:Class)


class EightFrames(BaseModel):
    num_frames = 8
    resolution = (96, 128)

    def predict(self, sample: ModelInput) -> ModelOutput:
        assert sample.input_frames.shape == (8, 96, 128, 3) and sample.input_frames.dtype == np.float32
        return ModelOutput(frames=sample.input_frames)


class PanoramaModel(BaseModel):
    """Answers with the source panoramas themselves (an ideal 360-degree model)."""

    def __init__(self, device="cpu", recipes=None, sources=None):
        self.recipes = {r.case_id: r for r in load_recipes(recipes)}
        self.sources = Path(sources)

    def predict(self, sample):
        r = self.recipes[sample.uid]
        panos = np.stack(list(clip_frames(r, self.sources / f"{r.source.id}.mp4")))
        return ModelOutput(frames=panos, projection="equirect")


class Closing(BaseModel):
    """Leaves a file behind when closed, to show that close() is called."""

    def __init__(self, device="cpu", marker=None):
        self.marker = Path(marker)

    def predict(self, sample):
        return ModelOutput(frames=sample.input_frames)

    def close(self):
        self.marker.write_text("closed")


class BadModel(BaseModel):
    """Misbehaves on the cases named in its config, in the way named."""

    def __init__(self, device="cpu", bad=None):
        self.bad = bad or {}

    def predict(self, sample):
        frames = sample.input_frames.copy()
        how = self.bad.get(sample.uid)
        if how == "count":
            frames = frames[:-1]
        elif how == "nan":
            frames[0, 0, 0, 0] = np.nan
        elif how == "size":
            frames = frames[:, :-2]
        elif how == "raise":
            raise RuntimeError("out of memory (pretend)")
        elif how == "masks":
            return ModelOutput(frames=frames, masks=np.zeros(frames.shape[:3], np.uint8))
        return ModelOutput(frames=frames)


# ------------------------------------------------------------------ sampling


def test_sampling_crop_and_intrinsics():
    np.testing.assert_array_equal(sample_indices(60, 8), np.linspace(0, 59, 8).round())
    np.testing.assert_array_equal(sample_indices(5, -1), np.arange(5))
    assert crop_box((192, 256), (96, 128)) == (0, 0, 256, 192)  # same aspect: no crop
    assert crop_box((192, 256), (100, 100)) == (32, 0, 192, 192)
    assert crop_box((192, 256), (-1, -1)) == (0, 0, 256, 192)
    # The public toolkit's rule truncates the cropped side: int(720 * 592 / 336) = 1268 (round() gives 1269).
    assert crop_box((720, 1280), (336, 592)) == (6, 0, 1268, 720)
    assert crop_box((76, 212), (76, 212)) == (0, 0, 211, 76)  # 212 / 76 * 76 falls just under 212
    frame = np.random.default_rng(0).integers(0, 256, (76, 211, 3), np.uint8)
    assert crop_box((76, 211), (35, 90)) == (8, 0, 195, 76)
    want = np.asarray(Image.fromarray(frame).crop((8, 0, 8 + 195, 76)).resize((90, 35), Image.BILINEAR))
    np.testing.assert_array_equal(crop_resize(frame, (8, 0, 195, 76), (35, 90), rgb="pil-bilinear"), want)
    k = np.array([[128.0, 0, 128], [0, 128, 96], [0, 0, 1]])
    cam = fit_camera(Camera(k, 192, 256, np.eye(4)[None]), (32, 0, 192, 192), (100, 100))
    assert (cam.height, cam.width) == (100, 100)
    k2 = cam.k
    # The principal point stays at the image centre and the field of view is what the crop keeps.
    np.testing.assert_allclose([k2[0, 2], k2[1, 2]], [50, 50])
    np.testing.assert_allclose(2 * np.arctan(50 / k2[0, 0]), 2 * np.arctan(96 / 128))


# ------------------------------------------------------------------ --model forms


@pytest.mark.slow
def test_public_example_runs_unchanged(sample_ds, tmp_path):
    result = infer_cli(
        "--model",
        ROOT / "examples" / "my_model.py:MyModel",
        "--dataset",
        sample_ds,
        "--output",
        tmp_path / "run",
        "--limit",
        "2",
    )
    assert result.exit_code == 0, result.output
    case = json.loads((tmp_path / "run" / "dynamic").glob("*/case.json").__next__().read_text())
    assert case["frame_indices"] == np.linspace(0, 59, 16).round().astype(int).tolist()
    assert case["size"] == [128, 96]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["sampling"]["num_frames"] == 16 and run["sampling"]["resolution"] == [96, 128]
    assert run["oracle"] is False


@pytest.mark.slow
def test_eight_frames_at_96x128(sample_ds, tmp_path):
    result = infer_cli(
        "--model", f"{HERE}:EightFrames", "--dataset", sample_ds, "--output", tmp_path / "run", "--limit", "1"
    )
    assert result.exit_code == 0, result.output
    case_dir = next((tmp_path / "run" / "dynamic").iterdir())
    frames = list_images(case_dir / "frames")
    assert len(frames) == 8 and read_image(frames[0]).shape == (96, 128, 3)
    case = json.loads((case_dir / "case.json").read_text())
    assert case["frame_indices"] == [0, 8, 17, 25, 34, 42, 51, 59]
    assert set(case["files"]) == {p.relative_to(tmp_path / "run").as_posix() for p in frames}


@pytest.mark.slow
def test_every_model_form(sample_ds, tmp_path, monkeypatch):
    # An entry point, registered the way an installed package registers one: a dist-info on sys.path.
    dist = tmp_path / "site" / "persistbench_testmodels-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: persistbench-testmodels\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[persistbench.models]\ntest-hold = persistbench.models.builtin:HoldModel\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cmd = f"cmd:{sys.executable} {ROOT / 'tests' / 'adapters' / 'cmd_model.py'} {{input}} {{output}} --masks"
    specs = [
        "hold",
        "test-hold",
        f"{ROOT / 'examples' / 'my_model.py'}:MyModel",
        "persistbench.models.builtin:HoldModel",
        cmd,
    ]
    outputs = {}
    for i, spec in enumerate(specs):
        result = infer_cli("--model", spec, "--dataset", sample_ds, "--output", tmp_path / f"r{i}", "--limit", "1")
        assert result.exit_code == 0, (spec, result.output)
        outputs[spec] = predictions(tmp_path / f"r{i}")
    # The built-in, its entry point and its module:Class name are the same model; cmd: echoes the input.
    assert outputs["hold"] == outputs["test-hold"] == outputs["persistbench.models.builtin:HoldModel"]
    cmd_frames = {k: v for k, v in outputs[cmd].items() if "/frames/" in k}
    assert cmd_frames == {k: v for k, v in outputs["hold"].items() if "/frames/" in k}
    assert any("/masks/" in k for k in outputs[cmd]), "cmd: masks are read back"
    log = next((tmp_path / f"r{len(specs) - 1}" / "logs").iterdir()).read_text()
    assert "cmd_model: starting" in log
    result = infer_cli("--model", "no-such-model", "--dataset", sample_ds, "--output", tmp_path / "bad")
    assert result.exit_code == 1 and "unknown model" in result.output


@pytest.mark.slow
def test_failing_external_program(sample_ds, tmp_path):
    cmd = f"cmd:{sys.executable} {ROOT / 'tests' / 'adapters' / 'cmd_model.py'} {{input}} {{output}} --fail"
    result = infer_cli("--model", cmd, "--dataset", sample_ds, "--output", tmp_path / "run", "--limit", "1")
    assert result.exit_code == 1
    assert "exited with 3: cmd_model: failing on purpose" in result.output


@pytest.mark.slow
def test_equirect_output_is_reprojected_into_the_target_view(sample_ds, tmp_path):
    sample = resolve_recipes(None, tmp_path).path.parent
    (tmp_path / "cfg.json").write_text(
        json.dumps({"recipes": str(sample / "recipes.jsonl"), "sources": str(sample / "sources")})
    )
    result = infer_cli(
        "--model",
        f"{HERE}:PanoramaModel",
        "--model-config",
        tmp_path / "cfg.json",
        "--dataset",
        sample_ds,
        "--output",
        tmp_path / "run",
        "--limit",
        "2",
    )
    assert result.exit_code == 0, result.output
    ds = Dataset(sample_ds)
    for case_json in (tmp_path / "run").rglob("case.json"):
        c = json.loads(case_json.read_text())
        gt = ds.case(c["subset"], c["uid"]).view("center")
        for t in (0, 30, 59):
            pred = read_image(case_json.parent / "frames" / layout.frame_name(t)).astype(float)
            ref = gt.frame(t).astype(float)
            assert 10 * np.log10(255**2 / max(np.mean((pred - ref) ** 2), 1e-12)) > 35


# ------------------------------------------------------------------ bad models, resume


@pytest.mark.slow
def test_bad_outputs_fail_only_their_case(sample_ds, tmp_path):
    cases = Dataset(sample_ds).cases()
    bad = {
        cases[0].case_id: "count",
        cases[1].case_id: "nan",
        cases[2].case_id: "size",
        cases[3].case_id: "raise",
        cases[4].case_id: "masks",
    }
    (tmp_path / "cfg.json").write_text(json.dumps({"bad": bad}))
    result = infer_cli(
        "--model",
        f"{HERE}:BadModel",
        "--model-config",
        tmp_path / "cfg.json",
        "--dataset",
        sample_ds,
        "--output",
        tmp_path / "run",
    )
    assert result.exit_code == 1
    assert "done 3, skipped 0, failed 5" in result.output
    reasons = {
        "count": "frames have shape (59, 192, 256, 3), expected (60, H, W, 3)",
        "nan": "frames hold NaN or infinite values",
        "size": "frames are 256x190, expected 256x192",
        "raise": "model raised RuntimeError: out of memory (pretend)",
        "masks": "masks have dtype uint8, expected bool",
    }
    subsets = {c.case_id: c.subset for c in cases}
    for case_id, how in bad.items():
        line = next(x for x in result.output.splitlines() if x.startswith(f"  {subsets[case_id]}.{case_id}: "))
        assert reasons[how] in line, line
        assert not (tmp_path / "run" / cases[0].subset / case_id).exists()
    assert len(list((tmp_path / "run").rglob("case.json"))) == 3


@pytest.mark.slow
def test_resume_and_overwrite_rules(sample_ds, tmp_path):
    run = tmp_path / "run"
    assert infer_cli("--model", "hold", "--dataset", sample_ds, "--output", run, "--limit", "1").exit_code == 0
    again = infer_cli("--model", "hold", "--dataset", sample_ds, "--output", run, "--limit", "1")
    assert again.exit_code == 1 and "pass --resume" in again.output
    other = infer_cli("--model", "reproject", "--dataset", sample_ds, "--output", run, "--resume")
    assert other.exit_code == 1 and "different model" in other.output
    ok = infer_cli("--model", "hold", "--dataset", sample_ds, "--output", run, "--resume", "--limit", "2")
    assert ok.exit_code == 0 and "done 1, skipped 1" in ok.output
    changed = json.loads((run / "run.json").read_text())
    changed["dataset"]["fingerprint"] = "0" * 64  # as if the dataset had changed (grown) since
    write_json(run / "run.json", changed)
    grown = infer_cli("--model", "hold", "--dataset", sample_ds, "--output", run, "--resume", "--limit", "2")
    assert grown.exit_code == 0 and "skipped 2" in grown.output  # its cases are as they were: kept
    assert json.loads((run / "run.json").read_text())["dataset"]["fingerprint"] != "0" * 64  # the new one recorded
    write_json(run / "run.json", changed)
    case_json = next(run.glob("*/*/case.json"))
    write_json(case_json, {k: v for k, v in json.loads(case_json.read_text()).items() if k != "case_sha256"})
    refused = infer_cli("--model", "hold", "--dataset", sample_ds, "--output", run, "--resume")
    assert refused.exit_code == 1 and "different dataset" in refused.output  # a case that cannot be checked
    assert (
        infer_cli(
            "--model", "reproject", "--dataset", sample_ds, "--output", run, "--overwrite", "--limit", "1"
        ).exit_code
        == 0
    )


@pytest.mark.slow
def test_kill_9_then_resume_is_byte_identical(sample_ds, tmp_path):
    def cmd(out, *extra):
        args = ["infer", "--no-progress", "--model", "reproject", "--dataset", sample_ds, "--output", out, "--limit", 3]
        return [sys.executable, "-m", "persistbench", *map(str, args), *extra]

    assert subprocess.run(cmd(tmp_path / "ref"), capture_output=True).returncode == 0
    out = tmp_path / "run"
    proc = subprocess.Popen(cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        if len(list(out.rglob("case.json"))) >= 1 and len(list(out.rglob("*.png"))) >= 75:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    assert len(list(out.rglob("case.json"))) < 3, "the run must have been interrupted"
    assert subprocess.run(cmd(out, "--resume"), capture_output=True).returncode == 0
    assert predictions(out) == predictions(tmp_path / "ref")


@pytest.mark.slow
def test_workers_give_the_same_predictions_and_models_are_closed(sample_ds, tmp_path):
    for workers in (1, 2):
        (tmp_path / f"cfg{workers}.json").write_text(json.dumps({"marker": str(tmp_path / f"closed{workers}")}))
        result = infer_cli(
            "--model",
            f"{HERE}:Closing",
            "--model-config",
            tmp_path / f"cfg{workers}.json",
            "--dataset",
            sample_ds,
            "--output",
            tmp_path / f"w{workers}",
            "--limit",
            "3",
            "--workers",
            workers,
        )
        assert result.exit_code == 0, result.output
        assert (tmp_path / f"closed{workers}").read_text() == "closed"
    assert predictions(tmp_path / "w1") == predictions(tmp_path / "w2")


# ------------------------------------------------------------------ baselines


def masked_mse_offscreen(run: Path, ds: Dataset, subset: str) -> float:
    errs = []
    for case in ds.cases(subset):
        vis = case.visibility()["view_0_visibility"]
        first_visible = int(np.argmax(vis > 0.7))
        for t in range(first_visible, case.n_frames):
            if vis[t] >= 0.3:
                continue
            mask = case.view("center").mask(t) > 0
            pred = read_image(run / subset / case.case_id / "frames" / layout.frame_name(t)).astype(float)
            gt = case.view("center").frame(t).astype(float)
            errs.append(np.mean((pred[mask] - gt[mask]) ** 2))
    return float(np.mean(errs))


@pytest.mark.slow
def test_reproject_beats_hold_off_screen_and_oracle_is_exact(sample_ds, tmp_path):
    ds = Dataset(sample_ds)
    for model in ("hold", "reproject", "oracle"):
        assert infer_cli("--model", model, "--dataset", sample_ds, "--output", tmp_path / model).exit_code == 0
    for subset in ("dynamic", "static"):
        hold, reproject = (masked_mse_offscreen(tmp_path / m, ds, subset) for m in ("hold", "reproject"))
        assert reproject < hold, (subset, reproject, hold)
        assert masked_mse_offscreen(tmp_path / "oracle", ds, subset) == 0.0
    assert json.loads((tmp_path / "oracle" / "run.json").read_text())["oracle"] is True
