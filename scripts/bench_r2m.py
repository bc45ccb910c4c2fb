"""R2M-Bench's CPU families (appearance without LPIPS, geometric) per pair: ours against the scikit-image per-pair path.

Ours (``persistbench score``'s path): the video is decoded once; the frames the pairs use are kept and every
pair and family reads them; SIFT features are computed once per frame and shared by the pairs that use the
frame, on as many threads as OpenCV uses in the process (``score``'s workers each get their share of the cores;
the bench runs it on one thread and on all of this machine's), and the pairs' matches too; PSNR is an exact
integer sum and SSIM OpenCV box filters in float64. The reference path does what a per-pair script does
(upstream's ``compute_psnr_ssim`` for appearance): for each pair, scikit-image's ``peak_signal_noise_ratio``
and ``structural_similarity`` (``win_size=7``) and scikit-image's SIFT + ``match_descriptors`` + RANSAC on a
fundamental matrix, both frames from scratch (given decoded frames, so decoding is not counted against it).
Both paths run in this process on the same synthetic video at ``--size`` over the pairs the default protocol
(``r2m-v2``: upstream's sampler) samples for it; the reference runs on ``--reference`` pairs only (it is slow),
spread evenly over the revisit, baseline and short lists (its time per pair depends on the frames: the first
few revisit pairs alone gave anything from 7x to 20x), and is reported per pair. Prints medians of ``--repeat`` runs, the ratio, and the projected time
of the 300 videos of R2M-Bench.
The reference is single-threaded (scikit-image and SciPy): the one-thread ratio is the per-core one.

Run: ``python scripts/bench_r2m.py [--size 270x480] [--reference 12] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from persistbench.io.video import read_frames
from persistbench.metrics.registry import METRICS
from persistbench.suites.r2m import layout, pairs, synth
from persistbench.suites.r2m.data import read_trajectory
from persistbench.suites.r2m.pair_video import PairVideo
from persistbench.suites.r2m.suite import R2MBench

FAMILIES = ("frame_psnr", "frame_ssim", "sift_match_ratio", "sift_inlier_ratio")


def ours(video: Path, pair_file: dict, protocol) -> tuple[float, int]:
    """Seconds for decode + every pair of every kind and CPU metric; the number of pairs."""
    start = time.perf_counter()
    all_pairs = [tuple(p) for kind in ("revisit", "baseline", "short") for p in pair_file[kind]]
    needed = {f for p in all_pairs for f in p}
    frames = {i: f for i, f in enumerate(read_frames(video)) if i in needed}
    v = PairVideo(frames)
    for m in FAMILIES:
        METRICS[m].function(v, all_pairs, protocol.params(m))
    return time.perf_counter() - start, len(all_pairs)


def reference_pair(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float]:
    from skimage.color import rgb2gray
    from skimage.feature import SIFT, match_descriptors
    from skimage.measure import ransac
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity
    from skimage.transform import FundamentalMatrixTransform

    with np.errstate(divide="ignore"):  # identical frames: scikit-image's PSNR is inf (ours is capped)
        psnr = peak_signal_noise_ratio(a, b, data_range=255)
    ssim = structural_similarity(a, b, channel_axis=2, data_range=255, win_size=7)
    feats = []
    for img in (a, b):
        sift = SIFT()
        sift.detect_and_extract(rgb2gray(img))
        feats.append(sift)
    matches = match_descriptors(feats[0].descriptors, feats[1].descriptors, max_ratio=0.75, cross_check=False)
    if len(matches) < 8:
        return psnr, ssim, 0.0, 0.0
    pa, pb = feats[0].keypoints[matches[:, 0]][:, ::-1], feats[1].keypoints[matches[:, 1]][:, ::-1]
    _, inliers = ransac((pa, pb), FundamentalMatrixTransform, min_samples=8, residual_threshold=3, max_trials=1000)
    n = min(len(feats[0].keypoints), len(feats[1].keypoints))
    return psnr, ssim, len(matches) / n, (inliers.sum() / len(matches)) if inliers is not None else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="270x480", help="HxW of the video")
    ap.add_argument("--reference", type=int, default=12, help="pairs the scikit-image path runs on")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    protocol = R2MBench.load_protocol()
    with tempfile.TemporaryDirectory() as tmp:
        tree = synth.make(Path(tmp) / "tree", synth.R2MSynthConfig(cases=1, size=(h, w), blur_px=1.0))
        video = tree / "videos" / "pose" / "revisit_loop" / "0001.mp4"
        pair_file = pairs.build(read_trajectory(layout.trajectory_path(tree, "revisit_loop")), protocol.config["pairs"])
        cores = cv2.getNumThreads()
        ours_s = {}
        for threads in sorted({1, cores}):
            cv2.setNumThreads(threads)
            runs = [ours(video, pair_file, protocol) for _ in range(args.repeat)]
            n_pairs = runs[0][1]
            ours_s[threads] = statistics.median(r[0] for r in runs)
        cv2.setNumThreads(cores)
        frames = dict(enumerate(read_frames(video)))
        every = [tuple(p) for kind in ("revisit", "baseline", "short") for p in pair_file[kind]]
        subset = [every[round(i * (len(every) - 1) / max(args.reference - 1, 1))] for i in range(args.reference)]
        ref_times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            for a, b in subset:
                reference_pair(frames[a], frames[b])
            ref_times.append((time.perf_counter() - start) / len(subset))
    ref_per_pair = statistics.median(ref_times)
    ref_rate = 1 / ref_per_pair
    print(f"video {w}x{h}, 481 frames, {n_pairs} pairs (revisit+baseline+short), CPU families: {', '.join(FAMILIES)}")
    print(f"scikit-image per-pair path: {ref_per_pair:.2f} s per pair, {ref_rate:.2f} pairs/s ({len(subset)} pairs)")
    for threads, seconds in ours_s.items():
        rate = n_pairs / seconds
        print(
            f"ours on {threads} thread(s) (decode once, shared frames and features): {seconds:.2f} s per video, "
            f"{rate:.1f} pairs/s; ratio {rate / ref_rate:.1f}x (target >= 10x); 300 videos: {300 * seconds / 60:.1f} min"
        )
    print(f"scikit-image path, 300 videos on one core: {300 * n_pairs * ref_per_pair / 3600:.1f} h")


if __name__ == "__main__":
    main()
