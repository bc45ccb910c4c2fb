"""Issue 22, item 4: small inputs within the limits no longer take gigabytes or minutes.

Frame sizes are checked from the container or image header before decoding, predictions at another size
than asked are refused, pair counts and protocol sizes are bounded, and R2M's baseline draw keeps
O(poses) memory while drawing exactly what the candidate grid drew.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fakes.clirun import refused, run_cli

from persistbench.core.errors import PersistbenchError
from persistbench.core.schema import size_hw
from persistbench.io.limits import MAX_PIXELS, check_frame_size
from persistbench.io.video import LOSSLESS_SETTINGS, encode_video
from persistbench.suites.r2m import layout, pairs
from persistbench.suites.wrop import synth as wrop_synth


def _grid_baselines(revisit, n_eff: int, p: dict, tolerance) -> list[tuple[int, int]]:
    """The candidate grid, enumerated (what pairs._baselines computed before, in O(n^2) memory)."""
    rng = np.random.default_rng(p["seed"] + 1)
    used = np.zeros(n_eff, bool)
    used[[f for pair in revisit for f in pair]] = True
    r, tenth, out = max(10, n_eff // 20), max(n_eff / 10, 1.0), []
    rev = np.array(revisit, np.int64).reshape(-1, 2)
    for i, j in revisit:
        g, tol = j - i, tolerance(j - i)
        band = int(i // tenth)
        for widen in range(11):
            lo, hi = max(int((band - widen) * tenth), 0), min(int(np.ceil((band + 1 + widen) * tenth)), n_eff)
            cand = [
                (u, u + d)
                for u in range(lo, hi)
                for d in range(max(1, g - tol), g + tol + 1)
                if u + d < n_eff
                and not used[u]
                and not used[u + d]
                and not any(abs(u - a) <= r and abs(u + d - b) <= r for a, b in rev)
            ]
            if len(cand) >= 2 or (lo == 0 and hi == n_eff):
                break
        if cand:
            out.append(cand[int(rng.integers(len(cand)))])
    return out


@pytest.mark.slow
def test_baseline_draw_is_the_candidate_grids_draw():
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(20, 160))
        revisit = []
        for _ in range(int(rng.integers(0, 8))):
            i = int(rng.integers(0, n - 3))
            revisit.append((i, int(rng.integers(i + 2, n))))
        p = {"seed": int(rng.integers(1000))}
        for tolerance in (lambda g: max(10, round(0.3 * g)), lambda g: max(3, round(0.5 * g))):
            assert pairs._baselines(revisit, n, p, tolerance) == _grid_baselines(revisit, n, p, tolerance)


@pytest.mark.slow
def test_baseline_draw_of_a_long_trajectory_runs_in_linear_memory():
    rng = np.random.default_rng(1)
    n = 10_000  # the pose limit; the grid held 4.6 million candidates x 100 pairs at 20,000 poses
    revisit = sorted(
        {(int(i), int(i) + int(g)) for i, g in zip(rng.integers(0, 7000, 100), rng.integers(50, 2500, 100))}
    )
    out = pairs.baseline_pairs(revisit, n, {"seed": 3, "baseline_relax_below": 5})
    assert len(out) == len(revisit) and all(0 <= a < b < n for a, b in out)


def test_frame_size_bounds():
    check_frame_size("x", 2160, 3840)
    check_frame_size("x", 8192, 16)
    for h, w in ((4096, 4096), (8193, 16), (0, 10)):
        with pytest.raises(PersistbenchError, match=r"^x: .*frames, more than the 8192 a side and"):
            check_frame_size("x", h, w)
    assert MAX_PIXELS == 3840 * 2160


@pytest.mark.parametrize(
    ("size", "ok"),
    [([256, 256], True), ([2160, 3840], True), ([8192, 8192], False), ([1, 8192], False), ([16, 8192], False)],
)
def test_protocol_sizes_are_bounded(size, ok):
    assert (size_hw(size) is None) == ok


@pytest.mark.slow
def test_a_huge_r2m_prediction_is_refused_from_its_header(r2m, tmp_path):
    run = Path(shutil.copytree(r2m / "videos" / "pose", tmp_path / "pose"))
    video = run / "DDDAAA" / "0001.mp4"  # upstream's layout
    encode_video(video, [np.zeros((4096, 4096, 3), np.uint8)] * 2, 16.0)
    refused(run_cli("score", "--pred", run, "--dataset", r2m, "--metrics", "frame_psnr"), video.name, "4096x4096")


@pytest.mark.slow
def test_a_huge_conditioning_image_is_refused_before_the_model(r2m, tmp_path):
    from PIL import Image

    tree = Path(shutil.copytree(r2m, tmp_path / "tree", ignore=shutil.ignore_patterns("videos")))
    image = next((tree / layout.HUB_IMAGES).glob("*.png"))
    Image.new("RGB", (5000, 5000)).save(image)
    out = tmp_path / "run"
    refused(run_cli("infer", "--model", "hold", "--dataset", tree, "--output", out), image.name, "5000x5000")


@pytest.mark.slow
def test_pair_files_and_protocols_bound_the_pairs(r2m, tmp_path):
    run = Path(shutil.copytree(r2m / "videos" / "pose", tmp_path / "pose"))
    theirs = tmp_path / "pairs"
    theirs.mkdir()
    for t in ("DDDAAA",):
        (theirs / f"{t}.json").write_text(json.dumps({k: [[0, 5]] * 100_000 for k in ("revisit", "baseline", "short")}))
    args = ("score", "--pred", run, "--dataset", r2m, "--metrics", "frame_psnr")
    refused(run_cli(*args, "--pairs", theirs), "DDDAAA.json", "revisit")
    proto = json.loads(Path("persistbench/data/protocols/r2m-v1.json").read_text())
    proto["name"], proto["pairs"]["min_short"], proto["pairs"]["max_short"] = "big", 100_000, 100_000
    (tmp_path / "big.json").write_text(json.dumps(proto))
    refused(run_cli(*args, "--protocol", tmp_path / "big.json"), "big.json", "_short: must be an integer in [1, 1000]")


@pytest.fixture(scope="module")
def wrop_run(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("wrop")
    wrop_synth.make(root / "corpus", wrop_synth.WropSynthConfig(samples=1))
    result = run_cli(
        "infer", "--model", "hold", "--dataset", root / "corpus", "--per-task", "1", "--output", root / "run"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return root / "corpus", root / "run"


@pytest.mark.slow
@pytest.mark.parametrize("size", [(16, 16), (192, 320), (4096, 4096)])
def test_a_wrop_prediction_at_another_size_than_asked_is_refused(wrop_run, tmp_path, size):
    corpus, run = wrop_run
    mine = Path(shutil.copytree(run, tmp_path / "run"))
    video = next(mine.glob("*/*/gen.mp4"))
    asked = json.loads((video.parent / "case.json").read_text())["size"]
    encode_video(video, [np.zeros((*size, 3), np.uint8)] * 2, 24.0, LOSSLESS_SETTINGS)
    line = refused(run_cli("score", "--pred", mine, "--dataset", corpus, "--metrics", "psnr"), video.name)
    assert f"{size[1]}x{size[0]}" in line and (f"asked for {asked[0]}x{asked[1]}" in line or "8192 a side" in line)


def _wrop_protocol(tmp_path: Path, **changes) -> Path:
    from persistbench.core.suites import SUITES

    cls = SUITES["wrop"]
    config = json.loads(Path(f"persistbench/data/protocols/{cls.protocols[0]}.json").read_text())
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**config, **changes}))
    return path


@pytest.mark.parametrize("name", ["classic-v1", "r2m-v1"])
def test_a_protocol_may_not_take_another_suites_shipped_name(tmp_path, name):
    from persistbench.core.suites import SUITES

    with pytest.raises(PersistbenchError, match=rf"p\.json: name '{name}' is another suite's shipped protocol"):
        SUITES["wrop"].load_protocol(str(_wrop_protocol(tmp_path, name=name)))


def test_a_protocol_may_not_list_a_metric_twice(tmp_path):
    from persistbench.core.suites import SUITES

    with pytest.raises(PersistbenchError, match=r"p\.json: metrics: psnr listed twice"):
        SUITES["wrop"].load_protocol(str(_wrop_protocol(tmp_path, name="mine", metrics=["psnr", "psnr"])))


@pytest.fixture(scope="module")
def r2m_hold(r2m, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("hold") / "run"
    result = run_cli("infer", "--model", "hold", "--dataset", r2m, "--output", run)
    assert result.returncode == 0, result.stderr[-2000:]
    return run


@pytest.mark.slow
def test_an_r2m_prediction_at_another_size_than_asked_is_refused(r2m, r2m_hold, tmp_path):
    run = Path(shutil.copytree(r2m_hold, tmp_path / "run"))
    video = next(run.glob("DDDAAA/*/gen.mp4"))
    asked = json.loads((video.parent / "case.json").read_text())["size"]
    encode_video(video, [np.zeros((16, 16, 3), np.uint8)] * 41, 16.0, LOSSLESS_SETTINGS)
    line = refused(run_cli("score", "--pred", run, "--dataset", r2m, "--metrics", "frame_psnr"), video.name)
    assert f"16x16 frames, the case asked for {asked[0]}x{asked[1]}" in line


@pytest.mark.slow
def test_an_r2m_prediction_that_is_a_fifo_is_refused_by_name(r2m, r2m_hold, tmp_path):
    import os

    run = Path(shutil.copytree(r2m_hold, tmp_path / "run"))
    video = next(run.glob("DDDAAA/*/gen.mp4"))
    video.unlink()
    os.mkfifo(video)
    refused(
        run_cli("score", "--pred", run, "--dataset", r2m, "--metrics", "frame_psnr"), video.name, "not a regular file"
    )
