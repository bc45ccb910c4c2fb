"""PersistBench's published protocol, ``paper-v3`` (the public toolkit's ``default-three-paper-v3``).

Per case (docs/metrics.md, "paper-v3", lists every step and each deviation):

1. the ground truth at the model's frames and crop, and the prediction, resized (PIL bilinear; masks
   nearest) to fit inside ``eval_size`` with the aspect kept; frames visible above
   ``visible_above`` and invisible below ``invisible_below`` of ``view_0_visibility``; scoring
   starts at the first visible frame (0 when none is);
2. *matching* (backend ``dinov3-large``): the object's features in the ground truth's start frame
   (its mask's box widened by ``bbox_margin``) are slid over the prediction's start frame; the best
   place receives the ground-truth mask, resized to the box;
3. *tracking* (backend ``sam2-package``, the ``sam2`` package the published scores came from;
   ``transformers``' port, ``sam2``, may be named in a protocol file of one's own): that mask is
   followed through the prediction (frames passed twice through JPEG at quality 95: the public
   toolkit's tracker reads a JPEG copy of its JPEG copy); a frame is tracked when its mask is not
   empty;
4. the scores, per frame from the start: ``object_permanence`` = tracked AND the judge sees the
   object (judge asked on a sparse, adaptive set of frames, :func:`paper_metrics.judge_statuses`);
   ``motion_continuity`` and ``appearance_preservation`` (backend ``dinov2-reg-large``) as the
   registry defines them; the case's visible and invisible means skip frames without a value.

A judgment that cannot be obtained leaves the case's object permanence null with the failures
counted (its other scores stand); ``--resume`` scores such a case again.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from persistbench.backends import BackendOptions, load, merged_provenance, provenance
from persistbench.backends.judge import (
    JudgmentFailed,
    failure_line,
    identity_line,
    merge_tallies,
    tally,
)
from persistbench.core import stats as st
from persistbench.core.case import CaseRef, Prediction, ScoreContext
from persistbench.core.errors import PersistbenchError
from persistbench.core.protocol import Protocol, Scorer
from persistbench.core.records import CaseScores
from persistbench.core.schema import metric_list, number, one_of, section, size_hw, statement
from persistbench.geometry.sampling import sampled_frames, sampled_masks
from persistbench.io.files import write_json
from persistbench.io.images import resize_images
from persistbench.metrics.pair import pooled
from persistbench.metrics.registry import METRICS, order
from persistbench.suites.persistbench import leaderboard as board
from persistbench.suites.persistbench import report
from persistbench.suites.persistbench import tracked as pm
from persistbench.suites.persistbench.dataset import Case
from persistbench.suites.persistbench.layout import SPLITS, public_result
from persistbench.suites.persistbench.predictions import FramePrediction
from persistbench.suites.persistbench.question import parse_seen, permanence_request
from persistbench.suites.persistbench.scoring import frame_lines, frame_rule, read_all, split_mean, split_units

if TYPE_CHECKING:
    from persistbench.suites.persistbench.suite import PersistBench

PROCEDURE = board.PROCEDURE
PAPER_METRICS = tuple(spec.name for spec in pm.TRACKED_METRICS)

SCHEMA = {
    "procedure": one_of(PROCEDURE),
    "visible_above": number(0, 1),
    "invisible_below": number(0, 1),
    "eval_size": size_hw,
    "metrics": metric_list(PAPER_METRICS),
    "matching": section({"backend": one_of("dinov3-large"), "bbox_margin": number(0, 1)}),
    "tracking": section({"backend": one_of("sam2-package", "sam2"), "jpeg_quality": number(1, 100, integer=True)}),
    "object_permanence": section(
        {
            "num_sample_frames": number(0, 10_000, integer=True),
            "crop_padding": number(0, 1),
            "crop_size": size_hw,
            "prompt": one_of("pair-v3"),
        }
    ),
    "appearance_preservation": section({"backend": one_of("dinov2-reg-large")}),
    "judge": section(
        {
            "model": lambda v: None if isinstance(v, str) and 0 < len(v) <= 200 else "must be a model name",
            "temperature": number(0.0, 2.0),
            "max_tokens": number(16, 65536, integer=True),
            "enable_thinking": one_of(False, True),
        }
    ),
    "aggregate": statement(
        "per case: mean over visible and over invisible frames from the start (null excluded and counted); "
        "per group: equal weight per case"
    ),
}


def eval_size(model_hw: tuple[int, int], box_hw: tuple[int, int]) -> tuple[int, int]:
    """The largest ``(h, w)`` inside ``box_hw`` with the aspect of ``model_hw``, truncated (the public rule)."""
    (h, w), (th, tw) = model_hw, box_hw
    return (int(tw / (w / h)), tw) if w / h > tw / th else (th, int(th * (w / h)))


def _jpeg(frame: np.ndarray, quality: int) -> np.ndarray:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, "JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


# ---------------------------------------------------------------- the case


@dataclass
class PaperCaseScores(CaseScores):
    """One case's ``paper-v3`` scores; the JSON form is :meth:`to_json`.

    ``metrics[m]`` one value per frame (None before ``start`` and where a frame has none);
    ``means[split][m]`` the mean over the split's frames from ``start`` that have one (None if none), the
    public toolkit 0.1.7's case value; ``published[split][m]`` the published leaderboard's (the same but for
    motion continuity: ``exp(-mean d)``); ``motion_distance`` each frame's ``d`` (motion continuity is
    ``exp(-d)``; None where it has none);
    ``tracked`` whether the tracker kept the object per frame; ``judge`` what was asked (``asked``: the
    frames; ``judgments``, ``failed``, ``reasons``: reason -> count, ``reason``: the first failure's
    message; ``answered_by``: the judges that answered); ``backends`` which backend, weights (sha256) and judge produced the scores.
    """

    uid: str
    subset: str
    use_stationary: int | None
    frame_indices: list[int]
    eval_size: list[int]
    visible: list[bool]
    invisible: list[bool]
    start: int
    matching_score: float
    tracked: list[bool]
    metrics: dict[str, list[float | None]]
    means: dict[str, dict[str, float | None]]
    published: dict[str, dict[str, float | None]]
    motion_distance: list[float | None]
    counts: dict[str, dict[str, int]]
    judge: dict
    backends: dict


def backends_needed(cfg: dict, wanted: tuple[str, ...]) -> list[str]:
    """Matching and tracking always; DINOv2 for appearance; the judge for permanence."""
    needed = [cfg["matching"]["backend"], cfg["tracking"]["backend"]]
    needed += [cfg["appearance_preservation"]["backend"]] if "appearance_preservation" in wanted else []
    return needed + (["judge"] if "object_permanence" in wanted else [])


def _none(values) -> list[float | None]:
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]


def score_case(case: Case, pred: FramePrediction, protocol: Protocol, wanted: tuple[str, ...], opts: BackendOptions):
    """The ``paper-v3`` scores of one predicted case; raises :class:`PersistbenchError` on a bad prediction
    and :class:`BackendUnavailable` when a backend it needs cannot run."""
    cfg = protocol.config
    idx = pred.frame_indices
    if not idx or max(idx) >= case.n_frames or min(idx) < 0:
        raise PersistbenchError(f"{case.case_id}: frame indices do not fit the case's {case.n_frames} frames")
    if len(pred.files) != len(idx):
        raise PersistbenchError(f"{case.case_id}: {len(pred.files)} predicted frames, expected {len(idx)}")
    used = provenance(backends_needed(cfg, wanted), opts)  # fails before any work when one is missing

    preds_model = read_all(list(pred.files), pred.size, pred.size or _first_size(pred), gray=False, rgb="area")
    model_hw = preds_model.shape[1:3]
    size = eval_size(model_hw, tuple(cfg["eval_size"]))
    view = case.view("center")
    refs = resize_images(sampled_frames(view, np.asarray(idx), pred.crop, model_hw), size, nearest=False)
    ref_masks = resize_images(
        sampled_masks(view, np.asarray(idx), pred.crop, model_hw).astype(np.uint8) * 255, size, True
    )
    ref_masks = ref_masks > 127
    preds = resize_images(preds_model, size, nearest=False)
    n = len(idx)
    vis = np.asarray(case.visibility()["view_0_visibility"], np.float64)[idx]
    visible, invisible = vis > cfg["visible_above"], vis < cfg["invisible_below"]
    start = int(np.argmax(visible)) if visible.any() else 0

    pred_masks, matching_score = _track(refs, ref_masks, preds, start, cfg, opts)
    tracked = [i >= start and bool(pred_masks[i].any()) for i in range(n)]
    judge = {"asked": [], "failed": 0, "reason": None, "model": None, "judgments": 0, "reasons": {}, "answered_by": []}
    state = pm.Tracked(ref_masks, pred_masks, start, tracked)
    if "motion_continuity" in wanted:
        state.distances = pm.motion_distances(ref_masks, pred_masks, start)
    if "object_permanence" in wanted:
        state.seen, judge = _judge(refs, ref_masks, preds, pred_masks, start, cfg, opts)
    if "appearance_preservation" in wanted:
        state.similarity = _similarity(refs, ref_masks, preds, pred_masks, tracked, cfg, opts)
    per_frame = {m: _none(METRICS[m].function(state, protocol.params(m))) for m in order(wanted)}
    means, published, counts = {}, {}, {}
    for split, sel in (("visible", visible), ("invisible", invisible)):
        picked = sel.copy()
        picked[:start] = False
        means[split] = {
            m: pm.split_mean([math.nan if v is None else v for v in s], picked, 0) for m, s in per_frame.items()
        }
        published[split] = dict(means[split])
        if state.distances is not None:
            published[split]["motion_continuity"] = pm.published_continuity(state.distances, picked, 0)
        counts[split] = {"frames": int(picked.sum())} | {
            f"{m}_null": int(sum(per_frame[m][i] is None for i in np.nonzero(picked)[0])) for m in per_frame
        }
    return PaperCaseScores(
        uid=case.case_id,
        subset=case.subset,
        use_stationary={"static": 1, "dynamic": 0}.get(case.subset),
        frame_indices=idx,
        eval_size=list(size),
        visible=visible.tolist(),
        invisible=invisible.tolist(),
        start=start,
        matching_score=matching_score,
        tracked=tracked,
        metrics=per_frame,
        means=means,
        published=published,
        motion_distance=_none(state.distances or []),
        counts=counts,
        judge=judge,
        backends=used,
        **CaseScores.common(protocol, wanted, {}, pred.digest),
    )


def _first_size(pred: FramePrediction) -> tuple[int, int]:
    from persistbench.io.images import image_size

    return image_size(pred.files[0])


def _track(refs, ref_masks, preds, start: int, cfg: dict, opts: BackendOptions) -> tuple[list[np.ndarray], float]:
    """The prediction's masks: the object found by matching in the start frame, then tracked to the end."""
    import torch

    features = load(cfg["matching"]["backend"], opts)
    h, w = refs.shape[1:3]
    unit = np.stack([refs[start], preds[start]]).astype(np.float32) / 255.0
    ref_f, pred_f = (torch.from_numpy(f).permute(2, 0, 1) for f in features(unit, fit="floor"))
    ref_box = pm.mask_box(ref_masks[start], cfg["matching"]["bbox_margin"])
    src = pm.crop_features(ref_f, ref_box)
    y, x, score = pm.best_match(src, pm.upsample_features(pred_f, h, w))
    placed = pm.place_mask(ref_masks[start], ref_box, pm.placed_box(y, x, src.shape[0], src.shape[1], h, w))
    tracker = load(cfg["tracking"]["backend"], opts)
    q = cfg["tracking"]["jpeg_quality"]
    masks = tracker.track([_jpeg(_jpeg(f, q), q) for f in preds[start:]], placed)
    empty = np.zeros((h, w), bool)
    return [empty] * start + [np.asarray(m, bool) for m in masks], score


def _judge(refs, ref_masks, preds, pred_masks, start, cfg, opts):
    """Per frame whether the judge sees the object (None before ``start``; all None when a judgment failed),
    and what was asked."""
    params = cfg["object_permanence"]
    judge = load("judge", opts)
    jcfg = cfg["judge"]
    n = len(refs)
    failures: list[str] = []
    answers: list = []  # every Answer or JudgmentFailed, for the record's tally

    def ask(indices: list[int]) -> dict[int, bool]:
        if any(not ref_masks[i].any() for i in indices):
            raise _NoReference(
                f"the reference mask is empty at frame {min(i for i in indices if not ref_masks[i].any())}"
            )
        reqs, tags = [], []
        for i in indices:
            tag = f"F{i:04d}"
            reqs.append(permanence_request((refs[i], ref_masks[i]), (preds[i], pred_masks[i]), tag, cfg))
            tags.append(tag)
        out = {}
        got = judge.ask_many(reqs, [parse_seen(t) for t in tags])
        answers.extend(got)
        for i, a in zip(indices, got):
            if isinstance(a, JudgmentFailed):
                failures.append(str(a))
            else:
                out[i] = a.value
        if failures:
            raise _Stop()
        return out

    empty = {i for i in range(start, n) if not pred_masks[i].any()}
    record = {"asked": [], "failed": 0, "reason": None, "model": jcfg["model"]}
    status = [None] * n
    try:
        if any(not ref_masks[i].any() for i in empty):
            raise _NoReference("the reference mask is empty at a frame whose tracked mask is empty")
        status, record["asked"] = pm.judge_statuses(start, n, empty, params["num_sample_frames"], ask)
    except _Stop:
        record.update(failed=len(failures), reason=failures[0])
    except _NoReference as e:
        record["reason"] = str(e)
    counted = tally(answers)
    extra = {k: counted[k] for k in ("reasons", "answered_by")}
    return status, {**record, "judgments": counted["asked"], **extra}


class _Stop(Exception):
    """A judgment failed: the case's permanence has no value."""


class _NoReference(Exception):
    """A frame to judge has no reference object (the public toolkit then leaves permanence without a value)."""


def _similarity(refs, ref_masks, preds, pred_masks, tracked, cfg, opts):
    """Cosine of the masked, average-pooled patch features of reference and prediction, per eligible frame."""
    features = load(cfg["appearance_preservation"]["backend"], opts)
    n = len(refs)
    eligible = [i for i in range(n) if tracked[i] and ref_masks[i].any()]
    out = [math.nan] * n
    if not eligible:
        return out
    f = features(np.concatenate([refs[eligible], preds[eligible]]).astype(np.float32) / 255.0, fit="resize")
    k = len(eligible)
    for j, i in enumerate(eligible):
        out[i] = float(np.dot(pooled(f[j], ref_masks[i]), pooled(f[k + j], pred_masks[i])))
    return out


# ---------------------------------------------------------------- aggregation


def summarise(results: list[dict]) -> dict:
    """Overall and per group (static / dynamic / unknown from ``use_stationary``): each metric's mean over
    the cases that have one, per split, with the count; cases with failed judgments counted."""

    def block(rows: list[dict]) -> dict:
        out = {"cases": len(rows), "averages": {}, "valid_counts": {}}
        for m in PAPER_METRICS:
            for split in SPLITS:
                vals = [r["means"][split].get(m) for r in rows if r["means"][split].get(m) is not None]
                out["averages"][f"{m}_{split}"] = float(np.mean(vals)) if vals else None
                out["valid_counts"][f"{m}_{split}"] = len(vals)
        return out

    groups = {"static": [], "dynamic": [], "unknown": []}
    for r in results:
        groups[GROUP_OF.get(r.get("use_stationary"), "unknown")].append(r)
    overall = block(results)
    failed = [r["judge"] for r in results if r["judge"].get("failed")]
    judged = merge_tallies(
        [{"asked": j.get("judgments", j["failed"]), "reasons": j.get("reasons") or {}} for j in failed]
    )
    permanence = [overall["valid_counts"][f"object_permanence_{s}"] for s in SPLITS]
    no_value = failed and not any(permanence)
    return {
        **overall,
        "groups": {g: block(rows) for g, rows in groups.items()},
        "published": {"overall": board.block(results)} | {g: board.block(rows) for g, rows in groups.items()},
        "judge_identities": merge_tallies(
            [{"answered_by": (r.get("judge") or {}).get("answered_by")} for r in results]
        )["answered_by"],
        "judge_failures": len(failed),
        "judge_failure_reasons": judged["reasons"],
        "failed_metrics": (
            {"object_permanence": f"no value in any case: {failure_line(judged)} in {len(failed)} cases"}
            if no_value
            else {}
        ),
        "backends": merged_provenance(results),
    }


GROUP_OF = {1: "static", 0: "dynamic"}  # use_stationary -> group (anything else: unknown)


def estimands(results: list[dict]) -> st.Estimands:
    """``paper-v3``'s numbers: each split's metric means overall and per group, and the published block's
    scores (x 100, unrounded), memory, visible average and gap; strata: the groups."""

    def group(r: dict) -> str:
        return GROUP_OF.get(r.get("use_stationary"), "unknown")

    units, _ = split_units(results, "means", group)
    published, _ = split_units(results, "published", group)
    units = st.Units(
        units.keys,
        units.strata,
        units.columns + tuple(f"published:{c}" for c in published.columns),
        np.concatenate([units.values, published.values], axis=1),
    )
    exprs: dict[str, object] = {}
    for name in ("overall", "static", "dynamic", "unknown"):
        strata = None if name == "overall" else (name,)
        for m in PAPER_METRICS:
            for split in SPLITS:
                exprs[f"{name}/{m}_{split}"] = split_mean(split, m, strata)
        scores = {
            column: st.Scaled(100.0, split_mean(split, m, strata, "published:")) for column, m, split in board.SCORES
        }
        exprs |= {f"published/{name}/{c}": e for c, e in scores.items()}
        memory = st.MeanOf(tuple(e for (c, _, split), e in zip(board.SCORES, scores.values()) if split == "invisible"))
        average = st.MeanOf(tuple(e for (c, _, split), e in zip(board.SCORES, scores.values()) if split == "visible"))
        exprs |= {
            f"published/{name}/memory": memory,
            f"published/{name}/visible_average": average,
            f"published/{name}/gap": st.Difference(average, memory),
        }
    headline = {"published/overall/memory": True} | {f"overall/{m}_invisible": True for m in PAPER_METRICS}
    return st.Estimands(units, exprs, "cases", "group", headline)


def tables(summary: dict) -> tuple[list[str], dict[str, str]]:
    """``summary.md``'s table (the published layout: three scores x visible / invisible, overall and per
    group) and ``leaderboard.csv``'s columns."""
    keys = [f"{m}_{s}" for m in PAPER_METRICS for s in SPLITS]
    lines = frame_lines(summary)
    lines += ["| group | cases | " + " | ".join(keys) + " |", "| --- | --- | " + " | ".join("---" for _ in keys) + " |"]
    row = {}
    for name, block in [("overall", summary), *summary["groups"].items()]:
        cells = []
        for k in keys:
            v = block["averages"][k]
            cells.append("n/a" if v is None else f"{100 * v:.2f} ({block['valid_counts'][k]})")
            row[f"{name}/{k}"] = "" if v is None else f"{v:.6f}"
        lines.append(f"| {name} | {block['cases']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Scores x 100 (valid cases), each case's score the mean of its frames' (the public toolkit 0.1.7's).")
    lines += ["", "In the published leaderboard's form (motion continuity per case exp(-mean d); docs/metrics.md):", ""]
    published_head = ["group", "cases", *board.COLUMNS]
    lines += ["| " + " | ".join(published_head) + " |", "|" + " --- |" * len(published_head)]
    for name, block in (summary.get("published") or {}).items():
        if not block["cases"]:
            continue
        values = {**block["scores"], **{k: block[k] for k in ("memory", "visible_average", "gap")}}
        lines.append(
            f"| {name} | {block['cases']} | " + " | ".join(board.fmt(values[c]) or "n/a" for c in board.COLUMNS) + " |"
        )
        row |= {f"published/{name}/{c}": board.fmt(values[c]) for c in board.COLUMNS}
    lines += ["", "Backends: " + _backend_line(summary["backends"])]
    ids = summary.get("judge_identities") or []
    if len(ids) > 1:
        lines.append(
            f"**The judgments come from {len(ids)} judge identities** (model, served, named, fingerprint): "
            + "; ".join(identity_line(j) for j in ids)
            + "."
        )
    if summary["judge_failures"]:
        why = ", ".join(f"{r}: {n}" for r, n in (summary.get("judge_failure_reasons") or {}).items())
        lines.append(f"{summary['judge_failures']} cases have judge failures ({why}): their object permanence is null.")
    for m, why in (summary.get("failed_metrics") or {}).items():
        lines.append(f"{m} could not be computed: {why}.")
    return lines, row


def _backend_line(backends: dict) -> str:
    parts = []
    for name, infos in backends.items():
        for info in infos:
            if name == "judge":
                parts.append(f"judge {info['judge_model']} at {info['judge_url']}")
            else:
                parts.append(f"{name} {info['weights']} (sha256 {info['sha256'][:12]}, {info['device']})")
    return "; ".join(parts) or "none"


# ---------------------------------------------------------------- the public toolkit's result.json


def to_public(record: dict, eval_box: tuple[int, int] = (384, 512), bbox_margin: float = 0.1) -> dict:
    """The public toolkit's per-case ``result.json`` body of one of our records (identity fields it adds at
    evaluation, ``evaluation_run_id`` and ``prediction_sha256``, are left to the caller). ``eval_box`` =
    (h, w) and ``bbox_margin`` are the protocol's (``eval_size``, ``matching.bbox_margin``): the public
    metadata records the box, not the size fitted inside it."""
    names = {
        "object_permanence": "object_permanence",
        "motion_continuity": "motion_continuity",
        "appearance_preservation": "appearance_preservation",
    }
    results = {
        names[m]: {
            "per_frame": {"score": record["metrics"][m]},
            "scalars": {s: record["means"][s][m] for s in SPLITS},
            "metadata": {},
        }
        for m in PAPER_METRICS
        if m in record["metrics"]
    }
    results["metadata"] = {
        "bbox_margin": bbox_margin,
        "eval_reso": list(eval_box),
        "visible_mask": record["visible"],
        "invisible_mask": record["invisible"],
        "track_start_frame_idx": record["start"],
        "matching_score": record["matching_score"],
    }
    return {
        "uid": f"{record['subset']}__{record['uid']}",
        "use_stationary": record["use_stationary"],
        "score_protocol": PROCEDURE,
        "results": results,
    }


def from_public(data: object, where: str) -> dict:
    """One of our records (enough of it for :func:`summarise`) from a public ``result.json``, checked as the
    public aggregation checks it: masks of one length and disjoint, nothing before the start, scores in
    range, and each saved mean equal to the mean of its frame scores."""
    try:
        if data.get("score_protocol") != PROCEDURE:
            raise ValueError(f"score_protocol is {data.get('score_protocol')!r}, not {PROCEDURE}")
        res, meta = data["results"], data["results"]["metadata"]
        vis, inv, start = meta["visible_mask"], meta["invisible_mask"], meta["track_start_frame_idx"]
        n = len(vis)
        if (
            not n
            or len(inv) != n
            or not all(type(v) is bool for v in vis + inv)
            or any(a and b for a, b in zip(vis, inv))
        ):
            raise ValueError("invalid visibility masks")
        if type(start) is not int or not 0 <= start < n:
            raise ValueError("invalid track_start_frame_idx")
        metrics, means = {}, {s: {} for s in SPLITS}
        for m in PAPER_METRICS:
            frames = res[m]["per_frame"]["score"]
            lo = -1.0 - 1e-6 if m == "appearance_preservation" else 0.0
            hi = 1.0 + (1e-6 if m == "appearance_preservation" else 0.0)
            if len(frames) != n or any(
                v is not None and (type(v) not in (int, float) or not lo <= v <= hi) for v in frames
            ):
                raise ValueError(f"{m}: invalid frame scores")
            if any(v is not None for v in frames[:start]):
                raise ValueError(f"{m}: scores before the start")
            metrics[m] = [None if v is None else float(v) for v in frames]
            for split, mask in (("visible", vis), ("invisible", inv)):
                picked = [v for i, (v, k) in enumerate(zip(frames, mask)) if i >= start and k and v is not None]
                expected = sum(picked) / len(picked) if picked else None
                saved = res[m]["scalars"][split]
                if (saved is None) != (expected is None) or (
                    saved is not None and not math.isclose(saved, expected, rel_tol=1e-7, abs_tol=1e-9)
                ):
                    raise ValueError(f"{m}/{split}: the saved mean differs from the frame scores")
                means[split][m] = saved
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise PersistbenchError(f"{where}: not a {PROCEDURE} result ({e})") from None
    stationary = data.get("use_stationary")
    return {
        "uid": data.get("uid"),
        "use_stationary": 1 if stationary in (True, 1, "1") else 0 if stationary in (False, 0, "0") else None,
        "metrics": metrics,
        "means": means,
        "judge": {"failed": 0},
        "backends": {},
    }


def compare(ours: dict, theirs: dict) -> dict:
    """How two records of one case (from :func:`from_public`) differ, per metric: the largest absolute
    difference of the per-frame scores both have, the frames only one has a score for, and the
    differences of the visible and invisible means (None where either is missing)."""
    out = {}
    for m in PAPER_METRICS:
        a, b = ours["metrics"][m], theirs["metrics"][m]
        both = [abs(x - y) for x, y in zip(a, b) if x is not None and y is not None]
        out[m] = {
            "frames": len(both),
            "max_frame_diff": max(both, default=0.0),
            "only_one": sum((x is None) != (y is None) for x, y in zip(a, b)) + abs(len(a) - len(b)),
            **{
                f"{split}_diff": None
                if ours["means"][split][m] is None or theirs["means"][split][m] is None
                else abs(ours["means"][split][m] - theirs["means"][split][m])
                for split in SPLITS
            },
        }
    return out


class PaperScorer(Scorer["PersistBench"]):
    """``paper-v3``: object permanence (a judge), motion continuity and appearance preservation (backends);
    each case is also written in the public toolkit's ``result.json`` form."""

    name = "paper"
    schema = SCHEMA

    def backends_needed(self, protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
        return backends_needed(protocol.config, wanted)

    def score_case(
        self, suite: PersistBench, case: CaseRef, pred: Prediction, protocol: Protocol, ctx: ScoreContext
    ) -> dict:
        full = suite.case(case.subset, case.case_id)
        record = score_case(full, pred, protocol, ctx.wanted, ctx.backends).to_json()
        if ctx.scores_dir is not None and not record["judge"]["failed"]:
            cfg = protocol.config
            public = to_public(record, cfg["eval_size"], cfg["matching"]["bbox_margin"])
            public |= {"prediction_sha256": record["prediction_sha256"]}
            write_json(public_result(ctx.scores_dir, case.subset, case.case_id), public)
        return record

    def scored_metrics(self, record: dict) -> set[str]:
        if record.get("judge", {}).get("failed"):  # failed judgments are asked again
            return set(record.get("metrics", {})) - {"object_permanence"}
        return super().scored_metrics(record)

    def merge(self, new: dict, old: dict) -> dict:
        return new  # every metric is scored together: a new record replaces the old one

    def summarise(
        self, suite: PersistBench, results: list[dict], protocol: Protocol, ctx: ScoreContext
    ) -> tuple[dict, dict]:
        return {"procedure": PROCEDURE, "frames": frame_rule(protocol.config)}, summarise(results)

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return tables(summary)

    def estimands(self, results: list[dict], summary: dict) -> st.Estimands:
        return estimands(results)

    def judge_battery(self, suite: PersistBench, protocol: Protocol, wanted: tuple[str, ...]) -> list:
        from persistbench.suites.persistbench import battery

        if "object_permanence" not in wanted:
            return []
        return battery.items([suite.case(c.subset, c.case_id) for c in suite.cases()], protocol.config)

    report_sections = staticmethod(report.paper_sections)


PAPER = PaperScorer()
