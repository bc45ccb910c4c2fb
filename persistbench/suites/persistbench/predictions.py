"""Finding a run's prediction of a PersistBench case: our run layout, or the public toolkit's output."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from persistbench.core.case import Prediction
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import RunLayout
from persistbench.core.runs import case_record
from persistbench.geometry.sampling import crop_box, sample_indices, target_size
from persistbench.io.files import read_json
from persistbench.io.images import list_images
from persistbench.io.names import check_name
from persistbench.suites.persistbench.dataset import Case


@dataclass(frozen=True)
class FramePrediction(Prediction):
    """Predicted frames of a case (``files``) and how they were sampled from it."""

    frame_indices: list[int]  # into the case's frames
    masks: list[Path]  # empty: the tracker localises
    size: tuple[int, int] | None  # (h, w) every frame must have; None: any, but all equal
    crop: tuple[int, int, int, int]  # (x0, y0, w, h) of the ground truth the model was asked for


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
    def from_run_info(cls, info: dict | None, where: Path) -> PublicRun | None:
        pre = (info or {}).get("preprocessing", info or {})
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


def _ints(value: object, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(isinstance(v, int) and 0 <= v <= 1 << 16 for v in value)


def read_prediction(run: RunLayout, run_info: dict | None, case: Case) -> FramePrediction | None:
    """The prediction of ``case``, or None when the run has none. Its records are checked (untrusted)."""
    full = case.size or case.view("center").mask(0).shape
    public = PublicRun.from_run_info(run_info, run.run_json)
    if public is not None:
        return _public_prediction(run, public, case, tuple(full))
    info = case_record(run, case.subset, case.case_id)
    if info is None:
        return None
    where = run.case_json(case.subset, case.case_id)
    idx, size, crop = info.get("frame_indices"), info.get("size"), info.get("crop") or [0, 0, full[1], full[0]]
    if not (isinstance(idx, list) and 0 < len(idx) <= case.n_frames and all(isinstance(i, int) for i in idx)):
        raise PersistbenchError(f"{where}: frame_indices must be 1 to {case.n_frames} frame numbers")
    if not (_ints(size, 2) and _ints(crop, 4)):
        raise PersistbenchError(f"{where}: size must be [w, h] and crop [x0, y0, w, h], positive integers")
    return FramePrediction(
        tuple(list_images(run.frames_dir(case.subset, case.case_id))),
        where,
        idx,
        list_images(run.masks_dir(case.subset, case.case_id)),
        (size[1], size[0]),
        tuple(crop),
    )


def _public_prediction(run: RunLayout, public: PublicRun, case: Case, full: tuple[int, int]) -> FramePrediction | None:
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
        if sizes is not None and any(list(s) != [size[1], size[0]] for s in sizes):
            raise PersistbenchError(
                f"{record}: sizes_wh differ from the {size[1]}x{size[0]} this run's eval_reso gives"
            )
    return FramePrediction(
        tuple(frames),
        record if record.is_file() else None,
        idx.tolist(),
        [],
        size,
        crop_box(full, public.eval_reso),
    )


def predicted_keys(run: RunLayout, run_info: dict | None, subsets: dict[str, str]) -> set[str]:
    """``<subset>.<case_id>`` of every case the run holds a prediction for, in our layout or the public
    toolkit's (its uids are ``<subset>__<case_id>`` or the case id, whose subset ``subsets`` gives: a uid of no
    case of the dataset is kept as it is, to be named)."""
    public = PublicRun.from_run_info(run_info, run.run_json)
    if public is None:
        return {f"{d.parent.name}.{d.name}" for d in run.root.glob("*/*") if (d / "case.json").is_file()}
    uids = (
        public.case_ids
        if public.case_ids is not None
        else [d.name for d in run.root.iterdir() if list_images(d / "prediction")]
    )
    keys = set()
    for uid in uids:  # a case id may hold "__" itself (a source id ending in "_")
        subset, sep, case_id = uid.partition("__")
        keys.add(f"{subsets[uid]}.{uid}" if uid in subsets else f"{subset}.{case_id}" if sep else uid)
    return keys
