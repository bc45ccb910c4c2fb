"""PersistBench's scoring: per frame against the ground truth, on visible and off-screen frames.

Per case: the ground truth is sampled to the prediction's frame indices (``case.json``), both are
resized to the protocol's evaluation size (``resize.rgb`` for RGB, nearest for masks), and every
requested frame metric of the registry is computed per frame inside the ground-truth ``center``
mask. Frames are "visible" when ``view_0_visibility`` is above ``visible_above`` and "invisible"
(off-screen: the memory frames) below ``invisible_below``, from the first visible frame on
(``start: first_visible``) or from the first frame (``start: first_frame``). Aggregates are
recomputed from the per-case files only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from persistbench.backends import BackendOptions
from persistbench.core import stats as st
from persistbench.core.case import CaseRef, Prediction, ScoreContext
from persistbench.core.errors import PersistbenchError
from persistbench.core.protocol import Protocol, Scorer
from persistbench.core.records import CaseScores, keep_unavailable
from persistbench.core.schema import (
    LPIPS_SECTION,
    PSNR_SECTION,
    SSIM_SECTION,
    metric_list,
    number,
    one_of,
    optional,
    section,
    size_hw,
    statement,
)
from persistbench.geometry.sampling import RGB_RESIZE, crop_resize, sampled_frames, sampled_masks
from persistbench.io.images import image_size, read_image
from persistbench.metrics.registry import METRICS, FrameBatch, order
from persistbench.suites.persistbench import report
from persistbench.suites.persistbench.dataset import Case
from persistbench.suites.persistbench.layout import SPLITS, VIEWS
from persistbench.suites.persistbench.predictions import FramePrediction
from persistbench.suites.persistbench.segment import TemplateTracker

if TYPE_CHECKING:
    from persistbench.suites.persistbench.suite import PersistBench

FRAME_METRICS = tuple(m for m, spec in METRICS.items() if spec.kind == "frame")

SCHEMA = {
    "visible_above": number(0, 1),
    "invisible_below": optional(number(0, 1)),
    "invisible_at_most": optional(number(0, 1)),
    "start": one_of("first_visible", "first_frame"),
    "eval_size": size_hw,
    "resize": section({"rgb": one_of(*RGB_RESIZE), "mask": one_of("nearest")}),
    "metrics": metric_list(FRAME_METRICS),
    "psnr": PSNR_SECTION,
    "ssim": SSIM_SECTION,
    "lpips": LPIPS_SECTION,
    "continuity": section({"scale": statement("sqrt(mean reference mask area)")}),
    "aggregate": statement(
        "per case: mean over visible and over invisible frames (NaN excluded and counted); "
        "per subset: equal weight per case"
    ),
}


@dataclass
class FrameCaseScores(CaseScores):
    """One case's scores (``scores/<protocol>/<subset>/<case_id>.json``); the JSON form is :meth:`to_json`.

    ``metrics[m]`` holds one value per scored frame (None for NaN: an empty reference mask, a lost
    object); ``means[split][m]`` the mean over the split's non-NaN frames and ``counts[split]``
    the number of frames and of NaNs skipped per metric.
    """

    uid: str
    subset: str
    frame_indices: list[int]
    visible: list[bool]
    invisible: list[bool]
    metrics: dict[str, list[float | None]]
    means: dict[str, dict[str, float | None]]
    counts: dict[str, dict[str, int]]
    mask_source: str
    lost: list[bool]


def frame_sets(visibility: np.ndarray, protocol: Protocol) -> tuple[np.ndarray, np.ndarray]:
    """``(visible, invisible)`` bool ``(T,)`` over a case's frames; with ``start: first_visible`` both are
    False before the first visible frame."""
    vis = np.asarray(visibility, np.float64)
    visible = vis > protocol.config["visible_above"]
    at_most = protocol.config.get("invisible_at_most")
    invisible = vis < protocol.config["invisible_below"] if at_most is None else vis <= at_most
    if protocol.config["start"] == "first_visible":
        start = int(np.argmax(visible)) if visible.any() else len(vis)
        visible[:start] = invisible[:start] = False
    return visible, invisible


def config_problems(config: dict) -> list[str]:
    """The off-screen frames are given by exactly one of ``invisible_below`` and ``invisible_at_most``."""
    if (config.get("invisible_below") is None) == (config.get("invisible_at_most") is None):
        return ["give exactly one of invisible_below and invisible_at_most"]
    return []


def frame_rule(config: dict) -> dict[str, str]:
    """The frames each split scores, as the summaries state them: ``{"visible": "view_0_visibility > 0.7",
    "invisible": "view_0_visibility < 0.3"}`` (or ``<= 0`` where the protocol counts only fully hidden frames)."""
    at_most = config.get("invisible_at_most")
    invisible = f"< {config['invisible_below']:g}" if at_most is None else f"<= {at_most:g}"
    return {
        "visible": f"view_0_visibility > {config['visible_above']:g}",
        "invisible": f"view_0_visibility {invisible}",
    }


def frame_lines(summary: dict) -> list[str]:
    """``summary.md``'s statement of the frame rule (:func:`frame_rule`), when the summary records one."""
    rule = summary.get("frames")
    return [f"Frames: visible where {rule['visible']}, invisible where {rule['invisible']}.", ""] if rule else []


def _nan_to_none(values) -> list:
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]


def _mean(values: list, selected: np.ndarray) -> tuple[float | None, int]:
    """Mean of the selected non-NaN values and the number of NaNs skipped."""
    picked = [v for v, s in zip(values, selected) if s]
    valid = [v for v in picked if v is not None]
    return (float(np.mean(valid)) if valid else None), len(picked) - len(valid)


def read_all(
    paths: list[Path], size: tuple[int, int] | None, eval_size: tuple[int, int], gray: bool, rgb: str
) -> np.ndarray:
    """Images resized to ``eval_size`` = (h, w); each must be ``size`` = (h, w) (or, if None, the size of
    the first), checked from the file's header before it is decoded."""
    out = []
    for p in paths:
        got = image_size(p)
        size = size or got
        if got != tuple(size):
            raise PersistbenchError(f"{p}: {got[1]}x{got[0]}, expected {size[1]}x{size[0]}")
        out.append(crop_resize(read_image(p, gray=gray), (0, 0, got[1], got[0]), eval_size, nearest=gray, rgb=rgb))
    return np.stack(out)


def score_case(
    case: Case,
    pred: FramePrediction,
    protocol: Protocol,
    wanted: tuple[str, ...],
    unavailable: dict[str, str],
    backends: BackendOptions,
) -> FrameCaseScores:
    """Per-frame metrics of one predicted case; raises :class:`PersistbenchError` on a bad prediction.

    The metrics of ``unavailable`` (metric -> why its backend cannot run here) are recorded as such, not
    computed; ``backends`` say how the others' backends load.
    """
    idx = pred.frame_indices
    if not idx or max(idx) >= case.n_frames or min(idx) < 0:
        raise PersistbenchError(f"{case.case_id}: frame indices do not fit the case's {case.n_frames} frames")
    if len(pred.files) != len(idx):
        raise PersistbenchError(f"{case.case_id}: {len(pred.files)} predicted frames, expected {len(idx)}")
    if pred.masks and len(pred.masks) != len(idx):
        raise PersistbenchError(f"{case.case_id}: {len(pred.masks)} predicted masks, expected {len(idx)}")
    size = tuple(protocol.config["eval_size"])
    rgb = protocol.config["resize"]["rgb"]
    for view in VIEWS:  # the scores do not use the cameras, but a case with broken ones is not scored as sound
        case.view(view).camera(case.n_frames)
    gt_view = case.view("center")
    gt = sampled_frames(gt_view, np.asarray(idx), pred.crop, size, rgb=rgb)
    gt_masks = sampled_masks(gt_view, np.asarray(idx), pred.crop, size)
    preds = read_all(list(pred.files), pred.size, size, gray=False, rgb=rgb)

    vis = np.asarray(case.visibility()["view_0_visibility"])
    visible, invisible = frame_sets(vis, protocol)
    sel = {"visible": visible[idx], "invisible": invisible[idx]}
    if pred.masks:
        source = "model"
        pred_masks = list(read_all(pred.masks, pred.size, size, gray=True, rgb=rgb) > 0)
    else:
        tracker = TemplateTracker()
        source = tracker.name
        ref = next((i for i, t in enumerate(idx) if visible[t] and gt_masks[i].any()), None)
        pred_masks = tracker.track(preds, gt[ref], gt_masks[ref]) if ref is not None else [None] * len(idx)
    lost = [m is None for m in pred_masks]
    pred_masks = [np.zeros(size, bool) if m is None else m for m in pred_masks]
    areas = [m.sum() for m in gt_masks if m.any()]
    scale = math.sqrt(float(np.mean(areas))) if areas else float("nan")
    batch = FrameBatch(preds, gt, gt_masks, pred_masks, scale, backends)
    per_frame = {
        m: _nan_to_none(METRICS[m].function(batch, protocol.params(m))) for m in order(wanted) if m not in unavailable
    }
    means, counts = {}, {}
    for split in SPLITS:
        means[split], counts[split] = {}, {"frames": int(sel[split].sum())}
        for name, values in per_frame.items():
            mean, nan = _mean(values, sel[split])
            means[split][name] = mean
            counts[split][f"{name}_nan"] = nan
    return FrameCaseScores(
        uid=case.case_id,
        subset=case.subset,
        frame_indices=idx,
        visible=sel["visible"].tolist(),
        invisible=sel["invisible"].tolist(),
        metrics=per_frame,
        means=means,
        counts=counts,
        mask_source=source,
        lost=lost,
        **CaseScores.common(protocol, wanted, unavailable, pred.digest),
    )


def merge(new: dict, old: dict) -> dict:
    """Keep the metrics an earlier scoring of the same prediction under the same protocol computed and this one
    did not, so that ``--metrics psnr`` adds to the results instead of replacing them. The merged record
    has the same bytes as scoring all its metrics at once."""
    if old.get("mask_source") != new["mask_source"]:
        return new
    kept = [m for m in old.get("metrics", {}) if m not in new["requested"] and m in FRAME_METRICS]
    for m in kept:
        new["metrics"][m] = old["metrics"][m]
        for split in SPLITS:
            new["means"][split][m] = old["means"][split].get(m)
            new["counts"][split][f"{m}_nan"] = old["counts"][split].get(f"{m}_nan", 0)
    kept += keep_unavailable(new, old, FRAME_METRICS)
    new["requested"] = order(set(new["requested"]) | set(kept))
    return new


@dataclass
class MetricMean:
    mean: float | None  # the mean of the case means that are not None
    cases: int  # how many cases had one


@dataclass
class SubsetSummary:
    visible: dict[str, MetricMean]
    invisible: dict[str, MetricMean]
    gap: dict[str, float | None]  # visible - invisible
    cases: int


@dataclass
class FrameSummary:
    """``summary.json``'s body: per subset and over ``all`` cases (equal weight per case)."""

    subsets: dict[str, SubsetSummary]

    def to_json(self) -> dict:
        return asdict(self)


def aggregate(results: list[dict]) -> FrameSummary:
    """Per subset and over all cases: for each split and metric, the mean of the case means and the valid-case count; and the gap."""
    out = {}
    for subset in sorted({r["subset"] for r in results}) + ["all"]:
        rs = [r for r in results if subset in ("all", r["subset"])]
        names = sorted({m for r in rs for m in r["metrics"]})
        split = {}
        for name in SPLITS:
            split[name] = {}
            for m in names:
                vals = [r["means"][name].get(m) for r in rs if r["means"][name].get(m) is not None]
                split[name][m] = MetricMean(float(np.mean(vals)) if vals else None, len(vals))
        gap = {
            m: split["visible"][m].mean - split["invisible"][m].mean
            if split["visible"][m].mean is not None and split["invisible"][m].mean is not None
            else None
            for m in names
        }
        out[subset] = SubsetSummary(split["visible"], split["invisible"], gap, len(rs))
    return FrameSummary(out)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def tables(summary: dict) -> tuple[list[str], dict[str, str]]:
    """``summary.md``'s table and ``leaderboard.csv``'s metric columns."""
    subsets = summary["subsets"]
    names = sorted(subsets["all"]["visible"])
    row = {}
    for s in subsets:
        for split in (*SPLITS, "gap"):
            for m in names:
                v = subsets[s][split][m] if split == "gap" else subsets[s][split][m]["mean"]
                row[f"{s}/{split}/{m}"] = "" if v is None else f"{v:.6f}"
    lines = frame_lines(summary)
    lines += ["| subset | metric | visible | invisible | gap | cases |", "| --- | --- | --- | --- | --- | --- |"]
    for s, block in subsets.items():
        for m in names:
            lines.append(
                f"| {s} | {m} | {_fmt(block['visible'][m]['mean'])} | {_fmt(block['invisible'][m]['mean'])} | "
                f"{_fmt(block['gap'][m])} | {block['cases']} |"
            )
    return lines, row


def split_units(results: list[dict], field: str, stratum) -> tuple[st.Units, list[str]]:
    """One unit per case (``<subset>.<uid>``, stratum ``stratum(record)``): per split and metric, the case's
    value of ``record[field][split][metric]`` and whether it has one (columns ``split/metric`` and
    ``split/metric#n``); and the metrics, in registry order."""
    metrics = order({m for r in results for split in SPLITS for m in (r.get(field) or {}).get(split, {})})
    columns = [f"{split}/{m}{suffix}" for split in SPLITS for m in metrics for suffix in ("", "#n")]
    values = np.zeros((len(results), len(columns)))
    for i, r in enumerate(results):
        for j, (split, m) in enumerate((split, m) for split in SPLITS for m in metrics):
            v = ((r.get(field) or {}).get(split) or {}).get(m)
            if v is not None:
                values[i, 2 * j : 2 * j + 2] = (v, 1.0)
    keys = tuple(f"{r['subset']}.{r['uid']}" for r in results)
    return st.Units(keys, tuple(stratum(r) for r in results), tuple(columns), values), metrics


def split_mean(split: str, metric: str, strata: tuple[str, ...] | None, prefix: str = "") -> st.Mean:
    """The mean over the cases of ``strata`` (None: all) that have one of ``split``/``metric`` (:func:`split_units`)."""
    return st.Mean(f"{prefix}{split}/{metric}", f"{prefix}{split}/{metric}#n", strata)


def estimands(results: list[dict]) -> st.Estimands:
    """``classic-v1``'s numbers: per subset and over all cases, each split's metric means and their gap."""
    units, metrics = split_units(results, "means", lambda r: r["subset"])
    exprs: dict[str, object] = {}
    for subset in [*sorted(set(units.strata)), "all"]:
        strata = None if subset == "all" else (subset,)
        for m in metrics:
            vis, inv = split_mean("visible", m, strata), split_mean("invisible", m, strata)
            exprs |= {f"{subset}/visible/{m}": vis, f"{subset}/invisible/{m}": inv}
            exprs[f"{subset}/gap/{m}"] = st.Difference(vis, inv)
    headline = {f"all/invisible/{m}": METRICS[m].higher_is_better for m in metrics if m in METRICS}
    return st.Estimands(units, exprs, "cases", "subset", headline)


class ClassicScorer(Scorer["PersistBench"]):
    """``classic-v1``: each frame metric inside the ground truth's mask, on visible and off-screen frames."""

    name = "classic"
    schema = SCHEMA

    def config_problems(self, config: dict) -> list[str]:
        return config_problems(config)

    def score_case(
        self, suite: PersistBench, case: CaseRef, pred: Prediction, protocol: Protocol, ctx: ScoreContext
    ) -> dict:
        full = suite.case(case.subset, case.case_id)
        return score_case(full, pred, protocol, ctx.wanted, ctx.unavailable, ctx.backends).to_json()

    def merge(self, new: dict, old: dict) -> dict:
        return merge(new, old)

    def summarise(
        self, suite: PersistBench, results: list[dict], protocol: Protocol, ctx: ScoreContext
    ) -> tuple[dict, dict]:
        fields = {
            "mask_source": sorted({r["mask_source"] for r in results}),
            "frames": frame_rule(protocol.config),
        }
        return fields, aggregate(results).to_json()

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return tables(summary)

    def estimands(self, results: list[dict], summary: dict) -> st.Estimands:
        return estimands(results)

    report_steps = staticmethod(report.steps)
    report_sections = staticmethod(report.sections)


CLASSIC = ClassicScorer()
