"""Where reconstruction time goes, and how close the pipeline comes to its bound.

A synth clip at 3840x1920 is reconstructed into two 1024x768 views. First the
per-frame CPU cost of each stage is measured on its own (one thread):
decoding (ffmpeg, CPU time of the child process), reprojection (both views,
RGB bilinear + mask nearest + visibility) and encoding/writing (both views'
frames and masks). Then the real reconstruction runs end to end in a fresh
process with both cores, and its frames/s is compared with the ideal
pipelined bound, 2 cores / (summed per-frame CPU cost). Peak resident memory
of that process (and of its ffmpeg child) is reported. PNG and JPG frames.

Run: ``python scripts/bench_reconstruct.py [--frames 20] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PANO = (3840, 1920)  # (w, h) as ffmpeg and OpenCV take them; sphere takes (h, w): PANO[::-1]
VIEW = (1024, 768)  # (w, h)


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def stage_costs(recipe, clip: Path, fmt: str, tmp: Path) -> dict[str, float]:
    """Per-frame CPU seconds of decoding, reprojection and encoding/writing, measured apart."""
    import cv2

    from persistbench.geometry import sphere
    from persistbench.suites.persistbench.build.recipes import decode_mask_columns, mask_pixels
    from persistbench.suites.persistbench.build.reconstruct import clip_frames, view_rotations
    from persistbench.suites.persistbench.dataset import CaseWriter

    cv2.setNumThreads(1)
    n = recipe.n_frames
    c0, s0 = cpu_children(), cpu_self()
    frames = list(clip_frames(recipe, clip))
    decode = (cpu_children() - c0 + cpu_self() - s0) / n

    k = sphere.intrinsics_from_fov(np.deg2rad(recipe.hfov_deg), *VIEW)
    rots = {v: view_rotations(recipe, v) for v in ("view_0", "center")}
    out = []
    s0 = cpu_self()
    for t, pano in enumerate(frames):
        mask_t = decode_mask_columns(recipe.masks[t])
        for view, r in rots.items():
            maps = sphere.equirect_to_perspective_maps(r[t], k, VIEW[::-1], PANO[::-1])
            out.append(
                (view, t, sphere.remap_bilinear(pano, maps), sphere.remap_nearest(mask_t, maps, transposed=True))
            )
        sphere.visibility_of_pixels(*mask_pixels(recipe.masks[t]), PANO[::-1], rots["view_0"][t], k, VIEW[::-1])
    reproject = (cpu_self() - s0) / n

    writer = CaseWriter(tmp / "stage", "dynamic", recipe.case_id, fmt)
    s0 = cpu_self()
    for view, t, rgb, mask in out:
        writer.write_frame(view, t, rgb)
        writer.write_mask(view, t, mask)
    encode = (cpu_self() - s0) / n
    cv2.setNumThreads(-1)
    return {"decode": decode, "reproject": reproject, "encode+write": encode}


def end_to_end(recipes: Path, clip_dir: Path, out: Path, fmt: str) -> dict:
    """Reconstruct in a fresh process; wall time, frames and peak RSS (self and ffmpeg child)."""
    code = f"""
import json, resource, time
from pathlib import Path
from persistbench.suites.persistbench.build.recipes import load_recipes
from persistbench.suites.persistbench.build.reconstruct import clip_frames, reconstruct_case
r = load_recipes({str(recipes)!r})[0]
t = time.perf_counter()
reconstruct_case(r, clip_frames(r, Path({str(clip_dir)!r}) / (r.source.id + ".mp4")), {str(out)!r}, {fmt!r})
wall = time.perf_counter() - t
print(json.dumps({{"wall": wall, "frames": r.n_frames,
    "rss_self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "rss_ffmpeg_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}}))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--keep", type=Path, default=None, help="keep the synth clip here (reused when present)")
    args = ap.parse_args()

    from persistbench.suites.persistbench.build.recipes import load_recipes
    from persistbench.suites.persistbench.synth import SynthConfig, generate

    tmp = Path(tempfile.mkdtemp(prefix="bench-reconstruct-"))
    synth_dir = args.keep or tmp / "synth"
    try:
        if not (synth_dir / "recipes.jsonl").exists():
            t = time.perf_counter()
            generate(
                synth_dir, SynthConfig(scenes=1, seed=0, pano_size=PANO, view_size=VIEW, n_frames=args.frames, fps=10.0)
            )
            print(f"(synth clip made in {time.perf_counter() - t:.0f} s)")
        recipe = load_recipes(synth_dir / "recipes.jsonl")[0]
        clip = synth_dir / "sources" / f"{recipe.source.id}.mp4"
        print(f"{PANO[0]}x{PANO[1]} clip -> two {VIEW[0]}x{VIEW[1]} views, {recipe.n_frames} frames, 2 cores")
        print(
            f"{'format':6s} {'decode':>8s} {'reproj':>8s} {'encode':>8s} {'sum':>8s}  {'reproj%':>7s} "
            f"{'bound':>7s} {'e2e':>7s} {'e2e/bound':>9s} {'RSS MB':>7s} {'ffmpeg MB':>9s}"
        )
        for fmt in ("png", "jpg"):
            costs = stage_costs(recipe, clip, fmt, tmp)
            total = sum(costs.values())
            bound = 2.0 / total
            e2e = end_to_end(synth_dir / "recipes.jsonl", clip.parent, tmp / f"e2e-{fmt}", fmt)
            fps = e2e["frames"] / e2e["wall"]
            print(
                f"{fmt:6s} {costs['decode'] * 1e3:7.1f}ms {costs['reproject'] * 1e3:7.1f}ms "
                f"{costs['encode+write'] * 1e3:7.1f}ms {total * 1e3:7.1f}ms  {costs['reproject'] / total:6.1%} "
                f"{bound:6.2f}/s {fps:6.2f}/s {fps / bound:8.1%} {e2e['rss_self_mb']:7.0f} {e2e['rss_ffmpeg_mb']:9.0f}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
