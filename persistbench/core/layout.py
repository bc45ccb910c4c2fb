"""Every path and file name of the core's on-disk formats, as named templates.

Nothing but paths and names here (no reading, no writing): a prediction run (``runs/<name>/<subset>/<case_id>/...``),
its scores (``runs/<name>/scores/<protocol>/...``), the state of a stage (``.state/``: locks and per-case
records) and the per-user cache. Suites keep the templates of their own formats in their folder
(``suites/<name>/layout.py``). Every path built from an identifier goes through
:func:`persistbench.io.names.child`, so none leaves its root.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from persistbench.io.names import child, confined

# ---------------------------------------------------------------- names

STATE_DIR = ".state"
DEFAULT_CACHE = "cache/youtube"  # where downloaded sources are kept by default (download's --cache; doctor checks it)
FRAMES_DIR = "frames"
MASKS_DIR = "masks"
SUITE_FETCH_JSON = (
    "persistbench_fetch.json"  # what fetch took (repository, revision, commit, files), in a suite's own tree
)
SYNTH_RECORD = "synth.json"  # what every suite's synth writes beside its data: the configuration
STUDY_STORE = "arena.sqlite"  # an arena study's votes, in the study folder
PREDICTION_VIDEO = "gen.mp4"  # R2M-Bench's name for a generated video, <root>/<T>/<id>/gen.mp4


def frame_name(index: int, fmt: str = "png") -> str:
    """File name of frame ``index`` as this toolkit writes it: ``frame_0000.png``."""
    return f"frame_{index:04d}.{fmt}"


def mask_name(index: int) -> str:
    """File name of mask ``index`` as this toolkit writes it: ``mask_0000.png``."""
    return f"mask_{index:04d}.png"


# ---------------------------------------------------------------- predictions and results


@dataclass(frozen=True)
class RunLayout:
    """Paths of a prediction run ``runs/<name>/`` and its scores."""

    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    def case_dir(self, subset: str, case_id: str) -> Path:
        return child(self.root, subset, case_id)

    def frames_dir(self, subset: str, case_id: str) -> Path:
        return self.case_dir(subset, case_id) / FRAMES_DIR

    def masks_dir(self, subset: str, case_id: str) -> Path:
        return self.case_dir(subset, case_id) / MASKS_DIR

    def frame_path(self, subset: str, case_id: str, index: int) -> Path:
        return self.frames_dir(subset, case_id) / frame_name(index)

    def mask_path(self, subset: str, case_id: str, index: int) -> Path:
        return self.masks_dir(subset, case_id) / mask_name(index)

    def case_json(self, subset: str, case_id: str) -> Path:
        return self.case_dir(subset, case_id) / "case.json"

    def video_path(self, subset: str, case_id: str) -> Path:
        """A prediction written as one video (suites whose cases are long generated videos)."""
        return self.case_dir(subset, case_id) / PREDICTION_VIDEO

    @property
    def state_dir(self) -> Path:
        """Locks and done records of ``infer``."""
        return confined(self.root, STATE_DIR)

    @property
    def log_dir(self) -> Path:
        """Per-case logs of external (``cmd:``) models: ``logs/<case_id>.log``."""
        return self.root / "logs"

    @property
    def scores_root(self) -> Path:
        """Every protocol's scores: ``scores/<protocol>/`` (a ``scores`` link out of the run is refused)."""
        return confined(self.root, "scores")

    def scores_dir(self, protocol: str) -> Path:
        return child(self.root, "scores", protocol)

    def scores_state_dir(self, protocol: str) -> Path:
        """Locks and done records of ``score`` under one protocol."""
        return confined(self.scores_dir(protocol), STATE_DIR)

    def case_scores(self, protocol: str, subset: str, case_id: str) -> Path:
        return child(self.scores_dir(protocol), subset, f"{case_id}.json")

    def results_json(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "results.json"

    def summary_json(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "summary.json"

    def leaderboard_csv(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "leaderboard.csv"

    def summary_md(self, protocol: str) -> Path:
        return self.scores_dir(protocol) / "summary.md"

    def public_prediction_dir(self, uid: str) -> Path:
        """The public toolkit's inference output: ``<uid>/prediction/00000.png``."""
        return child(self.root, uid, "prediction")


# ---------------------------------------------------------------- the sharded distribution


def stage_records_dir(state_dir: str | os.PathLike) -> Path:
    """Where an executor keeps one record per case of a stage."""
    return Path(state_dir) / "records"


def stage_record(state_dir: str | os.PathLike, key: str) -> Path:
    """An executor's record of one case of a stage (status, attempts, seconds per phase, worker)."""
    return child(stage_records_dir(state_dir), f"{key}.json")


def stage_log(state_dir: str | os.PathLike, key: str) -> Path:
    """The traceback of one case whose model or backend raised: ``<state>/logs/<key>.log``."""
    return child(Path(state_dir), "logs", f"{key}.log")


def stage_lock(state_dir: str | os.PathLike, key: str) -> Path:
    """The lock a worker holds while it runs one case of a stage."""
    return child(Path(state_dir), "locks", f"{key}.lock")


# ---------------------------------------------------------------- synthetic scenes and the source cache


def user_cache(*parts: str) -> Path:
    """A path in the per-user cache: ``$PERSISTBENCH_CACHE/<parts>``, default ``~/.cache/persistbench/<parts>``
    (``$XDG_CACHE_HOME`` honoured). Holds WROP's archive indexes (``wrop-index/<sha256>.json``) and the
    judge's answers (``judge/<sha256[:2]>/<sha256>.json``)."""
    if os.environ.get("PERSISTBENCH_CACHE"):
        return Path(os.environ["PERSISTBENCH_CACHE"]).joinpath(*parts)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base.joinpath("persistbench", *parts)


def judge_answer(digest: str) -> Path:
    """The cached answer of one judge request (``digest``: ``backends.judge.request_digest``)."""
    return user_cache("judge", digest[:2], f"{digest}.json")
