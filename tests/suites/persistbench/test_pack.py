"""pack / fetch: synth -> download -> pack -> fetch -> verify, reproducible shards, checksums, safe extraction."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.suites.persistbench import layout as pb_layout
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.dist.fetch import check_member, extract_shard
from persistbench.suites.persistbench.layout import DistributionLayout


def cli(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def dist(sample_ds, tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "dist"
    cli("pack", sample_ds, "--out", out, "--shard-size", "1MB", "--date", "2026-11-30")
    return out


@pytest.fixture(scope="module")
def fetched(dist, tmp_path_factory):
    out = tmp_path_factory.mktemp("fetched") / "data"
    cli("fetch", "--no-progress", "--from", dist, "--output", out)
    return out


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0**2 / mse)


@pytest.mark.slow
def test_fetched_pairs_equal_the_reconstructed_cases(sample_ds, dist, fetched):
    assert "ok: 8 cases verified" in cli("verify", fetched)
    index = json.loads(DistributionLayout(dist).index_json.read_text())
    assert len(index) == 8 and len({v["shard"] for v in index.values()}) > 1  # 1MB shards: several
    ref = {c.case_id: c for c in Dataset(sample_ds).cases()}
    got = Dataset(fetched).cases()
    assert sorted(c.case_id for c in got) == sorted(ref)
    worst = np.inf
    for case in got:
        want = ref[case.case_id]
        assert case.nested and case.subset == want.subset == index[case.case_id]["subset"]
        for name in pb_layout.VIEWS:
            v, w = case.view(name), want.view(name)
            assert v.video_path is not None and v.n_frames == w.n_frames == index[case.case_id]["n_frames"]
            assert all(np.array_equal(a, b) for a, b in zip(v.masks(), w.masks()))
            assert v.camera_path.read_bytes() == w.camera_path.read_bytes()
            frames = list(v.frames())
            assert len(frames) == w.n_frames
            worst = min(worst, min(psnr(a, b) for a, b in zip(frames, w.frames())))
        assert case.visibility_path.read_bytes() == want.visibility_path.read_bytes()
        angles, source = case.theta_phi(), want.theta_phi()  # the card's (T, 2) yaw and pitch of the input view
        assert set(angles) == {"view_0_theta", "view_0_phi"}
        assert all(np.array_equal(angles[k], source[k]) for k in angles)
    assert worst > 35, worst


@pytest.mark.slow
def test_pack_is_byte_reproducible_whatever_the_workers(sample_ds, dist, tmp_path):
    again = tmp_path / "again"
    cli("pack", sample_ds, "--out", again, "--shard-size", "1MB", "--date", "2026-11-30", "--workers", "2")
    files = lambda d: {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}  # noqa: E731
    assert files(again) == files(dist)
    assert "exists and is not empty" in cli("pack", sample_ds, "--out", again, code=1)  # never overwritten


@pytest.mark.slow
def test_shard_members_are_plain_files_with_fixed_metadata(dist):
    with tarfile.open(DistributionLayout(dist).shard(0)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert all(
        m.isfile() and m.mtime == 0 and m.uid == 0 and m.mode == 0o644 and check_member(m) is None for m in members
    )


@pytest.mark.slow
def test_croissant_validates_and_its_records_are_the_pairs(dist):
    mlc = pytest.importorskip("mlcroissant")
    ds = mlc.Dataset(jsonld=str(DistributionLayout(dist).croissant_json))
    assert not ds.metadata.ctx.issues.errors and not ds.metadata.ctx.issues.warnings
    records = {r["pairs/pair_id"].decode(): r for r in ds.records("pairs")}
    index = json.loads(DistributionLayout(dist).index_json.read_text())
    assert sorted(records) == sorted(index)
    assert all(
        records[k]["pairs/shard"].decode() == v["shard"] and records[k]["pairs/n_frames"] == v["n_frames"]
        for k, v in index.items()
    )
    doc = json.loads(DistributionLayout(dist).croissant_json.read_text())
    checksums = json.loads(DistributionLayout(dist).checksums_json.read_text())
    shards = [d for d in doc["distribution"] if d["encodingFormat"] == "application/x-tar"]
    assert {d["name"]: d["sha256"] for d in shards} == {k: v["sha256"] for k, v in checksums.items() if "/" not in k}
    assert "rai:dataCollection" in doc and "rai:dataLimitations" in doc


@pytest.mark.slow
def test_samples_only_and_resume(dist, fetched, tmp_path):
    out = tmp_path / "samples"
    assert "fetched 4 pair(s) from " in cli(
        "fetch", "--no-progress", "--from", dist, "--output", out, "--include", "samples"
    )
    assert "ok: 4 cases verified" in cli("verify", out)
    assert {c.subset for c in Dataset(out).cases()} == {"dynamic", "static"}
    # A rerun skips verified shards: it succeeds with the shards gone from the source.
    copy = shutil.copytree(dist, tmp_path / "dist")
    data = shutil.copytree(fetched, tmp_path / "data")
    for shard in (copy / "shards").glob("shard-*.tar"):
        shard.unlink()
    cli("fetch", "--no-progress", "--from", copy, "--output", data)
    assert "ok: 8 cases verified" in cli("verify", data)


@pytest.mark.slow
def test_a_flipped_byte_fails_the_checksum_and_nothing_is_extracted(dist, tmp_path):
    bad = shutil.copytree(dist, tmp_path / "bad")
    shard = DistributionLayout(bad).shard(1)
    data = bytearray(shard.read_bytes())
    data[5000] ^= 0x01
    shard.write_bytes(bytes(data))
    out = tmp_path / "out"
    output = cli("fetch", "--no-progress", "--from", bad, "--output", out, code=1)
    assert "failed 1" in output and "shard-0001.tar: sha256 differs from checksums.json; nothing extracted" in output
    index = json.loads(DistributionLayout(bad).index_json.read_text())
    for pair_id, row in index.items():  # the other shards came out whole; nothing of shard 1 did
        assert (out / pb_layout.pair_dir(row["subset"], pair_id)).exists() == (row["shard"] != "shard-0001.tar")
    assert not (out / "fetch.json").exists()  # the distribution is not complete


def crafted(path, add):
    with tarfile.open(path, "w") as tar:
        ok = tarfile.TarInfo("static/Synth_abc_0_obj_1/1/visibility_dict.npy")
        ok.size = 3
        tar.addfile(ok, io.BytesIO(b"abc"))
        add(tar)


def _file(name):
    def add(tar):
        info = tarfile.TarInfo(name)
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))

    return add


def _link(kind, name, target):
    def add(tar):
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        tar.addfile(info)

    return add


@pytest.mark.parametrize(
    "add, reason",
    [
        (_file("../evil"), "leaves the output directory"),
        (_file("static/Synth_abc_0_obj_1/1/../../../../evil"), "leaves the output directory"),
        (_file("/etc/evil"), "absolute path"),
        (_link(tarfile.SYMTYPE, "static/Synth_abc_0_obj_1/1/center/video.mp4", "/etc/passwd"), "link to"),
        (_link(tarfile.LNKTYPE, "static/Synth_abc_0_obj_1/1/center/video.mp4", "../../../../../evil"), "link to"),
        (_link(tarfile.CHRTYPE, "static/Synth_abc_0_obj_1/1/center/video.mp4", ""), "not a regular file"),
        (_file("static/Synth_abc_0_obj_1/1/run.sh"), "name outside"),
    ],
)
def test_crafted_shards_are_refused_before_anything_is_written(tmp_path, add, reason):
    sandbox = tmp_path / "sandbox"
    dist, out = sandbox / "dist", sandbox / "a" / "b" / "out"
    (dist / "shards").mkdir(parents=True)
    shard = dist / "shards" / "shard-0000.tar"
    crafted(shard, add)
    digest = hashlib.sha256(shard.read_bytes()).hexdigest()
    (dist / "shards" / "checksums.json").write_text(
        json.dumps({shard.name: {"sha256": digest, "bytes": shard.stat().st_size}})
    )
    (dist / "index.json").write_text(
        json.dumps({"Synth_abc_0_obj_1": {"shard": shard.name, "subset": "static", "n_frames": 1}})
    )
    before = {p for p in tmp_path.rglob("*")}
    output = cli("fetch", "--no-progress", "--from", dist, "--output", out, code=1)
    assert "shard-0000.tar: refused member" in output and reason in output and "nothing extracted" in output
    written = {p for p in tmp_path.rglob("*")} - before
    assert all(p == out or out in p.parents or p in out.parents for p in written), (
        written
    )  # nothing outside the output directory
    assert not [p for p in written if p.is_file() and ".state" not in p.parts]  # and no pair file inside it
    assert not (tmp_path / "evil").exists() and not (sandbox / "evil").exists()
    with pytest.raises(PersistbenchError, match="refused"):  # the function itself, not only the command
        extract_shard(shard, out)


def test_hub_offline_is_one_line(tmp_path):
    # A fresh process: huggingface_hub reads HF_HUB_OFFLINE when it is first imported.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    args = ["fetch", "--no-progress", "--repo", "someone/nothing", "--output", str(tmp_path / "out")]
    result = subprocess.run(
        [sys.executable, "-m", "persistbench", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: hf://someone/nothing@main: cannot resolve the revision")
    assert result.stderr.count("\n") == 1 and not list((tmp_path / "out").rglob("*"))


@pytest.mark.slow
def test_oracle_scores_perfectly_on_a_fetched_tree(fetched, tmp_path):
    run = tmp_path / "oracle"
    cli("infer", "--no-progress", "--model", "oracle", "--dataset", fetched, "--output", run)
    cli("score", "--no-progress", "--pred", run, "--metrics", "psnr,ssim,iou,continuity")
    s = json.loads(RunLayout(run).summary_json("classic-v1").read_text())
    for split in ("visible", "invisible"):
        block = s["subsets"]["all"][split]
        assert block["psnr"]["mean"] == 100.0 and block["ssim"]["mean"] == pytest.approx(1.0, abs=1e-12)
        assert block["iou"]["mean"] == 1.0 and block["continuity"]["mean"] == 1.0 and block["psnr"]["cases"] == 8


@pytest.mark.slow
def test_fetch_into_a_reconstructed_dataset_is_refused_and_verify_sees_nested_copies(
    sample_ds, dist, fetched, tmp_path
):
    ds = shutil.copytree(sample_ds, tmp_path / "ds")
    before = sorted(p.relative_to(ds).as_posix() for p in ds.rglob("*"))
    out = cli("fetch", "--no-progress", "--from", dist, "--output", ds, code=1)
    assert f"{ds}: holds a reconstructed dataset (cases.jsonl)" in out
    assert sorted(p.relative_to(ds).as_posix() for p in ds.rglob("*")) == before
    # A nested copy put there by hand is reported.
    case = Dataset(ds).cases()[0]
    shutil.copytree(fetched / pb_layout.pair_dir(case.subset, case.case_id), case.path / "obj_1")
    out = cli("verify", "--no-progress", ds, code=1)
    assert f"{case.path}: holds a case and a nested <obj_id>/ copy" in out
