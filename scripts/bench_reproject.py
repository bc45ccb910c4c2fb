"""Equirect -> perspective speed, side by side in one process, single thread.

3840x1920 RGB panorama -> 1024x768 view (90 deg), a new pose (yaw, pitch and
roll all change) every frame. Compared:

* ours: ``sphere.PerspectiveMapper.maps`` + ``sphere.remap_bilinear``;
* py360convert ``e2p`` (bilinear, its own per-pose cache never hits);
* ffmpeg ``v360`` (imageio-ffmpeg's binary, ``sendcmd`` changes the pose every
  frame; raw frames in, ``-f null`` out; the same pipeline with ``-vf null``
  is timed and subtracted, so only the filter counts);
* ``cv2.remap`` with maps computed beforehand: the lower bound for any
  method that samples through OpenCV.

Prints frames/s (from the median per-frame time) and ratios, plus the
largest error of our maps against float64 analytic geometry on the same
poses. Run: ``python scripts/bench_reproject.py [--frames 40]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from persistbench.geometry import sphere
from persistbench.io.video import ffmpeg_exe

PANO = (3840, 1920)  # (w, h) as ffmpeg and OpenCV take them; sphere takes (h, w): PANO[::-1]
VIEW = (1024, 768)  # (w, h)
HFOV = 90.0


def make_pano() -> np.ndarray:
    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (PANO[1] // 8, PANO[0] // 8, 3), dtype=np.uint8)
    pano = cv2.resize(small, PANO, interpolation=cv2.INTER_CUBIC)
    return cv2.add(pano, rng.integers(0, 24, pano.shape, dtype=np.uint8))


def make_poses(n: int) -> np.ndarray:
    """(n, 3) yaw, pitch, roll in radians: a random walk that covers the sphere."""
    rng = np.random.default_rng(1)
    yaw = np.cumsum(rng.uniform(0.05, 0.4, n)) % (2 * np.pi) - np.pi
    pitch = np.clip(np.cumsum(rng.normal(0, 0.15, n)), -1.4, 1.4)
    roll = np.clip(np.cumsum(rng.normal(0, 0.05, n)), -0.5, 0.5)
    return np.stack([yaw, pitch, roll], 1)


def bench_ffmpeg(pano: np.ndarray, poses: np.ndarray) -> float:
    """Seconds per frame of the v360 filter alone (pipeline with -vf null subtracted)."""
    n = len(poses)
    vfov = np.rad2deg(2 * np.arctan(np.tan(np.deg2rad(HFOV) / 2) * VIEW[1] / VIEW[0]))
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "pano.rgb"
        raw.write_bytes(pano.tobytes())
        cmds = Path(tmp) / "cmds.txt"
        # v360's yaw/pitch/roll are degrees; its pitch is + up, roll sign per its docs.
        cmds.write_text(
            "".join(
                f"{i / 25:.4f} v360 yaw {np.rad2deg(y):.4f}, v360 pitch {np.rad2deg(p):.4f}, v360 roll {np.rad2deg(r):.4f};\n"
                for i, (y, p, r) in enumerate(poses)
            )
        )

        def run(vf: str) -> float:
            cmd = [
                ffmpeg_exe(),
                "-v",
                "error",
                "-nostdin",
                "-threads",
                "1",
                "-filter_threads",
                "1",
                "-f",
                "rawvideo",
                "-pix_fmt",
                "rgb24",
                "-s",
                f"{PANO[0]}x{PANO[1]}",
                "-framerate",
                "25",
                "-stream_loop",
                str(n - 1),
                "-i",
                str(raw),
                "-vf",
                vf,
                "-f",
                "null",
                "-",
            ]
            t = time.perf_counter()
            subprocess.run(cmd, check=True)
            return time.perf_counter() - t

        v360 = (
            f"sendcmd=f='{cmds}',v360=input=e:output=flat:interp=linear:h_fov={HFOV}:v_fov={vfov:.6f}"
            f":w={VIEW[0]}:h={VIEW[1]}"
        )
        filt = statistics.median(run(v360) for _ in range(3))
        base = statistics.median(run("null") for _ in range(3))
    return max(filt - base, 1e-9) / n


def max_map_error(poses: np.ndarray) -> float:
    """Largest distance on the sphere, in equirect pixels, between our maps and float64 geometry."""
    k = sphere.intrinsics_from_fov(np.deg2rad(HFOV), *VIEW)
    mapper = sphere.PerspectiveMapper(k, VIEW[::-1], PANO[::-1])
    u, v = np.meshgrid(np.arange(VIEW[0]) + 0.5, np.arange(VIEW[1]) + 0.5)
    cam = np.stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones_like(u)], -1)
    worst = 0.0
    for p in poses[:8]:
        r = sphere.rotation_from_ypr(*p)
        mx, my = mapper.maps(r)
        lon, lat = sphere.lonlat_from_direction(cam @ r.T)
        ex, ey = sphere.equirect_xy_from_lonlat(lon, lat, *PANO)
        ok = (ey >= 0) & (ey <= PANO[1] - 1)  # rows beyond the outermost centres clamp by design
        dx = (np.mod(mx - ex + PANO[0] / 2, PANO[0]) - PANO[0] / 2) * np.cos(lat)
        worst = max(worst, float(np.hypot(dx, my - ey)[ok].max()))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=80)
    args = ap.parse_args()
    cv2.setNumThreads(1)
    pano = make_pano()
    poses = make_poses(args.frames)
    k = sphere.intrinsics_from_fov(np.deg2rad(HFOV), *VIEW)
    mapper = sphere.PerspectiveMapper(k, VIEW[::-1], PANO[::-1])
    mapper.cached_poses = 0  # the main rows must not benefit from repeated poses (there are none anyway)
    vfov = np.rad2deg(2 * np.arctan(np.tan(np.deg2rad(HFOV) / 2) * VIEW[1] / VIEW[0]))
    pan = poses.copy()
    pan[:, 1:] = pan[0, 1:]  # a pan: yaw changes, pitch and roll stay (maps shifted, not recomputed)
    pan_mapper = sphere.PerspectiveMapper(k, VIEW[::-1], PANO[::-1])
    maps = [mapper.maps(sphere.rotation_from_ypr(*p)) for p in poses]

    def e2p(p):
        yaw, pitch, roll = (float(a) for a in np.rad2deg(p))
        return py360convert.e2p(pano, (HFOV, vfov), yaw, pitch, (VIEW[1], VIEW[0]), in_rot_deg=roll)

    try:
        import py360convert
    except ImportError:
        py360convert = None
        print("py360convert not installed: pip install py360convert")
    methods = {
        "ours (maps + remap)": lambda i: sphere.remap_bilinear(pano, mapper.maps(sphere.rotation_from_ypr(*poses[i]))),
        "  ours: maps only": lambda i: mapper.maps(sphere.rotation_from_ypr(*poses[i])),
        "ours, pan (pitch/roll fixed)": lambda i: sphere.remap_bilinear(
            pano, pan_mapper.maps(sphere.rotation_from_ypr(*pan[i]))
        ),
        "cv2.remap, precomputed maps (limit)": lambda i: sphere.remap_bilinear(pano, maps[i]),
    }
    if py360convert is not None:
        methods["py360convert e2p"] = lambda i: e2p(poses[i])
    # Round robin, frame by frame, so that the machine's drift hits every method alike.
    times: dict[str, list[float]] = {name: [] for name in methods}
    for fn in methods.values():
        fn(0)  # warm-up
    for i in range(len(poses)):
        for name, fn in methods.items():
            if name.startswith("py360") and i % 4:
                continue  # 20x slower: a quarter of the frames is plenty
            t = time.perf_counter()
            fn(i)
            times[name].append(time.perf_counter() - t)
    rows = {name: statistics.median(ts) for name, ts in times.items()}
    rows["ffmpeg v360 (filter only)"] = bench_ffmpeg(pano, poses)

    ours = rows["ours (maps + remap)"]
    ref = rows.get("py360convert e2p")
    print(f"{PANO[0]}x{PANO[1]} -> {VIEW[0]}x{VIEW[1]}, new pose every frame, {args.frames} frames, 1 thread")
    print(f"{'method':40s} {'ms/frame':>9s} {'frames/s':>9s} {'vs ours':>8s} {'vs py360':>9s}")
    for name, sec in rows.items():
        vs_py = f"{ref / sec:8.1f}x" if ref else "-"
        print(f"{name:40s} {sec * 1e3:9.2f} {1 / sec:9.1f} {ours / sec:7.2f}x {vs_py:>9s}")
    print(
        f"our maps from the half-resolution grid (smooth poses) / full resolution: "
        f"{mapper.stats['coarse']} / {mapper.stats['exact']}"
    )
    err = max_map_error(poses)
    print(
        f"max error of our maps vs float64 geometry: {err:.5f} equirect px "
        f"({err * k[0, 0] * 2 * np.pi / PANO[0]:.5f} view px at the centre)"
    )


if __name__ == "__main__":
    main()
