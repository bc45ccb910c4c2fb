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
from .infer import case_record, crop_box, crop_resize, dataset_fingerprint, sample_indices, sampled_frames, sampled_masks, target_size
from .layout import STATE_DIR, Case, Dataset, RunLayout, list_images, read_image, read_json, sha256_file, write_json, write_text
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
def _lpips(device: str, weights: str | None, allow_download: bool) -> metrics.Lpips | str:
    """The LPIPS scorer, or the reason it is unavailable (loaded once per process)."""
    try:
        return metrics.Lpips(device, weights, allow_download=allow_download)
    except metrics.LpipsUnavailable as e:
        return str(e)


@dataclass(frozen=True)
class Prediction:
    """A run's prediction of one case, in our layout or the public toolkit's."""

    frame_indices: list[int]  # into the case's frames
    frames: list[Path]
    masks: list[Path]  # empty: the tracker localises
    size: tuple[int, int] | None  # (w, h) every frame must have; None: any, but all equal
    crop: tuple[int, int, int, int]  # (x0, y0, w, h) of the ground truth the model was asked for
    record: Path | None  # case.json (it lists every file's sha256); None for the public layout

    @functools.cached_property
    def digest(self) -> str:
        """Identity of the prediction's files, recorded in the scores (for ``--resume``); hashed on first use."""
        if self.record is not None:
            return sha256_file(self.record)
        h = hashlib.sha256()
        for f in self.frames:
            h.update(f.name.encode() + b"\0" + bytes.fromhex(sha256_file(f)))
        return h.hexdigest()


def is_public(run_info: dict) -> bool:
    """The public toolkit's inference output: ``run.json`` with ``eval_length``/``eval_reso``."""
    return "eval_length" in run_info


def read_prediction(run: RunLayout, run_info: dict, case: Case) -> Prediction | None:
    """The prediction of ``case``, or None when the run has none."""

    def full_size() -> tuple[int, int]:
        h0, w0 = case.view("center").mask(0).shape
        return w0, h0

    if is_public(run_info):
        frames = list_images(run.public_prediction_dir(case.case_id))
        if not frames:
            return None
        reso = tuple(int(v) for v in run_info.get("eval_reso") or (-1, -1))  # (height, width)
        idx = sample_indices(case.n_frames, int(run_info["eval_length"]))
        size = full_size()
        return Prediction(idx.tolist(), frames, [], target_size(size, reso) if min(reso) > 0 else None,
                          crop_box(size, reso), None)  # fmt: skip
    info = case_record(run, case.subset, case.case_id)
    if info is None:
        return None
    return Prediction([int(i) for i in info["frame_indices"]], list_images(run.frames_dir(case.subset, case.case_id)),
                      list_images(run.masks_dir(case.subset, case.case_id)), tuple(info["size"]),
                      tuple(info.get("crop") or (0, 0, *full_size())), run.case_json(case.subset, case.case_id))  # fmt: skip


def _read_all(paths: list[Path], size: tuple[int, int] | None, eval_size: tuple[int, int], gray: bool) -> np.ndarray:
    """Images resized to ``eval_size``; each must be ``size`` (or, if None, the size of the first)."""
    out = []
    for p in paths:
        image = read_image(p, gray=gray)
        got = (image.shape[1], image.shape[0])
        size = size or got
        if got != tuple(size):
            raise PersistbenchError(f"{p}: {got[0]}x{got[1]}, expected {size[0]}x{size[1]}")
        out.append(crop_resize(image, (0, 0, *got), eval_size, nearest=gray))
    return np.stack(out)


def score_case(case: Case, pred: Prediction, protocol: Protocol, wanted: tuple[str, ...], lpips) -> dict:
    """Per-frame metrics of one predicted case; raises :class:`PersistbenchError` on a bad prediction.

    ``lpips`` is a :class:`metrics.Lpips`, or the reason it is unavailable (str).
    """
    idx = pred.frame_indices
    if not idx or max(idx) >= case.n_frames or min(idx) < 0:
        raise PersistbenchError(f"{case.case_id}: frame indices do not fit the case's {case.n_frames} frames")
    if len(pred.frames) != len(idx):
        raise PersistbenchError(f"{case.case_id}: {len(pred.frames)} predicted frames, expected {len(idx)}")
    if pred.masks and len(pred.masks) != len(idx):
        raise PersistbenchError(f"{case.case_id}: {len(pred.masks)} predicted masks, expected {len(idx)}")
    size = protocol.eval_size
    gt_view = case.view("center")
    gt = sampled_frames(gt_view, np.asarray(idx), pred.crop, size)
    gt_masks = sampled_masks(gt_view, np.asarray(idx), pred.crop, size)
    preds = _read_all(pred.frames, pred.size, size, gray=False)

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
    if pred.masks:
        source = "model"
        pred_masks = list(_read_all(pred.masks, pred.size, size, gray=True) > 0)
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
        "requested": list(wanted), "prediction_sha256": pred.digest,
    }  # fmt: skip


@dataclass(frozen=True)
class ScoreOptions:
    pred: Path
    dataset: Path
    protocol: str = "classic-v1"
    metrics: tuple[str, ...] = MASKED + LOCALISATION
    device: str = "cpu"
    lpips_weights: str | None = None
    allow_download: bool = False  # the AlexNet weights, into the torch hub cache
    eval_size: tuple[int, int] | None = None  # (height, width); None: the protocol's


def _lpips_for(opts: ScoreOptions):
    return _lpips(opts.device, opts.lpips_weights, opts.allow_download) if "lpips" in opts.metrics else None


def _score_one(key: tuple[str, str], opts: ScoreOptions, run_info: dict) -> None:
    protocol = load_protocol(opts.protocol, opts.eval_size)
    run = RunLayout(opts.pred)
    case = Dataset(opts.dataset).case(*key)
    pred = read_prediction(run, run_info, case)
    if pred is None:
        raise PersistbenchError(f"{case.case_id}: the prediction disappeared while scoring")
    write_json(run.case_scores(protocol.name, *key), score_case(case, pred, protocol, opts.metrics, _lpips_for(opts)))


def _up_to_date(run: RunLayout, protocol: Protocol, opts: ScoreOptions, run_info: dict, case: Case, lpips_note) -> bool:
    """``--resume``: the case's scores exist for this protocol, these metrics, this prediction and LPIPS state."""
    try:
        old = read_json(run.case_scores(protocol.name, case.subset, case.case_id))
    except PersistbenchError:
        return False
    pred = read_prediction(run, run_info, case)
    return (pred is not None and old.get("protocol_sha256") == protocol.sha256 and old.get("requested") == list(opts.metrics)
            and old.get("prediction_sha256") == pred.digest and old.get("lpips_unavailable") == lpips_note)  # fmt: skip


def score(opts: ScoreOptions, workers: int = 1, shard: runner.Shard | None = None, resume: bool = False,
          allow_partial: bool = False, aggregate_only: bool = False, progress: bool = True) -> dict | None:  # fmt: skip
    """Score every case of the dataset that the run predicted; write per-case files and aggregates; return the summary.

    With ``shard``, only that shard's cases are scored and no aggregates are written (None is
    returned): run ``aggregate_only`` once every shard is done. Without ``resume`` every selected
    case is scored again; with it, cases whose scores are up to date are kept.
    """
    run = RunLayout(opts.pred)
    protocol = load_protocol(opts.protocol, opts.eval_size)
    run_info = read_json(run.run_json)
    ds = Dataset(opts.dataset)
    fingerprint = dataset_fingerprint(ds)
    recorded = run_info.get("dataset", {}).get("fingerprint")
    if recorded and recorded != fingerprint:
        raise PersistbenchError(f"{run.run_json}: predicted on a dataset with fingerprint {recorded[:12]}, "
                                f"but {ds.root} has {fingerprint[:12]}; pass the dataset the run was made on")  # fmt: skip
    cases = runner.select(ds.cases(), lambda c: c.subset, shard=shard)
    missing = [c.case_id for c in cases if read_prediction(run, run_info, c) is None]
    if missing and not allow_partial:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise PersistbenchError(f"{run.root}: no prediction for {', '.join(missing[:3])}{more}; --allow-partial scores the rest")
    present = [c for c in cases if c.case_id not in set(missing)]
    if not aggregate_only:
        note = _lpips_for(opts) if resume else None
        done = {c.case_id for c in present if _up_to_date(run, protocol, opts, run_info, c, note if isinstance(note, str) else None)} \
            if resume else set()  # fmt: skip
        job = runner.Job(functools.partial(_score_one, opts=opts, run_info=run_info), run.scores_dir(protocol.name) / STATE_DIR)
        outcomes = runner.run([(c.subset, c.case_id) for c in present], key_of=lambda k: k[1], job=job,
                              is_done=lambda k: k[1] in done, workers=workers, desc="score", progress=progress)  # fmt: skip
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:
            raise PersistbenchError(f"{run.root}: {len(failed)} case(s) could not be scored:\n{runner.summary(outcomes)}")
    if shard is not None:
        return None
    results = [read_json(run.case_scores(protocol.name, c.subset, c.case_id)) for c in present]
    return write_aggregates(run, protocol, {**run_info, "fingerprint": fingerprint}, results, missing)


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
        "run": run.root.name, "model": run_info.get("model", "public toolkit output" if is_public(run_info) else None),
        "oracle": bool(run_info.get("oracle")),
        "protocol": protocol.name, "protocol_sha256": protocol.sha256,
        "dataset_fingerprint": run_info["fingerprint"],
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
