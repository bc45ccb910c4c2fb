"""Our R2M-Bench pairs against upstream's own sampler, on a local copy of upstream's repository.

    python scripts/compare_upstream_r2m.py UPSTREAM [--lengths 481,400,121]

``UPSTREAM`` is a checkout of ``AMAP-ML/R2MBench`` (its ``src/`` and ``trajectories/``). Upstream's
``sample_pairs.sample_pairs_for_pose`` is imported from there and run on each real trajectory for a video
of each length. Its one reach outside the pose file, the representative video's frame count (through
``decord``, which upstream needs and we do not install), is answered with that length, and the four
settings its metric modules read at import (``TORCH_HOME``, ``BOQ_CHECKPOINT``, ``MUTUALVPR_CHECKPOINT``,
``LIGHTGLUE_ROOT``: checkpoint and code paths the sampler never uses) get placeholders unless set; nothing else of upstream's is
replaced. Ours is :func:`persistbench.suites.r2m.upstream_pairs.sample` with protocol
``r2m-paper-v1``'s parameters.

For each trajectory it prints whether our reader takes the file (and the largest deviation of its
rotations from orthonormal, and from determinant 1), then per length whether the revisit, baseline and
short lists are equal element for element, with their sizes. Exits 1 on any difference. Nothing of
upstream's is copied into this repository; the script only runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import types
from pathlib import Path

import numpy as np

from persistbench.suites.r2m import upstream_pairs
from persistbench.suites.r2m.data import read_trajectory
from persistbench.suites.r2m.suite import R2MBench

KINDS = ("revisit", "baseline", "short")


def _decord_answering(length: list[int]) -> types.ModuleType:
    """A stand-in for ``decord`` whose ``VideoReader`` has ``length[0]`` frames (all upstream asks of it)."""

    class VideoReader:
        def __init__(self, *args, **kwargs):
            pass

        def __len__(self) -> int:
            return length[0]

    module = types.ModuleType("decord")
    module.VideoReader, module.cpu = VideoReader, lambda *args: None
    return module


def drift(poses: np.ndarray) -> tuple[float, float]:
    """``(max |R^T R - I|, max |det R - 1|)`` over the trajectory's rotations."""
    r = poses[:, :3, :3]
    gram = np.einsum("tji,tjk->tik", r, r) - np.eye(3)
    return float(np.abs(gram).max()), float(np.abs(np.linalg.det(r) - 1).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("upstream", type=Path, help="a local copy of AMAP-ML/R2MBench")
    parser.add_argument("--lengths", default="481,400,121", help="video lengths to sample for (frames)")
    args = parser.parse_args(argv)
    lengths = [int(v) for v in args.lengths.split(",")]
    length = [lengths[0]]
    sys.modules.setdefault("decord", _decord_answering(length))
    for name in ("TORCH_HOME", "BOQ_CHECKPOINT", "MUTUALVPR_CHECKPOINT", "LIGHTGLUE_ROOT"):
        os.environ.setdefault(name, "unused-by-the-pair-sampler")
    sys.path.insert(0, str(args.upstream / "src"))
    import sample_pairs  # upstream's

    params = R2MBench.load_protocol("r2m-paper-v1").config["pairs"]
    failures = 0
    for path in sorted((args.upstream / "trajectories").glob("trajectory_*.json")):
        traj = read_trajectory(path)
        gram, det = drift(traj.poses)
        print(
            f"{path.name}: read, {len(traj.poses)} poses, K for {traj.size[1]}x{traj.size[0]}, "
            f"rotations orthonormal to {gram:.1e}, determinant 1 to {det:.1e}"
        )
        for n in lengths:
            length[0] = n
            with contextlib.redirect_stdout(io.StringIO()):  # upstream prints its progress
                theirs = sample_pairs.sample_pairs_for_pose(
                    str(path),
                    Path(f"{n}-frames.mp4"),
                    max_eval_pairs=params["max_revisit"],
                    seed=params["seed"],
                    min_gap_ratio=params["min_gap_fraction"],
                )
            ours, _ = upstream_pairs.sample(traj.poses, params, n)
            same = {k: [list(p) for p in ours[k]] == [list(p) for p in theirs[k]] for k in KINDS}
            failures += not all(same.values())
            sizes = ", ".join(f"{k} {len(ours[k])}/{len(theirs[k])}{'' if same[k] else ' DIFFERENT'}" for k in KINDS)
            print(f"  n_video {n}: {'equal' if all(same.values()) else 'DIFFERENT'} (ours/upstream's: {sizes})")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
