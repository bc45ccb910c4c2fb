"""What the core passes between a suite, a model and a scorer for one case: the case's name (:class:`CaseRef`),
the model's request (:class:`Request`), a run's prediction (:class:`Prediction`) and what scoring may use beside
them (:class:`ScoreContext`)."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from persistbench.backends import BackendOptions
from persistbench.io.files import sha256_file


@dataclass(frozen=True)
class CaseRef:
    """A case of any suite: ``subset`` groups cases (PersistBench: dynamic/static; R2M: the trajectory)."""

    subset: str
    case_id: str


@dataclass
class Request:
    """What a model gets for one case and how its answer is written.

    ``fields`` are the keyword arguments of the model interface's
    :class:`~persistbench.models.base.ModelInput`: the suite builds them without importing model
    code, and ``infer`` makes the ``ModelInput``.
    """

    fields: dict  # ModelInput's keyword arguments
    n_frames: int  # frames the model must return
    size: tuple[int, int]  # (h, w) of each returned frame
    record: dict  # written to the case's case.json beside the frames
    ground_truth: tuple[np.ndarray, np.ndarray] | None = None  # (frames, masks) for oracle models only
    video_fps: float | None = None  # write the frames as a lossless gen.mp4 at this rate, not as PNG files


@dataclass(frozen=True)
class Prediction:
    """A run's prediction of one case, as the suite found it (suites subclass it with what they need to score it)."""

    files: tuple[Path, ...]  # frame images, or one video
    record: Path | None  # a record that lists every file's sha256 (its hash identifies the prediction)

    @functools.cached_property
    def digest(self) -> str:
        """Identity of the prediction's files, recorded in the scores (for ``--resume``); hashed on first use."""
        if self.record is not None:
            return sha256_file(self.record)
        h = hashlib.sha256()
        for f in self.files:
            h.update(f.name.encode() + b"\0" + bytes.fromhex(sha256_file(f)))
        return h.hexdigest()


@dataclass
class ScoreContext:
    """What a suite's scorer may use beyond the case and its prediction (loaded once per process)."""

    wanted: tuple[str, ...]  # the metrics to compute now
    unavailable: dict[str, str] = field(default_factory=dict)  # metric of wanted -> why its backend cannot run here
    options: dict = field(default_factory=dict)  # suite options from the command line (e.g. R2M's --pairs)
    allow_partial: bool = False  # score what was predicted even when cases are missing (--allow-partial)
    scores_dir: Path | None = None  # scores/<protocol>/: where a suite may keep files of its own (R2M: pairs/)
    backends: BackendOptions = field(default_factory=BackendOptions)  # how model backends are loaded
