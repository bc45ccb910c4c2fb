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
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from . import __version__, metrics, runner
from .dataset import Case, Dataset
from .errors import PersistbenchError
from .files import read_json, sha256_file, write_json, write_text
from .images import image_size, list_images, read_image
from .layout import STATE_DIR, VIEWS, RunLayout
from .names import check_name, name_problem
from .runs import case_record
from .sampling import crop_box, crop_resize, sample_indices, sampled_frames, sampled_masks, target_size
from .segment import TemplateTracker
from .verify import require_usable

MASKED = ("psnr", "ssim", "lpips")
LOCALISATION = ("iou", "presence", "continuity")
METRICS = MASKED + LOCALISATION
SPLITS = ("visible", "invisible")


@dataclass(frozen=True)
class Protocol:
    name: str
    config: dict
    sha256: str  # of the canonical JSON: recorded in every output
    dirname: str  # scores/<dirname>/: the name, or name-<sha256[:8]> for a protocol changed from the shipped one

    @property
    def eval_size(self) -> tuple[int, int]:
        """``(width, height)``."""
        h, w = self.config["eval_size"]
        return int(w), int(h)

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(self.config["metrics"])


def _shipped(name: str) -> Path:
    return Path(str(resources.files("persistbench") / "data" / "protocols" / f"{name}.json"))


def _canonical_sha256(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _protocol_problems(config: object) -> Iterator[str]:
    """What is wrong with a protocol file's content (it is untrusted: a user may pass any JSON)."""
    if not isinstance(config, dict):
        yield "must be a JSON object"
        return
    problem = name_problem(config.get("name"))
    if problem:
        yield f"name: {problem}"
    for key in ("visible_above", "invisible_below"):
        v = config.get(key)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1):
            yield f"{key}: must be a number in [0, 1]"
    size = config.get("eval_size")
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and 0 < v <= 8192 for v in size)):
        yield "eval_size: must be [height, width], positive integers at most 8192"
    names = config.get("metrics")
    if not (isinstance(names, list) and names and all(isinstance(m, str) for m in names)):
        yield "metrics: must be a non-empty list of metric names"
    elif set(names) - set(METRICS):
        yield f"metrics: unknown {sorted(set(names) - set(METRICS))}; known: {', '.join(METRICS)}"


def load_protocol(spec: str = "classic-v1", eval_size: tuple[int, int] | None = None) -> Protocol:
    """A protocol by name (shipped in ``persistbench/data/protocols``, linked from ``configs/``) or JSON path.

    ``eval_size`` = (height, width) overrides the protocol's. A protocol whose content differs from
    the shipped one of its name (an override, or an edited file) has another hash, and its scores go
    to ``scores/<name>-<hash[:8]>/``, never over the shipped protocol's.
    """
    path = Path(spec)
    if not path.is_file():
        path = _shipped(spec) if name_problem(spec) is None else path
    if not path.is_file():
        raise PersistbenchError(f"--protocol {spec}: no such protocol (shipped: classic-v1) or file")
    config = read_json(path)
    problem = next(_protocol_problems(config), None)
    if problem:
        raise PersistbenchError(f"{path}: {problem}")
    if eval_size is not None:
        config = {**config, "eval_size": [int(eval_size[0]), int(eval_size[1])]}
    sha = _canonical_sha256(config)
    shipped = _shipped(config["name"])
    same = not shipped.is_file() or _canonical_sha256(read_json(shipped)) == sha
    return Protocol(config["name"], config, sha, config["name"] if same else f"{config['name']}-{sha[:8]}")


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


@dataclass(frozen=True)
class PublicRun:
    """The public toolkit's inference output (``OUT/null/NAME/``): how it sampled and cropped.

    ``run.json`` holds ``preprocessing: {eval_length, eval_reso}`` (older output: both at the top
    level) and ``case_ids``: ``<subset>__<case_id>`` (just the uid for rows without a subset).
    """

    eval_length: int  # -1: every frame
    eval_reso: tuple[int, int]  # (height, width); (-1, -1): the dataset's size
    case_ids: tuple[str, ...] | None

    @classmethod
    def from_run_info(cls, info: dict, where: Path) -> PublicRun | None:
        pre = info.get("preprocessing", info)
        if not isinstance(pre, dict) or "eval_length" not in pre:
            return None
        length, reso = pre["eval_length"], pre.get("eval_reso", -1)
        if not (isinstance(length, int) and not isinstance(length, bool) and (length == -1 or 1 <= length <= 100_000)):
            raise PersistbenchError(f"{where}: eval_length must be -1 or a positive integer, found {length!r}")
        if reso in (-1, None):
            reso = (-1, -1)
        elif isinstance(reso, list) and len(reso) == 2 and all(isinstance(v, int) and 0 < v <= 8192 for v in reso):
            reso = (reso[0], reso[1])
        else:
            raise PersistbenchError(f"{where}: eval_reso must be -1 or [height, width], found {reso!r}")
        ids = info.get("case_ids")
        if ids is not None:
            if not isinstance(ids, list):
                raise PersistbenchError(f"{where}: case_ids must be a list")
            ids = tuple(check_name(uid, f"{where}: case_ids") for uid in ids)
        return cls(length, reso, ids)

    @staticmethod
    def uids(case: Case) -> tuple[str, str]:
        """Folder names of a case's prediction: ``<subset>__<case_id>``, then the bare uid."""
        return f"{case.subset}__{case.case_id}", case.case_id


def read_prediction(run: RunLayout, run_info: dict, case: Case) -> Prediction | None:
    """The prediction of ``case``, or None when the run has none. Its records are checked (untrusted)."""
    full = case.size or case.view("center").mask(0).shape[::-1]
    public = PublicRun.from_run_info(run_info, run.run_json)
    if public is not None:
        return _public_prediction(run, public, case, tuple(full))
    info = case_record(run, case.subset, case.case_id)
    if info is None:
        return None
    where = run.case_json(case.subset, case.case_id)
    idx, size, crop = info.get("frame_indices"), info.get("size"), info.get("crop") or [0, 0, *full]
    if not (isinstance(idx, list) and 0 < len(idx) <= case.n_frames and all(isinstance(i, int) for i in idx)):
        raise PersistbenchError(f"{where}: frame_indices must be 1 to {case.n_frames} frame numbers")
    if not (_ints(size, 2) and _ints(crop, 4)):
        raise PersistbenchError(f"{where}: size must be [w, h] and crop [x0, y0, w, h], positive integers")
    return Prediction(
        idx,
        list_images(run.frames_dir(case.subset, case.case_id)),
        list_images(run.masks_dir(case.subset, case.case_id)),
        tuple(size),
        tuple(crop),
        where,
    )


def _ints(value: object, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(isinstance(v, int) and 0 <= v <= 1 << 16 for v in value)


def _public_prediction(run: RunLayout, public: PublicRun, case: Case, full: tuple[int, int]) -> Prediction | None:
    for uid in PublicRun.uids(case):
        frames = list_images(run.public_prediction_dir(uid))
        if frames:
            break
    else:
        return None
    idx = sample_indices(case.n_frames, public.eval_length)
    size = target_size(full, public.eval_reso)
    record = run.public_prediction_dir(uid).parent / "case.json"
    if record.is_file():
        info = read_json(record)
        n, sizes = info.get("num_frames"), info.get("sizes_wh")
        if info.get("uid") != uid or n != len(frames):
            raise PersistbenchError(f"{record}: uid and num_frames must be {uid!r} and {len(frames)}")
        if sizes is not None and any(list(s) != list(size) for s in sizes):
            raise PersistbenchError(
                f"{record}: sizes_wh differ from the {size[0]}x{size[1]} this run's eval_reso gives"
            )
    return Prediction(
        idx.tolist(), frames, [], size, crop_box(full, public.eval_reso), record if record.is_file() else None
    )


def predicted_keys(run: RunLayout, run_info: dict) -> set[str]:
    """Every case the run holds a prediction for: ``subset/case_id`` (ours), or the public toolkit's uids."""
    public = PublicRun.from_run_info(run_info, run.run_json)
    if public is not None:
        if public.case_ids is not None:
            return set(public.case_ids)
        return {d.name for d in run.root.iterdir() if list_images(d / "prediction")}
    return {f"{d.parent.name}/{d.name}" for d in run.root.glob("*/*") if (d / "case.json").is_file()}


def _read_all(paths: list[Path], size: tuple[int, int] | None, eval_size: tuple[int, int], gray: bool) -> np.ndarray:
    """Images resized to ``eval_size``; each must be ``size`` (or, if None, the size of the first),
    checked from the file's header before it is decoded."""
    out = []
    for p in paths:
        got = image_size(p)
        size = size or got
        if got != tuple(size):
            raise PersistbenchError(f"{p}: {got[0]}x{got[1]}, expected {size[0]}x{size[1]}")
        out.append(crop_resize(read_image(p, gray=gray), (0, 0, *got), eval_size, nearest=gray))
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
    for view in VIEWS:  # the scores do not use the cameras, but a case with broken ones is not scored as sound
        case.view(view).camera(case.n_frames)
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
        "uid": case.case_id,
        "subset": case.subset,
        "frame_indices": idx,
        "visible": sel["visible"].tolist(),
        "invisible": sel["invisible"].tolist(),
        "metrics": per_frame,
        "means": means,
        "counts": counts,
        "mask_source": source,
        "lost": lost,
        "lpips_unavailable": lpips_note,
        "protocol": protocol.name,
        "protocol_sha256": protocol.sha256,
        "requested": [m for m in METRICS if m in wanted],
        "prediction_sha256": pred.digest,
    }


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


def _merge(new: dict, old: dict | None) -> dict:
    """Keep the metrics an earlier scoring of the same prediction under the same protocol computed and this one
    did not, so that ``--metrics psnr`` adds to the results instead of replacing them. The merged record
    has the same bytes as scoring all its metrics at once."""
    same = old is not None and all(
        old.get(k) == new[k] for k in ("protocol_sha256", "prediction_sha256", "mask_source")
    )
    if not same:
        return new
    kept = [m for m in old.get("metrics", {}) if m not in new["requested"] and m in METRICS]
    for m in kept:
        new["metrics"][m] = old["metrics"][m]
        for split in SPLITS:
            new["means"][split][m] = old["means"][split].get(m)
            new["counts"][split][f"{m}_nan"] = old["counts"][split].get(f"{m}_nan", 0)
    if "lpips" not in new["requested"] and "lpips" in old.get("requested", []):
        new["lpips_unavailable"] = old.get("lpips_unavailable")
        kept.append("lpips")
    new["requested"] = [m for m in METRICS if m in set(new["requested"]) | set(kept)]
    return new


def _score_one(key: tuple[str, str], opts: ScoreOptions, run_info: dict) -> None:
    protocol = load_protocol(opts.protocol, opts.eval_size)
    run = RunLayout(opts.pred)
    case = require_usable(Dataset(opts.dataset).case(*key))
    pred = read_prediction(run, run_info, case)
    if pred is None:
        raise PersistbenchError(f"{case.case_id}: the prediction disappeared while scoring")
    path = run.case_scores(protocol.dirname, *key)
    new = score_case(case, pred, protocol, opts.metrics, _lpips_for(opts))
    write_json(path, _merge(new, read_json(path) if path.is_file() else None))


def _up_to_date(run: RunLayout, protocol: Protocol, opts: ScoreOptions, run_info: dict, case: Case, lpips_note) -> bool:
    """``--resume``: the case's scores exist for this protocol and prediction, with every requested metric."""
    try:
        old = read_json(run.case_scores(protocol.dirname, case.subset, case.case_id))
    except PersistbenchError:
        return False
    pred = read_prediction(run, run_info, case)
    if pred is None or old.get("protocol_sha256") != protocol.sha256 or old.get("prediction_sha256") != pred.digest:
        return False
    have = set(old.get("metrics", {})) | (
        {"lpips"} if old.get("lpips_unavailable") == lpips_note and lpips_note else set()
    )
    return set(opts.metrics) <= have and ("lpips" not in opts.metrics or old.get("lpips_unavailable") == lpips_note)


@dataclass(frozen=True)
class Coverage:
    """Which cases a run and its dataset have in common; anything else makes the result partial."""

    present: list[Case]  # predicted and on disk: scored
    missing: list[str]  # in the dataset, not predicted
    absent: list[str]  # recorded in the dataset, but its folder is gone
    unexpected: list[str]  # predicted, not a case of the dataset

    @property
    def partial(self) -> bool:
        return bool(self.missing or self.absent or self.unexpected)

    def problems(self) -> list[str]:
        def few(ids: list[str]) -> str:
            return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")

        out = []
        if self.missing:
            out.append(f"no prediction for {few(self.missing)}")
        if self.absent:
            out.append(f"the dataset lacks the folder of {few(self.absent)}")
        if self.unexpected:
            out.append(f"predictions for cases the dataset does not have: {few(self.unexpected)}")
        return out


def coverage(run: RunLayout, run_info: dict, ds: Dataset, cases: list[Case], everything: list[Case]) -> Coverage:
    """Compare the selected ``cases`` (of ``everything`` the dataset lists) with what the run predicted."""
    public = PublicRun.from_run_info(run_info, run.run_json) is not None
    known = set()
    for c in everything:
        known.update(PublicRun.uids(c) if public else [f"{c.subset}/{c.case_id}"])
    absent = [c.case_id for c in cases if not (c.path / "view_0").is_dir()]
    missing = [c.case_id for c in cases if c.case_id not in absent and read_prediction(run, run_info, c) is None]
    present = [c for c in cases if c.case_id not in set(absent) | set(missing)]
    return Coverage(present, missing, absent, sorted(predicted_keys(run, run_info) - known))


def score(
    opts: ScoreOptions,
    workers: int = 1,
    shard: runner.Shard | None = None,
    resume: bool = False,
    allow_partial: bool = False,
    aggregate_only: bool = False,
    progress: bool = True,
) -> dict | None:
    """Score every case of the dataset that the run predicted; write per-case files and aggregates; return the summary.

    With ``shard``, only that shard's cases are scored and no aggregates are written (None is
    returned): run ``aggregate_only`` once every shard is done. Without ``resume`` every selected
    case is scored again; with it, cases whose scores are up to date are kept. Metrics not
    requested now but scored before for the same prediction and protocol are kept.
    """
    run = RunLayout(opts.pred)
    protocol = load_protocol(opts.protocol, opts.eval_size)
    run_info = read_json(run.run_json)
    if not isinstance(run_info, dict):
        raise PersistbenchError(f"{run.run_json}: must hold a JSON object")
    ds = Dataset(opts.dataset)
    fingerprint = ds.fingerprint()
    recorded = run_info.get("dataset", {}).get("fingerprint") if isinstance(run_info.get("dataset"), dict) else None
    if recorded and recorded != fingerprint:
        raise PersistbenchError(
            f"{run.run_json}: predicted on a dataset with fingerprint {recorded[:12]}, "
            f"but {ds.root} has {fingerprint[:12]}; pass the dataset the run was made on"
        )
    everything = ds.cases()
    if not everything:
        raise PersistbenchError(f"{ds.root}: no cases to score against")
    cov = coverage(run, run_info, ds, runner.select(everything, lambda c: c.subset, shard=shard), everything)
    if cov.partial and not allow_partial:
        raise PersistbenchError(f"{run.root}: {'; '.join(cov.problems())}; --allow-partial scores the rest")
    if not aggregate_only:
        note = _lpips_for(opts) if resume else None
        note = note if isinstance(note, str) else None
        done = (
            {c.case_id for c in cov.present if _up_to_date(run, protocol, opts, run_info, c, note)} if resume else set()
        )
        job = runner.Job(
            functools.partial(_score_one, opts=opts, run_info=run_info), run.scores_dir(protocol.dirname) / STATE_DIR
        )
        outcomes = runner.run(
            [(c.subset, c.case_id) for c in cov.present],
            key_of=lambda k: k[1],
            job=job,
            is_done=lambda k: k[1] in done,
            workers=workers,
            desc="score",
            progress=progress,
        )
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:
            raise PersistbenchError(
                f"{run.root}: {len(failed)} case(s) could not be scored:\n{runner.summary(outcomes)}"
            )
    if shard is not None:
        return None
    results = [read_json(run.case_scores(protocol.dirname, c.subset, c.case_id)) for c in cov.present]
    return write_aggregates(run, protocol, {**run_info, "fingerprint": fingerprint}, results, cov)


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
        block["gap"] = {
            m: (block["visible"][m]["mean"] - block["invisible"][m]["mean"])
            if block["visible"][m]["mean"] is not None and block["invisible"][m]["mean"] is not None
            else None
            for m in names
        }
        block["cases"] = len(rs)
        out[subset] = block
    return out


def write_aggregates(run: RunLayout, protocol: Protocol, run_info: dict, results: list[dict], cov: Coverage) -> dict:
    """``results.json``, ``summary.json``, ``leaderboard.csv`` and ``summary.md`` from the per-case results."""
    unavailable = sorted({r["lpips_unavailable"] for r in results if r.get("lpips_unavailable")})
    header = {
        "run": run.root.name,
        "model": run_info.get("model", "public toolkit output"),
        "oracle": bool(run_info.get("oracle")),
        "protocol": protocol.name,
        "protocol_sha256": protocol.sha256,
        "dataset_fingerprint": run_info["fingerprint"],
        "mask_source": sorted({r["mask_source"] for r in results}),
        "partial": cov.partial,
        "missing_cases": cov.missing,
        "cases_missing_from_dataset": cov.absent,
        "unexpected_predictions": cov.unexpected,
        "scores_dir": protocol.dirname,
        "lpips_unavailable": unavailable[0] if unavailable else None,
        "toolkit_version": __version__,
    }
    summary = {**header, "subsets": aggregate(results)}
    write_json(run.results_json(protocol.dirname), {**header, "cases": results})
    write_json(run.summary_json(protocol.dirname), summary)
    names = sorted({m for r in results for m in r["metrics"]})
    columns = [f"{s}/{split}/{m}" for s in summary["subsets"] for split in (*SPLITS, "gap") for m in names]
    row = {
        "run": header["run"],
        "model": header["model"],
        "oracle": header["oracle"],
        "partial": header["partial"],
        "protocol": protocol.name,
        "protocol_sha256": protocol.sha256[:12],
    }
    for col in columns:
        s, split, m = col.split("/")
        v = summary["subsets"][s][split][m] if split == "gap" else summary["subsets"][s][split][m]["mean"]
        row[col] = "" if v is None else f"{v:.6f}"
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(row), lineterminator="\n")
    writer.writeheader()
    writer.writerow(row)
    write_text(run.leaderboard_csv(protocol.dirname), buf.getvalue())
    lines = [f"# {header['run']} ({header['model']}), protocol {protocol.name} ({protocol.sha256[:12]})", ""]
    if header["oracle"]:
        lines.append("**oracle run: copies the ground truth; it checks the scorer and is not a result.**\n")
    if cov.partial:
        lines.append(f"**partial: {'; '.join(cov.problems())}; those cases were not scored.**\n")
    if unavailable:
        lines.append(f"**LPIPS unavailable: {unavailable[0]}**\n")
    lines += ["| subset | metric | visible | invisible | gap | cases |", "| --- | --- | --- | --- | --- | --- |"]
    fmt = lambda v: "n/a" if v is None else f"{v:.4f}"  # noqa: E731
    for s, block in summary["subsets"].items():
        for m in names:
            lines.append(
                f"| {s} | {m} | {fmt(block['visible'][m]['mean'])} | {fmt(block['invisible'][m]['mean'])} | "
                f"{fmt(block['gap'][m])} | {block['cases']} |"
            )
    write_text(run.summary_md(protocol.dirname), "\n".join(lines) + "\n")
    return summary
