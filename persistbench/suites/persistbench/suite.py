"""PersistBench as a suite: the reconstructed dataset layout, per-frame ground truth, protocols ``classic-v1``
(weight-free) and ``paper-v3`` (the published protocol, on model backends)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...dataset import Case, Dataset
from ...executors import RunResult
from ...files import read_json, write_json
from ...layout import CASES_JSONL, DB_NAME, SUBSETS, VIEWS, RunLayout, public_result
from ...protocol import Protocol, load_protocol, shipped_path
from ...sampling import crop_box, fit_camera, sample_indices, sampled_frames, sampled_masks, target_size
from ...verify import require_usable, verify_dataset
from ..base import Request, ScoreContext, Suite
from . import paper, predictions, scoring


def _camera(view, idx: np.ndarray, box, out_size, size) -> dict:
    from ...camera import Camera

    cam = view.camera()
    full = Camera(np.asarray(cam["cam_intrinsic"]), size[0], size[1], np.asarray(cam["cam_poses"], np.float64))
    return fit_camera(full, box, out_size).at(idx).as_model_input()


class PersistBench(Suite):
    name = "persistbench"
    title = "PersistBench"
    protocols = ("classic-v1", "paper-v3")
    subsets = SUBSETS
    external_label = "public toolkit output"
    protocol_schema = scoring.SCHEMA

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

    def verify(self, progress: bool = False) -> tuple[list[str], int]:
        return verify_dataset(self.root, progress=progress)

    # ---------------------------------------------------------------- inference

    @classmethod
    def fetch(cls, output, repo, revision, from_dir, include, progress, tasks=None, **run) -> RunResult:
        """The sharded distribution: each shard's sha256 verified, extracted safely; resumable (:mod:`persistbench.fetch`)."""
        from ...fetch import DEFAULT_REPO, hub_source, local_source
        from ...fetch import fetch as run_fetch

        source = local_source(from_dir) if from_dir else hub_source(repo or DEFAULT_REPO, revision)
        result = run_fetch(output, source, include, progress=progress, **run)
        if result.value is not None:
            result.value = (
                f"fetched {result.value['pairs']} pair(s) from {result.value['files']} file(s) into {output}; "
                f"check them with: persistbench verify {output}"
            )
        return result

    @classmethod
    def synthesize(cls, out: Path, config_file: str | None, options: dict, progress: bool = True) -> str:
        """Procedural 360-degree scenes: source clips, ``recipes.jsonl`` and analytic truth (:mod:`persistbench.synth`)."""
        from ...files import check_writable
        from ...synth import SynthConfig, build_config, generate

        base_url = options.pop("base_url", None)
        cfg = build_config(SynthConfig, config_file, options)
        check_writable(out)
        return f"wrote {cfg.scenes} scenes: {generate(out, cfg, base_url, progress=progress)}"

    def sampling_note(self) -> str:
        return "np.linspace(0, T-1, num_frames).round(); centre crop to the aspect ratio; area resize"

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
                "input_frames": sampled_frames(source, idx, box, out).astype(np.float32) / 255.0,
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
        return predictions.predicted_keys(RunLayout(run), run_info)

    def keys_of(self, case, run_info) -> tuple[str, ...]:
        if predictions.PublicRun.from_run_info(run_info, Path("run.json")) is not None:
            return predictions.PublicRun.uids(case)
        return (f"{case.subset}/{case.case_id}",)

    def key(self, case) -> str:
        """The case id alone: it names its category, source and object, unique across subsets."""
        return case.case_id

    def on_disk(self, case) -> bool:
        return (self._case(case).path / VIEWS[0]).is_dir()

    def _case(self, ref) -> Case:
        return ref if isinstance(ref, Case) else self.dataset.case(ref.subset, ref.case_id)

    @classmethod
    def load_protocol(cls, spec: str | None = None, overrides: dict | None = None) -> Protocol:
        """A protocol that names a ``procedure`` is checked against ``paper-v3``'s schema, any other against
        ``classic-v1``'s."""
        spec = spec or cls.protocols[0]
        path = Path(spec) if Path(spec).is_file() else shipped_path(spec) if spec in cls.protocols else None
        paper_like = path is not None and paper.is_paper(read_json(path))
        schema = paper.SCHEMA if paper_like else scoring.SCHEMA
        return load_protocol(spec, schema, cls.protocols, overrides)

    def backends_needed(self, protocol: Protocol, wanted: tuple[str, ...]) -> list[str]:
        return paper.backends_needed(protocol.config, wanted) if paper.is_paper(protocol.config) else []

    def score_case(self, case, pred, protocol: Protocol, ctx: ScoreContext) -> dict:
        full = self.case(case.subset, case.case_id)
        if not paper.is_paper(protocol.config):
            return scoring.score_case(full, pred, protocol, ctx.wanted, ctx.lpips).to_json()
        record = paper.score_case(full, pred, protocol, ctx.wanted, ctx.backends).to_json()
        if ctx.scores_dir is not None and not record["judge"]["failed"]:
            public = paper.to_public(record) | {"prediction_sha256": record["prediction_sha256"]}
            write_json(public_result(ctx.scores_dir, case.subset, case.case_id), public)
        return record

    def scored_metrics(self, record: dict) -> set[str]:
        if record.get("judge", {}).get("failed"):  # failed judgments are asked again
            return set(record.get("metrics", {})) - {"object_permanence"}
        return super().scored_metrics(record)

    def merge(self, new: dict, old: dict) -> dict:
        return new if "judge" in new else scoring.merge(new, old)

    def summarise(self, results: list[dict], protocol: Protocol, ctx: ScoreContext) -> tuple[dict, dict]:
        if paper.is_paper(protocol.config):
            return {"procedure": paper.PROCEDURE}, paper.summarise(results)
        return {"mask_source": sorted({r["mask_source"] for r in results})}, scoring.aggregate(results).to_json()

    def tables(self, summary: dict):
        return paper.tables(summary) if "groups" in summary else scoring.tables(summary)

    # ---------------------------------------------------------------- report

    @classmethod
    def owns_summary(cls, summary: dict) -> bool:
        return "subsets" in summary or ("groups" in summary and "judge_failures" in summary)
