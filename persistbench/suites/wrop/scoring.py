"""WROP's continuation scores (``wrop-cont-v1``, ours): per target frame, against the target video, and over hold.

Per case, at the protocol's evaluation size (``eval_size``; null: the target video's): every
scored target frame (``video_split``'s seam overlap, at the start, and end padding excluded) gets
each metric twice, on the full frame and inside the *changed region*: the pixels where the target
frame differs from the last input frame by more than ``tau`` (of 255, the largest channel
difference), dilated by ``dilate_px`` (an ellipse). The region comes from the ground truth only,
so every model is scored on the same pixels; a frame whose region is empty has no changed-region
value (excluded and counted). The same values are computed for *hold*, the last input frame
repeated, in the same run; a metric's *gain* is the model's value minus hold's, frame by frame,
negated for metrics where lower is better (LPIPS), so that a positive gain is better than copying
the last frame and the ``hold`` model scores exactly 0.

Aggregates: a case is the mean over its frames; a task the mean over its cases; a category and
Overall the mean over tasks (equal weight per task), with counts; tasks named by
``exclude_tasks`` (names or globs) are scored but left out of every aggregate. Per-frame curves
average each target frame index over the cases that score it.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from persistbench.core import stats as st
from persistbench.core.case import CaseRef, Prediction, ScoreContext
from persistbench.core.protocol import Protocol, Scorer
from persistbench.core.records import CaseScores, keep_unavailable
from persistbench.core.schema import (
    LPIPS_SECTION,
    PSNR_SECTION,
    SSIM_SECTION,
    metric_list,
    name_list,
    number,
    one_of,
    optional,
    section,
    size_hw,
    statement,
)
from persistbench.geometry.sampling import RGB_RESIZE
from persistbench.metrics.registry import METRICS, FrameBatch, order
from persistbench.suites.wrop import report
from persistbench.suites.wrop.layout import REGIONS
from persistbench.suites.wrop.taxonomy import taxonomy

if TYPE_CHECKING:
    from persistbench.suites.wrop.suite import Wrop

ROLES = ("model", "hold")
WROP_METRICS = ("psnr", "ssim", "lpips")
BATCH = 8  # frames per metric call: LPIPS of 8 frames at 1280 x 720 stays under ~2 GB

SCHEMA = {
    "metrics": metric_list(WROP_METRICS),
    "eval_size": optional(size_hw),
    "resize": section({"rgb": one_of(*RGB_RESIZE)}),
    "changed_region": section(
        {
            "reference": one_of("last input frame"),
            "tau": number(0.0, 1.0),
            "dilate_px": number(0, 64, integer=True),
        }
    ),
    "psnr": PSNR_SECTION,
    "ssim": SSIM_SECTION,
    "lpips": LPIPS_SECTION,
    "frames": statement("target frames but video_split's seam_overlap_frames (first) and target_pad_end_frames (last)"),
    "gain": statement("per frame: model minus hold (the last input frame), negated where lower is better"),
    "exclude_tasks": name_list,
    "aggregate": statement(
        "per case: mean over scored frames (NaN excluded and counted); per task: equal weight per case; "
        "per category and overall: equal weight per task"
    ),
}


def changed_region(targets: np.ndarray, last: np.ndarray, tau: float, dilate_px: int) -> np.ndarray:
    """``(N, H, W)`` bool: where each target frame ``(N, H, W, 3)`` differs from ``last`` ``(H, W, 3)``
    (both uint8) by more than ``tau * 255`` in some channel, dilated by an ellipse of radius ``dilate_px``."""
    import cv2

    diff = np.abs(targets.astype(np.int16) - last.astype(np.int16)[None]).max(-1) > tau * 255.0
    if dilate_px <= 0:
        return diff
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * dilate_px + 1, 2 * dilate_px + 1))
    return np.stack([cv2.dilate(d.astype(np.uint8), kernel) > 0 for d in diff]) if len(diff) else diff


@dataclass
class ContCaseScores(CaseScores):
    """One sample's scores (``scores/<protocol>/<category>/<sample>.json``); the JSON form is :meth:`to_json`.

    ``values[region][metric][role]`` holds one value per scored frame (``scored_frames``, target
    frame indices; None where the frame has no value); ``means[region][metric]`` the model's and
    hold's means, the mean gain and the frame counts; ``changed_fraction`` the changed region's
    share of each scored frame.
    """

    uid: str
    subset: str  # the category
    task: str
    method: str  # video_split.method as the generator wrote it
    boundary_method: str | None  # before_event or overlap_event under manifest_event_boundary
    target_frames: int
    size: list[int]  # [w, h] of the evaluation
    scored_frames: list[int]
    changed_fraction: list[float]
    values: dict[str, dict[str, dict[str, list[float | None]]]]
    means: dict[str, dict[str, dict]]


def _none(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _values(metrics: list[str], frames: np.ndarray, refs: np.ndarray, regions: dict, protocol: Protocol, backends):
    """``[region][metric]``: one value per frame of ``frames`` against ``refs`` ``(N, H, W, 3)`` inside each
    region's masks ``(N, H, W)``, in chunks of :data:`BATCH` frames; a metric's per-frame maps (a network's)
    are computed once per chunk and reduced over every region; ``backends`` say how networks load."""
    out: dict = {r: {m: [] for m in metrics} for r in regions}
    for a in range(0, len(frames), BATCH):
        chunk = slice(a, a + BATCH)
        batch = FrameBatch(frames[chunk], refs[chunk], np.ones(refs[chunk].shape[:3], bool), [], math.nan, backends)
        for r, masks in regions.items():
            b = batch.with_masks(masks[chunk])
            for m in metrics:
                out[r][m] += [_none(v) for v in METRICS[m].function(b, protocol.params(m))]
    return out


def case_means(values: dict[str, list], higher_is_better: bool) -> dict:
    """The model's and hold's means over their valid frames, and the mean gain over frames where both are valid."""
    model, hold = values["model"], values["hold"]
    sign = 1.0 if higher_is_better else -1.0
    gains = [sign * (m - h) for m, h in zip(model, hold) if m is not None and h is not None]
    valid = [v for v in model if v is not None]
    valid_hold = [v for v in hold if v is not None]
    return {
        "model": float(np.mean(valid)) if valid else None,
        "hold": float(np.mean(valid_hold)) if valid_hold else None,
        "gain": float(np.mean(gains)) if gains else None,
        "frames": len(gains),
        "nan": len(model) - len(gains),
    }


def score_frames(
    preds: np.ndarray, targets: np.ndarray, last: np.ndarray, scored: range, protocol: Protocol, ctx, ids: dict
) -> ContCaseScores:
    """Scores of one continuation: ``preds`` and ``targets`` ``(N, H, W, 3)`` uint8 and ``last`` (the last
    input frame) at the evaluation size; ``scored`` the target frames that count."""
    idx = list(scored)
    refs, model = targets[idx], preds[idx]
    hold = np.repeat(last[None], len(idx), 0)
    cfg = protocol.config["changed_region"]
    regions = {
        "full": np.ones(refs.shape[:3], bool),
        "changed": changed_region(refs, last, cfg["tau"], cfg["dilate_px"]),
    }
    values: dict = {r: {} for r in REGIONS}
    means: dict = {r: {} for r in REGIONS}
    metrics = [m for m in order(ctx.wanted) if m not in ctx.unavailable]
    per_role = {
        role: _values(metrics, frames, refs, regions, protocol, ctx.backends)
        for role, frames in (("model", model), ("hold", hold))
    }
    for r in REGIONS:
        for m in metrics:
            values[r][m] = {role: per_role[role][r][m] for role in ROLES}
            means[r][m] = case_means(values[r][m], METRICS[m].higher_is_better)
    h, w = refs.shape[1:3] if len(idx) else targets.shape[1:3]
    return ContCaseScores(
        uid=ids["sample"],
        subset=ids["category"],
        task=ids["task"],
        method=ids["method"],
        boundary_method=ids["boundary_method"],
        target_frames=len(targets),
        size=[int(w), int(h)],
        scored_frames=idx,
        changed_fraction=[float(x.mean()) for x in regions["changed"]],
        values=values,
        means=means,
        **CaseScores.common(protocol, ctx.wanted, ctx.unavailable, ids["prediction"]),
    )


def merge(new: dict, old: dict) -> dict:
    """Keep the metrics an earlier scoring of the same prediction under the same protocol computed and this one did not."""
    kept = [m for m in old.get("values", {}).get("full", {}) if m not in new["requested"] and m in WROP_METRICS]
    for m in kept:
        for r in REGIONS:
            new["values"][r][m], new["means"][r][m] = old["values"][r][m], old["means"][r][m]
    kept += keep_unavailable(new, old, WROP_METRICS)
    new["requested"] = order(set(new["requested"]) | set(kept))
    return new


# ---------------------------------------------------------------- aggregates


@dataclass
class WropSummary:
    """``summary.json``'s body. ``tasks[t]``: category, case counts and, per region and metric, the mean
    model, hold and gain over its cases; ``categories`` (the six families, in the generator's order, with
    their display names and dimension), ``dimensions`` (object permanence, object solidity) and ``overall``
    the means over tasks; ``curves[region][metric]``: per target frame index, the mean model value and gain
    and the cases."""

    tasks: dict[str, dict]
    categories: dict[str, dict]
    dimensions: dict[str, dict]
    overall: dict[str, dict]
    curves: dict[str, dict]
    excluded_tasks: list[str]
    unavailable: dict[str, str]
    cases: int

    def to_json(self) -> dict:
        return asdict(self)


def _mean(values: list) -> float | None:
    valid = [v for v in values if v is not None]
    return float(np.mean(valid)) if valid else None


def _block(rows: list[dict], metrics: list[str]) -> dict:
    """Per region and metric: the mean of ``rows``' model, hold and gain, and how many rows hold a gain."""
    out = {}
    for r in REGIONS:
        out[r] = {}
        for m in metrics:
            cells = [row[r][m] for row in rows if m in row[r]]
            out[r][m] = {k: _mean([c[k] for c in cells]) for k in ("model", "hold", "gain")}
            out[r][m]["n"] = sum(c["gain"] is not None for c in cells)
    return out


def summarise(results: list[dict], exclude: list[str]) -> WropSummary:
    """Task, category and overall means (equal weight per task) and per-frame curves of the per-case records."""
    metrics = order({m for r in results for m in r["values"].get("full", {})})
    tasks = sorted({r["task"] for r in results})
    excluded = [t for t in tasks if any(fnmatch.fnmatchcase(t, p) for p in exclude)]
    kept = [r for r in results if r["task"] not in excluded]
    per_task = {}
    for t in tasks:
        rows = [r for r in results if r["task"] == t]
        per_task[t] = {
            "category": rows[0]["subset"],
            "cases": len(rows),
            "excluded": t in excluded,
            **_block([r["means"] for r in rows], metrics),
        }
    live = {t: v for t, v in per_task.items() if not v["excluded"]}
    tax = taxonomy()

    def level(members: list[dict], **about) -> dict:
        return {**about, "tasks": len(members), "cases": sum(v["cases"] for v in members), **_block(members, metrics)}

    categories = {
        c: level([v for v in live.values() if v["category"] == c], name=name, dimension=tax.dimension_of[c])
        for c, name in tax.family_names.items()
        if any(v["category"] == c for v in live.values())
    }
    dimensions = {
        d: level([v for v in live.values() if tax.dimension_of[v["category"]] == d], name=name)
        for d, name in tax.dimension_names.items()
        if any(tax.dimension_of[v["category"]] == d for v in live.values())
    }
    overall = {"tasks": len(live), "cases": len(kept), **_block(list(live.values()), metrics)}
    curves: dict = {r: {} for r in REGIONS}
    length = max((r["target_frames"] for r in kept), default=0)
    sign = {m: 1.0 if METRICS[m].higher_is_better else -1.0 for m in metrics}
    for reg in REGIONS:
        for m in metrics:
            model: list[list[float]] = [[] for _ in range(length)]
            gain: list[list[float]] = [[] for _ in range(length)]
            for r in kept:
                v = r["values"][reg].get(m)
                for i, t in enumerate(r["scored_frames"] if v else ()):
                    if v["model"][i] is not None and v["hold"][i] is not None:
                        model[t].append(v["model"][i])
                        gain[t].append(sign[m] * (v["model"][i] - v["hold"][i]))
            curves[reg][m] = {
                "model": [_mean(x) for x in model],
                "gain": [_mean(x) for x in gain],
                "cases": [len(x) for x in model],
            }
    unavailable = {m: why for r in results for m, why in r.get("unavailable", {}).items()}
    return WropSummary(per_task, categories, dimensions, overall, curves, excluded, unavailable, len(results))


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def tables(summary: dict) -> tuple[list[str], dict[str, str]]:
    """``summary.md``'s tables (one per region: the categories by their display names, the two dimensions in
    italics, Overall) and ``leaderboard.csv``'s columns (``<category, dimension or overall>/<region>/<metric>``)."""
    metrics = list(summary["overall"]["full"])
    lines, row = [], {}
    for reg in REGIONS:
        lines += [
            f"**{reg} frame**" if reg == "full" else "**changed region**",
            "",
            "| category | tasks | cases | " + " | ".join(f"{m} | {m} gain" for m in metrics) + " |",
            "| --- | --- | --- | " + " | ".join("--- | ---" for _ in metrics) + " |",
        ]
        blocks = [
            *((key, block["name"]) for key, block in summary["categories"].items()),
            *((key, f"*{block['name']}*") for key, block in summary["dimensions"].items()),
            ("overall", "**Overall**"),
        ]
        for key, name in blocks:
            block = summary["categories"].get(key) or summary["dimensions"].get(key) or summary["overall"]
            cells = [f"{_fmt(block[reg][m]['model'])} | {_fmt(block[reg][m]['gain'])}" for m in metrics]
            lines.append(f"| {name} | {block['tasks']} | {block['cases']} | " + " | ".join(cells) + " |")
            for m in metrics:
                for k in ("model", "gain"):
                    v = block[reg][m][k]
                    row[f"{key}/{reg}/{m}{'' if k == 'model' else '_gain'}"] = "" if v is None else f"{v:.6f}"
        lines.append("")
    if summary["excluded_tasks"]:
        lines.append(f"Excluded by the protocol: {', '.join(summary['excluded_tasks'])}.")
    for m, why in summary["unavailable"].items():
        lines.append(f"{m}: unavailable ({why}).")
    lines.append(f"{summary['cases']} cases; gain = model minus hold (the last input frame), positive is better.")
    return lines, row


def estimands(results: list[dict], summary: dict) -> st.Estimands:
    """WROP's numbers: each category's, dimension's and Overall's model value and gain over hold per region and
    metric, a mean over their tasks of the task means over samples (equal weight per task); strata: tasks."""
    metrics = list(summary["overall"]["full"])
    cells = [(reg, m, k) for reg in REGIONS for m in metrics for k in ("model", "gain")]
    columns = tuple(f"{reg}/{m}/{k}{suffix}" for reg, m, k in cells for suffix in ("", "#n"))
    values = np.zeros((len(results), len(columns)))
    for i, r in enumerate(results):
        for j, (reg, m, k) in enumerate(cells):
            v = r["means"][reg].get(m, {}).get(k)
            if v is not None:
                values[i, 2 * j : 2 * j + 2] = (v, 1.0)
    units = st.Units(tuple(r["uid"] for r in results), tuple(r["task"] for r in results), columns, values)
    live = {t: v for t, v in summary["tasks"].items() if not v["excluded"]}
    tax = taxonomy()
    levels = {
        **{c: [t for t, v in live.items() if v["category"] == c] for c in summary["categories"]},
        **{d: [t for t, v in live.items() if tax.dimension_of[v["category"]] == d] for d in summary["dimensions"]},
        "overall": list(live),
    }
    exprs: dict[str, object] = {}
    for key, tasks in levels.items():
        for reg, m, k in cells:
            per_task = tuple(st.Mean(f"{reg}/{m}/{k}", f"{reg}/{m}/{k}#n", (t,)) for t in tasks)
            exprs[f"{key}/{reg}/{m}{'' if k == 'model' else '_gain'}"] = st.MeanOf(per_task)
    headline = {f"overall/changed/{m}_gain": True for m in metrics}
    return st.Estimands(units, exprs, "samples", "task", headline)


class ContinuationScorer(Scorer["Wrop"]):
    """``wrop-cont-v1``. Per sample: each metric per scored target frame, full and in the changed region, and its
    gain over hold."""

    name = "continuation"
    schema = SCHEMA

    def score_case(self, suite: Wrop, case: CaseRef, pred: Prediction, protocol: Protocol, ctx: ScoreContext) -> dict:
        preds, targets, last, scored, ids = suite.continuation(case, pred, protocol)
        return score_frames(preds, targets, last, scored, protocol, ctx, ids).to_json()

    def scored_metrics(self, record: dict) -> set[str]:
        values = record.get("values")
        full = values.get("full") if isinstance(values, dict) else None
        return set(full) if isinstance(full, dict) else set()

    def merge(self, new: dict, old: dict) -> dict:
        return merge(new, old)

    def summarise(self, suite: Wrop, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        body = summarise(results, protocol.config["exclude_tasks"]).to_json()
        return {"dataset_options": suite.dataset_options()}, body

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return tables(summary)

    def estimands(self, results: list[dict], summary: dict) -> st.Estimands:
        return estimands(results, summary)

    report_steps = staticmethod(report.steps)
    report_sections = staticmethod(report.sections)


CONTINUATION = ContinuationScorer()
