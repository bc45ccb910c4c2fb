"""R2M-Bench's relative revisit scores: per video, per trajectory, per family, Overall.

For one video and one metric (higher is better): R, B, S = the means over its revisit, baseline
and short pairs; MemoryGain ``MG = R - B`` and DynamicRange ``DR = S - B`` (``B - R`` and ``B - S``
for lower-is-better metrics). The video counts for the metric only when ``DR > epsilon``: a video
that hardly changes has nothing to remember. Per trajectory, ``NMR = mean(MG) / (mean(DR) +
epsilon)`` over the valid videos; per metric the mean over trajectories; a family the mean of its
metrics; Overall the mean of the families, given only when every trajectory and every requested
family is there (``--allow-partial``: the mean of what is). A pair value that cannot be computed
is left out and counted, never averaged in as 0 or -1; identical frames give the capped PSNR.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from persistbench.backends import BackendUnavailable, check_backend, merged_provenance, provenance
from persistbench.backends.judge import failure_line, identity_line, merge_tallies, tally
from persistbench.core import stats as st
from persistbench.core.case import CaseRef, Prediction, ScoreContext
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.core.protocol import Protocol, Scorer
from persistbench.core.records import CaseScores, keep_unavailable
from persistbench.core.schema import (
    Check,
    interval,
    metric_list,
    number,
    one_of,
    optional,
    section,
    sha256_hex,
    size_hw,
    text,
)
from persistbench.io.names import name_problem, remove_tree
from persistbench.metrics.registry import METRICS, families, order
from persistbench.suites.r2m import layout, pairs, report, upstream_pairs, upstream_results, upstream_state
from persistbench.suites.r2m import metrics as pair_specs
from persistbench.suites.r2m.data import Checkout
from persistbench.suites.r2m.pair_video import PairVideo, StateQuestion
from persistbench.suites.r2m.pairs import MAX_PAIRS
from persistbench.suites.r2m.relative import KINDS, relative
from persistbench.suites.r2m.upstream_metrics import ROUNDING, mean_digits, rounded, value_digits

if TYPE_CHECKING:
    from persistbench.suites.r2m.suite import R2MBench

PREPROCESS = ("pil-bilinear", "torchvision-bicubic")  # pair_video.PairVideo._resized
PAIR_METRICS = tuple(spec.name for spec in pair_specs.SPECS)


def by_sampler(variants: dict[str, dict[str, Check]]) -> Check:
    """The ``pairs`` section: ``sampler`` names one of ``variants``, whose fields the rest must be."""
    checks = {name: section({"sampler": one_of(name), **fields}) for name, fields in variants.items()}

    def check(v: object) -> str | None:
        name = v.get("sampler") if isinstance(v, dict) else None
        if not isinstance(name, str) or name not in checks:
            return f"sampler: must be one of {', '.join(checks)}"
        return checks[name](v)

    return check


SCHEMA = {
    "metrics": metric_list(PAIR_METRICS),
    "extras": metric_list(PAIR_METRICS, empty=True),
    "pairs": by_sampler(
        {
            pairs.SAMPLER: {
                "yaw_tol_deg": interval(0.0, 90.0),
                "pos_tol_m": interval(0.0, 100.0),
                "translation_m": number(0.0, 10.0),
                "rotation_deg": number(0.0, 90.0),
                "min_gap_frames": number(1, 100_000, integer=True),
                "position_weight": number(0.0, 1e6),
                "fallback_below": number(0, 100_000, integer=True),
                "min_gap_fraction": number(0.0, 1.0),
                "max_revisit": number(1, MAX_PAIRS, integer=True),
                "seed": number(0, 2**32 - 1, integer=True),
                "baseline_relax_below": number(0, 100_000, integer=True),
                "max_short": number(1, MAX_PAIRS, integer=True),
                "min_short": number(1, MAX_PAIRS, integer=True),
            },
            upstream_pairs.SAMPLER: {
                "seed": number(0, 2**32 - 1, integer=True),
                "min_gap_fraction": number(0.0, 1.0),
                "max_revisit": number(1, MAX_PAIRS, integer=True),
                "max_short": number(1, MAX_PAIRS, integer=True),
                "min_short": number(1, MAX_PAIRS, integer=True),
            },
        }
    ),
    "frame_psnr": section({"cap_db": number(1.0, 1000.0)}),
    "frame_ssim": section(
        {
            "window": number(3, 51, integer=True, odd=True),
            "data_range": number(1.0, 65535.0),
            "k1": number(1e-6, 1.0),
            "k2": number(1e-6, 1.0),
        }
    ),
    "frame_lpips": section({"net": one_of("alex"), "version": one_of("0.1"), "inputs": one_of("[-1, 1]")}),
    "sift": section({"ratio": number(0.05, 1.0), "ransac_px": number(0.1, 100.0), "confidence": number(0.5, 0.9999)}),
    "models": one_of("when-available", "required"),
    "lightglue": section(
        {
            "backend": one_of("superpoint-lightglue"),
            "long_side": number(16, 4096, integer=True),
            "max_keypoints": number(1, 100_000, integer=True),
            "keypoint_threshold": number(0.0, 1.0),
            "threshold": number(0.0, 1.0),
            "ransac_px": number(0.1, 100.0),
            "confidence": number(0.5, 0.9999),
        }
    ),
    "scene_identity": section(
        {
            "backend": one_of("dinov2-base", "dinov2-reg-large", "dinov3-large"),
            "short_side": number(14, 4096, integer=True),
            "preprocess": one_of(*PREPROCESS),
            "crop": optional(number(14, 4096, integer=True)),
        }
    ),
    "boq": section({"backend": one_of("boq"), "size": size_hw, "preprocess": one_of(*PREPROCESS)}),
    "mutualvpr": section({"backend": one_of("mutualvpr"), "size": size_hw, "preprocess": one_of(*PREPROCESS)}),
    "object_consistency": section(
        {
            "segmenter": one_of("sam2"),
            "features": one_of("dinov2-base", "dinov2-reg-large", "dinov3-large"),
            "short_side": number(14, 4096, integer=True),
            "grid": number(1, 16, integer=True),
            "min_area": number(0.0, 1.0),
            "max_area": number(0.0, 1.0),
            "overlap": number(0.0, 1.0),
        }
    ),
    "object_persistence": section(
        {
            "detector": one_of("grounding-dino"),
            "segmenter": one_of("sam2-image"),
            "features": one_of("dinov2-base"),
            "clip": optional(one_of("clip-vit-b32")),
            "text_prompt": text(1, 2000),
            "box_threshold": number(0.0, 1.0),
            "text_threshold": number(0.0, 1.0),
            "nms_iou": number(0.0, 1.0),
            "max_objects": number(0, 100, integer=True),
            "max_candidates": number(0, 100, integer=True),
            "min_area_ratio": number(0.0, 1.0),
            "match_threshold": number(0.0, 1.0),
            "appearance_weight": number(0.0, 100.0),
            "semantic_weight": number(0.0, 100.0),
            "detector_short_side": number(16, 4096, integer=True),
            "detector_max_side": number(16, 8192, integer=True),
            "feature_size": number(14, 4096, integer=True),
        }
    ),
    "persistent_state": section(
        {
            "backend": one_of("judge"),
            "prompt": one_of("state-v1", upstream_state.PROMPT),
            "prompt_sha256": optional(sha256_hex),
            "max_side": optional(number(64, 4096, integer=True)),
            "temperature": number(0.0, 2.0),
            "max_tokens": number(16, 65536, integer=True),
            "enable_thinking": one_of(False, True, None),
            "pairs_per_kind": optional(number(1, MAX_PAIRS, integer=True)),
        }
    ),
    "epsilon": number(0.0, 1.0),
    "rounding": one_of("none", ROUNDING),
}


def backends_needed(protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
    """The backends ``wanted`` loads under ``protocol``: checked before scoring when its ``models`` is
    ``required``; with ``when-available`` a metric whose backend cannot run is reported unavailable."""
    if protocol.config["models"] != "required":
        return []
    return list(dict.fromkeys(b for m in order(wanted) for b in METRICS[m].backends(protocol.params(m))))


def _unavailable(spec, params: dict, backends) -> str | None:
    """Why the backends of ``spec`` cannot run (one line), or None."""
    try:
        for name in spec.backends(params):
            check_backend(name, backends)
    except BackendUnavailable as e:
        return str(e)
    return None


@dataclass
class PairCaseScores(CaseScores):
    """One video's scores (``scores/<protocol>/<T>/<id>.json``); the JSON form is :meth:`to_json`.

    ``values[m][kind]`` holds one value per scored pair of that kind (None where it failed);
    ``relative[m]`` the video's R, B, S, MG, DR and whether it counts (``valid``);
    ``dropped[kind]`` the pairs that fall beyond a short video; ``backends`` what the model-based values
    were computed with; ``judge[m]`` what the judge gave for metric ``m`` (``backends.judge.tally``: asked,
    failed, reasons, the judges that answered).
    """

    uid: str
    subset: str
    video_frames: int
    poses: int
    pairs_key: str
    pairs: dict[str, list[list[int]]]
    dropped: dict[str, int]
    values: dict[str, dict[str, list[float | None]]]
    relative: dict[str, dict]
    backends: dict[str, dict]  # backend -> weights (sha256) and device, or the judge's model and URL
    judge: dict[str, dict]  # metric -> the tally of its judgments (only metrics the judge computes)


def _clean(values: list[float], digits: int | None) -> list[float | None]:
    return [None if v is None or not np.isfinite(v) else rounded(float(v), digits) for v in values]


def state_question(checkout: Checkout, protocol: Protocol) -> StateQuestion:
    """``persistent_state``'s question under ``protocol``: a prompt we ship, or upstream's question with the prompts of
    the checkout's ``src/metrics/persistent_state.py`` (:mod:`upstream_state`); one line when they cannot be read or
    are not the ones the protocol's ``prompt_sha256`` pins."""
    p = protocol.config["persistent_state"]
    if p["prompt"] == upstream_state.PROMPT:
        where = checkout.confined(layout.state_source(checkout.root))
        question = upstream_state.question(where)
    else:
        where, question = f"prompt {p['prompt']}", StateQuestion.shipped(p["prompt"])
    if p["prompt_sha256"] is not None and question.sha256 != p["prompt_sha256"]:
        raise PersistbenchError(
            f"{where}: its prompts have sha256 {question.sha256[:12]}…, not the protocol's {p['prompt_sha256'][:12]}… "
            "(other prompts: use a protocol that pins them)"
        )
    return question


def score_video(
    frames: dict[int, np.ndarray],
    n_video: int,
    n_poses: int,
    pair_file: dict,
    protocol: Protocol,
    ctx,
    ids,
    question: StateQuestion | None = None,
) -> PairCaseScores:
    """Scores of one decoded video: ``frames`` holds every frame the pairs use that the video has; ``question``
    is :func:`state_question`'s."""
    kept = {k: [p for p in pair_file[k] if p[1] < n_video] for k in KINDS}
    dropped = {k: len(pair_file[k]) - len(kept[k]) for k in KINDS}
    video = PairVideo(frames, ctx.backends, state_question=question)
    values, rel, unavailable, judged = {}, {}, dict(ctx.unavailable), {}
    used = []
    for m in order(ctx.wanted):
        spec = METRICS[m]
        if m in unavailable:
            continue
        if spec.backend_keys and (why := _unavailable(spec, protocol.params(m), ctx.backends)):
            unavailable[m] = why
            continue
        asked_before = len(video.judgments)
        digits = value_digits(m, protocol.config["rounding"])
        values[m] = {k: _clean(spec.function(video, kept[k], protocol.params(m)), digits) for k in KINDS}
        if len(video.judgments) > asked_before:
            judged[m] = tally(video.judgments[asked_before:])
        used += spec.backends(protocol.params(m))
        rel[m] = relative(
            values[m], spec.higher_is_better, protocol.config["epsilon"], mean_digits(m, protocol.config["rounding"])
        )
    return PairCaseScores(
        uid=ids[1],
        subset=ids[0],
        video_frames=n_video,
        poses=n_poses,
        pairs_key=pair_file["meta"].get("key", "external"),
        pairs=kept,
        dropped=dropped,
        values=values,
        relative=rel,
        backends=provenance(list(dict.fromkeys(used)), ctx.backends),
        judge=judged,
        **CaseScores.common(protocol, ctx.wanted, unavailable, ids[2]),
    )


def merge(new: dict, old: dict) -> dict:
    """Keep the metrics an earlier scoring of the same video under the same protocol and pairs computed."""
    if old.get("pairs_key") != new["pairs_key"]:
        return new
    kept = [m for m in old.get("values", {}) if m not in new["requested"] and m in PAIR_METRICS]
    for m in kept:
        new["values"][m], new["relative"][m] = old["values"][m], old["relative"][m]
        if m in (old.get("judge") or {}):
            new["judge"][m] = old["judge"][m]
    if kept:
        new["backends"] = {**(old.get("backends") or {}), **new.get("backends", {})}
    kept += keep_unavailable(new, old, PAIR_METRICS)
    new["requested"] = order(set(new["requested"]) | set(kept))
    return new


@dataclass
class R2MSummary:
    """``summary.json``'s body: NMR per trajectory and metric, per metric, per family, and Overall, with counts."""

    # T -> metric -> {nmr, memory_gain, dynamic_range, valid, excluded, failed}
    trajectories: dict[str, dict[str, dict]]
    metrics: dict[str, dict]  # metric -> {nmr, trajectories, valid, excluded, failed}
    families: dict[str, dict]  # family -> {nmr, metrics, available}
    overall: float | None
    overall_note: str | None  # why Overall is missing or partial
    overall_partial: list[str]  # why Overall stands on less than the protocol's families and trajectories
    trajectory_overall: dict[str, float | None]  # T -> the mean of its families' means of metric NMRs there
    unavailable: dict[str, str]  # metric -> reason
    backends: dict[str, list]  # backend -> the distinct weights / judges the videos were scored with
    videos: int
    valid_videos: int  # videos with a relative score for at least one metric
    excluded_videos: int  # videos without one (DR <= epsilon, failed or missing pairs, for every metric)
    short_videos: int  # shorter than their trajectory
    dropped_pairs: dict[str, int]  # per kind
    judge_failures: dict  # {asked, judgments (failed), videos (with a failure), reasons: {reason: count}}
    judge_identities: list[
        dict
    ]  # every distinct judge that answered (endpoint, model asked, served, named, fingerprint)
    failed_metrics: dict[str, str]  # metric -> why it has no value in any video (score then exits non-zero)

    def to_json(self) -> dict:
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _failed(rel: dict) -> bool:
    """A video has no relative score for a metric because pair values of it failed (not for DR <= epsilon)."""
    return rel["memory_gain"] is None and rel.get("failed", 0) > 0


def trajectory_overall(cells: dict[str, dict], requested: list[str]) -> float | None:
    """One trajectory's Overall, as upstream's per-trajectory tables give it: per family the mean of its metrics'
    NMR there, then the mean of the families that have one (partial by nature)."""
    means = [
        _mean(v)
        for ms in families(requested).values()
        if (v := [cells[m]["nmr"] for m in ms if m in cells and cells[m]["nmr"] is not None])
    ]
    return _mean(means)


def summarise(
    results: list[dict],
    trajectories: tuple[str, ...],
    epsilon: float,
    allow_partial: bool,
    protocol_metrics: tuple[str, ...] = (),
) -> R2MSummary:
    """NMR per trajectory and metric, per metric, per family, and Overall; counts everywhere. A video that
    counts for a metric is ``valid``; one whose pair values failed so that R, B or S is missing is
    ``failed``; any other (DR <= epsilon, no pairs of a kind) is ``excluded``. An Overall over fewer families
    than ``protocol_metrics`` have (some not requested, or without a score) or fewer trajectories is partial."""
    requested = order({m for r in results for m in r["requested"]})
    unavailable = {m: why for r in results for m, why in r.get("unavailable", {}).items()}
    scored = order({m for r in results for m in r["relative"]})
    per_t: dict[str, dict] = {}
    for t in trajectories:
        rs = [r for r in results if r["subset"] == t]
        per_t[t] = {}
        for m in scored:
            rel = [r["relative"][m] for r in rs if m in r["relative"]]
            valid = [x for x in rel if x["valid"]]
            failed = sum(_failed(x) for x in rel)
            mg, dr = _mean([x["memory_gain"] for x in valid]), _mean([x["dynamic_range"] for x in valid])
            per_t[t][m] = {
                "nmr": None if mg is None else mg / (dr + epsilon),
                "memory_gain": mg,
                "dynamic_range": dr,
                "valid": len(valid),
                "excluded": len(rs) - len(valid) - failed,
                "failed": failed,
            }
    per_metric = {}
    for m in scored:
        nmrs = [per_t[t][m]["nmr"] for t in trajectories if per_t[t][m]["nmr"] is not None]
        per_metric[m] = {
            "nmr": _mean(nmrs),
            "memory_gain": _mean([per_t[t][m]["memory_gain"] for t in trajectories if per_t[t][m]["nmr"] is not None]),
            "trajectories": len(nmrs),
            "valid": sum(per_t[t][m]["valid"] for t in trajectories),
            "excluded": sum(per_t[t][m]["excluded"] for t in trajectories),
            "failed": sum(per_t[t][m]["failed"] for t in trajectories),
        }
    per_family = {}
    for fam, ms in families(requested).items():
        nmrs = [per_metric[m]["nmr"] for m in ms if m in per_metric and per_metric[m]["nmr"] is not None]
        per_family[fam] = {
            "nmr": _mean(nmrs),
            "metrics": ms,
            "available": [m for m in ms if m in per_metric and per_metric[m]["nmr"] is not None],
        }
    missing_families = [f for f, v in per_family.items() if v["nmr"] is None]
    missing_trajectories = sorted({t for m in scored for t in trajectories if per_t[t][m]["nmr"] is None})
    unrequested = [f for f in families(list(protocol_metrics)) if f not in per_family]
    available = [v["nmr"] for v in per_family.values() if v["nmr"] is not None]
    if not available:
        overall, note = None, "no family could be scored"
    elif (missing_families or missing_trajectories) and not allow_partial:
        why = [f"families without a score: {', '.join(missing_families)}"] if missing_families else []
        why += [f"trajectories without a score: {', '.join(missing_trajectories)}"] if missing_trajectories else []
        overall, note = None, "; ".join(why) + "; --allow-partial gives the mean of the available families"
    else:
        overall = _mean(available)
        note = (
            ("partial: " + ", ".join(missing_families + missing_trajectories))
            if missing_families or missing_trajectories
            else None
        )
    partial = []
    if overall is not None:
        partial += (
            [f"Overall without the families {', '.join(missing_families)} (no score)"] if missing_families else []
        )
        partial += (
            [f"Overall without the trajectories {', '.join(missing_trajectories)}"] if missing_trajectories else []
        )
        partial += [f"Overall without the families {', '.join(unrequested)} (not requested)"] if unrequested else []
        note = note or ("partial: " + ", ".join(unrequested) + " not requested" if unrequested else None)
    dropped = {k: sum(r.get("dropped", {}).get(k, 0) for r in results) for k in KINDS}
    tallies = {m: merge_tallies([r["judge"][m] for r in results if m in (r.get("judge") or {})]) for m in scored}
    judged = merge_tallies(list(tallies.values()))
    failed_metrics = {}
    for m in scored:
        pair_values = [x for r in results if m in r.get("values", {}) for k in KINDS for x in r["values"][m].get(k, [])]
        if not pair_values or any(x is not None for x in pair_values):
            continue
        failed_metrics[m] = "no value in any video" + (
            f": {failure_line(tallies[m])}" if tallies[m]["failed"] else ": every pair value failed"
        )
    return R2MSummary(
        trajectories=per_t,
        metrics=per_metric,
        families=per_family,
        overall=overall,
        overall_note=note,
        overall_partial=partial,
        trajectory_overall={t: trajectory_overall(per_t[t], requested) for t in trajectories},
        unavailable=unavailable,
        backends=merged_provenance(results),
        videos=len(results),
        valid_videos=(valid := sum(any(x.get("valid") for x in r["relative"].values()) for r in results)),
        excluded_videos=len(results) - valid,
        short_videos=sum(r.get("video_frames", 0) < r.get("poses", 0) for r in results),
        dropped_pairs=dropped,
        judge_failures={
            "asked": judged["asked"],
            "judgments": judged["failed"],
            "videos": sum(any(t.get("failed") for t in (r.get("judge") or {}).values()) for r in results),
            "reasons": judged["reasons"],
        },
        failed_metrics=failed_metrics,
        judge_identities=judged["answered_by"],
    )


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def tables(summary: dict) -> tuple[list[str], dict[str, str]]:
    """``summary.md``'s NMR table and ``leaderboard.csv``'s columns."""
    traj = list(summary["trajectories"])
    lines = [
        "| family | metric | " + " | ".join(traj) + " | NMR | valid | excluded | failed |",
        "| --- | --- | " + " | ".join("---" for _ in traj) + " | --- | --- | --- | --- |",
    ]
    row = {
        "overall": "" if summary["overall"] is None else f"{summary['overall']:.6f}",
        "overall_partial": "; ".join(summary.get("overall_partial") or []),
    }
    for fam, block in summary["families"].items():
        row[f"family/{fam}"] = "" if block["nmr"] is None else f"{block['nmr']:.6f}"
        for m in block["metrics"]:
            if m not in summary["metrics"]:
                why = summary["unavailable"].get(m, "not scored")
                lines.append(
                    f"| {fam} | {m} | " + " | ".join("n/a" for _ in traj) + f" | unavailable: {why} | 0 | 0 | 0 |"
                )
                continue
            cells = [_fmt(summary["trajectories"][t][m]["nmr"]) for t in traj]
            mm = summary["metrics"][m]
            lines.append(
                f"| {fam} | {m} | "
                + " | ".join(cells)
                + f" | {_fmt(mm['nmr'])} | {mm['valid']} | {mm['excluded']} | {mm['failed']} |"
            )
            row[f"metric/{m}"] = "" if mm["nmr"] is None else f"{mm['nmr']:.6f}"
            for t in traj:
                v = summary["trajectories"][t][m]["nmr"]
                row[f"{t}/{m}"] = "" if v is None else f"{v:.6f}"
        lines.append(f"| **{fam}** | family | " + " | ".join("" for _ in traj) + f" | **{_fmt(block['nmr'])}** | | | |")
    lines += [
        "",
        f"**Overall NMR: {_fmt(summary['overall'])}**"
        + (f" ({summary['overall_note']})" if summary["overall_note"] else ""),
    ]
    for name, entries in (summary.get("backends") or {}).items():
        lines.append(f"\nBackend {name}: " + "; ".join(", ".join(f"{k} {v}" for k, v in e.items()) for e in entries))
    jf = summary.get("judge_failures") or {"judgments": 0}
    if jf["judgments"]:
        why = ", ".join(f"{r}: {n}" for r, n in jf["reasons"].items())
        lines.append(
            f"\n**judge failures: {jf['judgments']} of {jf['asked']} judgments in {jf['videos']} videos ({why}); "
            "those pair values are null.**"
        )
    ids = summary.get("judge_identities") or []
    if len(ids) > 1:
        named = "; ".join(identity_line(j) for j in ids)
        lines.append(
            f"\n**The judgments come from {len(ids)} judge identities** (model, served, named, fingerprint): {named}."
        )
    for m, why in (summary.get("failed_metrics") or {}).items():
        lines.append(f"\n**{m} could not be computed: {why}.**")
    d = summary["dropped_pairs"]
    lines.append(
        f"\n{summary['videos']} videos ({summary['valid_videos']} with a relative score, "
        f"{summary['excluded_videos']} without); {summary['short_videos']} shorter than their trajectory "
        f"(pairs dropped: {d['revisit']} revisit, {d['baseline']} baseline, {d['short']} short)."
    )
    return lines, row


def estimands(results: list[dict], summary: dict, epsilon: float) -> st.Estimands:
    """R2M-Bench's numbers: NMR per trajectory and metric (mean memory gain over mean dynamic range of the
    valid videos), per metric (the mean over trajectories), per family and Overall (means of means), each
    only where the summary has it. A unit is a video id with all its trajectories' videos and their pairs."""
    trajectories = list(summary["trajectories"])
    metrics = list(summary["metrics"])
    cells = [(t, m) for t in trajectories for m in metrics]
    columns = [f"{t}/{m}/{part}" for t, m in cells for part in ("mg", "dr", "n")]
    keys = sorted({r["uid"] for r in results})
    at = {k: i for i, k in enumerate(keys)}
    values = np.zeros((len(keys), len(columns)))
    col = {c: j for j, c in enumerate(columns)}
    for r in results:
        for m, rel in r["relative"].items():
            if rel.get("valid") and f"{r['subset']}/{m}/n" in col:
                j = col[f"{r['subset']}/{m}/mg"]
                values[at[r["uid"]], j : j + 3] += (rel["memory_gain"], rel["dynamic_range"], 1.0)
    units = st.Units(tuple(keys), ("all",) * len(keys), tuple(columns), values)
    exprs: dict[str, object] = {}
    per_metric: dict[str, object] = {}
    for m in metrics:
        ratios = {t: st.Ratio(f"{t}/{m}/mg", f"{t}/{m}/dr", f"{t}/{m}/n", epsilon) for t in trajectories}
        exprs |= {f"{t}/{m}": e for t, e in ratios.items() if summary["trajectories"][t][m]["nmr"] is not None}
        per_metric[m] = st.MeanOf(tuple(ratios.values()))
        if summary["metrics"][m]["nmr"] is not None:
            exprs[f"metric/{m}"] = per_metric[m]
    per_family = {}
    for fam, block in summary["families"].items():
        per_family[fam] = st.MeanOf(tuple(per_metric[m] for m in block["metrics"] if m in per_metric))
        if block["nmr"] is not None:
            exprs[f"family/{fam}"] = per_family[fam]
    if summary["overall"] is not None:
        exprs["overall"] = st.MeanOf(
            tuple(per_family[f] for f, b in summary["families"].items() if b["nmr"] is not None)
        )
    return st.Estimands(units, exprs, "videos", None, {"overall": True} | {f"family/{f}": True for f in per_family})


class NmrScorer(Scorer["R2MBench"]):
    """Per video: each metric on its revisit and motion pairs, relative to its own distribution; per run: NMR."""

    name = "nmr"
    schema = SCHEMA

    def backends_needed(self, protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
        return backends_needed(protocol, wanted)

    def score_case(
        self, suite: R2MBench, case: CaseRef, pred: Prediction, protocol: Protocol, ctx: ScoreContext
    ) -> dict:
        found, frames, n_video, n_poses, pair_file = suite.pair_frames(case, pred, protocol, ctx.scores_dir)
        ids = (found.subset, found.case_id, pred.digest)
        question = None
        if "persistent_state" in ctx.wanted:
            try:
                question = state_question(suite.checkout, protocol)
            except PersistbenchError as e:  # unavailable, with the reason, unless the protocol requires every model
                if protocol.config["models"] == "required":
                    raise
                ctx = replace(ctx, unavailable={**ctx.unavailable, "persistent_state": str(e)})
        return score_video(frames, n_video, n_poses, pair_file, protocol, ctx, ids, question).to_json()

    def scored_metrics(self, record: dict) -> set[str]:
        """Metrics with values, and those reported unavailable because a model backend of their protocol section
        was missing (``--resume`` does not retry them; ``--metrics NAME`` once the backend is there does; the
        metrics with backends of their own are judged by ``score`` against what is unavailable now); a metric
        with failed judgments is not done (``--resume`` asks again; answers given are cached)."""
        values, unavailable, judge = record.get("values"), record.get("unavailable"), record.get("judge")
        done = set(values) if isinstance(values, dict) else set()
        if isinstance(judge, dict):
            done -= {m for m, t in judge.items() if isinstance(t, dict) and t.get("failed")}
        if isinstance(unavailable, dict):
            done |= {m for m in unavailable if m in METRICS and not METRICS[m].backend}
        return done

    def merge(self, new: dict, old: dict) -> dict:
        return merge(new, old)

    def summarise(
        self, suite: R2MBench, results: list[dict], protocol: Protocol, ctx: ScoreContext
    ) -> tuple[dict, dict]:
        body = summarise(
            results, suite.checkout.trajectories, protocol.config["epsilon"], ctx.allow_partial, protocol.metrics
        )
        extra = {"partial_reasons": body.overall_partial, "epsilon": protocol.config["epsilon"]}
        return extra | suite.reference_of(results), body.to_json()

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return tables(summary)

    def judge_battery(self, suite: R2MBench, protocol: Protocol, wanted: tuple[str, ...]) -> list:
        from persistbench.suites.r2m import battery
        from persistbench.suites.r2m.suite import conditioning_image

        if "persistent_state" not in wanted:
            return []
        images: dict[str, np.ndarray] = {}
        for ref in sorted(suite.cases(), key=lambda c: (c.case_id, c.subset)):
            if len(images) == 4:
                break
            if all(not k.endswith(f".{ref.case_id}") for k in images):  # one image per video id
                images[suite.key(ref)] = conditioning_image(suite.case(ref))
        return battery.items(images, state_question(suite.checkout, protocol), protocol.config["persistent_state"])

    def estimands(self, results: list[dict], summary: dict) -> st.Estimands | None:
        epsilon = summary.get("epsilon")  # None in summaries of upstream's result files: no intervals there
        return None if epsilon is None else estimands(results, summary, epsilon)

    def write_files(self, summary: dict, results: list[dict], scores_dir: Path) -> None:
        """Upstream's result layout under ``scores_dir/upstream/`` (:mod:`persistbench.suites.r2m.upstream_results`),
        its tasks named after the run's model (the run's name where the model's is not a usable file name)."""
        model = summary["model"] if name_problem(summary["model"]) is None else summary["run"]
        folder = scores_dir / layout.UPSTREAM_DIR
        remove_tree(scores_dir, folder)  # a scoring replaces the whole tree: no file of an earlier one is left
        upstream_results.write(folder, model, results)

    report_steps = staticmethod(report.steps)
    report_sections = staticmethod(report.sections)

    def foreign_results(self, suite: type[R2MBench], path: Path) -> list[dict] | None:
        """Upstream's result tree at ``path`` (:mod:`persistbench.suites.r2m.upstream_results`): one run per model,
        summarised by our rules with Overall over the families present, as upstream's summary gives it."""
        if not upstream_results.is_tree(path):
            return None
        protocol = suite.load_protocol()
        runs = []
        for model, videos in upstream_results.read(path).items():
            records = upstream_results.records(videos, protocol.config["epsilon"])
            body = summarise(records, suite.subsets, protocol.config["epsilon"], True).to_json()
            head = {
                "run": model,
                "model": model,
                "oracle": False,
                "protocol": upstream_results.SOURCE,
                "protocol_sha256": upstream_results.SOURCE,
                "suite": suite.name,
                "scorer": protocol.scorer.name,
                "dataset_fingerprint": "",
                "partial": False,
                "scores_dir": layout.UPSTREAM_DIR,
                "unavailable": {},
                "toolkit_version": upstream_results.SOURCE,
            }
            runs.append(
                {
                    "name": model,
                    "path": path,
                    "layout": RunLayout(path),
                    "summary": {**head, **body},
                    "results": {**head, "cases": records},
                    "info": None,
                }
            )
        return runs

    # ---------------------------------------------------------------- getting the data


NMR = NmrScorer()
