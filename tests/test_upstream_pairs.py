"""Issue 24 (part): upstream's pair sampler (``upstream-88e0cd9``) on real-form trajectories.

Upstream's files cannot ship here (its repository states no licence), so the fixtures are written from
what they contain (measured once on the real files, docs/metrics.md): 481 poses, K for 1920 x 1080, the
three motion programmes (DDDAAA: a strafe to +x and back; WSLRRLL: forward, back, then yaw-only turns;
revisit_loop: a square back to the start), WSLRRLL's rotation drift of up to 6e-4, and, for one extra
fixture, a static tail. The rules are checked one by one against computations written here.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from persistbench.suites.r2m import pairs, upstream_pairs
from persistbench.suites.r2m.data import read_trajectory

K = [[969.7675145179088, 0.0, 960.0], [0.0, 969.7675145179088, 540.0], [0.0, 0.0, 1.0]]
PARAMS = {"sampler": upstream_pairs.SAMPLER, "seed": 42, "min_gap_fraction": 0.2, "max_revisit": 100}
PARAMS |= {"max_short": 100, "min_short": 20}


def _pose(x: float, z: float, yaw_deg: float, drift: float = 0.0) -> list[list[float]]:
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    r = [[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]
    r = [[v * (1 + drift) for v in row] for row in r]
    return [[*r[0], x], [*r[1], 0.0], [*r[2], z], [0.0, 0.0, 0.0, 1.0]]


def programme(name: str) -> list[list[list[float]]]:
    """481 camera-to-world poses in the form of upstream's trajectory files."""
    if name == "DDDAAA":  # 240 steps to +x, then back
        xs = [i / 60 for i in range(241)] + [4.0 - i / 60 for i in range(1, 241)]
        return [_pose(x, 0.0, 0.0) for x in xs]
    if name == "WSLRRLL":  # forward, back, then turns of 0.9 degrees a frame; rounding drift grows to 6e-4
        out, z, yaw = [], 0.0, 0.0
        for i in range(481):
            if i <= 90:
                z = i / 30
            elif i <= 180:
                z = (180 - i) / 30
            else:
                step = [-0.9, 0.9, 0.9, -0.9, -0.9][min((i - 181) // 60, 4)]
                yaw += step
            out.append(_pose(0.0, z, yaw, drift=-3e-4 * i / 480))
        return out
    if name == "revisit_loop":  # a 4 m square, back to the start
        side = 120
        out = []
        for i in range(481):
            leg, t = divmod(i, side)
            t = t / side * 4.0
            x, z = [(0.0, t), (t, 4.0), (4.0, 4.0 - t), (4.0 - t, 0.0), (0.0, 0.0)][min(leg, 4)]
            out.append(_pose(x, z, 0.0))
        return out
    if name == "still_tail":  # the strafe, then 60 frames standing still
        return programme("DDDAAA")[:421] + [programme("DDDAAA")[420]] * 60
    raise ValueError(name)


def write(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"trajectory_{name}_30s.json"
    path.write_text(json.dumps({str(i): {"extrinsic": e, "K": K} for i, e in enumerate(programme(name))}))
    return path


@pytest.fixture(params=["DDDAAA", "WSLRRLL", "revisit_loop"])
def trajectory(request, tmp_path):
    return request.param, read_trajectory(write(tmp_path, request.param))


def test_every_real_form_trajectory_is_read(trajectory):
    name, traj = trajectory
    assert traj.poses.shape == (481, 4, 4) and traj.size == (1080, 1920)


def test_segments_follow_upstreams_labels():
    fp = upstream_pairs._frame_poses(np.array(programme("WSLRRLL")))
    labels = [label for _, _, label in upstream_pairs._segments(fp)]
    assert labels == ["W", "S", "L", "R", "L"]  # runs of one label merge; turns by the sign of the raw yaw step
    fp = upstream_pairs._frame_poses(np.array(programme("DDDAAA")))
    segs = upstream_pairs._segments(fp)
    assert [s[2] for s in segs] == ["W", "S"] and segs[0][0] == 1  # frame 0 is in no segment


def test_a_still_tail_is_trimmed_and_a_still_trajectory_is_not():
    poses = np.array(programme("still_tail"))
    assert upstream_pairs._moving_length(poses) == 421
    assert upstream_pairs._moving_length(np.array([programme("DDDAAA")[0]] * 50)) == 50


@pytest.mark.parametrize("n_video", [None, 481, 400, 121])
def test_revisit_pairs_follow_the_rules(trajectory, n_video):
    """For a video of ``n_video`` frames (None: the trajectory's 481), as upstream samples for its representative
    video: everything below ``min(n_video, n_pose)``, the gap at least a fifth of that."""
    name, traj = trajectory
    lists, info = upstream_pairs.sample(traj.poses, PARAMS, n_video)
    revisit = lists["revisit"]
    candidates, n_pose, (angle_tol, trans_tol) = upstream_pairs.revisit_candidates(traj.poses)
    n = min(n_video or 481, n_pose)
    assert n_pose == 481 and info["n_effective"] == n and info["min_gap"] == int(n * 0.2)
    fp = upstream_pairs._frame_poses(traj.poses)
    for a, b in candidates:  # every candidate is within both tolerances and at least 10 frames apart
        assert b - a >= 10
        assert math.dist(fp[a][1], fp[b][1]) <= trans_tol
        assert upstream_pairs._circular(fp[a][0], fp[b][0]) <= angle_tol
    kept = [(a, b) for a, b in candidates if a < n and b < n and b - a >= int(n * 0.2)]
    if len(kept) > 100:  # drawn by Random(42).sample, in draw order
        assert revisit == random.Random(42).sample(kept, 100)
    else:
        assert revisit == kept and revisit == sorted(revisit, key=lambda p: (p[1], p[0]))
    if n_video in (None, 481):
        assert revisit, name  # each programme comes back to where it was
    assert all(f < n for kind in ("revisit", "baseline", "short") for p in lists[kind] for f in p)


def test_baselines_and_short_pairs_follow_the_rules(trajectory):
    _, traj = trajectory
    lists, info = upstream_pairs.sample(traj.poses, PARAMS)
    revisit, baseline, short = lists["revisit"], lists["baseline"], lists["short"]
    taken = {f for p in revisit for f in p}
    radius = max(10, info["n_pose"] // 20)
    for u, v in baseline:
        assert 0 <= u < v < 481 and u not in taken and v not in taken
        assert not any(abs(u - i) <= radius and abs(v - j) <= radius for i, j in revisit)
    assert len(set(baseline)) == len(baseline)
    assert len(baseline) >= min(20, len(baseline)) and len(short) == min(100, max(20, len(revisit)))
    anchors = [a for a, _ in short]
    assert anchors == sorted(anchors) and anchors[0] == 0
    assert all(2 <= b - a <= 9 for a, b in short)  # max(6, int(0.02 * 481)) = 9


def test_pairs_do_not_depend_on_anything_but_the_trajectory(tmp_path):
    one = read_trajectory(write(tmp_path, "revisit_loop"))
    (tmp_path / "other").mkdir()
    two = read_trajectory(write(tmp_path / "other", "revisit_loop"))
    assert pairs.build(one, PARAMS) == pairs.build(two, PARAMS)
    assert pairs.build(one, PARAMS)["meta"]["key"] == pairs.key(one.sha256, PARAMS)


def test_the_paper_protocol_samples_upstreams_pairs():
    from persistbench.suites.r2m.suite import R2MBench

    assert R2MBench.load_protocol("r2m-paper-v1").config["pairs"] == PARAMS
