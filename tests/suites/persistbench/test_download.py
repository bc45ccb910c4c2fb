"""download: yt-dlp over loopback HTTP, file:// and --sources-dir; resume after kill -9; workers and
shards; the bundled sample; every kind of bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fakes import TESTS

from persistbench.cli import main
from persistbench.core import layout
from persistbench.io.serve import FileServer
from persistbench.suites.persistbench import layout as pb_layout
from persistbench.suites.persistbench.dataset import Dataset
from persistbench.suites.persistbench.index import read_case_records, read_index
from persistbench.suites.persistbench.synth import SynthConfig, generate
from persistbench.suites.persistbench.verify import verify_dataset

CFG = SynthConfig(scenes=4, seed=5, pano_size=(512, 256), view_size=(128, 96), n_frames=24, fps=8.0)


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """Four synth scenes served on a loopback HTTP server that honours Range requests."""
    root = tmp_path_factory.mktemp("served")
    with FileServer(root) as server:
        generate(root / "http", CFG, base_url=f"{server.url}/http/sources")
        yield root, server


@pytest.fixture(scope="session")
def local_synth(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local")
    generate(out, CFG)
    return out


def cli(*args, env=None):
    result = CliRunner().invoke(main, ["download", "--no-progress", *map(str, args)], env=env)
    return result


def tree(root: Path) -> dict[str, bytes]:
    """Every file's bytes (``data.db`` included), without resume state, the recipes' provenance and the availability
    manifest (both name the recipes file by its sha256; the manifest, the day it was written)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and layout.STATE_DIR not in p.parts
        and p.name not in (pb_layout.RECIPES_PROVENANCE, pb_layout.AVAILABILITY)
    }


def assert_same_dataset(a: Path, b: Path) -> None:
    ta, tb = tree(a), tree(b)
    assert sorted(ta) == sorted(tb)
    for k in ta:
        assert ta[k] == tb[k], k
    assert read_index(a) == read_index(b)


def truth(synth: Path, case_id: str) -> dict:
    return json.loads((synth / "truth" / f"{case_id}.json").read_text())


@pytest.fixture(scope="session")
def reference(local_synth, tmp_path_factory) -> Path:
    """An uninterrupted single-worker run over file:// URLs: the bytes everything else must match."""
    out = tmp_path_factory.mktemp("reference")
    result = cli("--recipes", local_synth / "recipes.jsonl", "--output", out / "ds", "--cache", out / "cache")
    assert result.exit_code == 0, result.output
    return out / "ds"


@pytest.mark.slow
def test_http_range_download_limit_3(served, tmp_path):
    root, server = served
    result = cli(
        "--recipes",
        root / "http" / "recipes.jsonl",
        "--limit",
        "3",
        "--output",
        tmp_path / "ds",
        "--cache",
        tmp_path / "cache",
    )
    assert result.exit_code == 0, result.output
    assert "done 3, skipped 0, failed 0" in result.output
    assert verify_dataset(tmp_path / "ds") == ([], 3)
    for case in Dataset(tmp_path / "ds").cases():
        want = truth(root / "http", case.case_id)["view_0_visibility"]
        np.testing.assert_allclose(case.visibility()["view_0_visibility"], want, atol=0.01)
        assert all(m.any() for m in case.view("center").masks())
    # yt-dlp went through ffmpeg's range download: Range requests, and ranged cache entries.
    assert any(rng and path.endswith(".mp4") for path, rng in server.requests)
    entries = [p.name for p in (tmp_path / "cache").rglob("*.mp4")]
    assert len(entries) == 3 and not any(e.startswith("full") for e in entries)


@pytest.mark.slow
def test_file_urls_and_sources_dir_give_the_same_dataset(local_synth, served, reference, tmp_path):
    result = cli(
        "--recipes",
        local_synth / "recipes.jsonl",
        "--sources-dir",
        local_synth / "sources",
        "--output",
        tmp_path / "sd",
        "--cache",
        tmp_path / "cache",
    )
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "cache").exists(), "--sources-dir downloads nothing"
    assert_same_dataset(reference, tmp_path / "sd")
    assert verify_dataset(tmp_path / "sd") == ([], 4)
    # Over HTTP the same scenes (same seed) give the same dataset too.
    root, _ = served
    result = cli(
        "--recipes", root / "http" / "recipes.jsonl", "--output", tmp_path / "http", "--cache", tmp_path / "c2"
    )
    assert result.exit_code == 0, result.output
    assert_same_dataset(reference, tmp_path / "http")


@pytest.mark.slow
def test_frames_are_located_by_timestamp(local_synth, reference, served, tmp_path):
    """A case that starts 1 s into its source: the range download begins at the keyframe at 0 s
    (earlier than asked), and the frames must still be the source's frames at 1.0 s + t/fps."""
    root, _ = served
    line = json.loads((root / "http" / "recipes.jsonl").read_text().splitlines()[1])
    first, n = 8, 10  # 1.0 s at 8 fps
    line["source"]["start"] = first / CFG.fps
    line["source"]["n_frames"] = n
    for view in line["views"].values():
        for key in view:
            view[key] = view[key][first : first + n]
    line["object"]["masks"] = line["object"]["masks"][first : first + n]
    line["fingerprint"]["frames"] = [0]
    line["fingerprint"]["thumbnails"] = line["fingerprint"]["thumbnails"][:1]
    line["fingerprint"]["tolerance"] = 255.0
    (tmp_path / "r.jsonl").write_text(json.dumps(line) + "\n")
    result = cli("--recipes", tmp_path / "r.jsonl", "--output", tmp_path / "ds", "--cache", tmp_path / "cache")
    assert result.exit_code == 0, result.output
    sub = Dataset(tmp_path / "ds").cases()[0]
    full = Dataset(reference).case(sub.subset, sub.case_id)
    for view in pb_layout.VIEWS:
        for t in range(n):
            assert sub.view(view).frame_paths[t].read_bytes() == full.view(view).frame_paths[first + t].read_bytes()
            assert sub.view(view).mask_paths[t].read_bytes() == full.view(view).mask_paths[first + t].read_bytes()


def run_cmd(local_synth, out, *extra):
    return [
        sys.executable,
        "-m",
        "persistbench",
        "download",
        "--no-progress",
        "--recipes",
        str(local_synth / "recipes.jsonl"),
        "--output",
        str(out),
        "--cache",
        str(out.parent / "cache"),
        *extra,
    ]


def kill_when(cmd, ready, timeout=120):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        if ready():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()


@pytest.mark.slow
def test_kill_9_then_resume_is_byte_identical(local_synth, reference, tmp_path):
    out = tmp_path / "ds"
    pngs = lambda: sum(1 for _ in out.rglob("*.png")) if out.exists() else 0  # noqa: E731
    records = lambda: len(read_case_records(out)) if (out / "cases.jsonl").exists() else 0  # noqa: E731
    kill_when(run_cmd(local_synth, out), lambda: pngs() >= 30)  # in the middle of the first case
    assert records() == 0
    kill_when(run_cmd(local_synth, out), lambda: records() >= 1)  # right after a case completed
    kill_when(run_cmd(local_synth, out), lambda: records() >= 2 and pngs() >= 2 * 96 + 40)  # inside the third
    n_done = records()
    assert n_done < 4, "the runs must have been interrupted"
    result = subprocess.run(run_cmd(local_synth, out), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"done {4 - n_done}, skipped {n_done}, failed 0" in result.stdout
    assert_same_dataset(reference, out)
    assert verify_dataset(out) == ([], 4)


@pytest.mark.slow
def test_workers_and_shards_give_the_same_bytes(local_synth, reference, tmp_path):
    result = subprocess.run(run_cmd(local_synth, tmp_path / "w2", "--workers", "2"), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert_same_dataset(reference, tmp_path / "w2")
    for shard in ("1/2", "0/2"):
        result = cli(
            "--recipes",
            local_synth / "recipes.jsonl",
            "--output",
            tmp_path / "sh",
            "--cache",
            tmp_path / "cache",
            "--shard",
            shard,
        )
        assert result.exit_code == 0, result.output
        assert "done 2, skipped 0" in result.output
    assert_same_dataset(reference, tmp_path / "sh")


@pytest.mark.slow
def test_bundled_sample_offline_and_checksums(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("--limit", "5")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("using the bundled sample recipes")
    assert "done 5, skipped 0, failed 0" in result.output
    result = cli()
    assert "done 3, skipped 5, failed 0" in result.output, result.output
    assert verify_dataset(tmp_path / "reconstructed") == ([], 8)
    want = json.loads((TESTS / "data" / "sample_checksums.json").read_text())["files"]
    got = {p: d for r in read_case_records(tmp_path / "reconstructed") for p, d in r["files"].items() if p in want}
    assert got == want
    subsets = [c.subset for c in Dataset(tmp_path / "reconstructed").cases()]
    assert subsets.count("dynamic") == subsets.count("static") == 4


# ------------------------------------------------------------------ bad input


def one_recipe(src_lines: list[str], index: int, **source) -> str:
    obj = json.loads(src_lines[index])
    obj["source"].update(source)
    return json.dumps(obj)


def bad_run(tmp_path, lines, *extra):
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n")
    return cli(
        "--recipes",
        tmp_path / "r.jsonl",
        "--output",
        tmp_path / "ds",
        "--cache",
        tmp_path / "cache",
        "--retries",
        "1",
        *extra,
    )


def assert_failed(result, tmp_path, case_id, message):
    """Exit 1; one error line naming the case and the problem; no trace of the case on disk."""
    assert result.exit_code == 1, result.output
    lines = [x for x in result.output.splitlines() if x.removeprefix("Error: ").strip().startswith(f"{case_id}: ")]
    assert len(lines) == 1 and message in lines[0], result.output
    leftovers = [p for p in (tmp_path / "ds").rglob(f"{case_id}*") if layout.STATE_DIR not in p.parts]
    assert not leftovers, "nothing half-written"


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind,message",
    [
        ("404", "unavailable: removed: [generic] clip: Unable to download webpage: HTTP Error 404"),
        ("truncated", "is not a complete video"),
        ("corrupt", "failed: ffmpeg exited"),
    ],
)
def test_bad_sources_fail_their_case_and_the_run_goes_on(served, tmp_path, kind, message):
    root, server = served
    lines = (root / "http" / "recipes.jsonl").read_text().splitlines()
    src = root / "http" / "sources" / f"{json.loads(lines[1])['source']['id']}.mp4"
    bad_dir = root / f"bad-{kind}"
    bad_dir.mkdir(exist_ok=True)
    if kind == "truncated":
        (bad_dir / "clip.mp4").write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    elif kind == "corrupt":
        (bad_dir / "clip.mp4").write_bytes(np.random.default_rng(0).integers(0, 256, 50000, np.uint8).tobytes())
    bad = json.loads(one_recipe(lines, 1, url=f"{server.url}/bad-{kind}/clip.mp4", id=f"bad{kind}"))
    result = bad_run(tmp_path, [lines[0], json.dumps(bad)])
    assert_failed(result, tmp_path, bad["case_id"], message)
    assert "done 1, skipped 0, failed 1" in result.output
    assert verify_dataset(tmp_path / "ds") == ([], 1)
    assert not [p for p in (tmp_path / "cache").rglob("*.mp4") if f"bad{kind}" in str(p)], "no cache entry"


@pytest.mark.slow
def test_changed_source_is_detected(served, tmp_path):
    root, server = served
    lines = (root / "http" / "recipes.jsonl").read_text().splitlines()
    other = json.loads(lines[2])["source"]["id"]
    # Case 0's recipe pointed at another scene's clip: same format, different content.
    swapped = one_recipe(lines, 0, url=f"{server.url}/http/sources/{other}.mp4", id="swapped")
    case_id = json.loads(swapped)["case_id"]
    result = bad_run(tmp_path, [swapped])
    assert_failed(result, tmp_path, case_id, "source differs from the one the benchmark was built from")
    result = bad_run(tmp_path, [swapped], "--accept-changed-sources")
    assert result.exit_code == 0, result.output
    assert verify_dataset(tmp_path / "ds") == ([], 1)


@pytest.mark.slow
def test_malformed_recipe_line_writes_nothing(local_synth, tmp_path):
    lines = (local_synth / "recipes.jsonl").read_text().splitlines()
    result = bad_run(tmp_path, [lines[0], lines[1][:-30]])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith(f"Error: {tmp_path / 'r.jsonl'}:2: not JSON")
    assert not (tmp_path / "ds").exists() and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_unwritable_output_directory(local_synth, tmp_path):
    (tmp_path / "blocker").write_text("a file where a directory must go")
    result = cli(
        "--recipes",
        local_synth / "recipes.jsonl",
        "--output",
        tmp_path / "blocker" / "ds",
        "--cache",
        tmp_path / "cache",
    )
    assert result.exit_code == 1
    assert (
        result.output.strip()
        == f"Error: {tmp_path / 'blocker' / 'ds'}: output directory is not writable (Not a directory)"
    )


@pytest.mark.slow
def test_youtube_needs_a_js_runtime(local_synth, tmp_path):
    """The check runs before any request: the YouTube URL below is never contacted."""
    lines = (local_synth / "recipes.jsonl").read_text().splitlines()
    yt = one_recipe(lines, 0, url="https://www.youtube.com/watch?v=dQw4w9WgXcQ")
    (tmp_path / "r.jsonl").write_text(yt + "\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    result = cli(
        "--recipes",
        tmp_path / "r.jsonl",
        "--output",
        tmp_path / "ds",
        "--cache",
        tmp_path / "cache",
        env={"PATH": str(empty)},
    )
    assert result.exit_code == 1
    assert "YouTube sources need a JavaScript runtime" in result.output and "deno" in result.output
    assert not (tmp_path / "ds").exists()


def test_hf_recipes_offline_is_a_clear_error(tmp_path):
    # A fresh process: huggingface_hub reads HF_HUB_OFFLINE when it is first imported.
    args = ["--recipes", "hf://someone/persistbench/recipes.jsonl", "--output", tmp_path / "ds"]
    result = subprocess.run(
        [sys.executable, "-m", "persistbench", "download", "--no-progress", *map(str, args)]
        + ["--cache", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: hf://someone/persistbench/recipes.jsonl: cannot fetch recipes")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_recipes_over_http(served, tmp_path):
    root, server = served
    result = cli(
        "--recipes",
        f"{server.url}/http/recipes.jsonl",
        "--limit",
        "1",
        "--output",
        tmp_path / "ds",
        "--cache",
        tmp_path / "cache",
        "--download-only",
    )
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "cache").rglob("*.mp4"))) == 1 and not (tmp_path / "ds").exists()
    result = cli(
        "--recipes", f"{server.url}/http/missing.jsonl", "--output", tmp_path / "ds", "--cache", tmp_path / "cache"
    )
    assert result.exit_code == 1 and "cannot fetch recipes" in result.output
