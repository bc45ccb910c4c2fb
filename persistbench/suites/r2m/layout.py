"""R2M-Bench's on-disk names, as named templates: upstream's checkout, its images and its predictions.

A dataset root is a checkout of R2M-Bench's repository plus its images::

    meta_data/data_single_<T>_100.json        [{"image", "prompt", "pose_json_path"}, ...]
    trajectories/trajectory_<T>_30s.json      {"0": {"extrinsic": 4x4, "K": 3x3}, ...}
    test_imgs/<id>.png                        the Hugging Face dataset's folder (GD-ML/R2MBench)
    generated_imgs/<id>.png                   what the metadata names (upstream asks for a symlink: one inside the checkout)
    src/metrics/persistent_state.py           upstream's code: its judge prompts are read from it (never run)

Predictions: ``<run>/<T>/<id>.mp4`` or ``<run>/<T>/<id>/gen.mp4`` (upstream; ours adds
``<run>/<T>/<id>/case.json``). Pair files: ``<scores>/pairs/<T>.json``. Synthetic trees add
``videos/<kind>/<T>/<id>.mp4`` and ``synth.json``.
"""

from __future__ import annotations

import re
from pathlib import Path

from persistbench.core.layout import PREDICTION_VIDEO, SYNTH_RECORD
from persistbench.io.names import child

META_DIR = "meta_data"
TRAJECTORY_DIR = "trajectories"
META_RE = re.compile(r"^data_single_([A-Za-z0-9_]+)_100\.json$")
IMAGE_DIRS = ("generated_imgs", "test_imgs")  # what the metadata names, then the Hub's folder (the alias)
HUB_REPO = "GD-ML/R2MBench"
HUB_IMAGES = "test_imgs"
PAIRS_DIR = "pairs"
UPSTREAM_DIR = "upstream"  # scores/<protocol>/upstream/: upstream's result layout of the run


def meta_path(root: Path, trajectory: str) -> Path:
    return child(root, META_DIR, f"data_single_{trajectory}_100.json")


def trajectory_path(root: Path, trajectory: str) -> Path:
    return child(root, TRAJECTORY_DIR, f"trajectory_{trajectory}_30s.json")


def video_paths(run: Path, trajectory: str, case_id: str) -> tuple[Path, Path]:
    """Where a prediction may be: ``<T>/<id>.mp4``, then ``<T>/<id>/gen.mp4``."""
    return child(run, trajectory, f"{case_id}.mp4"), child(run, trajectory, case_id, PREDICTION_VIDEO)


def pairs_path(directory: Path, trajectory: str, n_video: int | None = None) -> Path:
    """A trajectory's pair file (upstream's name), or the one sampled for a video of ``n_video`` frames."""
    return child(directory, f"{trajectory}.json" if n_video is None else f"{trajectory}_{n_video}frames.json")


def state_source(root: Path) -> Path:
    """Upstream's persistent-state module in a checkout, whose judge prompts ``upstream-88e0cd9`` asks with."""
    return child(root, "src", "metrics", "persistent_state.py")


def synth_video(root: Path, kind: str, trajectory: str, case_id: str) -> Path:
    """A synthetic video of known outcome (``persistbench synth --suite r2m``), in upstream's first layout."""
    return child(root, "videos", kind, trajectory, f"{case_id}.mp4")


def synth_json(root: Path) -> Path:
    return root / SYNTH_RECORD
