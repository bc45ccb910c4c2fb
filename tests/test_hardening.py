"""Issue 11: untrusted recipes and files, bounds, processes left behind, one-line errors.

Each test reproduces a defect found by trying the toolkit as a new user and as an attacker
would (issue 11, items 1-6 and 8); the public toolkit's output (item 7) is in test_public.py.
"""

from __future__ import annotations

import copy
import io
import json
import os
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
from persistbench.core.protocol import SHIPPED
from persistbench.io import names
from persistbench.io.files import write_json
from persistbench.io.images import write_image
from persistbench.io.safeload import load_npy, save_npy_dict
from persistbench.io.serve import FileServer
from persistbench.suites.persistbench import layout as pb_layout
from persistbench.suites.persistbench.build.download import bundled_recipes

SAMPLE = bundled_recipes()


def sample_line(index: int = 0) -> dict:
    obj = json.loads(SAMPLE.read_text().splitlines()[index])
    obj["source"]["url"] = (SAMPLE.parent / "sources" / f"{obj['source']['id']}.mp4").as_uri()
    return obj


def snapshot(root: Path) -> dict[str, float]:
    """Every path below ``root`` with its modification time (what was written, changed or removed)."""
    return {p.relative_to(root).as_posix(): p.stat().st_mtime for p in sorted(root.rglob("*"))}


def run_cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real command in a child process (as a user runs it), with its exit code and both streams."""
    return subprocess.run(
        [sys.executable, "-m", "persistbench", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    """A non-zero exit with ``Error: ...`` (one line per problem: a recipe file lists all of its
    problems, each ``file:line: field: problem``) and no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr and "Fatal Python error" not in result.stderr, result.stderr
    assert "Error: " in result.stderr, result.stderr
    errors = result.stderr[result.stderr.index("Error: ") :].splitlines()
    for needle in needles:
        assert any(needle in e for e in errors), (needle, result.stderr)


# ------------------------------------------------------------------ 1. paths from recipes, protocols, runs


def evil_recipes(path: Path) -> None:
    """The issue's reproduction: case and object ids that climb out of --output."""
    base = sample_line()
    lines = []
    for o in ["../!x", "../../../../victim"]:
        d = copy.deepcopy(base)
        d["case_id"] = "Synth_2LBoXdFXpW1_0_obj_" + o
        d["object"]["id"] = o
        lines.append(json.dumps(d))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("via", ["file", "http"])
def test_recipe_ids_cannot_write_or_delete_outside_output(tmp_path, via):
    work = tmp_path / "work"
    (work / "victim").mkdir(parents=True)
    (work / "victim" / "important.txt").write_text("precious")
    evil_recipes(work / "evil.jsonl")
    before = snapshot(tmp_path)
    if via == "file":
        result = run_cli("download", "--recipes", "evil.jsonl", "--output", "out", "--cache", "c", cwd=work)
    else:
        with FileServer(work) as server:
            result = run_cli(
                "download", "--recipes", f"{server.url}/evil.jsonl", "--output", "out", "--cache", "c", cwd=work
            )
    one_line_error(result, "evil.jsonl:1: case_id:", "evil.jsonl:2: object.id:")
    assert (work / "victim" / "important.txt").read_text() == "precious"
    after = snapshot(tmp_path)
    written = {p for p in after if p not in before or after[p] != before[p]} - {"work"}
    # Over HTTP the recipes are cached (under --cache); nothing else is written anywhere.
    assert all(p == "work/c" or p.startswith("work/c/") for p in written), written
    assert not (work / "out").exists()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("case_id", "Synth_a\nb_0_obj_1", "case_id: 'Synth_a\\nb_0_obj_1' is not a safe name"),
        ("case_id", "Synth_a\x00b_0_obj_1", "case_id: 'Synth_a\\x00b_0_obj_1' is not a safe name"),
        ("source.id", "../../x", "source.id: '../../x' is not a safe name"),
        ("source.id", "..", "source.id: '..' is not a safe name"),
        ("object.id", "/etc", "object.id: '/etc' is not a safe name"),
    ],
)
def test_every_id_passes_the_name_rule(tmp_path, field, value, problem):
    obj = sample_line()
    if field == "case_id":
        obj["case_id"] = value
    elif field == "source.id":
        obj["source"]["id"] = value
    else:
        obj["object"]["id"] = value
    (tmp_path / "r.jsonl").write_text(json.dumps(obj) + "\n")
    result = run_cli("download", "--recipes", "r.jsonl", "--output", "out", "--cache", "c", cwd=tmp_path)
    one_line_error(result, f"r.jsonl:1: {problem}")
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()


def test_protocol_name_cannot_leave_the_run(tmp_path):
    protocol = json.loads((SHIPPED / "classic-v1.json").read_text())
    protocol["name"] = "../../x"
    (tmp_path / "p.json").write_text(json.dumps(protocol))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    before = snapshot(tmp_path)
    result = run_cli(
        "score", "--pred", "run", "--dataset", ".", "--suite", "persistbench", "--protocol", "p.json", cwd=tmp_path
    )
    one_line_error(result, "p.json: name: '../../x' is not a safe name")
    assert snapshot(tmp_path) == before


def test_path_builders_refuse_results_outside_their_root(tmp_path):
    run = layout.RunLayout(tmp_path)
    for bad in ("..", "../x", "/etc", "a/b", "", ".hidden", "a\nb"):
        with pytest.raises(PersistbenchError, match="refusing to build a path"):
            pb_layout.case_dir(tmp_path, "static", bad)
        with pytest.raises(PersistbenchError):
            run.case_scores(bad, "static", "C")
    assert names.child(tmp_path, "static", "_Qla-x.1") == tmp_path / "static" / "_Qla-x.1"
    (tmp_path / "inside").mkdir()
    (tmp_path.parent / "outside-victim").mkdir(exist_ok=True)
    (tmp_path / "link").symlink_to(tmp_path.parent / "outside-victim")
    for bad in (tmp_path, tmp_path / ".." / "outside-victim", tmp_path / "link" / "x"):
        with pytest.raises(PersistbenchError, match="refusing to remove"):
            names.remove_tree(tmp_path, bad)
    names.remove_tree(tmp_path, tmp_path / "inside")
    assert not (tmp_path / "inside").exists() and (tmp_path.parent / "outside-victim").is_dir()


# ------------------------------------------------------------------ 2. bounds on what untrusted input may allocate


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda o: o["output"].update(width=20000), "output.width: must be a positive even number, at most 8192"),
        (lambda o: o["output"].update(height=1e9), "output.height: expected int, got float"),
        (lambda o: o["source"].update(n_frames=10**12), "source.n_frames: must be positive and at most 100000"),
        (lambda o: o["source"].update(width=10**6), "source.width: must be positive and at most 16384"),
        (lambda o: o["source"].update(fps=1e9), "source.fps: must be positive and at most 1000"),
        (lambda o: o["object"]["masks"][0].update(size=[10**6, 10**6]), "exceeds the limit"),
        (lambda o: o["fingerprint"].update(size=[10**5, 10**5]), "fingerprint.size: must be [width, height]"),
    ],
)
def test_recipe_sizes_are_bounded(tmp_path, edit, problem):
    obj = sample_line()
    edit(obj)
    (tmp_path / "r.jsonl").write_text(json.dumps(obj) + "\n")
    result = run_cli("download", "--recipes", "r.jsonl", "--output", "out", "--cache", "c", cwd=tmp_path)
    one_line_error(result, problem)


def test_a_case_that_does_not_fit_in_memory_is_refused_before_allocating(monkeypatch):
    from persistbench.suites.persistbench.build import reconstruct
    from persistbench.suites.persistbench.build.recipes import load_recipes

    recipe = load_recipes(SAMPLE)[0]
    reconstruct.check_memory(recipe, 1024, 512, "clip.mp4")  # fits
    with pytest.raises(PersistbenchError, match=r"clip.mp4: 20000x10000 exceeds the source limit"):
        reconstruct.check_memory(recipe, 20000, 10000, "clip.mp4")
    monkeypatch.setattr(reconstruct, "available_memory", lambda: 64 << 20)
    with pytest.raises(PersistbenchError, match=r"needs about .* GiB, 0.1 GiB available"):
        reconstruct.check_memory(recipe, 16384, 8192, "clip.mp4")


def _npy(payload: bytes) -> bytes:
    """A .npy file whose body is ``payload``: a pickled 0-d object array, as the public format writes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|O", "fortran_order": False, "shape": ()})
    return buf.getvalue() + payload


def _reduce(module: str, name: str, args: bytes) -> bytes:
    """Protocol-2 pickle: ``module.name(*args)`` where ``args`` are opcodes that push a tuple."""
    return b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n" + args + b"R."


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (_reduce("builtins", "bytearray", b"J\x00\x00\x00\x7f\x85"), "refusing to unpickle builtins.bytearray"),
        (_reduce("numpy", "ndarray", b"J\x00\x00\x00\x7f\x85\x85"), "not callable"),
        (b"\x80\x02]r\xff\xff\xff\xff.", "memo index 4294967295 out of bounds"),
        (
            _reduce("numpy.core.multiarray", "_reconstruct", b"cnumpy\nndarray\nJ\x00\x00\x00\x7f\x85C\x01b\x87"),
            "unexpected numpy array reconstruction",
        ),
        (_reduce("os", "system", b"X\x02\x00\x00\x00id\x85"), "refusing to unpickle os.system"),
    ],
)
def test_safe_loader_refuses_pickles_that_allocate_or_run_code(tmp_path, payload, reason):
    path = tmp_path / "visibility_dict.npy"
    path.write_bytes(_npy(payload))
    with pytest.raises(PersistbenchError, match=f"{path}: unsafe or malformed .npy file: .*{reason}"):
        load_npy(path)


def test_safe_loader_refuses_a_header_larger_than_its_file(tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    path = tmp_path / "big.npy"
    path.write_bytes(buf.getvalue() + b"\0" * 64)
    with pytest.raises(PersistbenchError, match="more than the file holds"):
        load_npy(path)
    d = {"cam_poses": np.eye(4)[None], "cam_intrinsic": np.eye(3), "n": np.float32(2.5), "s": {1, 2}}
    save_npy_dict(tmp_path / "ok.npy", d)
    back = load_npy(tmp_path / "ok.npy")
    assert back["s"] == {1, 2} and back["n"] == np.float32(2.5) and np.array_equal(back["cam_poses"], d["cam_poses"])


def test_remote_recipes_are_read_with_a_size_limit(tmp_path, monkeypatch):
    from persistbench.suites.persistbench.build import download, recipes

    (tmp_path / "big.jsonl").write_bytes(b"x" * (3 << 20))
    monkeypatch.setattr(download, "MAX_FILE_BYTES", 1 << 20)
    with FileServer(tmp_path) as server, pytest.raises(PersistbenchError, match="larger than the 1 MiB allowed"):
        download.resolve_recipes(f"{server.url}/big.jsonl", tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.jsonl"))
    monkeypatch.setattr(recipes, "MAX_FILE_BYTES", 1 << 20)  # local and hf:// files: checked before reading
    with pytest.raises(PersistbenchError, match=r"big.jsonl: 3145728 bytes, more than the 1 MiB"):
        recipes.load_recipes(tmp_path / "big.jsonl")


# ------------------------------------------------------------------ 3. processes


@pytest.mark.slow
def test_cmd_adapter_timeout_kills_its_grandchildren(tmp_path):
    from persistbench.models import ModelInput, load_model

    pid_file = tmp_path / "pid"
    model = load_model(
        f"cmd:sh -c 'echo $$ > {pid_file}; sleep 1000000 & sleep 1000000; : {{input}} {{output}}'",
        config={"timeout": 1.0},
    )
    sample = ModelInput(
        "C",
        np.zeros((2, 8, 8, 3), np.float32),
        {"cam_poses": np.tile(np.eye(4), (2, 1, 1)), "cam_intrinsic": np.eye(3)},
        {"cam_poses": np.tile(np.eye(4), (2, 1, 1)), "cam_intrinsic": np.eye(3)},
    )
    with pytest.raises(PersistbenchError, match="timed out after 1 s"):
        model.predict(sample)
    pgid = int(pid_file.read_text())
    deadline = time.time() + 2.0
    while group_alive(pgid) and time.time() < deadline:
        time.sleep(0.05)
    assert not group_alive(pgid)  # the shell and the background sleep alike


def test_cmd_adapter_output_is_bounded_before_decoding(tmp_path):
    from persistbench.models import ModelInput, load_model

    script = tmp_path / "adapter.py"
    script.write_text(
        "import sys, numpy as np, cv2, os\n"
        "out = sys.argv[2]; os.makedirs(out + '/frames')\n"
        "sys.stderr.write('x' * (1 << 22) + '\\nlast words\\n')\n"
        "n = int(sys.argv[3])\n"
        "for t in range(n): cv2.imwrite(f'{out}/frames/frame_{t:04d}.png', np.zeros((int(sys.argv[4]), 8, 3), np.uint8))\n"
        "sys.exit(int(sys.argv[5]))\n"
    )
    cams = {"cam_poses": np.tile(np.eye(4), (2, 1, 1)), "cam_intrinsic": np.eye(3)}
    sample = ModelInput("C", np.zeros((2, 8, 8, 3), np.float32), cams, cams)

    def predict(n, h, code):
        model = load_model(f"cmd:{sys.executable} {script} {{input}} {{output}} {n} {h} {code}")
        model.log_dir = tmp_path / "logs"
        return model.predict(sample)

    with pytest.raises(PersistbenchError, match="exited with 3: last words"):
        predict(2, 8, 3)
    assert (tmp_path / "logs" / "C.log").stat().st_size > 1 << 22  # the whole log is kept, on disk
    with pytest.raises(PersistbenchError, match="wrote 500 frames and 0 masks, expected 2"):
        predict(500, 8, 0)
    with pytest.raises(PersistbenchError, match=r"frame_0000.png: 8x5000, expected 8x8"):
        predict(2, 5000, 0)
    assert predict(2, 8, 0).frames.shape == (2, 8, 8, 3)


# ------------------------------------------------------------------ 5. one-line errors


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["synth", "--output", "{bad}", "--scenes", "1"],
        ["pack", "{ds}", "--output", "{bad}/dist"],
        ["fetch", "--output", "{bad}", "--from", "{ds}"],
        ["report", "{ds}", "--output", "{bad}/r.html"],
        ["demo", "--output", "{bad}"],
        ["infer", "--model", "hold", "--dataset", "{ds}", "--output", "{bad}"],
        ["download", "--output", "{bad}", "--limit", "1", "--cache", "{tmp}/c"],
        ["download", "--output", "{tmp}/o", "--limit", "1", "--cache", "{bad}"],
    ],
)
@pytest.mark.parametrize("bad", ["/sys/persistbench-test", "{tmp}/file", "{tmp}/file/under"])
def test_unwritable_outputs_give_one_line(dataset_dir, tmp_path, args, bad):
    (tmp_path / "file").write_text("a regular file")
    bad = bad.format(tmp=tmp_path)
    result = run_cli(*[a.format(bad=bad, ds=dataset_dir, tmp=tmp_path) for a in args], cwd=tmp_path)
    one_line_error(result, bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing made on the way to the refusal


@pytest.mark.slow
def test_scores_that_cannot_be_written_give_one_line(dataset_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "scores").write_text("a file where the scores folder goes")
    one_line_error(run_cli("score", "--pred", run, "--dataset", dataset_dir), str(run / "scores"))


@pytest.mark.slow
def test_a_decompression_bomb_prediction_is_refused_unread(hold_run_small, tmp_path):
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    run, ds = hold_run_small
    frame = next(run.glob("*/*/frames/frame_0001.png"))
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0))
    frame.write_bytes(b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))
    one_line_error(
        run_cli("score", "--no-progress", "--pred", run, "--dataset", ds, "--metrics", "psnr"),
        f"{frame}: larger than the decompression-bomb limit",
    )


@pytest.fixture
def hold_run_small(dataset_dir, tmp_path) -> tuple[Path, Path]:
    run = tmp_path / "run"
    result = CliRunner().invoke(
        main, ["infer", "--no-progress", "--model", "hold", "--dataset", str(dataset_dir), "--output", str(run)]
    )
    assert result.exit_code == 0, result.output
    return run, dataset_dir


def test_no_network_for_the_hub_is_one_line(tmp_path):
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_ETAG_TIMEOUT": "2"}
    result = subprocess.run(
        [sys.executable, "-m", "persistbench", "fetch", "--output", str(tmp_path / "d"), "--repo", "someone/data"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    one_line_error(result, "127.0.0.1:9: network unreachable")


# ------------------------------------------------------------------ 8. smaller things


@pytest.mark.slow
def test_fingerprint_refuses_another_sample_clip_and_accepts_reencodes(tmp_path):
    """Calibrated (scripts/calibrate_fingerprint.py): each bundled clip in place of another is refused,
    re-encodes of the right clip (another CRF, half size) are accepted."""
    from persistbench.io.video import H264_SETTINGS, encode_video, read_frames
    from persistbench.suites.persistbench.build.recipes import fingerprint_distance, load_recipes

    recipes = load_recipes(SAMPLE)
    frames = {r.source.id: list(read_frames(SAMPLE.parent / "sources" / f"{r.source.id}.mp4")) for r in recipes}
    for a in recipes:
        fp = a.fingerprint
        for b in recipes:
            d = fingerprint_distance(fp, {t: frames[b.source.id][t] for t in fp["frames"]})
            assert (d <= fp["tolerance"]) == (a is b), (a.case_id, b.case_id, d)
    a = recipes[0]
    import cv2

    for scale, crf in ((1, 30), (2, 23)):
        clip = tmp_path / f"re-{scale}-{crf}.mp4"
        small = (
            f if scale == 1 else cv2.resize(f, (f.shape[1] // 2, f.shape[0] // 2), interpolation=cv2.INTER_AREA)
            for f in frames[a.source.id]
        )
        encode_video(clip, small, a.source.fps, {**H264_SETTINGS, "crf": crf})
        again = [
            cv2.resize(f, (a.source.width, a.source.height), interpolation=cv2.INTER_AREA) for f in read_frames(clip)
        ]
        assert fingerprint_distance(a.fingerprint, {t: again[t] for t in a.fingerprint["frames"]}) < 2.0

    # End to end: the clip of another case under this case's name fails with the reason.
    (tmp_path / "clips").mkdir()
    b = recipes[1]
    (tmp_path / "clips" / f"{a.source.id}.mp4").write_bytes(
        (SAMPLE.parent / "sources" / f"{b.source.id}.mp4").read_bytes()
    )
    (tmp_path / "r.jsonl").write_text(SAMPLE.read_text().splitlines()[0] + "\n")
    result = run_cli("download", "--recipes", "r.jsonl", "--sources-dir", "clips", "--output", "out", cwd=tmp_path)
    assert result.returncode == 1 and "source differs from the one the benchmark was built from" in result.stderr


@pytest.mark.slow
def test_long_commands_show_progress(dataset_dir, tmp_path):
    for args, bar in (
        (["verify", dataset_dir], "verify"),
        (
            [
                "synth",
                "--output",
                tmp_path / "s",
                "--scenes",
                "1",
                "--frames",
                "4",
                "--pano-size",
                "128x64",
                "--size",
                "32x24",
            ],
            "synth",
        ),
        (["pack", dataset_dir, "--output", tmp_path / "dist"], "pack"),
    ):
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
        assert f"{bar}: 100%" in result.stderr, (bar, result.stderr)
        assert f"{bar}: 100%" not in run_cli(*args[:1], "--no-progress", *args[1:]).stderr if bar == "verify" else True


def test_options_are_named_alike_and_say_what_they_take(tmp_path):
    from persistbench import cli

    for command in ("synth", "pack", "report", "demo", "download", "infer", "fetch"):
        opts = {o for p in cli.main.get_command(None, command).params for o in p.opts}
        assert "--output" in opts, command
    doctor_cache = next(p for p in cli.main.get_command(None, "doctor").params if p.name == "cache")
    download_cache = next(p for p in cli.main.get_command(None, "download").params if p.name == "cache")
    assert doctor_cache.default == download_cache.default == "cache/youtube"
    result = CliRunner().invoke(main, ["score", "--pred", str(tmp_path), "--eval-size", "512"])
    assert result.exit_code == 2 and "'512' is not WIDTHxHEIGHT" in result.output
    result = CliRunner().invoke(main, ["synth", "--out", str(tmp_path / "s"), "--size", "32"])
    assert result.exit_code == 2 and "'32' is not WIDTHxHEIGHT" in result.output


@pytest.mark.slow
def test_doctor_does_not_call_missing_pieces_ready(tmp_path):
    env = {**os.environ, "PATH": ""}  # no JavaScript runtime: an optional piece for download (YouTube only)
    result = subprocess.run(
        [sys.executable, "-m", "persistbench", "doctor", "--for", "download"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    missing = [line[9:].split("  ")[0].strip() for line in lines if line.startswith("missing ")]
    assert "JavaScript runtime (YouTube)" in missing
    assert lines[-1] == f"ready for download; optional, missing: {', '.join(missing)}"


# ------------------------------------------------------------------ 4. masks resized centre-aligned, as PIL does


@pytest.mark.parametrize(
    ("size", "box", "out"),
    [
        ((640, 480), (0, 0, 640, 480), (512, 384)),
        ((640, 480), (80, 0, 480, 480), (384, 384)),
        ((256, 192), (32, 0, 192, 192), (100, 100)),
        ((300, 200), (0, 0, 300, 200), (512, 384)),
    ],
)
def test_masks_are_resized_centre_aligned_and_scored_like_scikit_image(tmp_path, size, box, out):
    from PIL import Image
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    from persistbench.geometry.sampling import crop_resize
    from persistbench.metrics import frame as metrics
    from persistbench.suites.persistbench.scoring import read_all

    rng = np.random.default_rng(sum(size) + sum(out))
    w, h = size
    out_hw = (out[1], out[0])
    yy, xx = np.mgrid[:h, :w]
    mask = (((xx - w / 2) / (w / 4)) ** 2 + ((yy - h / 2) / (h / 4)) ** 2 < 1).astype(np.uint8) * 255
    x0, y0, cw, ch = box
    want = np.asarray(Image.fromarray(mask[y0 : y0 + ch, x0 : x0 + cw]).resize(out, Image.NEAREST)) > 0
    got = crop_resize(mask, box, out_hw, nearest=True) > 0
    assert np.array_equal(got, want)
    # The scorer's own read path (files -> resize) gives the same masks, and its scores on them are
    # scikit-image's on the same resized inputs.
    write_image(tmp_path / "mask_0000.png", mask[y0 : y0 + ch, x0 : x0 + cw])
    assert np.array_equal(read_all([tmp_path / "mask_0000.png"], None, out_hw, gray=True, rgb="area")[0] > 0, want)
    a = rng.random((out[1], out[0], 3))
    b = np.clip(a + rng.normal(0, 0.05, a.shape), 0, 1)
    assert metrics.masked_psnr(a, b, want) == pytest.approx(
        peak_signal_noise_ratio(b[want], a[want], data_range=1.0), abs=1e-6
    )
    _, smap = structural_similarity(
        a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1.0, channel_axis=2, full=True
    )
    assert metrics.masked_ssim(a, b, want) == pytest.approx(float(smap[want].mean()), abs=1e-6)


@pytest.mark.slow
def test_report_shows_progress(hold_run_small, tmp_path):
    run, ds = hold_run_small
    result = run_cli("score", "--no-progress", "--pred", run, "--dataset", ds, "--metrics", "psnr,iou")
    assert result.returncode == 0, result.stderr
    result = run_cli("report", run, "--output", tmp_path / "r.html")
    assert result.returncode == 0, result.stderr
    assert "report: 100%" in result.stderr and (tmp_path / "r.html").stat().st_size > 1000


def test_temporaries_of_dead_writers_are_swept_by_the_next_write(tmp_path):
    """A writer killed between creating its temporary and renaming it leaves ``.<name>.<pid>.*.tmp``;
    the next write of that file removes it once the pid is gone, or is a zombie not yet reaped."""
    import signal

    gone = subprocess.Popen(["true"])
    gone.wait()
    zombie = subprocess.Popen(["sleep", "30"])
    os.kill(zombie.pid, signal.SIGKILL)
    deadline = time.time() + 5
    while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z" and time.time() < deadline:
        time.sleep(0.01)
    target = tmp_path / "case.json"
    stale = [tmp_path / f".case.json.{pid}.abc.tmp" for pid in (gone.pid, zombie.pid)]
    live = tmp_path / f".case.json.{os.getpid()}.xyz.tmp"
    other = tmp_path / f".other.json.{gone.pid}.abc.tmp"
    for p in (*stale, live, other):
        p.write_text("partial")
    write_json(target, {"ok": True})
    assert not any(p.exists() for p in stale) and live.exists() and other.exists()
    zombie.wait()
