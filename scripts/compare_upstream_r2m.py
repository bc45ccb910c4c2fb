"""Our R2M-Bench pairs against upstream's own sampler, on a local copy of upstream's repository.

    python scripts/compare_upstream_r2m.py UPSTREAM [RUN] [--lengths 481,400,121] [--protocol r2m-v2]

``UPSTREAM`` is a checkout of ``AMAP-ML/R2MBench`` (its ``src/`` and ``trajectories/``). Upstream's
``sample_pairs.sample_pairs_for_pose`` is imported from there and run on each real trajectory for a video
of each length. Its one reach outside the pose file, the representative video's frame count (through
``decord``, which upstream needs and we do not install), is answered with that length, and the four
settings its metric modules read at import (``TORCH_HOME``, ``BOQ_CHECKPOINT``, ``MUTUALVPR_CHECKPOINT``,
``LIGHTGLUE_ROOT``: checkpoint and code paths the sampler never uses) get placeholders unless set; nothing else of upstream's is
replaced. Ours is :func:`persistbench.suites.r2m.upstream_pairs.sample` with the protocol's
(default ``r2m-v2``) parameters.

For each trajectory it prints whether our reader takes the file (and the largest deviation of its
rotations from orthonormal, and from determinant 1), then per length whether the revisit, baseline and
short lists are equal element for element, with their sizes.

With ``RUN`` (a run scored by ``persistbench score``), upstream's ``compute_nmr_summary.py`` is run on
the run's upstream-form results (``scores/<protocol>/upstream/``) and every number of its
Template-Balanced and Per-Trajectory tables (Gain and NMR per metric, Overall, three decimals) is
compared with ours from ``summary.json``, formatted as upstream formats them.

Exits 1 on any difference. Nothing of upstream's is copied into this repository; the script only runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

from persistbench.suites.r2m import upstream_pairs
from persistbench.suites.r2m.data import read_trajectory
from persistbench.suites.r2m.suite import R2MBench
from persistbench.suites.r2m.upstream_metrics import OURS

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


UPSTREAM_ORDER = [  # compute_nmr_summary's METRICS, its columns' order
    "psnr",
    "ssim",
    "lpips",
    "dino_similarity",
    "boq_similarity",
    "mvpr_similarity",
    "match_ratio",
    "ransac_inlier_ratio",
    "state_score",
    "object_appearance_persistence",
    "object_semantic_persistence",
]
TEMPLATES = {"DDDAAA": "DDDAAA", "WSLRRLL": "WSLRRLL", "revisit_loop": "Revisit Loop"}


def _fmt(v: float | None) -> str:
    return "--" if v is None or math.isnan(v) else f"{v:.3f}"


def _their_rows(markdown: str) -> dict[str, list[str]]:
    """Section ("balanced" or a template's label) -> the cells of the first model's row."""
    out = {}
    sections = re.split(r"^## |^### ", markdown, flags=re.M)
    for sec in sections:
        title = sec.splitlines()[0].strip() if sec else ""
        row = re.search(r"<tbody>\s*<tr>(.*?)</tr>", sec, flags=re.S)
        if row:
            name = "balanced" if title.startswith("Template-Balanced") else title
            out[name] = re.findall(r"<td>(.*?)</td>", row.group(1))[1:]
    return out


def _our_rows(summary: dict) -> dict[str, list[str]]:
    """The same cells from our summary.json (a metric we did not score is "--", as upstream prints it)."""

    def cells(get, overall) -> list[str]:
        row = []
        for key in UPSTREAM_ORDER:
            mg, nmr = get(OURS[key]) if key in OURS else (None, None)
            row += ["--", "--"] if nmr is None else [_fmt(mg), _fmt(nmr)]
        return row + [_fmt(overall)]

    def balanced(m):
        x = summary["metrics"].get(m)
        return (x["memory_gain"], x["nmr"]) if x else (None, None)

    out = {"balanced": cells(balanced, summary["overall"])}
    for t, label in TEMPLATES.items():
        per = summary["trajectories"].get(t, {})
        out[label] = cells(
            lambda m, per=per: (per[m]["memory_gain"], per[m]["nmr"]) if m in per else (None, None),
            summary["trajectory_overall"].get(t),
        )
    return out


def compare_run(upstream: Path, run: Path, dirname: str) -> int:
    """Upstream's compute_nmr_summary on the run's upstream-form results (``scores/<dirname>/upstream``) against our
    summary; failures."""
    scores = run / "scores" / dirname
    summary = json.loads((scores / "summary.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "summary.md"
        subprocess.run(
            [
                sys.executable,
                str(upstream / "src" / "compute_nmr_summary.py"),
                "--results-dir",
                str(scores / "upstream"),
                "--output",
                str(out),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        theirs = _their_rows(out.read_text())
    ours = _our_rows(summary)
    failures = 0
    for name, row in ours.items():
        same = theirs.get(name) == row
        failures += not same
        numbers = sum(c != "--" for c in row)
        print(f"{run.name} {name}: {'equal' if same else 'DIFFERENT'} ({numbers} numbers; Overall {row[-1]})")
        if not same:
            print(f"  ours:       {row}\n  upstream's: {theirs.get(name)}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("upstream", type=Path, help="a local copy of AMAP-ML/R2MBench")
    parser.add_argument("run", type=Path, nargs="?", help="a run scored by persistbench score (optional)")
    parser.add_argument("--lengths", default="481,400,121", help="video lengths to sample for (frames)")
    parser.add_argument("--protocol", default="r2m-v2", help="the protocol (name or file) the run was scored with")
    args = parser.parse_args(argv)
    lengths = [int(v) for v in args.lengths.split(",")]
    length = [lengths[0]]
    sys.modules.setdefault("decord", _decord_answering(length))
    for name in ("TORCH_HOME", "BOQ_CHECKPOINT", "MUTUALVPR_CHECKPOINT", "LIGHTGLUE_ROOT"):
        os.environ.setdefault(name, "unused-by-the-pair-sampler")
    sys.path.insert(0, str(args.upstream / "src"))
    import sample_pairs  # upstream's

    protocol = R2MBench.load_protocol(args.protocol)
    params = protocol.config["pairs"]
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
    if args.run is not None:
        failures += compare_run(args.upstream, args.run, protocol.dirname)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
