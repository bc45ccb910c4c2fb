"""``persistbench infer``: run a model adapter over a suite's cases and write its predictions.

What the model gets for a case is the suite's (:meth:`~persistbench.core.suite.Suite.request`:
PersistBench samples ``view_0`` frames and both cameras; R2M-Bench gives the conditioning image,
the prompt and every trajectory pose); the model never sees what it is scored against. Its
output is validated before anything of the case is written, and the case's ``case.json`` is
written last. Cases run on an executor (:mod:`persistbench.executors`); nothing here depends on the suite.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from persistbench import __version__
from persistbench.core.case import CaseRef, Request
from persistbench.core.errors import PersistbenchError, UsageError, foreign
from persistbench.core.layout import STATE_DIR, RunLayout
from persistbench.core.outputs import RUN, check_output
from persistbench.core.runs import RunRecord, complete_record, read_run_info, stale_cases
from persistbench.core.suite import Suite
from persistbench.core.suites import open_suite
from persistbench.core.timing import phase
from persistbench.executors import Executor, Job, RunResult, Selection, SerialExecutor
from persistbench.geometry import sphere
from persistbench.io.files import check_writable, file_lock, sha256_file, write_json
from persistbench.io.images import write_image
from persistbench.io.names import remove_tree
from persistbench.io.video import LOSSLESS_SETTINGS, encode_video
from persistbench.models import BaseModel, ModelInput, ModelOutput, load_model, resolve

# ---------------------------------------------------------------- output validation (pure)


def validate_output(out: object, n: int, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray | None, str]:
    """Check a model's output; return ``(frames uint8 [n,h,w,3], masks bool [n,h,w] or None, projection)``.

    ``size`` = (h, w) of the expected perspective frames; equirectangular
    output must be ``[n, H, 2H, 3]``.

    Raises:
        ValueError: with a one-line reason.
    """
    if not isinstance(out, ModelOutput):
        raise ValueError(f"predict returned {type(out).__name__}, not ModelOutput")
    if out.projection not in ("perspective", "equirect"):
        raise ValueError(f"projection {out.projection!r} is neither 'perspective' nor 'equirect'")
    frames = np.asarray(out.frames)
    if frames.ndim != 4 or frames.shape[0] != n or frames.shape[3] != 3:
        raise ValueError(f"frames have shape {frames.shape}, expected ({n}, H, W, 3)")
    if out.projection == "perspective" and frames.shape[1:3] != tuple(size):
        raise ValueError(f"frames are {frames.shape[2]}x{frames.shape[1]}, expected {size[1]}x{size[0]}")
    if out.projection == "equirect" and frames.shape[2] != 2 * frames.shape[1]:
        raise ValueError(f"equirect frames are {frames.shape[2]}x{frames.shape[1]}, expected width = 2 x height")
    if frames.dtype == np.uint8:
        pass
    elif frames.dtype.kind == "f":
        if not np.isfinite(frames).all():
            raise ValueError("frames hold NaN or infinite values")
        if frames.min() < 0 or frames.max() > 1:
            raise ValueError(f"float frames must lie in [0, 1], found [{frames.min():.3g}, {frames.max():.3g}]")
        frames = np.clip(frames * 255.0 + 0.5, 0, 255).astype(np.uint8)
    else:
        raise ValueError(f"frames have dtype {frames.dtype}, expected uint8 or float")
    masks = None
    if out.masks is not None:
        masks = np.asarray(out.masks)
        if masks.dtype != bool:
            raise ValueError(f"masks have dtype {masks.dtype}, expected bool")
        if masks.shape != frames.shape[:3]:
            raise ValueError(f"masks have shape {masks.shape}, expected {frames.shape[:3]}")
    return frames, masks, out.projection


# ---------------------------------------------------------------- one case


@dataclass(frozen=True)
class InferOptions:
    dataset: Path | str  # a folder, or a URL for suites that read remote data
    output: Path
    model: str
    device: str = "cpu"
    config: dict | None = None
    suite: str | None = None  # None: detected from the dataset root
    suite_options: dict = field(default_factory=dict, hash=False)  # WROP's tasks, per_task, categories
    seed: int | None = None  # the run's seed: each case's ModelInput.seed derives from it (case_seed)

    def open_suite(self) -> Suite:
        """The suite on the dataset."""
        return open_suite(self.dataset, self.suite, self.suite_options)


@dataclass
class Prepared:
    """What every case of an ``infer`` run needs in one worker (:attr:`persistbench.executors.Job.setup`): the
    suite opened on its dataset and the model, loaded once."""

    suite: Suite
    model: BaseModel
    run: RunLayout

    def close(self) -> None:
        """The model's ``close()`` (a ``cmd:`` model's program), when it has one."""
        close = getattr(self.model, "close", None)
        if callable(close):
            close()


def prepare(opts: InferOptions) -> Prepared:
    """Open the suite and load the model, once per worker."""
    run = RunLayout(opts.output)
    model = load_model(opts.model, opts.device, opts.config)
    if hasattr(model, "log_dir"):  # a cmd: model logs beside the run
        model.log_dir = run.log_dir
    return Prepared(opts.open_suite(), model, run)


def sampling_of(model: object, name: str) -> tuple[int, tuple[int, int]]:
    """``(num_frames, (height, width))`` a model (class or instance) asks for, checked.

    ``num_frames`` is -1 (every frame) or positive; ``resolution`` is -1 or (-1, -1) (the dataset's
    size) or two positive integers. Anything else is refused naming the model.
    """
    n = getattr(model, "num_frames", -1)
    res = getattr(model, "resolution", (-1, -1))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not (n == -1 or n > 0):
        raise PersistbenchError(f"--model {name}: num_frames must be -1 (all) or a positive integer, found {n!r}")
    if isinstance(res, (int, np.integer)) and not isinstance(res, bool) and res == -1:
        res = (-1, -1)
    ok = (
        isinstance(res, (tuple, list))
        and len(res) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in res)
    )
    if not ok or not (tuple(res) == (-1, -1) or min(res) > 0):
        raise PersistbenchError(
            f"--model {name}: resolution must be -1 or (height, width) positive integers, found {res!r}"
        )
    return int(n), (int(res[0]), int(res[1]))


def sampling_record(model: object, name: str, suite: Suite) -> dict:
    """The sampling a model (class or instance) asks for, as recorded in ``run.json``."""
    n, res = sampling_of(model, name)
    return {"num_frames": n, "resolution": list(res), "rule": suite.sampling_note()}


def case_seed(seed: int | None, key: str) -> int | None:
    """A case's seed from the run's (None: none): a 32-bit integer of ``sha256(seed, key)``, so that a case gets
    the same seed whichever worker, shard or restart predicts it, and cases get different ones."""
    if seed is None:
        return None
    return int.from_bytes(hashlib.sha256(f"{seed}\0{key}".encode()).digest()[:4], "little")


def infer_case(state: Prepared, key: tuple[str, str], model_name: str, seed: int | None = None) -> None:
    """Predict one case ``(subset, case_id)`` and write it; ``case.json`` last."""
    subset, case_id = key
    model, suite = state.model, state.suite
    name = suite.key(CaseRef(subset, case_id))
    num_frames, resolution = sampling_of(model, model_name)
    oracle = bool(getattr(model, "uses_ground_truth", False))
    with phase("decode"):
        req = suite.request(CaseRef(subset, case_id), num_frames, resolution, oracle)
    if oracle:
        model.ground_truth = req.ground_truth
    try:
        with phase("model"):
            out = model.predict(ModelInput(**req.fields, seed=case_seed(seed, name)))
    except PersistbenchError:
        raise
    except SystemExit as e:  # the model's own code ended the process: that case fails, the run goes on
        raise PersistbenchError(f"{name}: model called sys.exit({e.code!r}) in predict()") from None
    except Exception as e:  # the model's own code: one line, the run goes on; its traceback in the case's log
        raise foreign(f"{name}: model raised {type(e).__name__}: {e}") from None
    try:
        frames, masks, projection = validate_output(out, req.n_frames, req.size)
    except ValueError as e:
        raise PersistbenchError(f"{name}: bad model output: {e}") from None
    with phase("write"):
        if projection == "equirect":
            frames, masks = _from_equirect(frames, masks, req.fields["target_cameras"], req.size)
        digest = suite.case_digest(CaseRef(subset, case_id))
        _write_case(state.run, subset, case_id, req, frames, masks, projection, digest)


def _from_equirect(frames, masks, cams, size):
    """Reproject panoramas into the target cameras (RGB bilinear, masks nearest); ``size`` = (h, w)."""
    mapper = sphere.PerspectiveMapper(cams["cam_intrinsic"], size, frames.shape[1:3])
    views, view_masks = [], []
    for t, r in enumerate(cams["cam_poses"][:, :3, :3]):
        maps = mapper.maps(r)
        views.append(sphere.remap_bilinear(frames[t], maps))
        if masks is not None:
            view_masks.append(sphere.remap_nearest(masks[t].astype(np.uint8), maps) > 0)
    return np.stack(views), (np.stack(view_masks) if masks is not None else None)


def _write_case(run: RunLayout, subset, case_id, req: Request, frames, masks, projection, digest) -> None:
    remove_tree(run.root, run.case_dir(subset, case_id))  # leftovers of an interrupted run
    files = {}

    def record(path, digest: str) -> None:
        files[path.relative_to(run.root).as_posix()] = digest

    if req.video_fps is not None:
        path = run.video_path(subset, case_id)
        encode_video(path, frames, req.video_fps, LOSSLESS_SETTINGS)
        record(path, sha256_file(path))
    else:
        for t in range(len(frames)):
            record(run.frame_path(subset, case_id, t), write_image(run.frame_path(subset, case_id, t), frames[t]))
    for t in range(len(frames) if masks is not None else 0):
        path = run.mask_path(subset, case_id, t)
        record(path, write_image(path, masks[t].astype(np.uint8) * 255))
    write_json(
        run.case_json(subset, case_id),
        {
            "uid": case_id,
            "subset": subset,
            **req.record,
            "projection": projection,
            "has_masks": masks is not None,
            "files": dict(sorted(files.items())),
            **({"case_sha256": digest} if digest else {}),
        },
    )


# ---------------------------------------------------------------- the run


def _predicted(suite: Suite, run: RunLayout, key: tuple[str, str]) -> bool:
    """Complete, and predicted on the case as the dataset has it now (where the case recorded its digest)."""
    info = complete_record(run, *key)
    return info is not None and suite.case_digest(CaseRef(*key)) in (None, info.get("case_sha256"))


def _predicted_here(state: Prepared, key: tuple[str, str]) -> bool:
    return _predicted(state.suite, state.run, key)


def check_model_fits(factory: object, name: str, suite: Suite) -> None:
    """Refuse, once for the run, a model that needs what the suite's requests never hold (cameras, the truth)."""
    model = getattr(factory, "func", factory)  # a cmd: model is a partial of its class
    if getattr(model, "needs_cameras", False) and not suite.gives_cameras:
        raise UsageError(f"--model {name}: needs cameras, and {suite.title} gives none; choose a model without them")
    if getattr(model, "uses_ground_truth", False) and not suite.has_ground_truth:
        raise UsageError(f"--model {name}: copies the ground truth, and {suite.title} has none to give")


def start_run(opts: InferOptions, suite: Suite, resume: bool, overwrite: bool) -> RunRecord:
    """Write (or, with ``resume``, check) ``run.json`` before any case; return it."""
    run = RunLayout(opts.output)
    factory = resolve(opts.model)
    # num_frames and resolution are class attributes; a cmd: model takes them from its config,
    # so it is built here (cheaply). Real models load in the workers only.
    model = load_model(opts.model, opts.device, opts.config) if isinstance(factory, functools.partial) else factory
    info = RunRecord(
        model=opts.model,
        config=opts.config or {},
        device=opts.device,
        oracle=bool(getattr(model, "uses_ground_truth", False)),
        sampling=sampling_record(model, opts.model, suite),
        dataset={
            "root": suite.dataset_id(),
            "fingerprint": suite.fingerprint(),
            **({"options": suite.dataset_options()} if suite.dataset_options() else {}),
            **({"skipped": suite.skipped()} if suite.skipped() else {}),
        },
        toolkit_version=__version__,
        seed=opts.seed,
        model_class=f"{type(model).__module__}.{type(model).__qualname__}"
        if isinstance(factory, functools.partial)
        else f"{factory.__module__}.{factory.__qualname__}",
    )
    with file_lock(run.state_dir / "run.lock"):  # two infers into one output: one decides, then the other
        return _claim_run(run, info, resume, overwrite, suite)


def _claim_run(run: RunLayout, info: RunRecord, resume: bool, overwrite: bool, suite: Suite) -> RunRecord:
    if run.run_json.exists():
        if overwrite:
            for entry in run.root.iterdir():  # everything of the old run goes but .state/, which holds the lock
                if entry.name == STATE_DIR:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    remove_tree(run.root, entry)
                else:
                    entry.unlink()
        elif resume:
            old = RunRecord.from_json(read_run_info(run))
            why = info.differs(old, by_case=True)
            if why is None and (old.dataset or {}).get("fingerprint") != info.dataset["fingerprint"]:
                if stale_cases(suite, run, suite.cases()) is None:
                    why = "a different dataset (fingerprint differs)"
                else:  # the dataset grew or changed: predicted cases checked by their own digests, changed ones redone
                    old.dataset = info.dataset
                    write_json(run.run_json, old.to_json())
            if why:
                raise PersistbenchError(f"{run.run_json}: --resume with {why}; use --overwrite or another --output")
            return old
        else:
            raise PersistbenchError(
                f"{run.root}: a run is already there; pass --resume to continue it or --overwrite to replace it"
            )
    info.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(run.run_json, info.to_json())
    return info


def infer(
    opts: InferOptions,
    selection: Selection | None = None,
    executor: Executor | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> RunResult:
    """Run the model over the selected cases on ``executor`` (default: serial); one outcome per case, in order.

    A shard of a run (``selection.shard``) joins the run another shard started (``run.json`` must agree).
    """
    selection = selection or Selection()
    suite = opts.open_suite()
    everything = suite.cases()
    if not everything:
        raise UsageError(f"{opts.dataset}: no cases (not a dataset root?)")
    if selection.subset is not None and selection.subset not in {c.subset for c in everything}:
        raise UsageError(
            f"--subset {selection.subset}: no such subset; {opts.dataset} has "
            f"{', '.join(sorted({c.subset for c in everything}))}"
        )
    cases = selection.apply(everything, lambda c: c.subset)
    check_model_fits(resolve(opts.model), opts.model, suite)  # refused once, before the run's folder is made
    check_output(opts.output, inputs=[("dataset", opts.dataset)], accepts=(RUN,))
    check_writable(opts.output)
    start_run(opts, suite, resume or (selection.shard is not None and not overwrite), overwrite)
    run = RunLayout(opts.output)
    names = {(c.subset, c.case_id): suite.key(c) for c in cases}
    work = functools.partial(infer_case, model_name=opts.model, seed=opts.seed)
    job = Job("infer", work, run.state_dir, _predicted_here, functools.partial(prepare, opts))
    predicted = functools.partial(_predicted, suite, run)
    return (executor or SerialExecutor()).run(
        job, list(names), key_of=names.__getitem__, is_done=predicted, progress=progress
    )


def check_complete(opts: InferOptions, selection: Selection | None = None) -> RunResult:
    """``infer --aggregate-only``: after the shards of a run, one outcome per selected case: ``skipped`` when
    predicted, else ``failed`` with the reason its record gives (or ``not predicted``)."""
    from persistbench.executors import Outcome, read_records

    selection = selection or Selection()
    suite = opts.open_suite()
    run = RunLayout(opts.output)
    if not run.run_json.is_file():
        raise PersistbenchError(f"{run.root}: no run.json; run infer (its shards) first")
    records = {r["key"]: r for r in read_records(run.state_dir)}
    outcomes = []
    for c in selection.apply(suite.cases(), lambda c: c.subset):
        key = suite.key(c)
        if _predicted(suite, run, (c.subset, c.case_id)):
            outcomes.append(Outcome(key, "done", attempts=records.get(key, {}).get("attempts", 1)))
        else:
            reason = str(records.get(key, {}).get("reason") or "not predicted").split("\n", 1)[0]
            outcomes.append(Outcome(key, "failed", reason))
    return RunResult("infer", outcomes, "none")
