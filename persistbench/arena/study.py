"""What a study compares: runs of one suite on one dataset, the cases every run predicted, and their frames.

The runs are read as untrusted (their ``run.json``, their prediction files); the frames the page shows are
decoded here from the runs' predictions and the dataset (the model's context, through the suite's own
:meth:`~persistbench.core.suite.Suite.request`), evenly subsampled to at most :data:`MAX_FRAMES` and
shrunk to at most :data:`MAX_WIDTH` pixels wide. Nothing a browser asks for names a file: it asks for a
pair's role and frame number, and only the runs and cases of the study can be read.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from persistbench.core.case import CaseRef
from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.layout import RunLayout
from persistbench.core.runs import read_run_info
from persistbench.core.stats import fingerprint
from persistbench.core.suite import Suite
from persistbench.io.images import outline

MAX_FRAMES = 48
MAX_WIDTH = 320


@dataclass(frozen=True)
class Study:
    """The runs (names unique), their suite and dataset, the cases all of them predicted and the question."""

    runs: tuple[str, ...]
    paths: tuple[Path, ...]
    suite_name: str
    dataset: str
    cases: tuple[CaseRef, ...]
    question: str
    reference: bool  # show the ground truth (PersistBench's reference view) beside the context
    predicted: tuple[int, ...] = ()  # how many cases each run predicted (the study uses those all share)

    @property
    def id(self) -> str:
        """The study's identity: a hash of its runs, dataset, cases and question."""
        text = "\n".join([*self.runs, self.dataset, *(f"{c.subset}/{c.case_id}" for c in self.cases), self.question])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> dict:
        return {
            "id": self.id,
            "runs": list(self.runs),
            "paths": [str(p) for p in self.paths],
            "suite": self.suite_name,
            "dataset": self.dataset,
            "question": self.question,
            "cases": len(self.cases),
            "cases_fingerprint": fingerprint([f"{c.subset}.{c.case_id}" for c in self.cases]),
            "predicted": dict(zip(self.runs, self.predicted)),
            "reference": self.reference,
        }

    def coverage_note(self) -> str | None:
        """A line saying that the runs predicted different cases and which the study uses, or None."""
        if len(set(self.predicted)) <= 1:
            return None
        counts = ", ".join(f"{r}: {n}" for r, n in zip(self.runs, self.predicted))
        return f"the runs predicted different cases ({counts}); the study shows the {len(self.cases)} they share"

    @functools.cached_property
    def suite(self) -> Suite:
        from persistbench.core.score import recorded_options
        from persistbench.core.suites import open_suite

        info = read_run_info(RunLayout(self.paths[0]))
        return open_suite(
            self.dataset, self.suite_name, recorded_options(info, RunLayout(self.paths[0]), self.suite_name)
        )

    def case(self, key: str) -> CaseRef:
        for c in self.cases:
            if self.suite.key(c) == key:
                return c
        raise KeyError(key)

    @functools.cached_property
    def sampling(self) -> tuple[int, tuple[int, int]]:
        """The models' sampling, from the first run's ``run.json``: ``(num_frames, (h, w))`` (-1: all, native)."""
        sampling = (read_run_info(RunLayout(self.paths[0])) or {}).get("sampling") or {}
        res = tuple(sampling.get("resolution") or (-1, -1))
        return int(sampling.get("num_frames", -1)), (int(res[0]), int(res[1]))

    @functools.lru_cache(maxsize=32)  # noqa: B019 (a study lives as long as its server)
    def request(self, key: str, reference: bool):
        """The suite's request of case ``key`` at the models' sampling (with the ground truth when
        ``reference``; None when the suite has none), made once for the frames and the prompt."""
        try:
            return self.suite.request(self.case(key), *self.sampling, reference)
        except PersistbenchError:
            if reference:  # a suite without ground truth (R2M-Bench) has no reference to show
                return None
            raise

    @functools.lru_cache(maxsize=32)  # noqa: B019
    def frames(self, key: str, role: str) -> tuple[np.ndarray, ...]:
        """The frames of case ``key`` for ``role``: ``context`` (what the models saw), ``reference`` (the ground
        truth, where the suite has one) or a run's name (its prediction); ``(H, W, 3)`` uint8 each."""
        if role == "reference":
            req = self.request(key, True)
            return () if req is None or req.ground_truth is None else _shown(list(req.ground_truth[0]))
        if role == "object":  # the object asked about: outlined in the target's first frame, where it is seen
            req = self.request(key, True)
            if req is None or req.ground_truth is None:
                return ()
            frame, mask = req.ground_truth[0][0], req.ground_truth[1][0]
            if not 0 < mask.mean() < 0.9:  # no object to point at (WROP's whole-frame truth)
                return ()
            return _shown([outline(frame, mask, (255, 0, 255), 3)])
        if role == "context":
            frames = self.request(key, False).fields["input_frames"]
            return _shown([np.clip(np.rint(f * 255), 0, 255).astype(np.uint8) for f in frames])
        path = self.paths[self.runs.index(role)]
        pred = self.suite.read_prediction(path, read_run_info(RunLayout(path)), self.case(key))
        if pred is None:
            raise PersistbenchError(f"{path}: no prediction of {key}")
        return _shown(_decode(pred.files))

    def prompt(self, key: str) -> str:
        prompt = self.request(key, False).fields.get("prompt")
        return prompt if isinstance(prompt, str) else ""


def _decode(files: tuple[Path, ...]) -> list[np.ndarray]:
    from persistbench.io.images import read_image
    from persistbench.io.video import read_frames

    if len(files) == 1 and files[0].suffix.lower() in (".mp4", ".mkv", ".webm", ".avi", ".mov"):
        out = []
        for f in read_frames(files[0]):
            out.append(f)
            if len(out) >= 2000:
                break
        return out
    return [read_image(f) for f in files]


def _shown(frames: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """At most :data:`MAX_FRAMES` frames evenly spaced (first and last kept), at most :data:`MAX_WIDTH` wide."""
    import cv2

    if not frames:
        return ()
    idx = np.unique(np.linspace(0, len(frames) - 1, min(len(frames), MAX_FRAMES)).round().astype(int))
    out = []
    for i in idx:
        f = np.ascontiguousarray(frames[i][..., :3], np.uint8)
        h, w = f.shape[:2]
        if w > MAX_WIDTH:
            f = cv2.resize(f, (MAX_WIDTH, max(1, round(h * MAX_WIDTH / w))), interpolation=cv2.INTER_AREA)
        out.append(f)
    return tuple(out)


def open_study(paths: list[Path], question: str | None = None, reference: bool = False) -> Study:
    """The study of ``paths`` (at least two runs of one suite on one dataset; run names unique), on the cases
    every run predicted."""
    from persistbench.core.score import dataset_of, recorded_options
    from persistbench.core.suites import SUITES, detect, open_suite

    if len(paths) < 2:
        raise UsageError("an arena compares at least two runs")
    names = [Path(p).resolve().name for p in paths]
    if len(set(names)) != len(names):
        raise UsageError(f"two runs share a folder name ({', '.join(sorted(n for n in names if names.count(n) > 1))})")
    datasets = {str(dataset_of(p)) for p in paths}
    if len(datasets) != 1:
        raise UsageError(f"the runs were predicted on different datasets: {', '.join(sorted(datasets))}")
    dataset = datasets.pop()
    suite_name = detect(dataset)
    common, predicted = None, []
    for p in paths:
        run = RunLayout(Path(p))
        info = read_run_info(run)
        suite = open_suite(dataset, suite_name, recorded_options(info, run, suite_name))
        have = {suite.key(c): c for c in suite.cases() if suite.read_prediction(run.root, info, c) is not None}
        predicted.append(len(have))
        common = have if common is None else {k: c for k, c in common.items() if k in have}
    if not common:
        raise UsageError("the runs have no predicted case in common")
    return Study(
        tuple(names),
        tuple(Path(p).resolve() for p in paths),
        suite_name,
        dataset,
        tuple(common[k] for k in sorted(common)),
        question or SUITES[suite_name].question,
        reference,
        tuple(predicted),
    )
