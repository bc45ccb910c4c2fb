"""Issue 40: the published sharded distribution read as its dataset card describes it (tests/fakes/card_dist.py writes
one from the card's text alone), and ``pack`` writing the card's layout, which the card's own snippets read."""

from __future__ import annotations

import glob
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from fakes.card_dist import PAIRS, SAMPLE, Pair, write
from fakes.card_dist import pair_files as card_pair_files
from fakes.clirun import refused, run_cli

from persistbench.core.errors import PersistbenchError
from persistbench.suites.persistbench.dataset import Dataset


@pytest.fixture(scope="module")
def card(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("card") / "dist")


@pytest.fixture(scope="module")
def fetched(card, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("fetched") / "data"
    result = run_cli("fetch", "--no-progress", "--from", card, "--output", out)
    assert result.returncode == 0, result.stderr
    return out, result.stdout


@pytest.mark.slow
def test_every_pair_of_the_cards_distribution_is_fetched_verified_predicted_and_scored(fetched, tmp_path):
    out, said = fetched
    uids = sorted(p.uid for p in PAIRS)
    assert f"{len(PAIRS)} pair(s)" in said, said
    record = json.loads((out / "fetch.json").read_text())
    assert record["pairs"] == 4 and record["index_keys"] == ["id", "path"] and record["verified"]
    assert sorted(c.case_id for c in Dataset(out).cases()) == uids  # both objects of one case are pairs
    verified = run_cli("verify", out)
    assert verified.returncode == 0 and "ok: 4 cases verified" in verified.stdout, verified.stdout + verified.stderr
    run = tmp_path / "run"
    assert run_cli("infer", "--no-progress", "--model", "hold", "--dataset", out, "--output", run).returncode == 0
    scored = run_cli("score", "--no-progress", "--pred", run, "--metrics", "psnr,iou")
    assert scored.returncode == 0, scored.stderr
    cases = sorted(
        p.stem for p in (run / "scores" / "classic-v1").rglob("*.json") if p.parent.name in ("dynamic", "static")
    )
    assert cases == uids
    summary = (run / "scores" / "classic-v1" / "summary.md").read_text()
    assert "Frames: visible where view_0_visibility > 0.7, invisible where view_0_visibility < 0.3." in summary
    card = run_cli("score", "--no-progress", "--pred", run, "--metrics", "iou", "--protocol", "card-v1")
    assert card.returncode == 0 and "invisible where view_0_visibility <= 0." in card.stdout, card.stderr
    big = next(p for p in PAIRS if p.n_frames == 208)
    case = next(c for c in Dataset(out).cases() if c.case_id == big.uid)
    assert case.n_frames == 208 and next(case.view("view_0").frames()).shape == (768, 1024, 3)


@pytest.mark.slow
def test_the_cards_theta_phi_array_is_read_in_one_place(fetched):
    out, _ = fetched
    case = Dataset(out).cases()[0]
    angles = case.theta_phi()
    assert set(angles) == {"view_0_theta", "view_0_phi"} and angles["view_0_theta"].shape == (case.n_frames,)


@pytest.mark.slow
def test_checksum_entries_of_another_shape_are_one_line(card, tmp_path):
    bad = Path(shutil.copytree(card, tmp_path / "bad"))
    sums = json.loads((bad / "shards" / "checksums.json").read_text())
    sums["shard-0000.tar"] = {"sha256": sums["shard-0000.tar"]["sha256"], "length": 1}
    (bad / "shards" / "checksums.json").write_text(json.dumps(sums))
    refused(
        run_cli("fetch", "--no-progress", "--from", bad, "--output", tmp_path / "o"),
        "shards/checksums.json: shard-0000.tar: expected",
    )


@pytest.mark.slow
def test_a_shard_and_its_index_that_disagree_name_every_pair(card, tmp_path):
    bad = Path(shutil.copytree(card, tmp_path / "bad"))
    index = json.loads((bad / "index.json").read_text())
    moved = next(k for k, v in index.items() if v["shard"] == "shard-0000.tar")
    index[moved]["shard"] = "shard-0001.tar"
    (bad / "index.json").write_text(json.dumps(index))
    line = refused(
        run_cli("fetch", "--no-progress", "--from", bad, "--output", tmp_path / "o"), "differ from index.json"
    )
    assert (
        "in the shard only: Synth_cardAAAAAAA_0_obj_0001" in line
        or "in the shard only: Synth_cardAAAAAAA_0_obj_0002" in line
    )


@pytest.mark.slow
def test_samples_laid_out_as_the_card_says_are_fetched(card, tmp_path):
    out = tmp_path / "samples"
    result = run_cli("fetch", "--no-progress", "--from", card, "--output", out, "--include", "samples")
    assert result.returncode == 0 and "1 pair(s)" in result.stdout, result.stdout + result.stderr
    assert json.loads((out / "fetch.json").read_text())["verified"] is False  # the card lists no checksums for them
    assert [c.case_id for c in Dataset(out).cases()] == [SAMPLE.uid]
    empty = Path(shutil.copytree(card, tmp_path / "empty"))
    shutil.rmtree(empty / "samples")
    refused(
        run_cli("fetch", "--no-progress", "--from", empty, "--output", tmp_path / "o", "--include", "samples"),
        "no pair to fetch",
    )


@pytest.mark.slow
def test_a_video_shorter_than_its_masks_is_named_by_verify(tmp_path):
    short = Pair("dynamic", "Synth_shortAAAAAA_0", "obj_0001", n_frames=10, seed=9)
    dist = write(tmp_path / "dist", (short,), None)
    out = tmp_path / "data"
    assert run_cli("fetch", "--no-progress", "--from", dist, "--output", out).returncode == 0
    masks = out / short.path / "view_0" / "masks"
    for i in range(10, 14):  # four masks more than the video has frames, and the index says 14
        shutil.copy(masks / "00000.png", masks / f"{i:05d}.png")
    pairs = json.loads((out / "pairs.json").read_text())
    pairs[short.uid]["n_frames"] = 14
    (out / "pairs.json").write_text(json.dumps(pairs))
    result = run_cli("verify", out)
    assert result.returncode != 0 and "video.mp4: 10 frames, the case has 14" in result.stdout + result.stderr
    run = run_cli("infer", "--no-progress", "--model", "hold", "--dataset", out, "--output", tmp_path / "run")
    refused(run, "video.mp4: 10 frames, the case has 14")


def test_the_card_protocol_scores_only_fully_hidden_frames(tmp_path):
    """The card: "evaluate on the frames where view_0_visibility == 0"; classic-v1 counts < 0.3."""
    from persistbench.core.protocol import Protocol
    from persistbench.suites.persistbench import scoring
    from persistbench.suites.persistbench.suite import PersistBench

    vis = np.array([1.0, 0.9, 0.2, 0.0, 0.0, 0.1, 1.0])
    card, classic = PersistBench.load_protocol("card-v1"), PersistBench.load_protocol("classic-v1")
    assert isinstance(card, Protocol)
    assert scoring.frame_sets(vis, card)[1].tolist() == [False, False, False, True, True, False, False]
    assert scoring.frame_sets(vis, classic)[1].tolist() == [False, False, True, True, True, True, False]
    assert scoring.frame_rule(card.config)["invisible"] == "view_0_visibility <= 0"
    assert scoring.frame_rule(classic.config)["invisible"] == "view_0_visibility < 0.3"
    both = tmp_path / "both.json"  # refused when loaded, not case by case while scoring
    both.write_text(json.dumps({**card.config, "name": "both", "invisible_below": 0.3}))
    with pytest.raises(PersistbenchError, match="both.json: give exactly one of invisible_below and invisible_at_most"):
        PersistBench.load_protocol(str(both))


@pytest.mark.slow
def test_the_cards_snippets_read_packs_output(sample_ds, tmp_path):
    """The card's own loops, as it prints them, on what ``pack`` writes; and ``pack`` -> ``fetch`` -> ``verify``."""
    import os

    dist = tmp_path / "dist"
    assert run_cli("pack", sample_ds, "--out", dist, "--shard-size", "1MB", "--date", "2026-11-30").returncode == 0
    cwd = os.getcwd()
    os.chdir(dist)
    try:
        for n, v in json.load(open("shards/checksums.json")).items():  # noqa: B007 (the card's loop, as printed)
            open("shards/" + n).close()
    finally:
        os.chdir(cwd)
    extracted = tmp_path / "extracted"
    for shard in sorted((dist / "shards").glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            tar.extractall(extracted, filter="data")
    os.chdir(extracted)
    try:
        pair = sorted(glob.glob("*/*/obj_*"))[0]
        vis = np.load(f"{pair}/visibility_dict.npy", allow_pickle=True).item()  # the card's reading of it
        masks = sorted(glob.glob(f"{pair}/view_0/masks/*.png"))
        angles = np.load(f"{pair}/theta_phi_values.npy")
    finally:
        os.chdir(cwd)
    assert angles.shape == (len(masks), 2) and angles.dtype == np.float64
    index = json.loads((dist / "index.json").read_text())
    assert "view_0_visibility" in vis and len(masks) == next(iter(index.values()))["n_frames"]
    out = tmp_path / "data"
    assert run_cli("fetch", "--no-progress", "--from", dist, "--output", out).returncode == 0
    assert "ok: 8 cases verified" in run_cli("verify", out).stdout


def test_the_default_repository_is_the_cards(tmp_path):
    result = run_cli(
        "fetch", "--no-progress", "--output", tmp_path / "o", env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    )
    refused(result, "hf://persistbench-neurips26/PersistBench@main")


@pytest.mark.slow
def test_a_pair_folder_outside_the_layout_is_named_not_dropped(fetched, tmp_path):
    out = Path(shutil.copytree(fetched[0], tmp_path / "data"))
    second = next(p for p in PAIRS if p.obj_id == "obj_0002")
    (out / second.path).rename(out / second.subset / second.case_id / "second")
    line = refused(run_cli("verify", out), "second")
    assert "a pair folder outside the layout" in line or "not a case or pair folder" in line
    refused(
        run_cli("infer", "--no-progress", "--model", "hold", "--dataset", out, "--output", tmp_path / "r"), "second"
    )


@pytest.mark.slow
def test_the_layout_pack_wrote_before_still_reads(tmp_path):
    """``<subset>/<case>_obj_<N>/<N>/``, ``mask_0000.png``, theta/phi a dictionary, samples listed in
    ``shards/checksums.json`` with ``bytes``: what ``pack`` wrote before this layout."""
    import hashlib
    import io

    pair = Pair("dynamic", "Synth_oldAAAAAAAA_0", "obj_1", seed=7)
    old = f"{pair.subset}/{pair.uid}/1"
    members = {}
    for name, data in card_pair_files(pair).items():
        if "/masks/" in name:
            name = name.replace("masks/", "masks/mask_").replace("mask_000", "mask_00")
        if name == "theta_phi_values.npy":
            buf = io.BytesIO()
            np.save(buf, np.array({"view_0_theta": np.zeros(pair.n_frames)}, dtype=object), allow_pickle=True)
            data = buf.getvalue()
        members[f"{old}/{name}"] = data
    dist = tmp_path / "dist"
    (dist / "shards").mkdir(parents=True)
    with tarfile.open(dist / "shards" / "shard-0000.tar", "w") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    sums = {}
    for name, data in members.items():
        (dist / "samples" / name).parent.mkdir(parents=True, exist_ok=True)
        (dist / "samples" / name).write_bytes(data)
        sums[f"samples/{name}"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    shard = (dist / "shards" / "shard-0000.tar").read_bytes()
    sums["shard-0000.tar"] = {"sha256": hashlib.sha256(shard).hexdigest(), "bytes": len(shard)}
    (dist / "shards" / "checksums.json").write_text(json.dumps(sums))
    index = {pair.uid: {"shard": "shard-0000.tar", "subset": pair.subset, "n_frames": pair.n_frames}}
    (dist / "index.json").write_text(json.dumps(index))
    for include in ("all", "samples"):
        out = tmp_path / include
        result = run_cli("fetch", "--no-progress", "--from", dist, "--output", out, "--include", include)
        assert result.returncode == 0 and "1 pair(s)" in result.stdout, result.stdout + result.stderr
        assert [c.case_id for c in Dataset(out).cases()] == [pair.uid]
        assert "ok: 1 cases verified" in run_cli("verify", out).stdout
