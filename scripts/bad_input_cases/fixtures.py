"""The valid inputs every bad one is made from, built once: each suite's synthetic data and runs."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fixtures:
    scenes: Path  # PersistBench synthetic scenes (recipes + sources)
    ds: Path  # their reconstructed dataset
    run: Path  # hold on it, scored (classic-v1)
    r2m: Path  # R2M-Bench synthetic checkout: 1 scene x 3 trajectories, 161 frames
    r2m_run: Path  # warp on it, scored (r2m-v2, the default: frame_psnr)
    wrop: Path  # WROP synthetic corpus: 2 tasks x 2 samples
    wrop_run: Path  # hold on it, scored (wrop-cont-v1)


def _cli(*args: object, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "persistbench", *map(str, args)], check=True, capture_output=True, cwd=cwd)


def build(tmp: Path) -> Fixtures:
    from persistbench.suites.persistbench.synth import SynthConfig, generate

    generate(
        tmp / "scenes", SynthConfig(scenes=2, seed=3, pano_size=(512, 256), view_size=(128, 96), n_frames=24, fps=8.0)
    )
    quiet = "--no-progress"
    _cli("download", quiet, "--recipes", "scenes/recipes.jsonl", "--output", "ds", "--cache", "cache", cwd=tmp)
    _cli("infer", quiet, "--model", "hold", "--dataset", "ds", "--output", "run", cwd=tmp)
    _cli("score", quiet, "--pred", "run", "--metrics", "psnr,iou", cwd=tmp)
    _cli("synth", "--suite", "r2m", "--scenes", "1", "--frames", "161", "--output", "r2m", cwd=tmp)
    _cli("infer", quiet, "--model", "warp", "--dataset", "r2m", "--output", "r2m_run", cwd=tmp)
    _cli("score", quiet, "--pred", "r2m_run", "--metrics", "frame_psnr", cwd=tmp)
    _cli("synth", "--suite", "wrop", "--scenes", "2", "--output", "wrop", cwd=tmp)
    _cli("infer", quiet, "--model", "hold", "--dataset", "wrop", "--output", "wrop_run", cwd=tmp)
    _cli("score", quiet, "--pred", "wrop_run", "--metrics", "psnr", cwd=tmp)
    return Fixtures(
        tmp / "scenes", tmp / "ds", tmp / "run", tmp / "r2m", tmp / "r2m_run", tmp / "wrop", tmp / "wrop_run"
    )
