"""Layout: names, readers for every variant, the safe loader, atomic writes, the index."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pytest

from persistbench.core import layout
from persistbench.core.errors import PersistbenchError
from persistbench.io.files import atomic_path, write_json
from persistbench.io.images import list_images
from persistbench.io.safeload import load_npy, save_npy_dict
from persistbench.io.video import encode_video
from persistbench.suites.persistbench import layout as pb_layout
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.index import DATA_COLUMNS, mark_complete, read_case_records, read_index


def test_case_id_parses_from_the_right():
    cid = pb_layout.CaseId.parse("Indoor_a_b-c_d_e_3_obj_12")
    assert (cid.category, cid.source_id, cid.clip, cid.obj_id) == ("Indoor", "a_b-c_d_e", 3, "12")
    assert str(cid) == "Indoor_a_b-c_d_e_3_obj_12"
    with pytest.raises(PersistbenchError, match="not a case id"):
        pb_layout.CaseId.parse("no_object_here")


def test_list_images_accepts_every_naming_variant(tmp_path):
    names = ["frame_0001.png", "frame_0000.png", "00002.jpg", "0003.png", "mask_0004.png", "notes.txt", "frame_1.png"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    got = [p.name for p in list_images(tmp_path)]
    assert got == ["frame_0000.png", "frame_0001.png", "00002.jpg", "0003.png", "mask_0004.png"]  # by number
    (tmp_path / "0001.png").write_bytes(b"")
    with pytest.raises(
        PersistbenchError,
        match="frame_0001.png and 0001.png are both image 1|0001.png and frame_0001.png are both image 1",
    ):
        list_images(tmp_path)
    assert list_images(tmp_path / "missing") == []


def test_safe_loader_reads_the_public_format(tmp_path):
    data = {
        "cam_poses": np.tile(np.eye(4), (5, 1, 1)),
        "cam_intrinsic": np.eye(3) * 2,
        "mode": "return",
        "scalar": np.float32(0.5),
        "flag": True,
        "nested": {"a": [1, 2.5, None], "b": (np.int64(3),)},
    }
    path = tmp_path / "camera_params.npy"
    save_npy_dict(path, data)
    public = np.load(path, allow_pickle=True).item()  # how the public toolkit reads it
    ours = load_npy(path)
    for got in (public, ours):
        np.testing.assert_array_equal(got["cam_poses"], data["cam_poses"])
        assert got["mode"] == "return" and got["scalar"] == np.float32(0.5) and got["nested"]["b"][0] == 3
    plain = tmp_path / "plain.npy"
    np.save(plain, np.arange(4))
    np.testing.assert_array_equal(load_npy(plain), np.arange(4))


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _crafted_npy(path, payload):
    header = {"descr": "|O", "fortran_order": False, "shape": ()}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(pickle.dumps(payload, protocol=3))


def test_safe_loader_refuses_code_execution(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "visibility_dict.npy"
    _crafted_npy(path, np.array({"x": _Exploit(marker)}, dtype=object))
    # Prove the file is a real exploit: the unsafe path would run it.
    with pytest.raises(PersistbenchError) as info:
        load_npy(path)
    assert str(path) in str(info.value) and "posix.system" in str(info.value)
    assert not marker.exists()
    np.load(path, allow_pickle=True)
    assert marker.exists(), "the crafted file must be a working exploit for the test to mean anything"


def test_safe_loader_rejects_malformed_files(tmp_path):
    good = tmp_path / "good.npy"
    save_npy_dict(good, {"a": np.arange(10)})
    bad = tmp_path / "truncated.npy"
    bad.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(PersistbenchError, match="truncated.npy"):
        load_npy(bad)
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not numpy at all")
    with pytest.raises(PersistbenchError, match="junk.npy"):
        load_npy(junk)


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "sub" / "file.json"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    assert not target.exists() and list(target.parent.iterdir()) == []
    write_json(target, {"b": 1, "a": 2})
    assert target.read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)


@pytest.mark.slow
def test_dataset_reads_reconstructed_cases(dataset_dir):
    ds = Dataset(dataset_dir)
    cases = ds.cases()
    assert [c.subset for c in cases] == ["dynamic", "static"]
    assert ds.cases("static") == cases[1:]
    case = cases[0]
    view = case.view("center")
    assert view.n_frames == case.n_frames == 24
    assert next(view.frames()).shape == (96, 128, 3) and view.mask(0).dtype == np.uint8
    cam = view.camera()
    assert cam["cam_poses"].shape == (24, 4, 4) and cam["cam_intrinsic"].shape == (3, 3)
    assert set(case.visibility()) >= {"view_0_visibility", "view_1_visibility", "mode", "window_ratio"}
    rows = ds.index_rows()
    assert [r["uid"] for r in rows] == [c.case_id for c in cases]
    assert set(DATA_COLUMNS) <= set(rows[0])
    assert [r["uid"] for r in ds.records()] == [c.case_id for c in cases]


@pytest.mark.slow
def test_dataset_reads_the_nested_video_form(dataset_dir, tmp_path):
    """``<subset>/<case_id>/<obj_id>/`` with ``video.mp4`` (the sharded distribution)."""
    src = Dataset(dataset_dir).cases()[0]
    nested = tmp_path / "fetched" / src.subset / src.case_id / "1"
    for name in pb_layout.VIEWS:
        view = src.view(name)
        (nested / name).mkdir(parents=True)
        encode_video(nested / name / "video.mp4", view.frames(), fps=8)
        shutil.copytree(view.path / "masks", nested / name / "masks")
        # The distribution numbers masks with 5 digits and no prefix.
        for p in sorted((nested / name / "masks").iterdir()):
            p.rename(p.with_name(f"{int(p.stem.split('_')[1]):05d}.png"))
        shutil.copy(view.camera_path, nested / name)
    shutil.copy(src.visibility_path, nested)
    shutil.copy(src.theta_phi_path, nested)

    case = Dataset(tmp_path / "fetched").cases()[0]
    assert case.nested and case.case_id == src.case_id and case.path == nested
    view = case.view("center")
    assert view.video_path is not None and view.n_frames == 24
    frames = list(view.frames())
    assert len(frames) == 24
    ref = [f.astype(float) for f in src.view("center").frames()]
    psnr = lambda a, b: 10 * np.log10(255**2 / np.mean((a.astype(float) - b) ** 2))  # noqa: E731
    # Within H.264 error of its own frame, and closer to it than to its neighbours (order kept).
    assert psnr(frames[5], ref[5]) > 30
    assert psnr(frames[5], ref[5]) > max(psnr(frames[5], ref[4]), psnr(frames[5], ref[6])) + 3
    np.testing.assert_array_equal(view.mask(3), src.view("center").mask(3))


def test_mark_complete_is_order_independent(tmp_path):
    rows = [
        ({"uid": f"Synth_x_{i}_obj_1", "subset": s, "success": 1})
        for i, s in enumerate(["static", "dynamic", "dynamic"])
    ]
    a, b = tmp_path / "a", tmp_path / "b"
    for root, order in ((a, rows), (b, rows[::-1])):
        for row in order:
            mark_complete(root, row, {"uid": row["uid"], "subset": row["subset"]})
    assert (a / "cases.jsonl").read_bytes() == (b / "cases.jsonl").read_bytes()
    assert read_index(a) == read_index(b)
    assert [json.loads(x)["uid"] for x in (a / "cases.jsonl").read_text().splitlines()] == [
        "Synth_x_1_obj_1",
        "Synth_x_2_obj_1",
        "Synth_x_0_obj_1",
    ]
    with pytest.raises(ValueError, match="unknown data.db columns"):
        mark_complete(a, {"uid": "u", "bogus": 1}, {"uid": "u", "subset": "static"})


def test_malformed_cases_jsonl_names_the_line(tmp_path):
    (tmp_path / "cases.jsonl").write_text('{"uid": "a", "subset": "static"}\n{oops\n')
    with pytest.raises(PersistbenchError, match=r"cases.jsonl:2"):
        read_case_records(tmp_path)


def test_run_layout_paths(tmp_path):
    run = layout.RunLayout(tmp_path / "runs" / "m")
    rel = lambda p: p.relative_to(run.root).as_posix()  # noqa: E731
    assert rel(run.run_json) == "run.json"
    assert rel(run.frame_path("static", "C", 3)) == "static/C/frames/frame_0003.png"
    assert rel(run.mask_path("static", "C", 3)) == "static/C/masks/mask_0003.png"
    assert rel(run.case_json("static", "C")) == "static/C/case.json"
    assert rel(run.case_scores("classic-v1", "static", "C")) == "scores/classic-v1/static/C.json"
    for name in ("results_json", "summary_json", "leaderboard_csv", "summary_md"):
        assert rel(getattr(run, name)("classic-v1")).startswith("scores/classic-v1/")
    assert rel(run.public_prediction_dir("uid")) == "uid/prediction"
