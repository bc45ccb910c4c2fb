"""verify: a sound dataset passes; each kind of damage is reported with its path, exit code 1."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.io.images import read_image, write_image
from persistbench.io.safeload import save_npy_dict
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.verify import verify_dataset


def first_case(root):
    return Dataset(root).cases()[0]


@pytest.mark.slow
def test_sound_dataset_passes(dataset_dir):
    result = CliRunner().invoke(main, ["verify", str(dataset_dir)])
    assert result.exit_code == 0 and "ok: 2 cases" in result.output


def _grey_mask(root):
    p = first_case(root).view("center").mask_paths[2]
    write_image(p, np.full((96, 128), 7, np.uint8))
    return p, "not binary"


def _drop_frame(root):
    p = first_case(root).view("view_0").frame_paths[-1]
    p.unlink()
    return p.parent, "23 frames, the case has 24"


def _bad_rotation(root):
    view = first_case(root).view("view_0")
    cam = view.camera()
    cam["cam_poses"][4, :3, :3] *= 1.1
    save_npy_dict(view.camera_path, cam)
    return view.camera_path, "cam_poses[4] rotation is not orthonormal"


def _bad_focal(root):
    view = first_case(root).view("center")
    cam = view.camera()
    cam["cam_intrinsic"][0, 0] = -1
    save_npy_dict(view.camera_path, cam)
    return view.camera_path, "focal lengths must be positive"


def _visibility_out_of_range(root):
    case = first_case(root)
    vis = case.visibility()
    vis["view_0_visibility"][0] = 1.5
    save_npy_dict(case.visibility_path, vis)
    return case.visibility_path, "must lie in [0, 1]"


def _short_visibility(root):
    case = first_case(root)
    vis = case.visibility()
    vis["view_0_visibility"] = vis["view_0_visibility"][:-1]
    save_npy_dict(case.visibility_path, vis)
    return case.visibility_path, "view_0_visibility must be (24,)"


def _tampered_frame(root):
    p = first_case(root).view("center").frame_paths[0]
    img = read_image(p)
    img[0, 0] ^= 1
    write_image(p, img)
    return p, "checksum differs"


def _not_in_index(root):
    import sqlite3

    case = first_case(root)
    with sqlite3.connect(root / "data.db") as con:
        con.execute("DELETE FROM data WHERE uid = ?", (case.case_id,))
    return case.path, "not in data.db (incomplete case)"


def _unsafe_pickle(root):
    case = first_case(root)
    case.theta_phi_path.write_bytes(
        case.theta_phi_path.read_bytes().replace(b"numpy._core.multiarray", b"numpy._core.multiarrax")
    )
    return case.theta_phi_path, "unsafe or malformed"


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage",
    [
        _grey_mask,
        _drop_frame,
        _bad_rotation,
        _bad_focal,
        _visibility_out_of_range,
        _short_visibility,
        _tampered_frame,
        _not_in_index,
        _unsafe_pickle,
    ],
)
def test_damage_is_reported(dataset_copy, damage):
    where, message = damage(dataset_copy)
    problems, n = verify_dataset(dataset_copy)
    assert n == 2
    assert any(p.startswith(str(where)) and message in p for p in problems), problems
    result = CliRunner().invoke(main, ["verify", str(dataset_copy)])
    assert result.exit_code == 1 and "problem(s)" in result.output


def test_missing_root_is_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["verify", str(tmp_path / "nowhere")])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {tmp_path / 'nowhere'}: dataset root does not exist"


@pytest.mark.slow
def test_record_without_case_is_reported(dataset_copy):
    with open(dataset_copy / "cases.jsonl", "a") as f:
        f.write(json.dumps({"uid": "Synth_gone_0_obj_1", "subset": "static"}) + "\n")
    problems, _ = verify_dataset(dataset_copy)
    assert any("Synth_gone_0_obj_1: case folder missing on disk" in p for p in problems)
