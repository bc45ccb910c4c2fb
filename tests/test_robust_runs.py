"""Issue 11: runs killed with SIGKILL leave no process behind and resume byte-identically; concurrent
runs do each case once; damaged datasets and odd models are refused, never scored silently."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fakes.processes import group_alive

from persistbench.cli import main
from persistbench.core import layout
from persistbench.core.errors import PersistbenchError
from persistbench.io.images import write_image
from persistbench.io.safeload import save_npy_dict
from persistbench.suites.persistbench import layout as pb_layout
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.index import read_case_records
from persistbench.suites.persistbench.synth import SynthConfig, generate

CFG = SynthConfig(scenes=4, seed=11, pano_size=(512, 256), view_size=(128, 96), n_frames=24, fps=8.0)


def command(*args: object) -> list[str]:
    return [sys.executable, "-m", "persistbench", *map(str, args)]


def kill_when(cmd: list[str], ready, timeout: float = 240) -> bool:
    """Start ``cmd`` in a process group of its own, SIGKILL its first process once ``ready()`` holds, and
    check that no process of the run is alive 2 s later. Returns whether the kill happened."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + timeout
    killed = False
    while proc.poll() is None and time.time() < deadline:
        if ready():
            proc.send_signal(signal.SIGKILL)
            killed = True
            break
        time.sleep(0.02)
    proc.wait()
    gone_by = time.time() + 2.0
    while group_alive(proc.pid) and time.time() < gone_by:
        time.sleep(0.05)
    assert not group_alive(proc.pid), f"processes of {cmd[3]} still alive 2 s after its parent was killed"
    return killed


def files(root: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file's bytes (data.db included), without resume state, locks and the files named in ``skip``."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and layout.STATE_DIR not in p.parts and p.name not in skip
    }


def count(root: Path, pattern: str) -> int:
    return sum(1 for _ in root.glob(pattern)) if root.exists() else 0


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scenes")
    generate(out, CFG)
    return out


@pytest.fixture(scope="module")
def reference(scenes, tmp_path_factory) -> Path:
    """Uninterrupted single-worker download, hold predictions and scores: the bytes to match."""
    out = tmp_path_factory.mktemp("reference")
    for args in (
        ("download", "--recipes", scenes / "recipes.jsonl", "--output", out / "ds", "--cache", out / "cache"),
        ("infer", "--model", "hold", "--dataset", out / "ds", "--output", out / "run"),
        ("score", "--pred", out / "run", "--metrics", "psnr,iou"),
    ):
        result = subprocess.run(command(*args, "--no-progress"), capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    return out


@pytest.mark.slow
def test_download_killed_three_times_leaves_nothing_running_and_resumes_identically(scenes, reference, tmp_path):
    out = tmp_path / "ds"
    cmd = command(
        "download",
        "--no-progress",
        "--workers",
        "2",
        "--recipes",
        scenes / "recipes.jsonl",
        "--output",
        out,
        "--cache",
        reference / "cache",
    )
    records = lambda: len(read_case_records(out)) if (out / "cases.jsonl").exists() else 0  # noqa: E731
    kills = [
        kill_when(cmd, lambda: count(out, "*/*/view_0/frames/*.png") >= 10),  # both workers mid-case
        kill_when(cmd, lambda: records() >= 1),
        kill_when(cmd, lambda: records() >= 2 and count(out, "*/*/center/frames/*.png") >= 2 * 24 + 10),
    ]
    assert any(kills) and records() < 4
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert files(out, (pb_layout.RECIPES_PROVENANCE,)) == files(reference / "ds", (pb_layout.RECIPES_PROVENANCE,))


@pytest.mark.slow
def test_infer_killed_three_times_leaves_nothing_running_and_resumes_identically(reference, tmp_path):
    run = tmp_path / "run"
    cmd = command(
        "infer",
        "--no-progress",
        "--workers",
        "2",
        "--model",
        "hold",
        "--dataset",
        reference / "ds",
        "--output",
        run,
        "--resume",
    )
    first = command(
        "infer", "--no-progress", "--workers", "2", "--model", "hold", "--dataset", reference / "ds", "--output", run
    )
    kills = [
        kill_when(first, lambda: count(run, "*/*/frames/*.png") >= 5),
        kill_when(cmd, lambda: count(run, "*/*/case.json") >= 1),
        kill_when(cmd, lambda: count(run, "*/*/case.json") >= 2),
    ]
    assert any(kills) and count(run, "*/*/case.json") < 4
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    skip = ("run.json",)  # holds the start time
    assert files(run, skip) == {k: v for k, v in files(reference / "run", skip).items() if not k.startswith("scores/")}


@pytest.mark.slow
def test_score_killed_three_times_leaves_nothing_running_and_rescores_identically(reference, tmp_path):
    run = Path(shutil.copytree(reference / "run", tmp_path / "run"))
    shutil.rmtree(run / "scores")
    cmd = command("score", "--no-progress", "--workers", "2", "--pred", run, "--metrics", "psnr,iou")
    kills = [
        kill_when(cmd, lambda: count(run, "scores/*/.state/cases/*.json") >= 1),
        kill_when(cmd, lambda: count(run, "scores/*/*/*.json") >= 1),
        kill_when(cmd, lambda: count(run, "scores/*/*/*.json") >= 2),
    ]
    assert any(kills)
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert files(run / "scores") == files(reference / "run" / "scores")


@pytest.mark.slow
def test_two_downloads_into_one_output_do_each_case_once(scenes, reference, tmp_path):
    cmd = command(
        "download",
        "--no-progress",
        "--recipes",
        scenes / "recipes.jsonl",
        "--output",
        tmp_path / "ds",
        "--cache",
        reference / "cache",
    )
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    done = [int(o.split("done ")[1].split(",")[0]) for o in outs]
    assert sum(done) == 4, outs
    assert files(tmp_path / "ds", (pb_layout.RECIPES_PROVENANCE,)) == files(
        reference / "ds", (pb_layout.RECIPES_PROVENANCE,)
    )


@pytest.mark.slow
def test_two_infers_into_one_output(reference, tmp_path):
    base = command(
        "infer", "--no-progress", "--model", "hold", "--dataset", reference / "ds", "--output", tmp_path / "r"
    )
    procs = [subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.communicate(), p.returncode) for p in procs]
    codes = sorted(code for _, code in results)
    assert codes == [0, 1], results
    assert any("a run is already there" in err for (_, err), _ in results)
    shutil.rmtree(tmp_path / "r")
    procs = [
        subprocess.Popen([*base, "--resume"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(int(o.split("done ")[1].split(",")[0]) for o in outs) == 4, outs


# ------------------------------------------------------------------ 4. damaged datasets are refused, not scored


def _damage(root: Path, what: str) -> tuple[str, str]:
    """Damage the first case of ``root``; return (case id, what the error must say)."""
    case = Dataset(root).cases()[0]
    center = case.view("center")
    if what == "missing input frame":
        case.view("view_0").frame_paths[10].unlink()
        return case.case_id, "view_0/frames: 23 frames, the case has 24"
    if what == "wrong-size frame":
        write_image(center.frame_paths[3], np.zeros((10, 12, 3), np.uint8))
        return case.case_id, f"{center.frame_paths[3]}: 12x10, expected 128x96"
    if what == "grayscale frame":
        write_image(center.frame_paths[3], np.zeros((96, 128), np.uint8))
        return case.case_id, f"{center.frame_paths[3]}: expected an 8-bit RGB image, found 1 channel(s)"
    if what == "non-binary mask":
        write_image(center.mask_paths[5], np.full((96, 128), 7, np.uint8))
        return case.case_id, f"{center.mask_paths[5]}: mask is not binary 0/255"
    if what == "NaN cameras":
        cam = center.camera()
        cam["cam_poses"][2, 0, 0] = np.nan
        save_npy_dict(center.camera_path, cam)
        return case.case_id, f"{center.camera_path}: cameras hold non-finite values"
    if what == "incomplete case folder":
        case.visibility_path.unlink()
        return case.case_id, f"{case.visibility_path}: missing"
    raise AssertionError(what)


# What the damage touches: the input view and cameras are read by infer and score, the target view's
# frames and masks only by score (a model never sees them).
DAMAGES = {
    "missing input frame": True,
    "wrong-size frame": False,
    "grayscale frame": False,
    "non-binary mask": False,
    "NaN cameras": True,
    "incomplete case folder": True,
}


@pytest.fixture(scope="module")
def hold_run(dataset_dir, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("hold") / "run"
    result = CliRunner().invoke(
        main, ["infer", "--no-progress", "--model", "hold", "--dataset", str(dataset_dir), "--output", str(run)]
    )
    assert result.exit_code == 0, result.output
    return run


@pytest.mark.slow
@pytest.mark.parametrize("what", DAMAGES)
def test_damaged_ground_truth_is_refused_by_infer_and_score(dataset_copy, hold_run, tmp_path, what):
    case_id, message = _damage(dataset_copy, what)
    result = CliRunner().invoke(
        main,
        [
            "infer",
            "--no-progress",
            "--model",
            "hold",
            "--dataset",
            str(dataset_copy),
            "--output",
            str(tmp_path / "run"),
        ],
    )
    if DAMAGES[what]:
        assert result.exit_code == 1 and message in result.output and "failed 1" in result.output, result.output
    result = CliRunner().invoke(
        main,
        ["score", "--no-progress", "--pred", str(hold_run), "--dataset", str(dataset_copy), "--metrics", "psnr,iou"],
    )
    assert result.exit_code == 1 and message in result.output and case_id in result.output, result.output


@pytest.mark.slow
def test_a_deleted_case_folder_makes_the_scores_partial(dataset_copy, hold_run, tmp_path):
    run = Path(shutil.copytree(hold_run, tmp_path / "run"))
    gone = Dataset(dataset_copy).cases()[1]
    shutil.rmtree(gone.path)
    args = ["score", "--no-progress", "--pred", str(run), "--dataset", str(dataset_copy), "--metrics", "psnr,iou"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and f"the dataset lacks the folder of {gone.subset}.{gone.case_id}" in result.output
    result = CliRunner().invoke(main, [*args, "--allow-partial"])
    assert result.exit_code == 0, result.output
    summary = json.loads(layout.RunLayout(run).summary_json("classic-v1").read_text())
    assert summary["partial"] is True and summary["cases_missing_from_dataset"] == [f"{gone.subset}.{gone.case_id}"]
    assert summary["subsets"]["all"]["cases"] == 1


@pytest.mark.slow
def test_verify_lists_every_problem_of_every_case(dataset_copy):
    from persistbench.suites.persistbench.verify import verify_dataset

    a, b = Dataset(dataset_copy).cases()
    a.view("center").frame_paths[0].write_bytes(b"not an image")
    b.view("view_0").mask_paths[1].write_bytes(b"not an image either")
    write_image(b.view("center").mask_paths[2], np.full((96, 128), 9, np.uint8))
    problems, n = verify_dataset(dataset_copy)
    assert n == 2
    for needle in (
        f"{a.view('center').frame_paths[0]}: not a readable image",
        f"{b.view('view_0').mask_paths[1]}: not a readable image",
        f"{b.view('center').mask_paths[2]}: mask is not binary",
    ):
        assert any(needle in p for p in problems), (needle, problems)


@pytest.mark.slow
def test_score_metrics_list_must_not_be_empty(hold_run):
    result = CliRunner().invoke(main, ["score", "--no-progress", "--pred", str(hold_run), "--metrics", ","])
    assert result.exit_code == 2 and "no metric named" in result.output


# ------------------------------------------------------------------ 5, 6. models that exit, and the interface as documented


def model_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "m.py"
    path.write_text(
        f"import numpy as np, sys\nfrom persistbench.models import BaseModel, ModelOutput\nclass M(BaseModel):\n{body}"
    )
    return f"{path}:M"


HOLD = "    def predict(self, s):\n        return ModelOutput(np.repeat(s.input_frames[:1], len(s.input_frames), 0))\n"


@pytest.mark.slow
def test_a_model_that_calls_sys_exit_fails_its_cases_only(dataset_dir, tmp_path):
    spec = model_file(tmp_path, "    def predict(self, s):\n        sys.exit(3)\n")
    result = CliRunner().invoke(
        main,
        ["infer", "--no-progress", "--model", spec, "--dataset", str(dataset_dir), "--output", str(tmp_path / "run")],
    )
    assert (
        result.exit_code == 1
        and "failed 2" in result.output
        and "model called sys.exit(3) in predict()" in result.output
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("attrs", "error"),
    [
        ("    resolution = -1\n", None),
        ("    resolution = (-1, -1)\n    num_frames = 8\n", None),
        ("    num_frames = 0\n", "num_frames must be -1 (all) or a positive integer, found 0"),
        ("    num_frames = -3\n", "num_frames must be -1 (all) or a positive integer, found -3"),
        ("    resolution = (-5, 10)\n", "resolution must be -1 or (height, width) positive integers, found (-5, 10)"),
        ("    resolution = 64\n", "resolution must be -1 or (height, width) positive integers, found 64"),
    ],
)
def test_model_sampling_as_documented(dataset_dir, tmp_path, attrs, error):
    spec = model_file(tmp_path, attrs + HOLD)
    result = CliRunner().invoke(
        main,
        ["infer", "--no-progress", "--model", spec, "--dataset", str(dataset_dir), "--output", str(tmp_path / "run")],
    )
    if error is None:
        assert result.exit_code == 0, result.output
        info = json.loads((tmp_path / "run" / "run.json").read_text())
        assert info["sampling"]["resolution"] == [-1, -1]
    else:
        assert result.exit_code == 1 and f"--model {spec}: {error}" in result.output, result.output
        assert not (tmp_path / "run" / "run.json").exists()


def test_infer_on_a_folder_without_cases_is_a_usage_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(
        main, ["infer", "--model", "hold", "--dataset", str(tmp_path / "empty"), "--output", str(tmp_path / "run")]
    )
    assert result.exit_code == 2 and "no cases" in result.output
    assert not (tmp_path / "run").exists()


def test_kill_helpers_see_a_live_group():
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert group_alive(proc.pid) == [proc.pid]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert group_alive(proc.pid) == []


def test_a_run_json_of_an_earlier_version_names_its_sampling_protocol(tmp_path):
    """run.json's ``sampling`` was called ``protocol`` (its rule ``sampling``) before: such a run is read as the
    same, and a ``--resume`` of it is not refused for a different sampling."""
    from persistbench.core.layout import RunLayout
    from persistbench.core.runs import RunRecord, read_run_info

    old = {"model": "hold", "config": {}, "device": "cpu", "oracle": False, "dataset": {"fingerprint": "f"}}
    old |= {"protocol": {"num_frames": 8, "resolution": [96, 128], "sampling": "uniform"}}
    old |= {"toolkit_version": "0.5", "model_class": "m.Hold"}
    (tmp_path / "run.json").write_text(json.dumps(old))
    info = read_run_info(RunLayout(tmp_path))
    assert "protocol" not in info and info["sampling"] == {"num_frames": 8, "resolution": [96, 128], "rule": "uniform"}
    now = RunRecord.from_json({**old, "sampling": info["sampling"]})
    assert now.differs(RunRecord.from_json(info)) is None
    (tmp_path / "run.json").write_text(json.dumps({**old, "protocol": {"num_frames": True}}))
    with pytest.raises(PersistbenchError, match="sampling: must be"):
        read_run_info(RunLayout(tmp_path))
