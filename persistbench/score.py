"""``persistbench score``: the scoring protocol (which frames, which sizes) and aggregation.

Per case: the ground truth is sampled to the prediction's frame indices
(``case.json``), both are resized to the protocol's evaluation size (area for
RGB, nearest for masks), and every metric of :mod:`persistbench.metrics` is
computed per frame inside the ground-truth ``center`` mask. Frames are
"visible" when ``view_0_visibility`` is above the protocol's threshold and
"invisible" (off-screen: the memory frames) below the other, from the first
visible frame on. Aggregates are recomputed from the per-case files only.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from . import __version__, metrics, runner
from .errors import PersistbenchError
from .infer import case_done, crop_resize, sampled_frames, sampled_masks
from .layout import STATE_DIR, Case, Dataset, RunLayout, list_images, read_image, read_json, write_json, write_text
from .segment import TemplateTracker

MASKED = ("psnr", "ssim", "lpips")
LOCALISATION = ("iou", "presence", "continuity")
SPLITS = ("visible", "invisible")


@dataclass(frozen=True)
class Protocol:
    name: str
    config: dict
    sha256: str  # of the canonical JSON: recorded in every output

    @property
    def eval_size(self) -> tuple[int, int]:
        """``(width, height)``."""
        h, w = self.config["eval_size"]
        return int(w), int(h)


def load_protocol(spec: str = "classic-v1", eval_size: tuple[int, int] | None = None) -> Protocol:
    """A protocol by name (shipped in ``persistbench/data/protocols``, linked from ``configs/``) or JSON path.

    ``eval_size`` = (height, width) overrides the protocol's; the hash then differs, as it should.
    """
    path = Path(spec)
    if not path.is_file():
        path = Path(str(resources.files("persistbench") / "data" / "protocols" / f"{spec}.json"))
    if not path.is_file():
        raise PersistbenchError(f"--protocol {spec}: no such protocol (shipped: classic-v1) or file")
    config = read_json(path)
    if eval_size is not None:
        config = {**config, "eval_size": [int(eval_size[0]), int(eval_size[1])]}
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return Protocol(config["name"], config, hashlib.sha256(canonical.encode()).hexdigest())


def frame_sets(visibility: np.ndarray, protocol: Protocol) -> tuple[np.ndarray, np.ndarray]:
    """``(visible, invisible)`` bool ``(T,)`` over a case's frames, both False before the first visible frame."""
    vis = np.asarray(visibility, np.float64)
    visible = vis > protocol.config["visible_above"]
    invisible = vis < protocol.config["invisible_below"]
    start = int(np.argmax(visible)) if visible.any() else len(vis)
    visible[:start] = invisible[:start] = False
    return visible, invisible


def _nan_to_none(values) -> list:
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]


def _mean(values: list, selected: np.ndarray) -> tuple[float | None, int]:
    """Mean of the selected non-NaN values and the number of NaNs skipped."""
    picked = [v for v, s in zip(values, selected) if s]
    valid = [v for v in picked if v is not None]
    return (float(np.mean(valid)) if valid else None), len(picked) - len(valid)


@functools.lru_cache(maxsize=2)
def _lpips(device: str, weights: str | None) -> metrics.Lpips | str:
    """The LPIPS scorer, or the reason it is unavailable (loaded once per process)."""
    try:
        return metrics.Lpips(device, weights)
    except metrics.LpipsUnavailable as e:
        return str(e)


def score_case(case: Case, run: RunLayout, protocol: Protocol, wanted: tuple[str, ...], lpips) -> dict:
    """Per-frame metrics of one predicted case; raises :class:`PersistbenchError` on a bad prediction."""
    info = read_json(run.case_json(case.subset, case.case_id))
    idx = [int(i) for i in info["frame_indices"]]
    if not idx or max(idx) >= case.n_frames or min(idx) < 0:
        raise PersistbenchError(f"{case.case_id}: frame indices do not fit the case's {case.n_frames} frames")
    pred_paths = list_images(run.frames_dir(case.subset, case.case_id))
    if len(pred_paths) != len(idx):
        raise PersistbenchError(f"{case.case_id}: {len(pred_paths)} predicted frames, case.json lists {len(idx)}")
    size = protocol.eval_size
    gt_view = case.view("center")
    h0, w0 = gt_view.mask(0).shape
    box = (0, 0, w0, h0)
    gt = sampled_frames(gt_view, np.asarray(idx), box, size)
    gt_masks = sampled_masks(gt_view, np.asarray(idx), box, size)
    preds = []
    for p in pred_paths:
        image = read_image(p)
        if image.shape[:2] != tuple(info["size"][::-1]):
            raise PersistbenchError(f"{p}: {image.shape[1]}x{image.shape[0]}, case.json says {info['size'][0]}x{info['size'][1]}")
        preds.append(crop_resize(image, (0, 0, image.shape[1], image.shape[0]), size))
    preds = np.stack(preds)

    vis = np.asarray(case.visibility()["view_0_visibility"])
    visible, invisible = frame_sets(vis, protocol)
    sel = {"visible": visible[idx], "invisible": invisible[idx]}
    per_frame: dict[str, list] = {}
    if "psnr" in wanted:
        per_frame["psnr"] = [metrics.masked_psnr(p, g, m) for p, g, m in zip(preds, gt, gt_masks)]
    if "ssim" in wanted:
        per_frame["ssim"] = [metrics.masked_ssim(p, g, m) for p, g, m in zip(preds, gt, gt_masks)]
    lpips_note = None
    if "lpips" in wanted:
        if isinstance(lpips, str):
            lpips_note = lpips
        else:
            per_frame["lpips"] = list(lpips(preds, gt, gt_masks))
    mask_paths = list_images(run.masks_dir(case.subset, case.case_id))
    if mask_paths:
        source = "model"
        pred_masks = []
        for p in mask_paths:
            m = read_image(p, gray=True)
            pred_masks.append(crop_resize(m, (0, 0, m.shape[1], m.shape[0]), size, nearest=True) > 0)
    else:
        tracker = TemplateTracker()
        source = tracker.name
        ref = next((i for i, t in enumerate(idx) if visible[t] and gt_masks[i].any()), None)
        pred_masks = tracker.track(preds, gt[ref], gt_masks[ref]) if ref is not None else [None] * len(idx)
    lost = [m is None for m in pred_masks]
    pred_masks = [np.zeros(size[::-1], bool) if m is None else m for m in pred_masks]
    areas = [m.sum() for m in gt_masks if m.any()]
    scale = math.sqrt(float(np.mean(areas))) if areas else float("nan")
    if "iou" in wanted:
        per_frame["iou"] = [metrics.iou(p, g) for p, g in zip(pred_masks, gt_masks)]
    if "presence" in wanted:
        per_frame["presence"] = [metrics.presence(p) for p in pred_masks]
    if "continuity" in wanted:
        per_frame["continuity"] = [metrics.continuity(p, g, scale) for p, g in zip(pred_masks, gt_masks)]

    per_frame = {k: _nan_to_none(v) for k, v in per_frame.items()}
    means, counts = {}, {}
    for split in SPLITS:
        means[split], counts[split] = {}, {"frames": int(sel[split].sum())}
        for name, values in per_frame.items():
            mean, nan = _mean(values, sel[split])
            means[split][name] = mean
            counts[split][f"{name}_nan"] = nan
    return {
        "uid": case.case_id, "subset": case.subset, "frame_indices": idx,
        "visible": sel["visible"].tolist(), "invisible": sel["invisible"].tolist(),
        "metrics": per_frame, "means": means, "counts": counts,
        "mask_source": source, "lost": lost, "lpips_unavailable": lpips_note,
        "protocol": protocol.name, "protocol_sha256": protocol.sha256,
    }  # fmt: skip


@dataclass(frozen=True)
class ScoreOptions:
    pred: Path
    dataset: Path
    protocol: str = "classic-v1"
    metrics: tuple[str, ...] = MASKED + LOCALISATION
    device: str = "cpu"
    lpips_weights: str | None = None
    eval_size: tuple[int, int] | None = None  # (height, width); None: the protocol's


def _score_one(key: tuple[str, str], opts: ScoreOptions) -> None:
    protocol = load_protocol(opts.protocol, opts.eval_size)
    run = RunLayout(opts.pred)
    case = Dataset(opts.dataset).case(*key)
    lpips = _lpips(opts.device, opts.lpips_weights) if "lpips" in opts.metrics else None
    write_json(run.case_scores(protocol.name, *key), score_case(case, run, protocol, opts.metrics, lpips))


def _scored(run: RunLayout, protocol: Protocol, subset: str, case_id: str) -> bool:
    try:
        return read_json(run.case_scores(protocol.name, subset, case_id)).get("protocol_sha256") == protocol.sha256
    except PersistbenchError:
        return False


def score(opts: ScoreOptions, workers: int = 1, allow_partial: bool = False, aggregate_only: bool = False,
          progress: bool = True) -> dict:  # fmt: skip
    """Score every case of the dataset that the run predicted; write per-case files and aggregates; return the summary."""
    run = RunLayout(opts.pred)
    protocol = load_protocol(opts.protocol, opts.eval_size)
    run_info = read_json(run.run_json)
    cases = Dataset(opts.dataset).cases()
    missing = [c.case_id for c in cases if not case_done(run, c.subset, c.case_id)]
    if missing and not allow_partial:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise PersistbenchError(f"{run.root}: no prediction for {', '.join(missing[:3])}{more}; --allow-partial scores the rest")
    keys = [(c.subset, c.case_id) for c in cases if c.case_id not in set(missing)]
    if not aggregate_only:
        job = runner.Job(functools.partial(_score_one, opts=opts), run.scores_dir(protocol.name) / STATE_DIR)
        outcomes = runner.run(keys, key_of=lambda k: k[1], job=job, is_done=lambda k: _scored(run, protocol, *k),
                              workers=workers, desc="score", progress=progress)  # fmt: skip
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:
            raise PersistbenchError(f"{run.root}: {len(failed)} case(s) could not be scored:\n{runner.summary(outcomes)}")
    results = [read_json(run.case_scores(protocol.name, *k)) for k in keys]
    return write_aggregates(run, protocol, run_info, results, missing)


def aggregate(results: list[dict]) -> dict:
    """Per subset and over all cases: for each split and metric, the mean of the case means and the valid-case count; and the gap."""
    out = {}
    for subset in sorted({r["subset"] for r in results}) + ["all"]:
        rs = [r for r in results if subset in ("all", r["subset"])]
        names = sorted({m for r in rs for m in r["metrics"]})
        block = {}
        for split in SPLITS:
            block[split] = {}
            for m in names:
                vals = [r["means"][split].get(m) for r in rs if r["means"][split].get(m) is not None]
                block[split][m] = {"mean": float(np.mean(vals)) if vals else None, "cases": len(vals)}
        block["gap"] = {m: (block["visible"][m]["mean"] - block["invisible"][m]["mean"])
                        if block["visible"][m]["mean"] is not None and block["invisible"][m]["mean"] is not None else None
                        for m in names}  # fmt: skip
        block["cases"] = len(rs)
        out[subset] = block
    return out


def write_aggregates(run: RunLayout, protocol: Protocol, run_info: dict, results: list[dict], missing: list[str]) -> dict:
    """``results.json``, ``summary.json``, ``leaderboard.csv`` and ``summary.md`` from the per-case results."""
    unavailable = sorted({r["lpips_unavailable"] for r in results if r.get("lpips_unavailable")})
    header = {
        "run": run.root.name, "model": run_info.get("model"), "oracle": bool(run_info.get("oracle")),
        "protocol": protocol.name, "protocol_sha256": protocol.sha256,
        "dataset_fingerprint": run_info.get("dataset", {}).get("fingerprint"),
        "mask_source": sorted({r["mask_source"] for r in results}), "partial": bool(missing), "missing_cases": missing,
        "lpips_unavailable": unavailable[0] if unavailable else None, "toolkit_version": __version__,
    }  # fmt: skip
    summary = {**header, "subsets": aggregate(results)}
    write_json(run.results_json(protocol.name), {**header, "cases": results})
    write_json(run.summary_json(protocol.name), summary)
    names = sorted({m for r in results for m in r["metrics"]})
    columns = [f"{s}/{split}/{m}" for s in summary["subsets"] for split in (*SPLITS, "gap") for m in names]
    row = {"run": header["run"], "model": header["model"], "oracle": header["oracle"], "partial": header["partial"],
           "protocol": protocol.name, "protocol_sha256": protocol.sha256[:12]}  # fmt: skip
    for col in columns:
        s, split, m = col.split("/")
        v = summary["subsets"][s][split][m] if split == "gap" else summary["subsets"][s][split][m]["mean"]
        row[col] = "" if v is None else f"{v:.6f}"
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(row), lineterminator="\n")
    writer.writeheader()
    writer.writerow(row)
    write_text(run.leaderboard_csv(protocol.name), buf.getvalue())
    lines = [f"# {header['run']} ({header['model']}), protocol {protocol.name} ({protocol.sha256[:12]})", ""]
    if header["oracle"]:
        lines.append("**oracle run: copies the ground truth; it checks the scorer and is not a result.**\n")
    if missing:
        lines.append(f"**partial: {len(missing)} case(s) without predictions were not scored.**\n")
    if unavailable:
        lines.append(f"**LPIPS unavailable: {unavailable[0]}**\n")
    lines += ["| subset | metric | visible | invisible | gap | cases |", "| --- | --- | --- | --- | --- | --- |"]
    fmt = lambda v: "n/a" if v is None else f"{v:.4f}"  # noqa: E731
    for s, block in summary["subsets"].items():
        for m in names:
            lines.append(f"| {s} | {m} | {fmt(block['visible'][m]['mean'])} | {fmt(block['invisible'][m]['mean'])} | "
                         f"{fmt(block['gap'][m])} | {block['cases']} |")  # fmt: skip
    write_text(run.summary_md(protocol.name), "\n".join(lines) + "\n")
    return summary
