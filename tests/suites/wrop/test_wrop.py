"""WROP: a corpus of tars read in place (locally, over HTTP Range, after fetch), continuation scores over hold."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fakes import TESTS

from persistbench.backends import BackendOptions
from persistbench.cli import main
from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.infer import InferOptions, infer
from persistbench.core.layout import RunLayout
from persistbench.core.score import ScoreOptions, score
from persistbench.core.suites import open_suite
from persistbench.io.serve import FileServer
from persistbench.models.base import ModelInput
from persistbench.models.builtin import FlowModel, region_velocity
from persistbench.suites.wrop import corpus, layout
from persistbench.suites.wrop.scoring import changed_region
from persistbench.suites.wrop.synth import WropSynthConfig, make, write_tar

ADAPTER = TESTS / "adapters" / "wrop_first_frame.py"


@pytest.fixture(scope="module")
def wrop(tmp_path_factory) -> Path:
    """Three real tasks of three samples (one task per video_split method the generator uses), 96 x 160."""
    out = tmp_path_factory.mktemp("wrop")
    make(out, WropSynthConfig(samples=3))
    return out


@pytest.fixture(autouse=True)
def _index_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))


def members_of(tar_path: Path) -> dict[str, bytes]:
    with tarfile.open(tar_path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def write_corpus(root: Path, tars: dict[str, dict[str, bytes]], counts: dict | None = None, digests=None) -> Path:
    """A corpus of ``tars`` (task -> members), with checksums.txt from their bytes unless overridden."""
    lines = []
    for task, members in tars.items():
        digest = write_tar(root / layout.archive_path(task), members)
        n = (counts or {}).get(task, len(members))
        lines.append(f"{(digests or {}).get(task, digest)}  {layout.archive_name(task)}  {n}\n")
    (root / layout.CHECKSUMS).write_text("".join(lines))
    return root


def _score(run: Path, dataset, metrics=("psnr", "ssim"), **kw) -> dict:
    return score(ScoreOptions(pred=run, dataset=dataset, metrics=metrics, **kw), progress=False).value


# ---------------------------------------------------------------- the fixtures and the corpus reader


@pytest.mark.slow
def test_synth_writes_the_corpus_layout(wrop):
    entries = corpus.parse_checksums((wrop / layout.CHECKSUMS).read_bytes(), "checksums.txt")
    assert sorted(entries) == ["knock_ball_off_ledge", "trapdoor_drop", "u_track_occluded_ball"]
    splits = []
    for task, entry in entries.items():
        path = wrop / layout.archive_path(task)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256
        members = members_of(path)
        assert len(members) == entry.members == 15
        assert all(layout.MemberRule(task).problem(name) is None for name in members)
        archive = corpus.open_archive(corpus.open_location(wrop), entry)
        for sample in archive.samples:
            meta = archive.metadata(sample)
            splits.append(meta["video_split"])
            assert archive.text(sample).startswith("Continue this scene as a short video.")
            assert archive.text(sample).endswith("\n") and list(meta) == ["parameters", "provenance", "video_split"]
            traj = archive.trajectory(sample)  # the generator's keys, kinds and shapes (checked by the reader)
            n = len(traj["body_names"])
            assert traj["xpos"].shape == (120, n, 3) and traj["qpos"].shape == (120, 7 * n)
            assert traj["xquat"].dtype == np.float32 and traj["body_names"].dtype.kind == "U"
            assert traj["is_target"][0] and int(traj["frame_start"]) == 1 and int(traj["frame_end"]) == 120
            assert np.allclose(traj["qpos"].reshape(120, n, 7)[..., :3], traj["xpos"])
    assert {(s["method"], s.get("boundary_method")) for s in splits} == {
        ("midpoint", None),
        ("manifest_event_boundary", "before_event"),
        ("manifest_event_boundary", "overlap_event"),
    }
    assert any(s["input_pad_start_frames"] for s in splits)
    assert {s.get("seam_overlap_frames", 0) for s in splits} == {0, 1}
    assert all(s["input_end_index"] - s["input_start_index"] + s["input_pad_start_frames"] == 60 for s in splits)
    import subprocess

    from persistbench.io.video import ffmpeg_exe

    info = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True, text=True).stderr
    assert "Input #0, tar" in info or "Invalid data" in info  # the tar itself is no video
    with archive.video(sample, layout.INPUT_VIDEO) as video:
        info = subprocess.run(
            [ffmpeg_exe(), "-hide_banner", "-protocol_whitelist", "subfile,file", "-i", video],
            capture_output=True,
            text=True,
        ).stderr
    assert "h264" in info and "yuv420p" in info and "160x96" in info


def test_synth_is_byte_reproducible(wrop, tmp_path):
    make(tmp_path, WropSynthConfig(samples=3, tasks=("u_track_occluded_ball",)))
    again = (tmp_path / layout.archive_path("u_track_occluded_ball")).read_bytes()
    assert again == (wrop / layout.archive_path("u_track_occluded_ball")).read_bytes()


def test_per_task_picks_depend_on_the_task_alone():
    samples = [f"t_{i:04d}" for i in range(50)]
    five, two = corpus.pick("t", samples, 5), corpus.pick("t", samples, 2)
    assert len(five) == 5 and set(two) <= set(five) and five == sorted(five)
    assert corpus.pick("t", list(reversed(samples)), 5) == five  # order of the listing does not matter
    assert corpus.pick("u", [s.replace("t_", "u_") for s in samples], 5) != [s.replace("t_", "u_") for s in five]
    assert corpus.pick("t", samples, None) == samples


def test_cases_tasks_and_per_task(wrop):
    suite = open_suite(wrop)
    assert suite.name == "wrop" and len(suite.cases()) == 9
    assert {c.subset for c in suite.cases()} == {"baillargeonian_occlusion", "object_drop", "object_collision"}
    one = open_suite(wrop, options={"tasks": ["u_track*"], "per_task": 2})
    both = open_suite(wrop, options={"per_task": 2})
    rolls = [c for c in both.cases() if c.case_id.startswith("u_track")]
    assert one.cases() == rolls and len(rolls) == 2  # the same picks whatever other tasks are chosen
    assert one.fingerprint() != both.fingerprint() != suite.fingerprint()
    with pytest.raises(UsageError, match=r"--tasks nope\*: no such task"):
        open_suite(wrop, options={"tasks": ["nope*"]}).cases()
    with pytest.raises(UsageError, match="--per-task: does not apply to --suite r2m"):
        open_suite(wrop, "r2m", options={"per_task": 2})


# ---------------------------------------------------------------- the acceptance chain


@pytest.fixture(scope="module")
def runs(wrop, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("runs")
    models = {"hold": "hold", "flow": "flow", "file": f"{ADAPTER}:FirstFrame"}
    for name, spec in models.items():
        outcomes = infer(InferOptions(dataset=wrop, output=out / name, model=spec), progress=False)
        assert all(o.status == "done" for o in outcomes), outcomes
    return {name: out / name for name in models}


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory) -> str:
    """Random AlexNet weights in torchvision's format: LPIPS runs (its values mean nothing)."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("alexnet") / "alexnet.pth"
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), path)
    return str(path)


@pytest.mark.slow
def test_lpips_is_a_backend_and_lpips_weights_its_alias(runs, alexnet, tmp_path):
    """``--lpips-weights FILE`` and ``--weights lpips=FILE`` score the same bytes; without weights LPIPS is
    recorded unavailable per metric (the reason names the fix) and the other metrics are scored."""
    scored = {}
    for name, args in (("alias", ["--lpips-weights", alexnet]), ("weights", ["--weights", f"lpips={alexnet}"])):
        run = Path(shutil.copytree(runs["hold"], tmp_path / name / "hold"))
        result = CliRunner().invoke(
            main, ["score", "--pred", str(run), "--metrics", "psnr,lpips", "--no-progress", *args]
        )
        assert result.exit_code == 0, result.output
        scored[name] = (RunLayout(run).summary_json("wrop-cont-v1")).read_bytes()
    assert scored["alias"] == scored["weights"]
    summary = json.loads(scored["alias"])
    assert summary["unavailable"] == {} and summary["overall"]["full"]["lpips"]["gain"] == 0.0
    run = Path(shutil.copytree(runs["hold"], tmp_path / "none" / "hold"))
    missing = tmp_path / "no-such-alexnet.pth"
    result = CliRunner().invoke(
        main, ["score", "--pred", str(run), "--metrics", "psnr,lpips", "--weights", f"lpips={missing}"]
    )
    # lpips, named and computed for no case, fails the command (issue 38); the other scores are written
    assert result.exit_code == 1 and "lpips could not be computed" in result.output, result.output
    summary = json.loads(RunLayout(run).summary_json("wrop-cont-v1").read_text())
    assert list(summary["unavailable"]) == ["lpips"] and str(missing) in summary["unavailable"]["lpips"]
    assert "lpips" not in summary["overall"]["full"] and summary["overall"]["full"]["psnr"]["gain"] == 0.0
    assert "**lpips unavailable:" in RunLayout(run).summary_md("wrop-cont-v1").read_text()


@pytest.mark.slow
def test_hold_gains_exactly_zero_and_flow_gains_in_the_changed_region(wrop, runs, alexnet):
    metrics = ("psnr", "ssim", "lpips")
    hold = _score(runs["hold"], wrop, metrics, backends=BackendOptions(weights=(("lpips", alexnet),)))
    for case in json.loads((RunLayout(runs["hold"]).scores_dir("wrop-cont-v1") / "results.json").read_text())["cases"]:
        for region in ("full", "changed"):
            for m in metrics:
                vals = case["values"][region][m]
                assert vals["model"] == vals["hold"] and case["means"][region][m]["gain"] in (0.0, None)
    for block in [hold["overall"], *hold["categories"].values(), *hold["tasks"].values()]:
        assert all(block[r][m]["gain"] == 0.0 for r in ("full", "changed") for m in metrics)
    assert hold["unavailable"] == {}
    flow = _score(runs["flow"], wrop, metrics, backends=BackendOptions(weights=(("lpips", alexnet),)))
    roll = flow["tasks"]["u_track_occluded_ball"]
    assert roll["category"] == "baillargeonian_occlusion" and roll["cases"] == 3
    assert roll["changed"]["psnr"]["gain"] > 0.1, roll["changed"]["psnr"]
    assert flow["categories"]["baillargeonian_occlusion"]["tasks"] == 1
    assert flow["overall"]["tasks"] == 3 and flow["overall"]["cases"] == 9
    # the paper's families, in the generator's order, and the dimensions above them; equal weight per task
    assert list(flow["categories"]) == ["baillargeonian_occlusion", "object_drop", "object_collision"]
    assert flow["categories"]["object_drop"]["name"] == "Object drop"
    assert flow["categories"]["object_drop"]["dimension"] == "object_solidity"
    assert {k: (v["name"], v["tasks"]) for k, v in flow["dimensions"].items()} == {
        "object_permanence": ("Object permanence", 1),
        "object_solidity": ("Object solidity", 2),
    }
    solid = [flow["tasks"][t]["full"]["psnr"]["model"] for t in ("trapdoor_drop", "knock_ball_off_ledge")]
    assert flow["dimensions"]["object_solidity"]["full"]["psnr"]["model"] == pytest.approx(np.mean(solid), abs=1e-12)
    # Overall is the mean of the tasks' means
    want = np.mean([t["full"]["psnr"]["model"] for t in flow["tasks"].values()])
    assert flow["overall"]["full"]["psnr"]["model"] == pytest.approx(want, abs=1e-12)
    curve = flow["curves"]["full"]["psnr"]
    assert len(curve["model"]) == 60 and max(curve["cases"]) == 9 and min(curve["cases"]) < 9  # the seam
    model = _score(runs["file"], wrop)
    assert model["model"].endswith("wrop_first_frame.py:FirstFrame") and model["overall"]["cases"] == 9
    lines = (RunLayout(runs["flow"]).scores_dir("wrop-cont-v1") / "summary.md").read_text()
    assert "| Baillargeonian occlusion | 1 | 3 |" in lines and "| *Object solidity* | 2 | 6 |" in lines
    assert "**changed region**" in lines


@pytest.mark.slow
def test_scored_frames_leave_out_seam_and_padding(wrop, runs):
    _score(runs["hold"], wrop, ("psnr",))
    results = json.loads((RunLayout(runs["hold"]).scores_dir("wrop-cont-v1") / "results.json").read_text())
    suite = open_suite(wrop)
    for case in results["cases"]:
        archive, sample = suite.sample(type("Ref", (), {"subset": case["subset"], "case_id": case["uid"]})())
        split = archive.metadata(sample)["video_split"]
        first, end = split.get("seam_overlap_frames", 0), 60 - split["target_pad_end_frames"]
        assert case["scored_frames"] == list(range(first, end)) and case["method"] == split["method"]
        assert case["boundary_method"] == split.get("boundary_method")


@pytest.mark.slow
def test_scores_are_identical_from_disk_over_http_and_after_fetch(wrop, runs, tmp_path):
    run = Path(shutil.copytree(runs["flow"], tmp_path / "run", ignore=shutil.ignore_patterns("scores")))
    scores = RunLayout(run).scores_dir("wrop-cont-v1")

    def snapshot() -> dict[str, bytes]:
        out = {p.relative_to(scores).as_posix(): p.read_bytes() for p in sorted(scores.rglob("*.*")) if p.is_file()}
        out = {k: v for k, v in out.items() if not k.startswith(".state/")}
        shutil.rmtree(scores)
        return out

    _score(run, wrop)
    local = snapshot()
    with FileServer(wrop) as server:
        remote = server.url
        _score(run, remote, suite="wrop")
        over_http = snapshot()
        assert any(r and r.startswith("bytes=") for _, r in server.requests)
        fetched = tmp_path / "fetched"
        result = CliRunner().invoke(
            main, ["fetch", "--suite", "wrop", "--from", remote, "--output", str(fetched), "--no-progress"]
        )
        assert result.exit_code == 0, result.output
    for task in ("u_track_occluded_ball", "trapdoor_drop", "knock_ball_off_ledge"):
        assert (fetched / layout.archive_path(task)).read_bytes() == (wrop / layout.archive_path(task)).read_bytes()
    _score(run, fetched)
    after_fetch = snapshot()
    assert local == over_http == after_fetch and len(local) == 13


@pytest.mark.slow
def test_the_hub_through_huggingface_hubs_file_system(wrop, tmp_path):
    """hf://datasets/... read by huggingface_hub (HF_ENDPOINT: a loopback stand-in for the Hub's API): the
    revision pinned to a commit, only Range reads of the archives, and the scores of a local read."""
    import os
    import subprocess
    import sys

    from fakes.fakehub import COMMIT, FakeHub

    run = tmp_path / "run"
    with FakeHub(layout.HUB_REPO, wrop) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "0"}
        cli = [sys.executable, "-m", "persistbench", "--"]
        base = ["--no-progress"]
        dataset = f"hf://datasets/{layout.HUB_REPO}"
        for args in (
            ["infer", "--model", "flow", "--dataset", dataset, "--per-task", "1", "--output", str(run)],
            ["score", "--pred", str(run), "--metrics", "psnr,ssim"],
        ):
            result = subprocess.run(cli[:3] + args + base, env=env, capture_output=True, text=True, cwd=tmp_path)
            assert result.returncode == 0, result.stderr[-2000:]
        tars = [r for m, p, r in hub.requests if p.endswith(".tar")]
    info = json.loads((run / "run.json").read_text())
    assert info["dataset"]["root"] == f"hf://datasets/{layout.HUB_REPO}@{COMMIT}"
    assert info["dataset"]["options"] == {"per_task": 1}
    assert tars and all(r and r.startswith("bytes=") and not r.endswith("-") for r in tars)
    scores = RunLayout(run).scores_dir("wrop-cont-v1")
    remote = {p.name: p.read_bytes() for p in scores.rglob("*.json") if ".state" not in p.parts}
    shutil.rmtree(scores)
    _score(run, wrop)  # the same run against the local copy: the selection comes from run.json
    local = {p.name: p.read_bytes() for p in scores.rglob("*.json") if ".state" not in p.parts}
    assert local == remote and len(remote) == 5


@pytest.mark.slow
def test_remote_selection_reads_only_the_bytes_it_needs(tmp_path, monkeypatch):
    """60 samples of two 200 KB videos: two samples over HTTP read the headers and those samples, not the archive."""
    members = {}
    rng = np.random.default_rng(0)
    for i in range(60):
        for name in layout.MEMBERS:
            data = rng.bytes(200_000) if name.endswith(".mp4") else b'{"video_split": {"method": "midpoint"}}'
            members[layout.member_path(1 + i // 12, "big", f"big_{i:04d}", name)] = data
    root = write_corpus(tmp_path / "c", {"big": members})
    size = (root / layout.archive_path("big")).stat().st_size
    with FileServer(root) as server:
        suite = open_suite(
            server.url, "wrop", {"per_task": 2, "categories": str(_mapping(tmp_path, big="object_drop"))}
        )
        cases = suite.cases()
        for c in cases:
            archive, sample = suite.sample(c)
            archive.text(sample)
        served = sum(_range_bytes(r) for _, r in server.requests if r)
        assert len(cases) == 2 and all(c.subset == "object_drop" for c in cases)
        assert served < size / 10, (served, size)
        server.requests.clear()
        again = open_suite(
            server.url, "wrop", {"per_task": 2, "categories": str(_mapping(tmp_path, big="object_drop"))}
        )
        assert again.cases() == cases and len(server.requests) <= 3  # the index comes from the cache


def _range_bytes(header: str) -> int:
    a, b = header.removeprefix("bytes=").split("-")
    return int(b) - int(a) + 1


def _mapping(tmp_path: Path, **tasks: str) -> Path:
    path = tmp_path / "categories.json"
    path.write_text(json.dumps(tasks))
    return path


# ---------------------------------------------------------------- negative fixtures


@pytest.fixture
def roll_members(wrop) -> dict[str, bytes]:
    return members_of(wrop / layout.archive_path("u_track_occluded_ball"))


def _cli_infer(root: Path, out: Path, *extra: str):
    return CliRunner().invoke(
        main, ["infer", "--model", "hold", "--dataset", str(root), "--output", str(out), "--no-progress", *extra]
    )


def _one_line_error(result, *parts: str) -> None:
    assert result.exit_code != 0
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1, result.output
    for p in parts:
        assert p in lines[0], lines[0]


def test_wrong_member_count_missing_file_unsafe_name_and_link(roll_members, tmp_path):
    tar = "u_track_occluded_ball_task.tar"
    cases = {}
    cases["count"] = ({"u_track_occluded_ball": roll_members}, {"u_track_occluded_ball": 14}, ["15 members", "says 14"])
    missing = dict(roll_members)
    gone = next(n for n in missing if n.endswith("u_track_occluded_ball_0001/prompt.txt"))
    del missing[gone]
    cases["missing"] = ({"u_track_occluded_ball": missing}, None, [f"member {gone} is missing"])
    unsafe = {**roll_members, "train/shard1/u_track_occluded_ball_task/../../../etc/passwd": b"x"}
    cases["unsafe"] = ({"u_track_occluded_ball": unsafe}, None, ["etc/passwd", "refused"])
    for what, (tars, counts, parts) in cases.items():
        root = write_corpus(tmp_path / what, tars, counts)
        out = tmp_path / f"{what}-run"
        _one_line_error(_cli_infer(root, out), tar, *parts)
        assert not out.exists(), what  # nothing written
    link_root = tmp_path / "link"
    path = link_root / layout.archive_path("u_track_occluded_ball")
    path.parent.mkdir(parents=True)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for name, data in sorted(roll_members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("train/shard1/u_track_occluded_ball_task/u_track_occluded_ball_0000/prompt2.txt")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        t.addfile(info)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (link_root / layout.CHECKSUMS).write_text(f"{digest}  {tar}  15\n")
    _one_line_error(_cli_infer(link_root, tmp_path / "link-run"), tar, "prompt2.txt", "symbolic link; refused")
    assert not (tmp_path / "link-run").exists()


def test_wrong_checksum_is_found_by_verify_and_fetch_keeps_nothing(roll_members, tmp_path):
    root = write_corpus(
        tmp_path / "c", {"u_track_occluded_ball": roll_members}, digests={"u_track_occluded_ball": "0" * 64}
    )
    result = CliRunner().invoke(main, ["verify", str(root), "--no-progress"])
    assert result.exit_code == 1 and "u_track_occluded_ball_task.tar: sha256" in result.output
    assert "says 000000000000" in result.output
    out = tmp_path / "fetched"
    result = CliRunner().invoke(
        main, ["fetch", "--suite", "wrop", "--from", str(root), "--output", str(out), "--no-progress"]
    )
    _one_line_error(result, "u_track_occluded_ball_task.tar", "sha256", "nothing kept")
    assert not any(p.is_file() for p in out.rglob("*") if ".state" not in p.parts)  # the failure is recorded there


def test_object_npz_and_unknown_task(roll_members, tmp_path):
    bad = dict(roll_members)
    name = next(n for n in bad if n.endswith("u_track_occluded_ball_0002/trajectory.npz"))
    buf = io.BytesIO()
    np.savez(buf, xpos=np.array([{"a": 1}], dtype=object))
    bad[name] = buf.getvalue()
    root = write_corpus(tmp_path / "npz", {"u_track_occluded_ball": bad})
    result = CliRunner().invoke(main, ["verify", str(root), "--no-progress"])
    line = f"u_track_occluded_ball_task.tar: {name}: xpos: unsafe or malformed .npy file: holds Python objects"
    assert result.exit_code == 1 and line in result.output
    with pytest.raises(PersistbenchError, match="holds Python objects"):
        suite = open_suite(root)
        suite.archive("u_track_occluded_ball").trajectory("u_track_occluded_ball_0002")
    # a task outside WROP's taxonomy, and no --categories file that maps it
    renamed = {n.replace("u_track_occluded_ball", "my_rolling_ball"): d for n, d in roll_members.items()}
    mine = write_corpus(tmp_path / "mine", {"my_rolling_ball": renamed})
    out = tmp_path / "run"
    _one_line_error(_cli_infer(mine, out), "my_rolling_ball_task.tar", "unknown task 'my_rolling_ball'", "150 tasks")
    assert not out.exists()
    result = _cli_infer(mine, out, "--tasks", "rolling")
    assert result.exit_code == 2 and "Error: --tasks rolling: no such task" in result.output
    mapping = _mapping(tmp_path, my_rolling_ball="baillargeonian occlusion")
    result = _cli_infer(mine, out, "--categories", str(mapping))
    assert result.exit_code == 0, result.output
    info = json.loads((out / "run.json").read_text())
    assert info["dataset"]["options"] == {"categories": str(mapping.resolve())}
    assert (out / "baillargeonian_occlusion" / "my_rolling_ball_0000" / "gen.mp4").is_file()
    # the file overrides the taxonomy for a task it knows
    moved = open_suite(
        tmp_path / "mine", options={"categories": str(_mapping(tmp_path, my_rolling_ball="object drop"))}
    )
    assert {c.subset for c in moved.cases()} == {"object_drop"}


# ---------------------------------------------------------------- the parts


def test_changed_region_thresholds_and_dilates():
    last = np.zeros((20, 20, 3), np.uint8)
    target = last.copy()
    target[10, 10] = (0, 30, 0)
    target[2, 2] = (0, 20, 0)
    plain = changed_region(target[None], last, 0.1, 0)[0]
    assert plain.sum() == 1 and plain[10, 10]  # 30 > 25.5 > 20
    wide = changed_region(target[None], last, 0.1, 2)[0]
    assert wide.sum() == 17 and wide[8, 10] and wide[9, 8] and not wide[8, 9]  # OpenCV's 5 x 5 ellipse


def test_region_velocity_and_flow_baseline_extrapolate_a_moving_square():
    frames = np.full((8, 40, 60, 3), 90, np.uint8)
    for t in range(8):
        x = 5 + 2 * t
        frames[t, 15:23, x : x + 8] = np.arange(8)[None, :, None] * 25 + 40  # a textured square, 2 px/frame
    ys, xs = np.nonzero(frames[-1, ..., 0] != 90)
    vx, vy = region_velocity(frames[-1], frames[-7], ys, xs, 6, 20)
    assert vx == pytest.approx(2.0, abs=1e-6) and vy == pytest.approx(0.0, abs=1e-6)
    out = FlowModel().predict(ModelInput("sq", frames.astype(np.float32) / 255, n_targets=3)).frames
    assert out.shape == (3, 40, 60, 3)
    want = frames[-1, 15:23, 19:27]
    assert np.array_equal(out[2, 15:23, 25:33], want)  # three frames on: 6 px to the right


def test_fetch_resumes_a_partial_archive_and_skips_a_complete_one(wrop, tmp_path):
    out = tmp_path / "out"
    tar = layout.archive_path("u_track_occluded_ball")
    whole = (wrop / tar).read_bytes()
    part = out / (tar + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(whole[: len(whole) // 2])  # an interrupted download
    args = ["fetch", "--suite", "wrop", "--from", str(wrop), "--output", str(out), "--no-progress"]
    result = CliRunner().invoke(main, [*args, "--tasks", "u_track*"])
    assert result.exit_code == 0, result.output
    assert (out / tar).read_bytes() == whole and not part.exists()
    assert (out / layout.CHECKSUMS).read_text().split()[1:] == ["u_track_occluded_ball_task.tar", "15"]
    before = (out / tar).stat().st_mtime_ns
    result = CliRunner().invoke(main, args)  # all tasks now: the complete archive is kept as it is
    assert result.exit_code == 0 and (out / tar).stat().st_mtime_ns == before
    assert len((out / layout.CHECKSUMS).read_text().splitlines()) == 3
    assert json.loads((out / "persistbench_fetch.json").read_text())["tasks"] == [
        "knock_ball_off_ledge",
        "trapdoor_drop",
        "u_track_occluded_ball",
    ]
