"""WROP's names: the corpus's files and the members of its archives, and the rule every member name obeys.

The corpus (the Hugging Face dataset ``Hokin/object-permanence``)::

    train/checksums.txt                 one line per archive: <sha256> <file name> <member count>
    train/<task>_task.tar               one archive per task
      train/shard<K>/<task>_task/<task>_<NNNN>/<member>    K >= 1, NNNN four digits or more

with ``<member>`` one of :data:`MEMBERS`. A sample is named by its folder, ``<task>_<NNNN>``.

The generator's loose output (``object-permanence generate --out OUT``), read as a corpus too::

    OUT/<task>_task/<task>_<NNNN>/<member>   and ERROR.txt where the sample failed to render
"""

from __future__ import annotations

import re
from pathlib import Path

from persistbench.core.layout import user_cache

HUB_REPO = "Hokin/object-permanence"
SPLIT = "train"
CHECKSUMS = f"{SPLIT}/checksums.txt"
INPUT_VIDEO, TARGET_VIDEO = "input_video.mp4", "target_video.mp4"
PROMPT, TRAJECTORY, METADATA = "prompt.txt", "trajectory.npz", "metadata.json"
MEMBERS = (INPUT_VIDEO, TARGET_VIDEO, PROMPT, TRAJECTORY, METADATA)
ERROR = "ERROR.txt"  # the generator's note in a sample it failed to render
REGIONS = ("full", "changed")  # the regions a scores record holds values of: the whole frame, what changed

TASK_RE = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")  # the generator has box_holds_N_objects
_ARCHIVE_RE = re.compile(rf"({TASK_RE.pattern})_task\.tar")
_FOLDER_RE = re.compile(rf"({TASK_RE.pattern})_task")
_SAMPLE = r"({task})_(\d{{4,}})"


def index_cache_path(sha256: str) -> Path:
    """Where the index of an archive is cached, keyed by its sha256 (never beside it: a corpus is input):
    ``$PERSISTBENCH_CACHE/wrop-index/<sha256>.json``, default ``~/.cache/persistbench/wrop-index/``."""
    return user_cache("wrop-index", f"{sha256}.json")


def archive_name(task: str) -> str:
    """``<task>_task.tar``."""
    return f"{task}_task.tar"


def archive_path(task: str) -> str:
    """The archive of ``task`` relative to the corpus root: ``train/<task>_task.tar``."""
    return f"{SPLIT}/{archive_name(task)}"


def task_of_archive(name: str) -> str | None:
    """The task of an archive file name, or None when the name is not ``<task>_task.tar``."""
    m = _ARCHIVE_RE.fullmatch(name)
    return m.group(1) if m else None


def task_folder(task: str) -> str:
    """The folder of ``task`` in the generator's loose output: ``<task>_task``."""
    return f"{task}_task"


def task_of_folder(name: str) -> str | None:
    """The task of a loose output folder's name, or None when the name is not ``<task>_task``."""
    m = _FOLDER_RE.fullmatch(name)
    return m.group(1) if m else None


def member_path(shard: int, task: str, sample: str, member: str) -> str:
    """A member's name inside its task's archive."""
    return f"{SPLIT}/shard{shard}/{task}_task/{sample}/{member}"


class MemberRule:
    """The member names an archive of ``task`` may hold: its folders and the files of :data:`MEMBERS`."""

    def __init__(self, task: str):
        t = re.escape(task)
        sample = _SAMPLE.format(task=t)
        self.task = task
        self._file = re.compile(
            rf"{SPLIT}/shard([1-9]\d{{0,2}})/{t}_task/{sample}/({'|'.join(map(re.escape, MEMBERS))})"
        )
        self._dir = re.compile(rf"{SPLIT}(?:/shard[1-9]\d{{0,2}}(?:/{t}_task(?:/{sample})?)?)?")

    def problem(self, name: str) -> str | None:
        """Why ``name`` is not a member of this task's archive, or None (directories without a trailing slash)."""
        if self._file.fullmatch(name) or self._dir.fullmatch(name):
            return None
        return f"not a name of the {self.task} archive's layout (train/shard<K>/{self.task}_task/{self.task}_<NNNN>/<file>)"

    def split(self, name: str) -> tuple[int, str, str] | None:
        """``(shard, sample, member)`` of a file member's name, or None for a folder."""
        m = self._file.fullmatch(name)
        return (int(m.group(1)), f"{m.group(2)}_{m.group(3)}", m.group(4)) if m else None


class FolderRule:
    """The sample folders the loose output of ``task`` may hold: ``<task>_<NNNN>``."""

    def __init__(self, task: str):
        self.task = task
        self._sample = re.compile(_SAMPLE.format(task=re.escape(task)))

    def problem(self, name: str) -> str | None:
        if self._sample.fullmatch(name):
            return None
        return f"not a sample folder of {self.task} ({self.task}_<NNNN>)"
