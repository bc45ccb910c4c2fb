"""Outputs that are exact stay the same bytes on every CPU; videos decode whatever their path says."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from persistbench.core.errors import PersistbenchError
from persistbench.geometry import portable
from persistbench.io.video import decode_with_pts, encode_video, read_frames
from persistbench.suites.persistbench import segment

ROOT = Path(__file__).parent.parent
# The lowest SIMD levels the two libraries let us force on this machine (SSE2 is x86-64's baseline).
LOW_SIMD = {
    "OPENCV_CPU_DISABLE": "AVX512_SKX,AVX512_ICL,AVX512_COMMON,AVX2,FMA3,AVX,SSE4_2,SSE4_1,POPCNT,SSSE3",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR X86_V3",
}


def test_portable_trigonometry_matches_numpy_to_a_few_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-10, 10, 20000), np.linspace(-np.pi, np.pi, 1001), [0.0, -0.0, 1e-300, 7e5]])
    for ours, ref in ((portable.sin, np.sin), (portable.cos, np.cos), (portable.atan, np.arctan)):
        np.testing.assert_allclose(ours(x), ref(x), rtol=4 * 2.0**-52, atol=1e-30)  # atol: sin near k pi
    y = rng.uniform(-5, 5, 20000)
    zeros = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0, 0.0])
    xs = np.array([0.0, 0.0, -0.0, -0.0, 0.0, 0.0, 1.0, -1.0])
    np.testing.assert_allclose(portable.atan2(y, x[: len(y)]), np.arctan2(y, x[: len(y)]), rtol=4 * 2.0**-52)
    assert np.array_equal(portable.atan2(zeros, xs), np.arctan2(zeros, xs))
    assert np.array_equal(np.signbit(portable.atan2(zeros, xs)), np.signbit(np.arctan2(zeros, xs)))
    np.testing.assert_allclose(portable.tan(x[:1000]), np.tan(x[:1000]), rtol=8 * 2.0**-52)


def test_portable_matrix_helpers_match_numpy():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 3)), rng.normal(size=(3, 50))
    np.testing.assert_allclose(portable.matmul(a, b), a @ b, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(portable.inv3(a), np.linalg.inv(a), rtol=1e-12, atol=1e-12)


def test_exact_correlation_matches_the_integer_sum():
    rng = np.random.default_rng(2)
    for shape, kshape in (((40, 50, 3), (9, 7, 3)), ((70, 90, 3), (30, 25, 1)), ((12, 12, 1), (12, 12, 1))):
        image = rng.integers(0, 4081, shape).astype(np.int64)
        kernel = rng.integers(0, 17, kshape).astype(np.int64)
        oh, ow = shape[0] - kshape[0] + 1, shape[1] - kshape[1] + 1
        want = np.zeros((oh, ow, shape[2]), np.int64)
        for i in range(kshape[0]):
            for j in range(kshape[1]):
                want += kernel[i, j] * image[i : i + oh, j : j + ow]
        assert np.array_equal(segment._correlate(image, kernel), want)


def test_tracker_score_is_masked_pearson_correlation():
    rng = np.random.default_rng(3)
    frame = rng.integers(0, 256, (40, 60, 3)).astype(np.int64)
    template = frame[10:22, 20:35].copy()
    weight = (rng.random((12, 15)) > 0.3).astype(np.int64)
    score, (x, y) = segment._best(frame, template, weight)
    assert (x, y) == (20, 10) and score == pytest.approx(1.0, abs=1e-12)
    w = weight.astype(bool)
    elsewhere = segment._best(frame[5:17, 9:24], template, weight)[0]  # one placement: its score alone
    a, t = frame[5:17, 9:24][w].astype(float), template[w].astype(float)  # (n, 3) masked pixels
    num = ((a - a.mean(0)) * (t - t.mean(0))).sum()
    den = np.sqrt(((a - a.mean(0)) ** 2).sum() * ((t - t.mean(0)) ** 2).sum())
    assert elsewhere == pytest.approx(num / den, abs=1e-12)


def _chain_digests(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    code = (
        "import json, sys; sys.path.insert(0, 'scripts'); import golden_outputs as g; from pathlib import Path;"
        f"print(json.dumps(g.chain_outputs(Path({str(tmp)!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
def test_exact_outputs_do_not_depend_on_the_simd_level(tmp_path):
    """Everything but the float scores is byte-identical with OpenCV's and NumPy's dispatch held to SSE2/SSE3."""
    fast = _chain_digests(tmp_path / "fast", {})
    slow = _chain_digests(tmp_path / "slow", LOW_SIMD)
    assert sorted(fast) == sorted(slow)
    exact = [p for p in fast if "/scores/" not in p]
    assert len(exact) > 300
    assert [p for p in exact if fast[p] != slow[p]] == []


def test_ffmpeg_colour_conversion_is_bit_exact_without_simd(tmp_path):
    rng = np.random.default_rng(4)
    frames = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(4)]
    encode_video(tmp_path / "a.mp4", frames, 8.0)
    plain = hashlib.sha256(b"".join(f.tobytes() for f in read_frames(tmp_path / "a.mp4"))).hexdigest()
    code = (
        "import hashlib, sys; from persistbench.io import video;"
        "video.BITEXACT_SCALING = ('-cpuflags', '0', *video.BITEXACT_SCALING);"
        "print(hashlib.sha256(b''.join(f.tobytes() for f in video.read_frames(sys.argv[1]))).hexdigest())"
    )
    no_simd = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a.mp4")], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert plain == no_simd


@pytest.mark.parametrize("folder", ["mirror rror", "invalid_data", "Error"])
def test_paths_that_contain_error_words_decode(tmp_path, folder):
    src = tmp_path / folder
    src.mkdir()
    frames = [np.full((16, 16, 3), 40 * i, np.uint8) for i in range(3)]
    encode_video(src / "clip.mp4", frames, 8.0)
    got = [f for _, f in decode_with_pts(src / "clip.mp4")]
    assert len(got) == 3 and got[0].shape == (16, 16, 3)


@pytest.mark.parametrize("size", [2, 8])
def test_tiny_videos_decode(tmp_path, size):
    encode_video(tmp_path / "tiny.mp4", [np.zeros((size, size, 3), np.uint8)] * 2, 8.0)
    assert [f.shape for f in read_frames(tmp_path / "tiny.mp4")] == [(size, size, 3)] * 2


def test_damaged_video_fails_with_ffmpegs_error(tmp_path):
    encode_video(tmp_path / "ok.mp4", [np.zeros((32, 32, 3), np.uint8)] * 8, 8.0)
    data = (tmp_path / "ok.mp4").read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) // 2])
    with pytest.raises(PersistbenchError, match=r"cut\.mp4: (not a readable video|decoding failed): \S"):
        list(read_frames(tmp_path / "cut.mp4"))
