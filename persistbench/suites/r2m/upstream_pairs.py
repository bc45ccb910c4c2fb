"""R2M-Bench's pairs as upstream samples them (sampler ``upstream-88e0cd9``), element for element.

A reimplementation from upstream's behaviour (``AMAP-ML/R2MBench`` at 88e0cd9: ``sample_pairs.py``,
``pair_sampling.py``, ``eval_revisit.py``; no code of theirs is here): the same float arithmetic in the
same order, Python's ``random.Random(seed)`` with the same calls in the same order, so the lists are
upstream's lists. docs/metrics.md ("R2M-Bench pairs") gives the rules. Given a video's length,
:func:`sample` samples for it as upstream does for its representative video (``min(n_video, n_pose)``
frames). One choice is ours: upstream takes ``n_video`` from the first video of a task's folder, ``score``
from each video, so a video's pairs never depend on which other videos exist (the two agree whenever a
task's videos are as long as its first, as upstream's 481-frame videos are).
"""

from __future__ import annotations

import math
import random

import numpy as np

SAMPLER = "upstream-88e0cd9"
_STILL_M, _STILL_DEG = 0.01, 0.5  # a step that moves no more than this is still (tail trim, segments)
_MIN_FRAME_GAP = 10
_BINS = 10
_ATTEMPTS = 500
_MIN_BASELINES = 20


def _circular(a: float, b: float) -> float:
    return abs((a - b + 180.0) % 360.0 - 180.0)


def _distance(p: tuple[float, float, float], q: tuple[float, float, float]) -> float:
    return math.sqrt((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2 + (p[2] - q[2]) ** 2)


def _rotation_angle(a: np.ndarray, b: np.ndarray) -> float:
    trace = sum(float(a[i, j]) * float(b[i, j]) for i in range(3) for j in range(3))
    return math.acos(max(-1.0, min(1.0, (trace - 1.0) / 2.0))) * 180.0 / math.pi


def _moving_length(poses: np.ndarray) -> int:
    """Frames up to the last that moves more than 1 cm or turns more than 0.5 degrees from the one before;
    all of them when none does, or there are fewer than 3."""
    n = len(poses)
    if n < 3:
        return n
    for i in range(n - 1, 0, -1):
        step = math.sqrt(sum((float(poses[i, r, 3]) - float(poses[i - 1, r, 3])) ** 2 for r in range(3)))
        if step > _STILL_M or _rotation_angle(poses[i, :3, :3], poses[i - 1, :3, :3]) > _STILL_DEG:
            return i + 1
    return n


def _frame_poses(poses: np.ndarray) -> list[tuple[float, tuple[float, float, float]]]:
    """Per frame ``(yaw degrees, position)``: yaw = atan2(R02, R00), never unwrapped."""
    return [
        (math.atan2(float(e[0, 2]), float(e[0, 0])) * 180.0 / math.pi, (float(e[0, 3]), float(e[1, 3]), float(e[2, 3])))
        for e in poses
    ]


def _tolerances(fp) -> tuple[float, float]:
    """``(angle, translation)``: twice the 95th percentile of the steps, within [1, 5] degrees and [0.1, 1] m."""
    if len(fp) < 2:
        return 2.0, 0.1
    steps = [_distance(fp[i][1], fp[i - 1][1]) for i in range(1, len(fp))]
    turns = [_circular(fp[i][0], fp[i - 1][0]) for i in range(1, len(fp))]
    p95_t, p95_y = float(np.percentile(steps, 95)), float(np.percentile(turns, 95))
    return max(1.0, min(2.0 * p95_y, 5.0)), max(0.1, min(2.0 * p95_t, 1.0))


def _segments(fp) -> list[tuple[int, int, str]]:
    """``(first, last, label)`` runs of W/S (sign of the dominant axis of a translation step) and L/R (sign of
    the raw yaw step); still steps extend the current run; frames before the first moving step are in none."""
    out, current, start = [], None, 0
    for i in range(1, len(fp)):
        (y1, p1), (y0, p0) = fp[i], fp[i - 1]
        delta = (p1[0] - p0[0], p1[1] - p0[1], p1[2] - p0[2])
        dyaw = y1 - y0
        if math.sqrt(delta[0] * delta[0] + delta[1] * delta[1] + delta[2] * delta[2]) > _STILL_M and abs(dyaw) < 0.5:
            axis = max(range(3), key=lambda a: abs(delta[a]))  # the first of equals
            label = "W" if delta[axis] > 0 else "S"
        elif abs(dyaw) > 0.5:
            label = "R" if dyaw > 0 else "L"
        else:
            label = "."
        if label not in (current, "."):
            if current is not None:
                out.append((start, i - 1, current))
            current, start = label, i
    if current is not None:
        out.append((start, len(fp) - 1, current))
    return out


def _segment_matches(fp, segments, angle_tol: float, trans_tol: float) -> list[tuple[int, int]]:
    """``(later, earlier)``: for every pair of segments and every frame of the later one, the earlier segment's
    frame at least 10 frames away, within both tolerances, of least ``yaw + 10 position`` (the first of equals)."""
    out = []
    for li in range(1, len(segments)):
        for ei in range(li):
            for lf in range(segments[li][0], segments[li][1] + 1):
                best, best_cost = None, math.inf
                for ef in range(segments[ei][0], segments[ei][1] + 1):
                    if abs(lf - ef) < _MIN_FRAME_GAP:
                        continue
                    yd, pd = _circular(fp[lf][0], fp[ef][0]), _distance(fp[lf][1], fp[ef][1])
                    cost = yd + pd * 10
                    if yd <= angle_tol and pd <= trans_tol and cost < best_cost:
                        best, best_cost = ef, cost
                if best is not None:
                    out.append((lf, best))
    return out


def _all_matches(fp, angle_tol: float, trans_tol: float) -> list[tuple[int, int]]:
    """``(later, earlier)`` for every two frames at least 10 apart within both tolerances."""
    return [
        (j, i)
        for i in range(len(fp))
        for j in range(i + _MIN_FRAME_GAP, len(fp))
        if _distance(fp[i][1], fp[j][1]) <= trans_tol and _circular(fp[i][0], fp[j][0]) <= angle_tol
    ]


def revisit_candidates(poses: np.ndarray) -> tuple[list[tuple[int, int]], int, tuple[float, float]]:
    """``(pairs (earlier, later) sorted by (later, earlier), n_pose, (angle_tol, translation_tol))``."""
    n_pose = _moving_length(poses)
    fp = _frame_poses(poses[:n_pose])
    angle_tol, trans_tol = _tolerances(fp)
    found = _segment_matches(fp, _segments(fp), angle_tol, trans_tol)
    if len(found) < 3:
        everywhere = _all_matches(fp, angle_tol, trans_tol)
        if len(everywhere) > len(found):
            found = everywhere
    unique = list(dict.fromkeys((earlier, later) for later, earlier in found))
    return sorted(unique, key=lambda p: (p[1], p[0])), n_pose, (angle_tol, trans_tol)


def _bins(frames: list[int], n: int) -> list[list[int]]:
    size = max(1, math.ceil(n / _BINS))
    out: list[list[int]] = [[] for _ in range(_BINS)]
    for f in frames:
        out[min(f // size, _BINS - 1)].append(f)
    return out


def _near_bins(bins: list[list[int]], target: int) -> list[int]:
    for radius in range(len(bins) + 1):
        lo, hi = max(0, target - radius), min(len(bins), target + radius + 1)
        found = [f for b in bins[lo:hi] for f in b]
        if len(found) >= 2:
            return found
    return [f for b in bins for f in b]


def _window(bins, anchor: int, back: int, n: int, floor: int, ratio: float) -> tuple[int, int, int, list[int]]:
    """``(g, lo, hi, candidates)`` for revisit pair ``(anchor, back)``: gaps within ``max(floor, round(ratio g))``
    of its gap ``g``, and the first frames of the anchor's tenth (widened) that leave room for them."""
    g = back - anchor
    tol = max(floor, int(round(ratio * g)))
    lo, hi = max(1, g - tol), min(n - 1, g + tol)
    near = _near_bins(bins, min(anchor // max(1, math.ceil(n / _BINS)), _BINS - 1))
    return g, lo, hi, [f for f in near if f + hi < n] or [f for f in near if f + lo < n]


def baselines(revisit: list[tuple[int, int]], n: int, seed: int) -> list[tuple[int, int]]:
    """Gap-matched pairs away from every revisit frame and pair: the best of 500 draws per revisit pair, then
    draws from the same stream until there are 20."""
    rng = random.Random(seed)
    valid = [(min(a, b), max(a, b)) for a, b in revisit if a != b and 0 <= a < n and 0 <= b < n]
    if not valid or n <= 1:
        return []
    taken = {f for pair in valid for f in pair}
    free = [f for f in range(n) if f not in taken]
    if len(free) < 2:
        return []
    bins, radius = _bins(free, n), max(10, n // 20)

    def allowed(u: int, v: int) -> bool:
        return (
            u not in taken
            and v not in taken
            and not any(abs(u - i) <= radius and abs(v - j) <= radius for i, j in valid)
        )

    out: list[tuple[int, int]] = []
    used: set[tuple[int, int]] = set()
    for anchor, back in valid:
        g, lo_g, hi_g, cand = _window(bins, anchor, back, n, 10, 0.3)
        if not cand:
            continue
        best, best_err = None, math.inf
        for _ in range(_ATTEMPTS):
            u = rng.choice(cand)
            gap = rng.randint(lo_g, hi_g)
            v = u + gap
            if v >= n or not allowed(u, v) or (u, v) in used:
                continue
            if abs(gap - g) < best_err:
                best, best_err = (u, v), abs(gap - g)
                if best_err == 0:
                    break
        if best is not None:
            out.append(best)
            used.add(best)
    need = _MIN_BASELINES - len(out)
    for anchor, back in valid:
        if need <= 0:
            break
        _, lo_g, hi_g, cand = _window(bins, anchor, back, n, 3, 0.5)
        if not cand:
            continue
        for _ in range(_ATTEMPTS):
            if need <= 0:
                break
            u = rng.choice(cand)
            v = u + rng.randint(lo_g, hi_g)
            if v >= n or (u, v) in used or not allowed(u, v):
                continue
            out.append((u, v))
            used.add((u, v))
            need -= 1
    return out


def short_pairs(n: int, count: int, seed: int) -> list[tuple[int, int]]:
    """One pair per anchor (anchors spread evenly over the frames that have a successor 2 away), its gap drawn
    uniformly from ``[2, max(6, int(0.02 n))]`` (cut at the last frame)."""
    if n <= 1:
        return []
    rng = random.Random(seed)
    max_gap = max(2, max(6, int(0.02 * n)))
    anchors = [f for f in range(n) if f + 2 < n]
    if not anchors:
        return []
    m = min(count, len(anchors))
    chosen = [anchors[int(round(x))] for x in np.linspace(0, len(anchors) - 1, num=m)]
    attempts = max(10, 5000 // max(1, len(chosen)))
    out: list[tuple[int, int]] = []
    used: set[tuple[int, int]] = set()
    for a in chosen:
        hi = min(max_gap, n - 1 - a)
        if hi < 2:
            continue
        for _ in range(attempts):
            pair = (a, a + rng.randint(2, hi))
            if pair not in used:
                out.append(pair)
                used.add(pair)
                break
    return out


def sample(
    poses: np.ndarray, params: dict, n_video: int | None = None
) -> tuple[dict[str, list[tuple[int, int]]], dict]:
    """``({"revisit", "baseline", "short"}, info)`` for camera-to-world ``poses`` ``(T, 4, 4)`` and a video of
    ``n_video`` frames (None: as long as the trajectory). Pose ``i`` is video frame ``i`` (upstream's
    ``map_pose_to_video_frame``); every list stays below ``min(n_video, n_pose)``, the trimmed length.

    ``params``: ``seed`` (42 upstream), ``max_revisit`` (100), ``min_gap_fraction`` (0.2), ``min_short``
    (20) and ``max_short`` (100).
    """
    candidates, n_pose, (angle_tol, trans_tol) = revisit_candidates(poses)
    n = min(n_video, n_pose) if n_video else n_pose  # upstream's effective_frames
    min_gap = int(n * params["min_gap_fraction"])
    kept = [(a, b) for a, b in candidates if a < n and b < n and abs(b - a) >= min_gap]
    info = {"n_pose": n_pose, "n_effective": n, "yaw_tol_deg": angle_tol, "pos_tol_m": trans_tol, "min_gap": min_gap}
    if not kept:
        return {"revisit": [], "baseline": [], "short": []}, info
    if len(kept) > params["max_revisit"]:
        kept = random.Random(params["seed"]).sample(kept, params["max_revisit"])
    count = min(params["max_short"], max(params["min_short"], len(kept)))
    return {
        "revisit": kept,
        "baseline": baselines(kept, n, params["seed"]),
        "short": short_pairs(n, count, params["seed"]),
    }, info
