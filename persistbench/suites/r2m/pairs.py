"""R2M-Bench's frame pairs (sampler ``r2m-v1``), built from a trajectory alone: pure and deterministic.

* *revisit* ``(i, j)``: frame ``j`` looks at the place frame ``i`` saw, after the camera left it;
* *baseline*: one pair per revisit pair, about the same gap apart, that is not a revisit;
* *short*: pairs a few frames apart (the most similar a video gets).

The rules are the published ones (docs/metrics.md, "R2M-Bench pairs"), with two choices made
explicit: per-frame motion uses the yaw unwrapped across +-180 degrees, and the matching of two
frames uses the wrapped angular difference (a full turn comes back to the same view). Every
random choice draws from a generator seeded by the protocol, so a pair list depends on the
trajectory and the parameters only: never on which videos exist, their order, or the workers.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from persistbench.suites.r2m import upstream_pairs
from persistbench.suites.r2m.data import Trajectory, yaw_degrees

SAMPLER = "r2m-v1"
VERSION = 1
STATIC_POSITION = 1e-6  # m: a tail frame that moves less than this (and turns less than below) is static
STATIC_YAW = 1e-4  # degrees
# Pairs of one kind in a pair file or a protocol (upstream: 100 revisit, up to 100 short); each is scored.
MAX_PAIRS = 1000


def key(trajectory_sha256: str, params: dict, n_video: int | None = None) -> str:
    """What a pair list is keyed by: the trajectory's bytes, the sampler and its parameters, the version, and
    the length of the video it was sampled for when that is shorter than the trajectory."""
    fields = {"trajectory": trajectory_sha256, "params": params, "sampler": params["sampler"], "version": VERSION}
    if n_video is not None:
        fields["n_video"] = n_video
    text = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def effective_length(positions: np.ndarray, yaw: np.ndarray) -> int:
    """Frames up to the last one that moves: the static tail is trimmed."""
    moving = (np.linalg.norm(np.diff(positions, axis=0), axis=1) > STATIC_POSITION) | (
        np.abs(np.diff(yaw)) > STATIC_YAW
    )
    return int(np.flatnonzero(moving)[-1]) + 2 if moving.any() else 1


def angle_diff(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """Absolute angular difference in degrees, in [0, 180]."""
    return np.abs((np.asarray(a) - np.asarray(b) + 180.0) % 360.0 - 180.0)


def segments(dpos: np.ndarray, dyaw: np.ndarray, p: dict) -> np.ndarray:
    """Segment number per frame: runs of translation (moves, barely turns) or rotation (turns) steps.

    A step that is neither (standing still) stays in the current segment; frame 0 is in the first.
    """
    kind = np.where(
        dyaw > p["rotation_deg"], 2, np.where((dpos > p["translation_m"]) & (dyaw < p["rotation_deg"]), 1, 0)
    )
    seg = np.zeros(len(dpos) + 1, np.int64)
    current, last = 0, 0
    for k, step in enumerate(kind, start=1):
        if step and last and step != last:
            current += 1
        last = step or last
        seg[k] = current
    return seg


def revisit_pairs(positions: np.ndarray, yaw: np.ndarray, n_eff: int, p: dict) -> tuple[list[tuple[int, int]], dict]:
    """``(pairs, info)``: each later frame with its best earlier match, then the gap filter and the sample."""
    pos, y = positions[:n_eff], yaw[:n_eff]
    dpos = np.linalg.norm(np.diff(pos, axis=0), axis=1)
    dyaw = np.abs(np.diff(y))
    yaw_tol = float(np.clip(2 * np.percentile(dyaw, 95), *p["yaw_tol_deg"])) if len(dyaw) else p["yaw_tol_deg"][0]
    pos_tol = float(np.clip(2 * np.percentile(dpos, 95), *p["pos_tol_m"])) if len(dpos) else p["pos_tol_m"][0]
    seg = segments(dpos, dyaw, p)

    def match(use_segments: bool) -> list[tuple[int, int]]:
        out = []
        for j in range(n_eff):
            i = np.arange(0, max(j - p["min_gap_frames"] + 1, 0))
            if use_segments:
                i = i[seg[i] < seg[j]]
            if not len(i):
                continue
            yd = angle_diff(y[i], y[j])
            pd = np.linalg.norm(pos[i] - pos[j], axis=1)
            ok = (yd <= yaw_tol) & (pd <= pos_tol)
            if ok.any():
                cost = yd[ok] + p["position_weight"] * pd[ok]
                out.append((int(i[ok][np.argmin(cost)]), j))
        return out

    pairs = match(True)
    fallback = len(pairs) < p["fallback_below"]
    if fallback:
        pairs = match(False)
    pairs = [(i, j) for i, j in pairs if j - i >= p["min_gap_fraction"] * n_eff]
    if len(pairs) > p["max_revisit"]:
        rng = np.random.default_rng(p["seed"])
        pairs = [pairs[k] for k in sorted(rng.choice(len(pairs), p["max_revisit"], replace=False).tolist())]
    info = {"yaw_tol_deg": yaw_tol, "pos_tol_m": pos_tol, "fallback": fallback, "segments": int(seg[-1]) + 1}
    return pairs, info


def baseline_pairs(revisit: list[tuple[int, int]], n_eff: int, p: dict) -> list[tuple[int, int]]:
    """One pair per revisit pair, the same gap apart within a tolerance, from the same tenth of the timeline,
    touching no revisit frame and not near any revisit pair; the tolerance relaxes when fewer than
    ``baseline_relax_below`` result."""
    strict = _baselines(revisit, n_eff, p, lambda g: max(10, round(0.3 * g)))
    if len(strict) >= p["baseline_relax_below"]:
        return strict
    return _baselines(revisit, n_eff, p, lambda g: max(3, round(0.5 * g)))


def _baselines(revisit, n_eff: int, p: dict, tolerance) -> list[tuple[int, int]]:
    """Upstream's draw (candidates ``(u, v)`` in ``u``-major, ``v``-ascending order, one chosen uniformly), counted
    per ``u`` from prefix sums instead of enumerated: memory O(n_eff), time O(n_eff x revisit pairs) per pair,
    where the candidate grid would be O(n_eff^2) (20,000 poses: 3.5 GiB)."""
    rng = np.random.default_rng(p["seed"] + 1)
    used = np.zeros(n_eff, bool)
    used[[f for pair in revisit for f in pair]] = True
    free = np.concatenate([[0], np.cumsum(~used)])  # free[x + 1] = unused frames in [0, x]
    r = max(10, n_eff // 20)
    tenth = max(n_eff / 10, 1.0)
    out = []
    for i, j in revisit:
        g, tol = j - i, tolerance(j - i)
        dmin, dmax = max(1, g - tol), g + tol
        band = int(i // tenth)
        for widen in range(11):
            lo, hi = max(int((band - widen) * tenth), 0), min(int(np.ceil((band + 1 + widen) * tenth)), n_eff)
            counts = _candidate_counts(lo, hi, dmin, dmax, n_eff, used, free, revisit, r)
            total = int(counts.sum())
            if total >= 2 or (lo == 0 and hi == n_eff):
                break
        if total:
            k = int(rng.integers(total))
            at = int(np.searchsorted(np.cumsum(counts), k, side="right"))
            u = lo + at
            v = _candidates_of(u, dmin, dmax, n_eff, used, revisit, r)[k - int(counts[:at].sum())]
            out.append((u, int(v)))
    return out


def _forbidden(u: int, revisit, r: int) -> list[tuple[int, int]]:
    """The ``v`` intervals that lie near a revisit pair whose first frame is near ``u`` (merged, sorted)."""
    spans = sorted((b - r, b + r) for a, b in revisit if abs(u - a) <= r)
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _candidate_counts(lo, hi, dmin, dmax, n_eff, used, free, revisit, r) -> np.ndarray:
    """Per ``u`` in ``[lo, hi)``: how many ``v`` in ``[u + dmin, u + dmax]``, below ``n_eff``, are unused and
    not near a revisit pair (``|u - i| <= r`` and ``|v - j| <= r``); 0 where ``u`` itself is used."""
    counts = np.zeros(max(hi - lo, 0), np.int64)
    # The revisit pairs near u change only where some |u - i| crosses r: constant between those points.
    cuts = sorted({lo, hi, *(c for a, _ in revisit for c in (a - r, a + r + 1) if lo < c < hi)})
    for s0, s1 in zip(cuts, cuts[1:]):
        u = np.arange(s0, s1)
        a = u + dmin
        b = np.minimum(u + dmax, n_eff - 1)
        c = np.where(b >= a, free[np.clip(b + 1, 0, n_eff)] - free[np.clip(a, 0, n_eff)], 0)
        for fa, fb in _forbidden(s0, revisit, r):
            x, y = np.maximum(a, fa), np.minimum(b, fb)
            c -= np.where(y >= x, free[np.clip(y + 1, 0, n_eff)] - free[np.clip(x, 0, n_eff)], 0)
        counts[s0 - lo : s1 - lo] = np.where(used[u], 0, c)
    return counts


def _candidates_of(u, dmin, dmax, n_eff, used, revisit, r) -> np.ndarray:
    """The candidate ``v`` of one ``u``, ascending (those :func:`_candidate_counts` counts)."""
    v = np.arange(u + dmin, min(u + dmax, n_eff - 1) + 1)
    keep = ~used[v]
    for fa, fb in _forbidden(u, revisit, r):
        keep &= (v < fa) | (v > fb)
    return v[keep]


def short_pairs(n_revisit: int, n_eff: int, p: dict) -> list[tuple[int, int]]:
    """``min(max_short, max(min_short, n_revisit))`` pairs with gaps in ``[2, max(6, int(0.02 n))]``, anchors spread evenly."""
    g_max = max(6, int(0.02 * n_eff))
    count = min(p["max_short"], max(p["min_short"], n_revisit))
    if n_eff <= 2:
        return []
    out = []
    anchors = np.linspace(0, max(n_eff - 1 - g_max, 0), count).round().astype(np.int64)
    for k, a in enumerate(anchors.tolist()):
        gap = 2 + k % (g_max - 1)
        if a + gap < n_eff:
            out.append((a, a + gap))
    return out


def build(trajectory: Trajectory, params: dict, n_video: int | None = None) -> dict:
    """The pair file of a trajectory: ``{"revisit", "baseline", "short", "meta"}`` (upstream's form), by the
    sampler ``params["sampler"]`` names: ours (``r2m-v1``) or upstream's (:mod:`.upstream_pairs`), which
    samples for a video of ``n_video`` frames when given (shorter than the trajectory)."""
    if params["sampler"] == upstream_pairs.SAMPLER:
        lists, info = upstream_pairs.sample(trajectory.poses, params, n_video)
        meta = {"sampler": upstream_pairs.SAMPLER, "key": key(trajectory.sha256, params, n_video)}
        meta |= {"n_video": n_video} if n_video is not None else {}
        meta |= {"trajectory_sha256": trajectory.sha256, "params": params, "n_frames": len(trajectory.poses), **info}
        return {kind: [list(p) for p in lists[kind]] for kind in ("revisit", "baseline", "short")} | {"meta": meta}
    positions = trajectory.poses[:, :3, 3]
    yaw = yaw_degrees(trajectory.poses)
    n_eff = effective_length(positions, yaw)
    revisit, info = revisit_pairs(positions, yaw, n_eff, params)
    return {
        "revisit": [list(x) for x in revisit],
        "baseline": [list(x) for x in baseline_pairs(revisit, n_eff, params)],
        "short": [list(x) for x in short_pairs(len(revisit), n_eff, params)],
        "meta": {
            "sampler": SAMPLER,
            "version": VERSION,
            "key": key(trajectory.sha256, params),
            "trajectory_sha256": trajectory.sha256,
            "params": params,
            "n_frames": len(trajectory.poses),
            "n_effective": n_eff,
            **info,
        },
    }


MAX_META_BYTES = 64 << 10  # of a --pairs file's meta, as JSON


def check_pair_file(data: object, where: str, n_frames: int) -> dict:
    """A pair file from outside (``--pairs``): three lists of ``[a, b]`` frame numbers, ``0 <= a < b``, and an
    optional ``meta`` object of at most :data:`MAX_META_BYTES` as JSON. Only these keys are returned (they are
    what is copied into the scores); any other key is ignored."""
    import json

    from persistbench.core.errors import PersistbenchError

    if not isinstance(data, dict):
        raise PersistbenchError(f"{where}: must be an object with revisit, baseline and short")
    for kind in ("revisit", "baseline", "short"):
        pairs = data.get(kind)
        if not isinstance(pairs, list) or len(pairs) > MAX_PAIRS:
            raise PersistbenchError(f"{where}: {kind}: must be a list of [a, b] frame pairs")
        for pair in pairs:
            ok = (
                isinstance(pair, list)
                and len(pair) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
            )
            if not ok or not 0 <= pair[0] < pair[1] < n_frames:
                raise PersistbenchError(f"{where}: {kind}: {pair!r} is not a pair 0 <= a < b < {n_frames}")
    meta = data.get("meta", {})
    if not isinstance(meta, dict) or len(json.dumps(meta)) > MAX_META_BYTES:
        raise PersistbenchError(f"{where}: meta: must be an object of at most {MAX_META_BYTES >> 10} KiB as JSON")
    return {"revisit": data["revisit"], "baseline": data["baseline"], "short": data["short"], "meta": meta}
