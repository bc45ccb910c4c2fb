"""Calibrate the source fingerprint: distances of true re-encodes against distances between different clips.

For every clip of the bundled sample (and a second synth set made with another seed, so clips of the
same generator are compared too), the recipe's fingerprint frames are compared with

* re-encodes of the same clip that a video host might serve: other CRF (23, 30, 36), half and double
  resolution, another container and codec (VP9 in WebM), 4:4:4 chroma;
* every other clip, at the same frame indices.

It prints both distributions for each thumbnail size and statistic and the margin between them, which
is what docs/recipes.md reports and what the defaults in persistbench.suites.persistbench.build.recipes are chosen from.

    python scripts/calibrate_fingerprint.py
"""

from __future__ import annotations

import itertools
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from persistbench.io.video import ffmpeg_exe, read_frames
from persistbench.suites.persistbench.build.download import bundled_recipes
from persistbench.suites.persistbench.build.recipes import fingerprint_distance, load_recipes, make_fingerprint
from persistbench.suites.persistbench.synth import SynthConfig, generate

REENCODES = {
    "crf23": ["-c:v", "libx264", "-crf", "23", "-pix_fmt", "yuv420p"],
    "crf30": ["-c:v", "libx264", "-crf", "30", "-pix_fmt", "yuv420p"],
    "crf36": ["-c:v", "libx264", "-crf", "36", "-pix_fmt", "yuv420p"],
    "half-res": ["-vf", "scale=iw/2:ih/2", "-c:v", "libx264", "-crf", "23", "-pix_fmt", "yuv420p"],
    "double-res": ["-vf", "scale=iw*2:ih*2", "-c:v", "libx264", "-crf", "23", "-pix_fmt", "yuv420p"],
    "vp9-webm": ["-c:v", "libvpx-vp9", "-crf", "33", "-b:v", "0", "-deadline", "realtime", "-cpu-used", "8"],
    "yuv444": ["-c:v", "libx264", "-crf", "18", "-pix_fmt", "yuv444p"],
}


def frames_at(clip: Path, idx: list[int], size: tuple[int, int] | None = None) -> dict[int, np.ndarray]:
    import cv2

    wanted = set(idx)
    out = {t: f.copy() for t, f in enumerate(read_frames(clip)) if t in wanted}
    if size is not None:  # a re-encode at another resolution is compared at the recipe's source size
        out = {t: cv2.resize(f, size, interpolation=cv2.INTER_AREA) for t, f in out.items()}
    return out


def reencode(clip: Path, args: list[str], out: Path) -> Path:
    subprocess.run([ffmpeg_exe(), "-nostdin", "-loglevel", "error", "-y", "-i", str(clip), *args, str(out)], check=True)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sets = [(bundled_recipes(), bundled_recipes().parent / "sources")]
        other = generate(tmp / "other", SynthConfig(scenes=8, seed=99, pano_size=(1024, 512)))
        sets.append((other, tmp / "other" / "sources"))
        clips = []
        for recipes, sources in sets:
            for r in load_recipes(recipes):
                clips.append((r, sources / f"{r.source.id}.mp4"))
        configs = [((16, 32), "mean"), ((32, 64), "mean")]  # thumbnail (h, w)
        same: dict[tuple, list[float]] = {c: [] for c in configs}
        different: dict[tuple, list[float]] = {c: [] for c in configs}
        worst_same: dict[tuple, tuple[float, str]] = {c: (0.0, "") for c in configs}
        for r, clip in clips:
            idx = r.fingerprint["frames"]
            size = (r.source.width, r.source.height)
            ref = frames_at(clip, idx)
            variants = {
                name: reencode(clip, args, tmp / f"{r.source.id}-{name}.{'webm' if 'vp9' in name else 'mp4'}")
                for name, args in REENCODES.items()
            }
            for config in configs:
                fp = make_fingerprint(ref, thumb_size=config[0])
                for name, path in variants.items():
                    d = fingerprint_distance(fp, frames_at(path, idx, size))
                    same[config].append(d)
                    worst_same[config] = max(worst_same[config], (d, f"{r.source.id} {name}"))
        for (ra, ca), (_, cb) in itertools.combinations(clips, 2):
            idx = ra.fingerprint["frames"]
            a, b = frames_at(ca, idx), frames_at(cb, idx, (ra.source.width, ra.source.height))
            for config in configs:
                different[config].append(fingerprint_distance(make_fingerprint(a, thumb_size=config[0]), b))
        print(
            f"{len(clips)} clips, {len(REENCODES)} re-encodes each, {len(different[configs[0]])} pairs of different clips"
        )
        print(f"{'thumbnail':10s} {'re-encode: median / max':>26s} {'different: min / median':>26s}  margin")
        for config in configs:
            s, d = np.array(same[config]), np.array(different[config])
            print(
                f"{config[0][1]}x{config[0][0]:<7d} {np.median(s):12.2f} / {s.max():5.2f}     {d.min():12.2f} / "
                f"{np.median(d):6.2f}   {d.min() - s.max():6.2f}   (worst re-encode: {worst_same[config][1]})"
            )


if __name__ == "__main__":
    main()
