"""Upstream's result layout (``AMAP-ML/R2MBench`` at 88e0cd9), written from our records and read back.

Upstream's GPU evaluator (``eval_gpu_metrics.py``) writes one ``results.json`` per metric family, task
and shard, and its persistent-state script one file per task; ``compute_nmr_summary.py`` reads them::

    <root>/<family>/<task>/shard_0/results.json          {"global_summary": ..., "per_video": {<id>: ...}}
    <root>/persistent_state/results_gemini_nmr_<task>.json {"videos": {<id>: {"revisit_scores": [...], ...}}}

``<family>`` is ``appearance``, ``scene_identity``, ``geometric`` or ``object``; ``<task>`` is
``<model>_<T>_30s``. A video's entry holds, per kind of pair, each metric's ``mean``, ``std``,
``median`` and ``count`` over its pairs (rounded to 6 decimals) and its own NMR. :func:`write` writes
a scored run in that form (failed pair values are left out of the means and the score lists, where
upstream would store them as numbers); :func:`read` turns such a tree, ours or upstream's, into our
per-video records so that our summary, report and leaderboard come from it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import read_json, write_json
from persistbench.io.names import child, name_problem
from persistbench.metrics.registry import METRICS
from persistbench.suites.r2m.relative import KINDS, from_means
from persistbench.suites.r2m.upstream_metrics import OURS, UPSTREAM

SOURCE = "upstream R2M-Bench results (88e0cd9 layout)"  # how a report names runs read from such a tree
VISUAL_FAMILIES = ("appearance", "scene_identity", "geometric", "object")
STATE_DIR = "persistent_state"
STATE_PREFIX = "results_gemini_nmr_"
TASK_RE = re.compile(r"^(?P<model>.+)_(?P<trajectory>DDDAAA|WSLRRLL|revisit_loop)_30s$", re.IGNORECASE)
TRAJECTORIES = {"dddaaa": "DDDAAA", "wslrrll": "WSLRRLL", "revisit_loop": "revisit_loop"}
MIN_DYNAMIC_RANGE = 1e-5  # eval_gpu_metrics: a video's own NMR is 0 at or below this range


def task_name(model: str, trajectory: str) -> str:
    """Upstream's task name of a model's videos along one trajectory."""
    return f"{model}_{trajectory}_30s"


def parse_task(name: str) -> tuple[str, str] | None:
    """``(model, trajectory)`` of a task name ``<model>_<T>_30s`` (the trajectory's case as upstream's
    templates spell it), or None."""
    m = TASK_RE.match(name)
    return (m["model"], TRAJECTORIES[m["trajectory"].lower()]) if m else None


def _stats(values: list[float]) -> dict:
    a = np.asarray(values, np.float64)
    return {
        "mean": round(float(np.mean(a)), 6),
        "std": round(float(np.std(a)), 6),
        "median": round(float(np.median(a)), 6),
        "count": len(values),
    }


def _kind_means(agg: dict[str, dict]):
    """``(key, R, B, S)`` of each metric a video's aggregate has for all three kinds of pair."""
    for key in agg["revisit"]:
        if key in agg["baseline"] and key in agg["short"]:
            yield (key, *(agg[k][key]["mean"] for k in KINDS))


def _video_nmr(agg: dict[str, dict]) -> dict[str, float]:
    """A video's own NMR per key, as ``eval_gpu_metrics._compute_nmr`` gives it (0 at a range <= 1e-5)."""
    out = {}
    for key, r, b, s in _kind_means(agg):
        sign = 1.0 if METRICS[OURS[key]].higher_is_better else -1.0
        dyn, num = sign * (s - b), sign * (r - b)
        out[key] = 0.0 if dyn <= MIN_DYNAMIC_RANGE else round(float(num / dyn), 6)
    return out


def _object_nmr(agg: dict[str, dict]) -> dict[str, dict]:
    """A video's own NMR per key, as ``object_identity.compute_object_nmr`` gives it (not valid at a range <= 1e-8)."""
    out = {}
    for key, r, b, s in _kind_means(agg):
        dr, mg = s - b, r - b
        valid = dr > 1e-8
        value = round(float(mg / (dr + 1e-8)), 6) if valid else None
        out[key] = {"value": value, "valid": valid, "mg": round(float(mg), 6), "dr": round(float(dr), 6)}
    return out


def _state_nmr(scores: dict[str, list[float]]) -> dict:
    """``compute_gemini_nmr``'s block of a video's judge scores."""
    if not all(scores[k] for k in KINDS):
        return {"nmr": None, "reason": "insufficient_data"}
    r, b, s = (float(np.mean(scores[k])) for k in KINDS)
    block = {"mean_revisit": round(r, 4), "mean_baseline": round(b, 4), "mean_short": round(s, 4)}
    if abs(s - b) < 1e-8:
        return {"nmr": 0.0, **block, "dynamic_range": round(s - b, 6), "reason": "insufficient_dynamic_range"}
    return {"nmr": round(float((r - b) / (s - b)), 6), **block, "dynamic_range": round(s - b, 6)}


def write(root: Path, model: str, records: list[dict]) -> list[Path]:
    """Write our per-video records (one run of ``model``) in upstream's layout under ``root``; the files written.

    A video enters a family's file when it has a value of one of the family's metrics; the state file
    holds the judge's scores (its failures left out) and the pairs it was asked about (the first
    ``pairs_per_kind`` of each kind, as upstream's ``select_for_video`` keeps them).
    """
    if name_problem(model):
        raise PersistbenchError(f"{model!r}: not usable as upstream's task name ({name_problem(model)})")
    per_family: dict[tuple[str, str], dict] = {}
    states: dict[str, dict] = {}
    for r in records:
        task = task_name(model, r["subset"])
        for m, values in r["values"].items():
            if m not in UPSTREAM:
                continue
            up = UPSTREAM[m]
            kept = {k: [x for x in values[k] if x is not None] for k in KINDS}
            if up.family == STATE_DIR:
                states.setdefault(task, {})[r["uid"]] = {
                    **{f"{k}_pairs": r["pairs"][k][: len(values[k])] for k in KINDS},
                    **{f"{k}_scores": kept[k] for k in KINDS},
                    "nmr": _state_nmr(kept),
                }
                continue
            video = per_family.setdefault((up.family, task), {}).setdefault(
                r["uid"], {**{f"num_{k}_pairs": len(r["pairs"][k]) for k in KINDS}, **{k: {} for k in KINDS}}
            )
            for k in KINDS:
                if kept[k]:
                    video[k][up.key] = _stats(kept[k])
    written = []
    for (family, task), videos in sorted(per_family.items()):
        for v in videos.values():
            v["nmr"] = (_object_nmr if family == "object" else _video_nmr)(v)
        path = child(root, family, task, "shard_0", "results.json")
        write_json(path, {"global_summary": {"num_videos": len(videos), "families": [family]}, "per_video": videos})
        written.append(path)
    for task, videos in sorted(states.items()):
        path = child(root, STATE_DIR, f"{STATE_PREFIX}{task}.json")
        write_json(path, {"engine": "persistbench judge", "num_videos": len(videos), "videos": videos})
        written.append(path)
    return written


def is_tree(root: Path) -> bool:
    """Whether ``root`` looks like upstream's result tree (a family folder holding a task folder)."""
    families = [root / f for f in (*VISUAL_FAMILIES, "unified")]
    return any(f.is_dir() and any(parse_task(t.name) for t in f.iterdir() if t.is_dir()) for f in families) or any(
        (root / STATE_DIR).glob(f"{STATE_PREFIX}*.json")
    )


def _mean_of(stats: object, where: str) -> float:
    mean = stats.get("mean") if isinstance(stats, dict) else None
    if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
        raise PersistbenchError(f"{where}: mean is {mean!r}, not a finite number")
    return float(mean)


def _blank(model: str, trajectory: str, uid: str) -> dict:
    return {"model": model, "subset": trajectory, "uid": uid, "means": {}}


def _entries(path: Path, key: str) -> dict[str, dict]:
    """The per-video objects a result file holds under ``key`` (checked: an object of objects)."""
    data = read_json(path)
    entries = data.get(key) if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise PersistbenchError(f"{path}: no {key} object")
    for uid, entry in entries.items():
        if not isinstance(entry, dict):
            raise PersistbenchError(f"{path}: {key}[{uid!r}] is not an object")
    return entries


def _visual(root: Path, videos: dict) -> None:
    for family in (*VISUAL_FAMILIES, "unified"):
        folder = root / family
        if not folder.is_dir():
            continue
        for task in sorted(p for p in folder.iterdir() if p.is_dir()):
            parsed = parse_task(task.name)
            if parsed is None:
                continue
            for shard in sorted(task.glob("shard_*")):
                path = next(
                    (shard / n for n in ("results.json", "results_partial.json") if (shard / n).is_file()), None
                )
                if path is None:
                    continue
                for uid, entry in _entries(path, "per_video").items():
                    video = videos.setdefault((*parsed, uid), _blank(*parsed, uid))
                    for kind in KINDS:
                        block = entry.get(kind, {})
                        if not isinstance(block, dict):
                            raise PersistbenchError(f"{path}: per_video[{uid!r}].{kind} is not an object")
                        for key, stats in block.items():
                            if key in OURS:
                                where = f"{path}: per_video[{uid!r}].{kind}.{key}"
                                video["means"].setdefault(OURS[key], {})[kind] = _mean_of(stats, where)


def _scores(video: dict, kind: str, where: str) -> list[float]:
    raw = video.get(f"{kind}_scores", [])
    if not isinstance(raw, list) or any(
        isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in raw
    ):
        raise PersistbenchError(f"{where}.{kind}_scores: not a list of finite numbers")
    return [float(x) for x in raw]


def _state(root: Path, videos: dict) -> None:
    for path in sorted((root / STATE_DIR).glob(f"{STATE_PREFIX}*.json")):
        parsed = parse_task(path.stem[len(STATE_PREFIX) :])
        if parsed is None:
            continue
        for uid, v in _entries(path, "videos").items():
            where = f"{path}: videos[{uid!r}]"
            lists = {k: _scores(v, k, where) for k in KINDS}
            if all(lists.values()):  # compute_nmr_summary: the lists' means, else the saved block's
                means = {k: sum(x) / len(x) for k, x in lists.items()}
            else:
                block = v.get("nmr") if isinstance(v.get("nmr"), dict) else {}
                saved = [block.get(f"mean_{k}") for k in KINDS]
                if any(x is None for x in saved):
                    continue
                means = {k: _mean_of({"mean": x}, f"{where}.nmr.mean_{k}") for k, x in zip(KINDS, saved)}
            video = videos.setdefault((*parsed, uid), _blank(*parsed, uid))
            video["means"]["persistent_state"] = means


def read(root: Path) -> dict[str, list[dict]]:
    """Model -> its videos of an upstream result tree at ``root``, each ``{"model", "subset", "uid", "means":
    {our metric: {kind: mean}}}``, merged across families by video as ``compute_nmr_summary.py`` merges them
    (a later family's value of a metric replaces an earlier one's). Malformed files are refused in one line."""
    root = Path(root)
    if not is_tree(root):
        raise PersistbenchError(f"{root}: not an upstream R2M-Bench result tree (<family>/<model>_<T>_30s/shard_*/)")
    videos: dict[tuple[str, str, str], dict] = {}
    _visual(root, videos)
    _state(root, videos)
    out: dict[str, list[dict]] = {}
    for (model, _, _), video in sorted(videos.items()):
        out.setdefault(model, []).append(video)
    return out


def records(videos: list[dict], epsilon: float) -> list[dict]:
    """Our per-video records (the fields :func:`persistbench.suites.r2m.scoring.summarise` reads) of one model's
    videos from :func:`read`: R, B and S are upstream's saved means."""
    out = []
    for v in videos:
        rel = {
            m: from_means(means, METRICS[m].higher_is_better, epsilon)
            for m, means in v["means"].items()
            if all(k in means for k in KINDS)
        }
        out.append({"subset": v["subset"], "uid": v["uid"], "requested": sorted(v["means"]), "relative": rel})
    return out
