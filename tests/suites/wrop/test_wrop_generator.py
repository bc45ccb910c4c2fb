"""WROP in the generator's real forms: its taxonomy, its metadata.json and trajectory.npz, its loose output."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from persistbench.cli import main
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.suites.wrop import corpus, layout
from persistbench.suites.wrop.synth import WropSynthConfig, make, split
from persistbench.suites.wrop.taxonomy import taxonomy


@pytest.fixture(autouse=True)
def _index_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))


def test_the_taxonomy_is_the_generators_150_tasks_in_six_families():
    tax = taxonomy()
    assert tax.source["repository"] == "hokindeng/object-permanence"
    assert tax.source["file"] == "object_permanence/taxonomy.py" and len(tax.source["commit"]) == 40
    assert sorted(tax.task_ids.values(), key=lambda g: int(g[1:])) == [f"G{i:02d}" for i in range(1, 151)]
    assert all(layout.TASK_RE.fullmatch(name) for name in tax.families)
    counts = {f: list(tax.families.values()).count(f) for f in tax.family_names}
    assert counts == {
        "baillargeonian_occlusion": 26,
        "object_static_occlusion": 29,
        "container_permanence": 35,
        "baillargeonian_obstruction": 20,
        "object_drop": 21,
        "object_collision": 19,
    }
    assert list(tax.family_names.values()) == [
        "Baillargeonian occlusion",
        "Static occlusion",
        "Container permanence",
        "Baillargeonian obstruction",
        "Object drop",
        "Object collision",
    ]
    per_dimension = {d: sum(n for f, n in counts.items() if tax.dimension_of[f] == d) for d in tax.dimension_names}
    assert per_dimension == {"object_permanence": 90, "object_solidity": 60}
    # a few rows as the generator's taxonomy.py files them (G34 is obstruction despite its name)
    assert tax.families["occ_small_ball_behind_screen"] == "baillargeonian_obstruction"
    assert tax.task_ids["box_holds_N_objects"] == "G11" and tax.families["hole_box_drop"] == "object_drop"
    assert corpus.CATEGORIES == tuple(tax.family_names)


# ---------------------------------------------------------------- metadata.json's video_split


def _fixed(input_end: int, target_start: int, n: int = 120) -> dict:
    """The generator's fixed_length_info keys for a split, 60-frame clips (0-based, ends exclusive)."""
    i0, t1 = max(0, input_end - 60), min(n, target_start + 60)
    return {
        "input_start_index": i0,
        "input_end_index": input_end,
        "target_start_index": target_start,
        "target_end_index": t1,
        "input_source_frames": input_end - i0,
        "target_source_frames": t1 - target_start,
        "input_pad_start_frames": 60 - (input_end - i0),
        "target_pad_end_frames": 60 - (t1 - target_start),
        "clip_frames": 60,
        "equal_length": True,
    }


SPLITS = {  # the generator's forms, numbers from its task manifests (G102, G120) and its other modes
    "midpoint": {"mode": "half", "n_frames": 120, "midpoint_index": 60, "split_index": 60, "method": "midpoint"}
    | _fixed(60, 60),
    "G102 before_event": {
        "split_index": 76,
        "method": "manifest_event_boundary",
        "boundary_method": "before_event",
        "event": "screen begins its reveal lift",
        "first_target_frame": 77,
    }
    | _fixed(76, 76),
    "G120 overlap_event": {
        "split_index": 39,
        "method": "manifest_event_boundary",
        "boundary_method": "overlap_event",
        "event_frame": 40,
        "seam_overlap_frames": 1,
    }
    | _fixed(40, 39),
    "deepest_occlusion": {"method": "deepest_occlusion", "event_ssg_frame": 50, "clamp_band": [24, 96]}
    | _fixed(50, 50),
    "midpoint_fallback": {"method": "midpoint_fallback", "fallback_reason": "no apparatus"} | _fixed(60, 60),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_every_split_method_of_the_generator_gives_its_scored_frames(name):
    vs = corpus.video_split({"video_split": {**SPLITS[name], "something_new": [1, 2]}}, "m.json")
    assert vs.target_frames == 60
    want = {"G102 before_event": range(0, 44), "G120 overlap_event": range(1, 60)}.get(name, range(0, 60))
    assert vs.scored(60) == want  # the 16 padded end frames of G102 and the seam frame of G120 are left out
    assert vs.policy == {"G102 before_event": "before_event", "G120 overlap_event": "overlap_event"}.get(name, name)


@pytest.mark.parametrize(
    "change, why",
    [
        ({"method": "before_event"}, "video_split.method 'before_event' is not one of"),
        ({"method": "manifest_event_boundary", "boundary_method": "middle"}, "boundary_method 'middle' is not one of"),
        ({"target_end_index": None}, "video_split.target_end_index is missing"),
        ({"input_pad_start_frames": -1}, "input_pad_start_frames must be an integer"),
        ({"input_end_index": 0}, "input [input_start_index, input_end_index) is empty"),
        ({"seam_overlap_frames": 1}, "seam_overlap_frames is 1, but the input ends at 60 and the target starts at 60"),
    ],
)
def test_a_split_that_is_missing_or_inconsistent_is_refused_naming_the_member(change, why):
    split = {k: v for k, v in {**SPLITS["midpoint"], **change}.items() if v is not None}
    with pytest.raises(PersistbenchError) as e:
        corpus.video_split({"video_split": split}, "a.tar: train/shard1/t_task/t_0000/metadata.json")
    assert str(e.value).startswith("a.tar: train/shard1/t_task/t_0000/metadata.json: ") and why in str(e.value)


def test_synth_writes_the_splits_compute_split_writes():
    assert split("u_track_occluded_ball") == SPLITS["midpoint"] | {"mode": "half", "n_frames": 120}
    knock = split("knock_ball_off_ledge")
    assert (knock["input_start_index"], knock["input_end_index"], knock["target_start_index"]) == (0, 36, 35)
    assert knock["input_pad_start_frames"] == 24 and knock["seam_overlap_frames"] == 1
    assert knock["last_input_frame"] == knock["first_target_rendered_frame"] == knock["event_frame"] == 36


# ---------------------------------------------------------------- trajectory.npz


def _npz(**arrays) -> dict[str, np.ndarray]:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    with np.load(io.BytesIO(buf.getvalue()), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _trajectory(t: int = 120, n: int = 2, **override) -> dict:
    arrays = {
        "xpos": np.zeros((t, n, 3), np.float32),
        "xquat": np.zeros((t, n, 4), np.float32),
        "qpos": np.zeros((t, n * 7), np.float32),
        "qvel": np.zeros((t, n * 6), np.float32),
        "body_names": np.array(["ball", "screen"][:n]),
        "body_roles": np.array(["target", ""][:n]),
        "body_shapes": np.array(["sphere", "cube"][:n]),
        "body_colors": np.array(["red", "grey"][:n]),
        "is_target": np.array([True, False][:n]),
        "fps": np.float32(24),
        "frame_start": np.int32(1),
        "frame_end": np.int32(120),
        "extra_from_a_newer_generator": np.arange(3),
    }
    return _npz(**{k: v for k, v in {**arrays, **override}.items() if v is not None})


def test_trajectory_keys_and_shapes_are_the_generators():
    corpus.check_trajectory(_trajectory(), "t.npz")  # extra keys ignored
    cases = {
        "lacks body_roles": _trajectory(body_roles=None),
        "qpos is float32 [120, 7]": _trajectory(qpos=np.zeros((120, 7), np.float32)),
        "is_target is int64": _trajectory(is_target=np.array([1, 0])),
        "xpos must be [T, N, 3]": _trajectory(xpos=np.zeros((120, 6), np.float32)),
    }
    for why, arrays in cases.items():
        with pytest.raises(PersistbenchError, match=re.escape(why)) as e:
            corpus.check_trajectory(arrays, "train/x/trajectory.npz")
        assert str(e.value).startswith("train/x/trajectory.npz: ")


# ---------------------------------------------------------------- the generator's loose output


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    """The same samples as tars and as the generator's loose output, two per task."""
    root = tmp_path_factory.mktemp("outputs")
    make(root / "tars", WropSynthConfig(samples=2))
    make(root / "loose", WropSynthConfig(samples=2, loose=True))
    return {"tars": root / "tars", "loose": root / "loose"}


def _infer_score(dataset: Path, out: Path) -> dict:
    result = CliRunner().invoke(
        main, ["infer", "--model", "flow", "--dataset", str(dataset), "--output", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["score", "--pred", str(out), "--metrics", "psnr,ssim", "--no-progress"])
    assert result.exit_code == 0, result.output
    results = json.loads((RunLayout(out).scores_dir("wrop-cont-v1") / "results.json").read_text())
    return {c["uid"]: c for c in results["cases"]}


@pytest.mark.slow
def test_the_loose_output_is_read_in_place_and_scores_as_the_corpus(outputs, tmp_path):
    loose = Path(shutil.copytree(outputs["loose"], tmp_path / "loose"))
    failed = loose / "trapdoor_drop_task" / "trapdoor_drop_0001"
    (failed / layout.ERROR).write_text("render exceeded 1800s and was killed (attempt 2/2)")
    (loose / "knock_ball_off_ledge_task" / "knock_ball_off_ledge_0000" / layout.TARGET_VIDEO).unlink()
    (loose / "knock_ball_off_ledge_task" / "knock_ball_off_ledge_0001" / ".full.mp4").write_bytes(b"leftover")
    files = sorted(p.relative_to(loose) for p in loose.rglob("*"))
    scored = _infer_score(loose, tmp_path / "run")
    assert sorted(p.relative_to(loose) for p in loose.rglob("*")) == files  # read in place: nothing written there
    assert sorted(scored) == [
        "knock_ball_off_ledge_0001",
        "trapdoor_drop_0000",
        "u_track_occluded_ball_0000",
        "u_track_occluded_ball_0001",
    ]
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["dataset"]["skipped"] == {
        "knock_ball_off_ledge/knock_ball_off_ledge_0000": "no target_video.mp4",
        "trapdoor_drop/trapdoor_drop_0001": "ERROR.txt (the generator failed to render it)",
    }
    result = CliRunner().invoke(main, ["verify", str(loose), "--no-progress"])
    assert result.exit_code == 0 and "ok: 4 cases verified" in result.output
    assert (
        "left out 2 sample(s)" in result.output
        and "left out trapdoor_drop/trapdoor_drop_0001: ERROR.txt" in result.output
    )

    corpus_scores = _infer_score(outputs["tars"], tmp_path / "tars-run")
    for uid, case in scored.items():  # the same samples give the same scores from tars and from folders
        assert (
            case["values"] == corpus_scores[uid]["values"]
            and case["scored_frames"] == corpus_scores[uid]["scored_frames"]
        )


def test_the_loose_output_refuses_foreign_names_and_links(outputs, tmp_path):
    def copy(name: str) -> Path:
        return Path(shutil.copytree(outputs["loose"], tmp_path / name))

    cases = {}
    root = copy("foreign")
    (root / "trapdoor_drop_task" / "other_0000").mkdir()
    cases["foreign"] = (root, "other_0000: not a sample folder of trapdoor_drop (trapdoor_drop_<NNNN>)")
    root = copy("file")
    (root / "trapdoor_drop_task" / "trapdoor_drop_0000" / "notes.md").write_text("x")
    cases["file"] = (root, "notes.md: not a WROP file")
    root = copy("link")
    prompt = root / "trapdoor_drop_task" / "trapdoor_drop_0000" / layout.PROMPT
    prompt.unlink()
    os.symlink("/etc/passwd", prompt)
    cases["link"] = (root, "prompt.txt: not a regular file (links are refused)")
    root = copy("task-link")  # a whole task folder linked in: refused, not skipped without a word
    elsewhere = Path(shutil.copytree(root / "trapdoor_drop_task", tmp_path / "elsewhere"))
    shutil.rmtree(root / "trapdoor_drop_task")
    (root / "trapdoor_drop_task").symlink_to(elsewhere)
    cases["task-link"] = (root, "trapdoor_drop_task: a task folder that is not a folder (links are refused)")
    for what, (root, why) in cases.items():
        out = tmp_path / f"{what}-run"
        result = CliRunner().invoke(
            main, ["infer", "--model", "hold", "--dataset", str(root), "--output", str(out), "--no-progress"]
        )
        assert result.exit_code == 1 and why in result.output, (what, result.output)
        assert len([x for x in result.output.splitlines() if x.strip()]) == 1 and not out.exists()


@pytest.mark.slow
def test_a_target_video_that_disagrees_with_its_split_is_refused(outputs, tmp_path):
    loose = Path(shutil.copytree(outputs["loose"], tmp_path / "loose"))
    sample = loose / "u_track_occluded_ball_task" / "u_track_occluded_ball_0000"
    meta = json.loads((sample / layout.METADATA).read_text())
    meta["video_split"]["target_end_index"] = 110
    meta["video_split"]["target_pad_end_frames"] = 0  # 50 target frames by the split; the video has 60
    (sample / layout.METADATA).write_text(json.dumps(meta))
    run = tmp_path / "run"
    args = ["--dataset", str(loose), "--output", str(run), "--no-progress", "--tasks", "u_track*"]
    assert CliRunner().invoke(main, ["infer", "--model", "hold", *args]).exit_code == 0
    result = CliRunner().invoke(main, ["score", "--pred", str(run), "--metrics", "psnr", "--no-progress"])
    assert result.exit_code != 0
    assert f"{sample / layout.TARGET_VIDEO}: 60 frames, metadata.json's video_split makes 50" in result.output


def _zip_bytes(members: list[tuple[str, bytes]], encrypt: str | None = None) -> bytes:
    """A zip of ``members`` (names may repeat); the member ``encrypt`` carries the encryption flag."""
    import warnings
    import zipfile

    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        warnings.simplefilter("ignore")  # zipfile warns of the repeated name, which is the point
        for name, data in members:
            z.writestr(name, data)
    raw = bytearray(buf.getvalue())
    if encrypt is not None:  # set bit 0 of the general purpose flags in the local and central headers
        for sig, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            i = raw.find(sig)
            while i >= 0:
                name_at = i + (30 if sig == b"PK\x03\x04" else 46)
                if raw[name_at : name_at + len(encrypt)] == encrypt.encode():
                    raw[i + offset] |= 1
                i = raw.find(sig, i + 4)
    return bytes(raw)


@pytest.mark.slow
def test_a_hostile_trajectory_npz_is_one_line(outputs, tmp_path):
    """Issue 39: members with the encryption flag or twice (numpy would keep the last) are refused naming the file."""
    loose = Path(shutil.copytree(outputs["loose"], tmp_path / "loose"))
    target = sorted(loose.glob("*_task/*/trajectory.npz"))[0]
    good = np.load(target, allow_pickle=False)
    arrays = {k: good[k] for k in good.files}
    members = []
    for k, v in arrays.items():
        b = io.BytesIO()
        np.save(b, v, allow_pickle=False)
        members.append((f"{k}.npy", b.getvalue()))
    for n, (damaged, needle) in enumerate(
        [
            (_zip_bytes(members, encrypt="xpos.npy"), "xpos: an encrypted member"),
            (_zip_bytes([*members, members[0]]), f"{members[0][0][:-4]}: a member twice"),
        ]
    ):
        target.write_bytes(damaged)
        for command in (
            ["verify", str(loose)],
            ["infer", "--model", "hold", "--dataset", str(loose), "-o", str(tmp_path / f"r{n}")],
        ):
            result = CliRunner().invoke(main, [*command, "--no-progress"])
            assert result.exit_code != 0 and needle in result.output, (command, result.output)
            assert "Traceback" not in result.output and "internal error" not in result.output
