"""WROP as a suite: the corpus read in place, video continuation, ``wrop-cont-v1`` scores.

Cases are ``(category, <task>_<NNNN>)``. The dataset root is the corpus (:mod:`.corpus`: a folder,
an ``http(s)`` URL or ``hf://datasets/<repo>[@revision]``), narrowed by suite options that are
recorded in ``run.json`` so that ``score`` sees the same cases: ``tasks`` (names or globs),
``per_task`` (a deterministic subset per task, :func:`.corpus.pick`) and ``categories`` (a JSON
file ``{task: category}`` for tasks whose metadata names none).

What the model gets (:meth:`Wrop.request`): the input video's frames (``num_frames`` of them
evenly spaced, the last included; centre-cropped and resized to its ``resolution``), the prompt,
no cameras, and ``n_targets``, the target video's length; it returns that many frames at the
input's size, written as a lossless ``<run>/<category>/<sample>/gen.mp4``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from persistbench.core.case import CaseRef, Prediction, Request
from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.layout import STATE_DIR, RunLayout
from persistbench.core.options import ExistingFile, NameList, SuiteOption, file_path, positive_int, string_list
from persistbench.core.protocol import Protocol
from persistbench.core.runs import case_record
from persistbench.core.suite import DemoResult, Suite
from persistbench.core.synth import synth_option
from persistbench.executors import Executor, RunResult
from persistbench.geometry.sampling import (
    CROP_RULE,
    SAMPLE_RULE,
    crop_box,
    crop_resize,
    describe_resize,
    sample_indices,
    target_size,
)
from persistbench.io.files import read_json, sha256_file
from persistbench.io.limits import MAX_FRAMES, check_asked_size, check_frame_size, check_memory
from persistbench.io.names import name_problem
from persistbench.io.video import probe, read_frames
from persistbench.suites.wrop import corpus, layout
from persistbench.suites.wrop.taxonomy import taxonomy

INPUT_RESIZE = "area"  # how input frames are resized for a model


@dataclass(frozen=True)
class WropPrediction(Prediction):
    """A run's ``gen.mp4``, with the ``(w, h)`` its ``case.json`` says the model was asked for."""

    asked: tuple[int, int] | None = None


class Wrop(Suite):
    name = "wrop"
    title = "WROP"
    question = "Which continuation is physically right?"
    scorers = {"wrop-cont-v1": "persistbench.suites.wrop.scoring:CONTINUATION"}
    subsets = corpus.CATEGORIES
    external_label = "external videos"
    remote = True  # the root may be a URL
    option_specs = (
        SuiteOption(
            "tasks",
            "Comma-separated task names or globs (default: all).",
            ("infer", "score", "verify", "fetch"),
            NameList(),
            "LIST",
            case=True,
            json=string_list,
        ),
        SuiteOption(
            "per_task",
            "N samples per task, the same N whatever other tasks are chosen (default: all).",
            ("infer", "score", "verify"),
            click.IntRange(1),
            "N",
            case=True,
            json=positive_int,
        ),
        SuiteOption(
            "categories",
            "A JSON file {task: category} that overrides WROP's taxonomy or adds tasks it lacks.",
            ("infer", "score", "verify"),
            ExistingFile(),
            "FILE",
            case=True,
            json=file_path,
        ),
        synth_option("scenes", "Samples per task; default 3."),
        synth_option("seed", "Random seed; default 0."),
        synth_option("size", "Frame size WxH, even; default 160x96."),
    )

    def __init__(self, root, options=None):
        super().__init__(root, options)
        self.location = corpus.open_location(str(root))
        self._archives: dict[str, corpus.TaskSamples] = {}  # opened once per suite (a worker's, for its run)
        per_task = self.options.get("per_task")
        if per_task is not None and (problem := positive_int(per_task)):
            raise UsageError(f"--per-task {per_task}: {problem}")
        _ = self._mapping  # a --categories file is checked now, whether or not a task needs it

    @classmethod
    def detect(cls, root: Path) -> bool:
        return (Path(root) / layout.CHECKSUMS).is_file() or bool(corpus.loose_tasks(Path(root)))

    def dataset_id(self) -> str:
        return self.location.id

    # ---------------------------------------------------------------- data

    @functools.cached_property
    def loose(self) -> bool:
        """Whether the root is the generator's loose output (``<task>_task/<task>_<NNNN>/``), not the corpus."""
        loc = self.location
        return isinstance(loc, corpus.LocalCorpus) and not (loc.root / layout.CHECKSUMS).is_file()

    @functools.cached_property
    def entries(self) -> dict[str, corpus.ArchiveEntry]:
        return corpus.checksums(self.location)

    @functools.cached_property
    def tasks(self) -> list[str]:
        """Every task of the dataset: ``checksums.txt``'s, or the loose output's task folders."""
        if self.loose:
            found = corpus.loose_tasks(self.location.root)
            if not found:
                raise PersistbenchError(
                    f"{self.location.id}: neither a WROP corpus ({layout.CHECKSUMS}) nor the generator's output "
                    "(<task>_task/<task>_<NNNN>/)"
                )
            return found
        return sorted(self.entries)

    def archive(self, task: str) -> corpus.TaskSamples:
        """The samples of ``task``: its archive, or its folder of the loose output."""
        if task not in self.tasks:
            raise PersistbenchError(f"{self.location.id}: unknown task {task!r} (not in {layout.CHECKSUMS})")
        if task not in self._archives:
            self._archives[task] = (
                corpus.TaskFolder(self.location.root, task)
                if self.loose
                else corpus.open_archive(self.location, self.entries[task])
            )
        return self._archives[task]

    def skipped(self) -> dict[str, str]:
        """``<task>/<sample>`` -> why, for the selected tasks' samples that are left out (the loose output's
        failed renders and incomplete folders; a corpus has none)."""
        if not self.loose:
            return {}
        tasks = corpus.match_tasks(self.tasks, self.options.get("tasks"), self.location.id)
        return {f"{t}/{s}": why for t in tasks for s, why in sorted(self.archive(t).skipped.items())}

    @functools.cached_property
    def _mapping(self) -> dict[str, str]:
        path = self.options.get("categories")
        if not path:
            return {}
        data = read_json(path)
        if not isinstance(data, dict):
            raise PersistbenchError(f"{path}: must hold a JSON object {{task: category}}")
        out = {}
        for task, cat in data.items():
            if corpus.category_id(cat) is None:
                raise PersistbenchError(
                    f"{path}: {task}: category {cat!r} is not one of {', '.join(corpus.CATEGORIES)}"
                )
            out[task] = corpus.category_id(cat)
        return out

    def category(self, task: str) -> str:
        """The task's category (family): from the ``categories`` file when it maps the task, else from WROP's
        taxonomy (:mod:`.taxonomy`); a task neither knows is refused."""
        found = self._mapping.get(task) or taxonomy().families.get(task)
        if found is None:
            raise PersistbenchError(
                f"{self.archive(task).name}: unknown task {task!r}: not one of the generator's 150 tasks "
                f"({taxonomy().reference}) and no --categories file maps it"
            )
        return found

    @functools.cached_property
    def _cases(self) -> dict[tuple[str, str], str]:
        """(category, sample) -> task, in order."""
        tasks = corpus.match_tasks(self.tasks, self.options.get("tasks"), self.location.id)
        out = {}
        for task in tasks:
            cat = self.category(task)
            for sample in corpus.pick(task, list(self.archive(task).samples), self.options.get("per_task")):
                out[cat, sample] = task
        return dict(sorted(out.items()))

    def cases(self) -> list[CaseRef]:
        return [CaseRef(c, s) for c, s in self._cases]

    def sample(self, ref) -> tuple[corpus.TaskSamples, str]:
        try:
            task = self._cases[ref.subset, ref.case_id]
        except KeyError:
            raise PersistbenchError(f"{self.location.id}: no case {ref.subset}/{ref.case_id}") from None
        return self.archive(task), ref.case_id

    def case_digest(self, ref) -> str | None:
        """sha256 of the sample's archive (its checksum) and name, or of the loose sample's files."""
        task = self._cases.get((ref.subset, ref.case_id))
        if task is None:
            return None
        h = hashlib.sha256(f"{task}/{ref.case_id}\n".encode())
        if self.loose:
            folder = self.archive(task)
            for file in layout.MEMBERS:
                h.update(f"{file} {sha256_file(folder.path(ref.case_id, file))}\n".encode())
        else:
            h.update(f"{self.entries[task].sha256} {self.entries[task].members}\n".encode())
        return h.hexdigest()

    def fingerprint(self) -> str:
        """The corpus's archives (sha256 and member count from ``checksums.txt``), or for the loose output the
        sha256 of every file of the selected samples, and the selected cases."""
        h = hashlib.sha256()
        if self.loose:
            for (_, sample), task in self._cases.items():
                folder = self.archive(task)
                for file in layout.MEMBERS:
                    h.update(f"{task}/{sample}/{file} {sha256_file(folder.path(sample, file))}\n".encode())
        else:
            for task, entry in sorted(self.entries.items()):
                h.update(f"{task} {entry.sha256} {entry.members}\n".encode())
        for cat, sample in self._cases:
            h.update(f"{cat}/{sample}\n".encode())
        return h.hexdigest()

    def verify(self, progress: bool = False) -> tuple[list[str], int]:
        """Every selected archive in full: its sha256 and member count against ``checksums.txt``, every member
        name, and each selected sample's metadata, prompt, trajectory and videos."""
        from tqdm import tqdm

        problems: list[str] = []
        try:
            tasks = corpus.match_tasks(self.tasks, self.options.get("tasks"), self.location.id)
        except PersistbenchError as e:
            return [str(e)], 0
        checked = 0
        for task in tqdm(tasks, desc="verify", unit="task", disable=not progress):
            try:
                if not self.loose:
                    entry = self.entries[task]
                    source = self.location.source(layout.archive_path(task))
                    digest = corpus.sha256_of(source)
                    if digest != entry.sha256:
                        problems.append(
                            f"{source.name}: sha256 {digest[:12]}..., {layout.CHECKSUMS} says {entry.sha256[:12]}..."
                        )
                        continue
                archive = self.archive(task)
                self.category(task)
                for sample in corpus.pick(task, list(archive.samples), self.options.get("per_task")):
                    checked += 1
                    self._check_sample(archive, sample)
            except PersistbenchError as e:
                problems.append(str(e))
        return problems, checked

    @staticmethod
    def _check_sample(archive: corpus.TaskSamples, sample: str) -> None:
        """Every member of a sample, from headers and small files (what ``verify`` and ``infer`` check first)."""
        archive.video_split(sample)
        archive.text(sample)
        archive.trajectory(sample)
        for video in (layout.INPUT_VIDEO, layout.TARGET_VIDEO):
            with archive.video(sample, video) as source:
                info = probe(source)
            where = archive.where(sample, video)
            check_frame_size(where, info["height"], info["width"])
            if info["duration"] * info["fps"] > MAX_FRAMES + 1:  # from the header; decoding also stops there
                raise PersistbenchError(
                    f"{where}: about {info['duration'] * info['fps']:.0f} frames, more than the {MAX_FRAMES} allowed"
                )

    # ---------------------------------------------------------------- getting the data

    @classmethod
    def fetch(cls, output, repo, revision, from_dir, include, progress, options=None, **run) -> RunResult:
        """Whole archives with ``checksums.txt`` verified (:mod:`.fetch`), resumable; ``include`` does not apply."""
        from persistbench.suites.wrop.fetch import fetch_corpus

        tasks = (options or {}).get("tasks")
        result = fetch_corpus(Path(output), repo, revision, from_dir, list(tasks) if tasks else None, progress, **run)
        if result.value is not None:
            result.value = (
                f"fetched {result.value} archive(s) into {Path(output) / layout.SPLIT}; "
                f"check with: persistbench verify {output}"
            )
        return result

    # ---------------------------------------------------------------- synthetic data

    SYNTH_FIELDS = {"scenes": "samples", "seed": "seed", "size": "size"}

    @classmethod
    def synthesize(cls, out: Path, config_file: str | None, options: dict, progress: bool = True) -> str:
        """A tiny corpus of tars (:mod:`persistbench.suites.wrop.synth`)."""
        from persistbench.core.synth import suite_config
        from persistbench.io.files import check_writable
        from persistbench.suites.wrop.synth import WropSynthConfig, make

        cfg = suite_config(WropSynthConfig, cls.name, cls.SYNTH_FIELDS, config_file, options, hw=("size",))
        check_writable(out)
        tasks = make(out, cfg, progress)
        return f"wrote {len(tasks)} archive(s) of {cfg.samples} sample(s) each: {out / layout.SPLIT}"

    # ---------------------------------------------------------------- inference

    def sampling_note(self) -> str:
        return (
            f"num_frames input frames {SAMPLE_RULE} over the input video (the last included); {CROP_RULE}; "
            f"{describe_resize(INPUT_RESIZE)}; no cameras; n_targets = the target video's length"
        )

    def _decode(self, archive: corpus.TaskSamples, sample: str, video: str) -> tuple[np.ndarray, float]:
        """``(frames (T, H, W, 3) uint8, fps)`` of a video member."""
        where = archive.where(sample, video)
        with archive.video(sample, video) as source:
            info = probe(source)
            check_frame_size(where, info["height"], info["width"])
            check_memory(where, MAX_FRAMES * info["height"] * info["width"] * 3)
            frames = []
            for frame in read_frames(source):
                if len(frames) == MAX_FRAMES:
                    raise PersistbenchError(f"{where}: more than the {MAX_FRAMES} frames allowed")
                frames.append(frame)
        if not frames:
            raise PersistbenchError(f"{where}: no frames")
        return np.stack(frames), info["fps"]

    gives_cameras = False  # continuations of ordinary videos

    def request(self, ref, num_frames: int, resolution: tuple[int, int], oracle: bool) -> Request:
        archive, sample = self.sample(ref)
        self._check_sample(archive, sample)
        inputs, fps = self._decode(archive, sample, layout.INPUT_VIDEO)
        targets, _ = self._decode(archive, sample, layout.TARGET_VIDEO)
        size = inputs.shape[1:3]
        box, out = crop_box(size, resolution), target_size(size, resolution)
        frames = np.stack(
            [crop_resize(inputs[i], box, out, rgb=INPUT_RESIZE) for i in sample_indices(len(inputs), num_frames)]
        )
        truth = None
        if oracle:
            gt = np.stack([crop_resize(f, crop_box(targets.shape[1:3], out), out) for f in targets])
            truth = (gt, np.ones(gt.shape[:3], bool))
        return Request(
            fields={
                "uid": sample,
                "input_frames": frames.astype(np.float32) / 255.0,
                "prompt": archive.text(sample),
                "n_targets": len(targets),
            },
            n_frames=len(targets),
            size=out,
            record={"size": [out[1], out[0]], "frames": len(targets), "task": archive.task},
            ground_truth=truth,
            video_fps=fps or 24.0,
        )

    # ---------------------------------------------------------------- predictions

    def read_prediction(self, run: Path, run_info, ref) -> Prediction | None:
        layout_ = RunLayout(Path(run))
        path = layout_.video_path(ref.subset, ref.case_id)
        if not path.is_file():
            return None
        asked = (case_record(layout_, ref.subset, ref.case_id) or {}).get("size")
        return WropPrediction((path,), None, tuple(asked) if asked else None)

    def predicted(self, run: Path, run_info) -> set[str]:
        out = set()
        for cat in sorted(Path(run).iterdir()):
            if not cat.is_dir() or name_problem(cat.name) or cat.name in ("scores", "logs", STATE_DIR):
                continue
            out |= {f"{cat.name}.{s.name}" for s in cat.iterdir() if (s / "gen.mp4").is_file()}
        return out

    # ---------------------------------------------------------------- scoring

    def continuation(
        self, ref, pred: Prediction, protocol: Protocol
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, range, dict]:
        """What the scorer needs of one sample: ``(predicted, target, last input)`` frames at the protocol's
        evaluation size (``(n, h, w, 3)``, ``(n, h, w, 3)``, ``(h, w, 3)`` uint8), which target frames are
        scored (``video_split``) and the ids the record names."""
        archive, sample = self.sample(ref)
        targets, _ = self._decode(archive, sample, layout.TARGET_VIDEO)
        last = self._decode(archive, sample, layout.INPUT_VIDEO)[0][-1]
        video = pred.files[0]
        info = probe(video)
        check_asked_size(video, info["width"], info["height"], pred.asked)
        preds = []
        for frame in read_frames(video):
            if len(preds) == len(targets):  # frames beyond the target's length are ignored
                break
            preds.append(frame)
        if len(preds) < len(targets):
            raise PersistbenchError(f"{video}: {len(preds)} frames, the target video has {len(targets)}")
        size = tuple(protocol.config["eval_size"] or targets.shape[1:3])
        rgb = protocol.config["resize"]["rgb"]

        def fit(frames) -> np.ndarray:
            return np.stack([crop_resize(f, crop_box(f.shape[:2], size), size, rgb=rgb) for f in frames])

        split = archive.video_split(sample)
        if len(targets) != split.target_frames:
            raise PersistbenchError(
                f"{archive.where(sample, layout.TARGET_VIDEO)}: {len(targets)} frames, {layout.METADATA}'s "
                f"video_split makes {split.target_frames}"
            )
        ids = {
            "sample": sample,
            "category": ref.subset,
            "task": archive.task,
            "method": split.method,
            "boundary_method": split.boundary_method,
            "prediction": pred.digest,
        }
        scored = split.scored(len(targets))
        return fit(preds), fit(targets), fit([last])[0], scored, ids

    @classmethod
    def demo(cls, out: Path, executor: Executor, progress: bool, step: Callable[[str], None]) -> DemoResult:
        from persistbench.suites.wrop import demo

        return demo.run(out, executor, progress, step)
