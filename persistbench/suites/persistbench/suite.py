"""PersistBench as a suite: the reconstructed dataset layout, per-frame ground truth, protocols ``classic-v1``
(weight-free) and ``paper-v3`` (the published protocol, on model backends)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from persistbench.core.case import Request
from persistbench.core.checks import Check
from persistbench.core.layout import RunLayout
from persistbench.core.suite import DemoResult, Suite
from persistbench.core.synth import synth_option
from persistbench.executors import Executor, RunResult
from persistbench.geometry.sampling import (
    CROP_RULE,
    MODEL_INPUT_RESIZE,
    SAMPLE_RULE,
    crop_box,
    describe_resize,
    fit_camera,
    sample_indices,
    sampled_frames,
    sampled_masks,
    target_size,
)
from persistbench.suites.persistbench import predictions
from persistbench.suites.persistbench.dataset import Case, Dataset
from persistbench.suites.persistbench.layout import CASES_JSONL, DB_NAME, SUBSETS, VIEWS
from persistbench.suites.persistbench.verify import require_usable, verify_dataset


def _camera(view, idx: np.ndarray, box, out_size, size) -> dict:
    from persistbench.geometry.camera import Camera

    cam = view.camera()
    full = Camera(np.asarray(cam["cam_intrinsic"]), size[0], size[1], np.asarray(cam["cam_poses"], np.float64))
    return fit_camera(full, box, out_size).at(idx).as_model_input()


# persistbench synth's options -> SynthConfig's fields (sizes stay WxH)
SYNTH_FIELDS = {
    "scenes": "scenes",
    "seed": "seed",
    "pano_size": "pano_size",
    "size": "view_size",
    "hfov": "hfov_deg",
    "frames": "n_frames",
    "fps": "fps",
    "speed": "speed_deg_s",
    "radius": "radius_deg",
}


class PersistBench(Suite):
    name = "persistbench"
    title = "PersistBench"
    option_specs = (
        synth_option("scenes", "Scenes (even: dynamic, odd: static); default 4."),
        synth_option("seed", "Random seed; default 0."),
        synth_option("base_url", "Source URL prefix, e.g. http://127.0.0.1:8000 (default: relative file paths)."),
        synth_option("pano_size", "Source clip size WxH (W = 2H); default 1024x512."),
        synth_option("size", "Output view size WxH; default 256x192."),
        synth_option("hfov", "Horizontal field of view, degrees; default 90."),
        synth_option("frames", "Frames per scene; default 60."),
        synth_option("fps", "Frames per second; default 10."),
        synth_option("speed", "Angular speed of dynamic objects, degrees/s; default 15."),
        synth_option("radius", "Object angular radius, degrees; default 12."),
    )
    question = "Which prediction keeps the object where and how it should be once it is off-screen?"
    scorers = {
        "classic-v1": "persistbench.suites.persistbench.scoring:CLASSIC",
        "card-v1": "persistbench.suites.persistbench.scoring:CLASSIC",
        "paper-v3": "persistbench.suites.persistbench.paper:PAPER",
    }
    subsets = SUBSETS
    external_label = "public toolkit output"

    def __init__(self, root, options=None):
        super().__init__(root, options)
        self.dataset = Dataset(self.root)

    @classmethod
    def detect(cls, root: Path) -> bool:
        if (root / CASES_JSONL).is_file() or (root / DB_NAME).is_file():
            return True
        return any((root / s).is_dir() for s in SUBSETS)

    def cases(self) -> list[Case]:
        return self.dataset.cases()

    def case(self, subset: str, case_id: str) -> Case:
        return require_usable(self.dataset.case(subset, case_id))

    def fingerprint(self) -> str:
        return self.dataset.fingerprint()

    def case_digest(self, case) -> str | None:
        """sha256 of the case's ``cases.jsonl`` record (every file's checksum); None for an unindexed dataset."""
        return self._digests.get((case.subset, case.case_id))

    @functools.cached_property
    def _digests(self) -> dict[tuple[str, str], str]:
        return {
            (r["subset"], r["uid"]): hashlib.sha256(
                json.dumps(r, sort_keys=True, separators=(",", ":")).encode()
            ).hexdigest()
            for r in self.dataset.records()
        }

    def availability(self) -> dict | None:
        from persistbench.suites.persistbench.build import availability

        return availability.read(self.root)

    def verify(self, progress: bool = False) -> tuple[list[str], int]:
        return verify_dataset(self.root, progress=progress)

    # ---------------------------------------------------------------- inference

    @classmethod
    def fetch(cls, output, repo, revision, from_dir, include, progress, options=None, **run) -> RunResult:
        """The sharded distribution: each shard's sha256 verified, extracted safely; resumable
        (:mod:`persistbench.suites.persistbench.dist.fetch`)."""
        from persistbench.io.hub import hub_source
        from persistbench.suites.persistbench.dist.fetch import DEFAULT_REPO, local_source
        from persistbench.suites.persistbench.dist.fetch import fetch as run_fetch

        source = local_source(from_dir) if from_dir else hub_source(repo or DEFAULT_REPO, revision)
        result = run_fetch(output, source, include, progress=progress, **run)
        if result.value is not None:
            record = result.value
            forms = {"path": "their paths (<subset>/<case>/obj_<N>)", "id": "their ids (<case>_obj_<N>)"}
            keys = " and ".join(forms[f] for f in record["index_keys"])
            unchecked = "" if record["verified"] else "; the samples have no checksums to check them against"
            result.value = (
                f"fetched {record['pairs']} pair(s) from {record['files']} file(s) into {output} (index.json names "
                f"pairs by {keys}){unchecked}; check them with: persistbench verify {output}"
            )
        return result

    @classmethod
    def synthesize(cls, out: Path, config_file: str | None, options: dict, progress: bool = True) -> str:
        """Procedural 360-degree scenes: source clips, ``recipes.jsonl`` and analytic truth
        (:mod:`persistbench.suites.persistbench.synth`)."""
        from persistbench.core.synth import suite_config
        from persistbench.io.files import check_writable
        from persistbench.suites.persistbench.synth import SynthConfig, generate

        options = dict(options)
        base_url = options.pop("base_url", None)
        cfg = suite_config(SynthConfig, cls.name, SYNTH_FIELDS, config_file, options)
        check_writable(out)
        return f"wrote {cfg.scenes} scenes: {generate(out, cfg, base_url, progress=progress)}"

    def sampling_note(self) -> str:
        return f"{SAMPLE_RULE}; {CROP_RULE}; {describe_resize(MODEL_INPUT_RESIZE)}"

    def request(self, ref, num_frames: int, resolution: tuple[int, int], oracle: bool) -> Request:
        """``view_0``'s sampled frames and both cameras; the ``center`` view is what the model renders."""
        case = self.case(ref.subset, ref.case_id)
        source, target = case.view("view_0"), case.view("center")
        size = case.size or source.mask(0).shape  # masks are PNG files in every layout: no video decode
        idx = sample_indices(case.n_frames, num_frames)
        box = crop_box(size, resolution)
        out = target_size(size, resolution)
        truth = (sampled_frames(target, idx, box, out), sampled_masks(target, idx, box, out)) if oracle else None
        return Request(
            fields={
                "uid": case.case_id,
                "input_frames": sampled_frames(source, idx, box, out, MODEL_INPUT_RESIZE).astype(np.float32) / 255.0,
                "input_cameras": _camera(source, idx, box, out, size),
                "target_cameras": _camera(target, idx, box, out, size),
            },
            n_frames=len(idx),
            size=out,
            record={
                "frame_indices": idx.tolist(),
                "size": [out[1], out[0]],
                "source_size": [size[1], size[0]],
                "crop": list(box),
            },
            ground_truth=truth,
        )

    # ---------------------------------------------------------------- scoring

    def read_prediction(self, run: Path, run_info, case):
        return predictions.read_prediction(RunLayout(run), run_info, self._case(case))

    def predicted(self, run: Path, run_info) -> set[str]:
        subsets = {c.case_id: c.subset for c in self.cases()}  # a bare public uid is a case id
        return predictions.predicted_keys(RunLayout(run), run_info, subsets)

    def on_disk(self, case) -> bool:
        return (self._case(case).path / VIEWS[0]).is_dir()

    def _case(self, ref) -> Case:
        return ref if isinstance(ref, Case) else self.dataset.case(ref.subset, ref.case_id)

    @classmethod
    def demo(cls, out: Path, executor: Executor, progress: bool, step: Callable[[str], None]) -> DemoResult:
        from persistbench.suites.persistbench import demo

        return demo.run(out, executor, progress, step)

    @classmethod
    def checks(cls) -> list[Check]:
        from persistbench.suites.persistbench.build import checks

        return checks.checks()
