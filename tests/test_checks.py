"""Issue 22, items 11-15 ("checks that are missing or wrong"): R2M checkouts, ``infer --resume``'s completion,
PAX records of WROP archives, ``--pairs`` files and ``run.json``'s fields.

Each test reproduces one defect with the real command (a child process, as a user runs it) on real files:
real symlinks, real tars written by Python's tarfile, real runs of the built-in models.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from fakes.clirun import refused, run_cli

from persistbench.core.errors import PersistbenchError
from persistbench.io.tarindex import LocalFile, build_index, cached_index
from persistbench.suites.r2m import layout
from persistbench.suites.wrop import layout as wrop_layout
from persistbench.suites.wrop import synth as wrop_synth


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- R2M checkouts


def _edit_trajectory(root: Path, edit) -> Path:
    path = layout.trajectory_path(root, "DDDAAA")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


def _reflect(data: dict) -> None:
    for row in data["2"]["extrinsic"][:3]:
        row[0] = -row[0]  # the columns stay orthonormal; the determinant becomes -1


def _set_k(i: int, j: int, value: float):
    def edit(data: dict) -> None:
        for entry in data.values():  # every frame: K must be the same in all of them
            entry["K"][i][j] = value

    return edit


def _last_row(data: dict) -> None:
    for entry in data.values():
        entry["K"][2] = [5, 7, -3]


def _rename_key(new: str):
    def edit(data: dict) -> None:
        data[new] = data.pop("3")

    return edit


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (_reflect, "frame 2: extrinsic is a reflection"),
        (_last_row, "K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]"),
        (_set_k(1, 0, 0.5), "K must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]"),
        (_set_k(0, 2, 0.1), "principal point"),
        (_rename_key("\u00b3"), "keys must be frame numbers"),  # superscript three: str.isdigit(), not int()
        (_rename_key("\u0663"), "keys must be frame numbers"),  # Arabic-Indic three: int() takes it
    ],
    ids=["reflection", "k-last-row", "k-lower", "principal-point", "superscript-key", "arabic-indic-key"],
)
def test_trajectories_that_describe_no_camera_are_refused_by_verify(checkout, edit, needle):
    path = _edit_trajectory(checkout, edit)
    refused(run_cli("verify", checkout, "--no-progress"), str(path), needle)


@pytest.mark.slow
def test_a_principal_point_near_zero_is_refused_before_infer_divides_by_it(checkout, tmp_path):
    path = _edit_trajectory(checkout, _set_k(1, 2, 0.1))
    result = run_cli("infer", "--model", "hold", "--dataset", checkout, "--output", tmp_path / "run", "--no-progress")
    refused(result, str(path), "principal point")


def test_a_frame_listed_twice_is_refused_naming_the_file(checkout):
    path = layout.trajectory_path(checkout, "DDDAAA")
    data = json.loads(path.read_text())
    other = dict(data["0"], extrinsic=data["5"]["extrinsic"])
    path.write_text('{"0": ' + json.dumps(other) + ", " + json.dumps(data)[1:])  # "0" twice: the last would win
    refused(run_cli("verify", checkout, "--no-progress"), str(path), "'0'", "twice")


def test_pose_json_path_may_not_climb_out_of_the_checkout(checkout):
    meta = layout.meta_path(checkout, "DDDAAA")
    specs = json.loads(meta.read_text())
    specs[0]["pose_json_path"] = "../../../trajectories/trajectory_DDDAAA_30s.json"
    meta.write_text(json.dumps(specs))
    refused(run_cli("verify", checkout, "--no-progress"), str(meta), "entry 0: pose_json_path")


def test_verify_decodes_the_images_a_truncated_png_fails(checkout):
    image = checkout / layout.HUB_IMAGES / "0001.png"
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])
    refused(run_cli("verify", checkout, "--no-progress"), str(image), "not a readable image")


def _outside(tmp_path: Path, root: Path, rel: str) -> Path:
    """A copy of ``root/rel`` outside the checkout."""
    target = tmp_path / "elsewhere" / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    (shutil.copytree if (root / rel).is_dir() else shutil.copy)(root / rel, target)
    return target


@pytest.mark.slow
@pytest.mark.parametrize(
    "link",
    [
        f"{layout.HUB_IMAGES}/0001.png",  # an image
        layout.HUB_IMAGES,  # the image folder
        "generated_imgs",  # the folder the metadata names, as upstream asks users to make it
        f"{layout.TRAJECTORY_DIR}/trajectory_DDDAAA_30s.json",  # a trajectory
        f"{layout.META_DIR}/data_single_DDDAAA_100.json",  # a metadata file
    ],
)
def test_links_that_lead_out_of_the_checkout_are_refused(checkout, tmp_path, link):
    target = _outside(tmp_path, checkout, layout.HUB_IMAGES if link == "generated_imgs" else link)
    if link == "generated_imgs":
        shutil.rmtree(checkout / layout.HUB_IMAGES)
    else:
        (shutil.rmtree if (checkout / link).is_dir() else Path.unlink)(checkout / link)
    (checkout / link).symlink_to(target)
    line = refused(run_cli("verify", checkout, "--no-progress"), "links must stay inside it")
    assert str(checkout / link) in line and str(target) in line
    result = run_cli("infer", "--model", "hold", "--dataset", checkout, "--output", tmp_path / "run", "--no-progress")
    refused(result, "links must stay inside it")
    assert not list((tmp_path / "run").glob("*/*/gen.mp4"))


def test_links_inside_the_checkout_are_followed(checkout, tmp_path):
    """Upstream's own advice (``generated_imgs`` a link to the images) works when the images are in the checkout,
    and so does a checkout reached through a link."""
    (checkout / "generated_imgs").symlink_to(layout.HUB_IMAGES)
    (checkout / "trajectories_v2").mkdir()
    moved = checkout / "trajectories_v2" / "trajectory_DDDAAA_30s.json"
    layout.trajectory_path(checkout, "DDDAAA").rename(moved)
    layout.trajectory_path(checkout, "DDDAAA").symlink_to(moved)
    (tmp_path / "via").symlink_to(checkout)
    result = run_cli("verify", tmp_path / "via", "--no-progress")
    assert result.returncode == 0 and "ok: 3 cases verified" in result.stdout, result.stdout + result.stderr


# ---------------------------------------------------------------- infer --resume


@pytest.fixture
def hold_run(r2m, tmp_path) -> Path:
    run = tmp_path / "hold"
    result = run_cli("infer", "--model", "hold", "--dataset", r2m, "--output", run, "--no-progress")
    assert result.returncode == 0 and "done 3, skipped 0" in result.stdout, result.stdout + result.stderr
    return run


def _resume(r2m: Path, run: Path) -> subprocess.CompletedProcess:
    result = run_cli("infer", "--model", "hold", "--dataset", r2m, "--output", run, "--resume", "--no-progress")
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_resume_redoes_cases_whose_outputs_are_gone_or_changed(r2m, hold_run):
    videos = sorted(hold_run.glob("*/*/gen.mp4"))
    want = {v: v.read_bytes() for v in videos}
    videos[0].unlink()
    videos[1].write_bytes(want[videos[1]][:-10])  # damaged: another sha256 than case.json records
    assert "done 2, skipped 1, failed 0" in _resume(r2m, hold_run).stdout
    assert {v: v.read_bytes() for v in videos} == want
    assert "done 0, skipped 3, failed 0" in _resume(r2m, hold_run).stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage",
    [
        {"poses": 1e30},
        {"size": ["x", -1]},
        {"files": {"../../../etc/passwd": "0" * 64}},
        {"files": {}},
        {"has_masks": "no"},
        {"subset": "WSLRRLL"},
        {"trajectory_sha256": "x" * 100_000},
    ],
    ids=["poses", "size", "files-outside", "files-empty", "has-masks", "subset", "long-string"],
)
def test_resume_redoes_cases_whose_record_is_damaged(r2m, hold_run, damage):
    record = hold_run / "DDDAAA" / "0001" / "case.json"
    good = record.read_bytes()
    record.write_text(json.dumps({**json.loads(good), **damage}))
    assert "done 1, skipped 2, failed 0" in _resume(r2m, hold_run).stdout
    assert record.read_bytes() == good


# ---------------------------------------------------------------- WROP archives: PAX records


def _pax_tar(path: Path, members: dict[str, bytes], pax: dict[str, dict[str, str]]) -> bytes:
    """A PAX tar of ``members`` (name -> bytes); ``pax[name]`` are extended records written for that member."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            info.pax_headers = pax.get(name, {})
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


def _set_header_size(data: bytes, name: str, size: int) -> bytes:
    """The tar ``data`` with the ustar size field of member ``name``'s header set to ``size`` (checksum redone)."""
    out, pos = bytearray(data), 0
    while out[pos : pos + 512] != bytes(512):
        header = out[pos : pos + 512]
        length = int(header[124:136].rstrip(b"\0 ") or b"0", 8)
        if header[156:157] == b"0" and header[:100].rstrip(b"\0") == name.encode():
            out[pos + 124 : pos + 136] = b"%011o\0" % size
            out[pos + 148 : pos + 156] = b" " * 8
            out[pos + 148 : pos + 156] = b"%06o\0 " % sum(out[pos : pos + 512])
            return bytes(out)
        pos += 512 + (length + 511) // 512 * 512
    raise AssertionError(f"no member {name}")


def test_the_index_takes_member_sizes_from_pax_records_as_tarfile_does(tmp_path):
    """A PAX ``size`` record overrides the header's size field: the member's data and the next header are where
    it says (``tarfile`` and GNU tar read it so); the index must find the same members with the same bytes."""
    path = tmp_path / "t.tar"
    members = {"a/big.bin": b"x" * 3000, "a/after.txt": b"after"}
    data = _pax_tar(path, members, {"a/big.bin": {"size": "3000"}})
    path.write_bytes(_set_header_size(data, "a/big.bin", 7))  # the header lies; the PAX record is what counts
    with tarfile.open(path) as tar:
        want = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert want == members
    index = build_index(LocalFile(path), lambda name: None)
    assert {name: index.read(name) for name in index.members} == want


def test_an_index_cached_before_pax_sizes_were_read_is_built_again(tmp_path):
    path = tmp_path / "t.tar"
    members = {"a/big.bin": b"x" * 3000, "a/after.txt": b"after"}
    path.write_bytes(_set_header_size(_pax_tar(path, members, {"a/big.bin": {"size": "3000"}}), "a/big.bin", 7))
    index = build_index(LocalFile(path), lambda name: None)
    stale = [[m.name, m.offset, 7 if m.name == "a/big.bin" else m.size] for m in index.members.values()]
    cache = tmp_path / "cache.json"
    cache.write_text(json.dumps({"version": 1, "size": path.stat().st_size, "sha256": "a" * 64, "members": stale}))
    again = cached_index(LocalFile(path), "a" * 64, lambda name: None, cache)
    assert {name: again.read(name) for name in again.members} == members


@pytest.mark.parametrize(
    ("records", "needle"),
    [
        ({"size": str(10**15)}, "beyond the end"),
        ({"size": "12abc"}, "size"),
        ({"linkpath": "/etc/passwd"}, "linkpath"),
        ({"GNU.sparse.size": "100"}, "sparse"),
        ({"path": "a/../../etc/passwd"}, "outside"),
    ],
    ids=["size-past-the-end", "size-not-a-number", "linkpath", "sparse", "path"],
)
def test_pax_records_that_change_a_member_are_honoured_or_refused(tmp_path, records, needle):
    path = tmp_path / "t.tar"
    _pax_tar(path, {"a/prompt.txt": b"hello", "a/x.txt": b"x"}, {"a/prompt.txt": records})

    def rule(name: str) -> str | None:
        return "outside a/" if ".." in name.split("/") else None

    with pytest.raises(PersistbenchError, match=needle) as e:
        build_index(LocalFile(path), rule)
    assert str(path) in str(e.value)


@pytest.mark.slow
def test_a_pax_size_past_the_end_is_refused_by_verify_and_infer_as_by_tarfile(tmp_path):
    root = tmp_path / "wrop"
    wrop_synth.make(root, wrop_synth.WropSynthConfig(samples=1))
    task = sorted(wrop_synth.WropSynthConfig().tasks)[0]
    archive = root / wrop_layout.archive_path(task)
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    prompt = next(name for name in members if name.endswith(wrop_layout.PROMPT))
    data = _pax_tar(archive, members, {prompt: {"size": str(10**15)}})
    checksums = root / wrop_layout.CHECKSUMS
    lines = [
        f"{hashlib.sha256(data).hexdigest()}  {archive.name}  {len(members)}" if archive.name in line else line
        for line in checksums.read_text().splitlines()
    ]
    checksums.write_text("\n".join(lines) + "\n")
    with pytest.raises((tarfile.ReadError, OSError)):  # the standard reader refuses the archive (3.11: OSError)
        with tarfile.open(archive) as tar:
            tar.getmembers()
    refused(run_cli("verify", root, "--no-progress"), str(archive), "beyond the end")
    result = run_cli("infer", "--model", "hold", "--dataset", root, "--output", tmp_path / "run", "--no-progress")
    refused(result, str(archive), "beyond the end")


# ---------------------------------------------------------------- --pairs files and run.json


@pytest.fixture
def pose_run(r2m, tmp_path) -> Path:
    return Path(shutil.copytree(r2m / "videos" / "pose", tmp_path / "pose"))


@pytest.mark.slow
def test_a_pair_file_gives_only_its_pairs_and_a_bounded_meta(r2m, pose_run, tmp_path):
    first = run_cli("score", "--pred", pose_run, "--dataset", r2m, "--metrics", "frame_psnr", "--no-progress")
    assert first.returncode == 0, first.stdout + first.stderr
    written = pose_run / "scores" / "r2m-v2" / "pairs"
    theirs = Path(shutil.copytree(written, tmp_path / "theirs"))
    for f in theirs.iterdir():
        data = json.loads(f.read_text())
        f.write_text(json.dumps({**data, "meta": {"from": "upstream"}, "notes": "x" * 1_000_000, "extra": [1]}))
    args = ("score", "--pred", pose_run, "--dataset", r2m, "--metrics", "frame_psnr", "--no-progress")
    again = run_cli(*args, "--pairs", theirs)
    assert again.returncode == 0, again.stdout + again.stderr
    for f in written.iterdir():
        data = json.loads(f.read_text())
        assert sorted(data) == ["baseline", "meta", "revisit", "short"]
        assert data["meta"]["from"] == "upstream" and data["meta"]["key"].startswith("file:")
    big = theirs / "DDDAAA.json"
    big.write_text(json.dumps({**json.loads(big.read_text()), "meta": {"blob": "x" * 1_000_000}}))
    refused(run_cli(*args, "--pairs", theirs), str(big), "meta")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("model", "m" * 5_000_000, "model: must be"),
        ("model", {"name": "warp"}, "model: must be"),
        ("oracle", "yes", "oracle: must be true or false"),
    ],
    ids=["model-5MB", "model-dict", "oracle-string"],
)
def test_run_json_fields_are_checked_before_they_reach_the_outputs(r2m, hold_run, field, value, needle):
    run_json = hold_run / "run.json"
    run_json.write_text(json.dumps({**json.loads(run_json.read_text()), field: value}))
    before = snapshot(hold_run)
    result = run_cli("score", "--pred", hold_run, "--dataset", r2m, "--metrics", "frame_psnr", "--no-progress")
    refused(result, str(run_json), needle)
    assert snapshot(hold_run) == before


def test_rotations_that_drift_as_upstreams_real_files_do_are_read(checkout):
    """Upstream's trajectory_WSLRRLL_30s.json is orthonormal only to 6.1e-4 (determinant 0.99973 at frame 139)."""

    def drift(data: dict) -> None:
        for key in ("10", "20"):
            e = data[key]["extrinsic"]
            for r in range(3):
                e[r][:3] = [v * (1 - 3e-4) + (6e-4 if c == (r + 1) % 3 else 0) for c, v in enumerate(e[r][:3])]

    _edit_trajectory(checkout, drift)
    result = run_cli("verify", checkout, "--no-progress")
    assert result.returncode == 0, result.stdout + result.stderr
    from persistbench.suites.r2m.data import read_trajectory

    traj = read_trajectory(layout.trajectory_path(checkout, "DDDAAA"))
    r = traj.rigid_poses[10, :3, :3]
    assert abs(traj.poses[10, 0, 0] - r[0, 0]) > 1e-5 and abs(r @ r.T - np.eye(3)).max() < 1e-12
    assert (traj.rigid_poses[0] == traj.poses[0]).all()  # an orthonormal rotation is kept bit for bit


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["3"]["extrinsic"][0].__setitem__(3, 1e300), "frame 3: extrinsic: a position beyond 1e+06 m"),
    ],
)
def test_positions_beyond_any_scene_are_refused(checkout, edit, needle):
    _edit_trajectory(checkout, edit)
    refused(run_cli("verify", checkout, "--no-progress"), needle)


def test_a_metadata_file_that_lists_no_case_is_refused(checkout):
    path = layout.meta_path(checkout, "DDDAAA")
    path.write_text("[]")
    refused(run_cli("verify", checkout, "--no-progress"), path.name, "must be a list of 1 to")
