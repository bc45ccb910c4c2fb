"""Every path and file name of PersistBench's on-disk formats, as named templates.

Nothing but paths and names here (no reading, no writing):

* the dataset (written by ``download``): ``<root>/<subset>/<case_id>/{view_0,center}/...``,
  ``data.db`` and ``cases.jsonl``; the sharded distribution's nested form
  ``<subset>/<case_id>/<obj_id>/`` with ``video.mp4`` instead of ``frames/`` is read too;
  its completion records (``.state/complete/``);
* the sharded distribution (``shards/``, ``index.json``, ...) and what ``fetch`` took;
* what ``synth`` writes, and ``download``'s source cache.

Runs, scores and a stage's records are the core's (:mod:`persistbench.core.layout`).
Every path built from an identifier goes through :func:`persistbench.io.names.child`, so none leaves its root.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STATE_DIR, SYNTH_RECORD
from persistbench.io.names import NAME_PATTERN, check_name, child, confined

SUBSETS = ("dynamic", "static")
VIEWS = ("view_0", "center")
SPLITS = ("visible", "invisible")  # a case's frames as scores split them: the object in view, off-screen
DB_NAME = "data.db"
CASES_JSONL = "cases.jsonl"
AVAILABILITY = "availability.json"  # which cases of the recipes were built, refused, not attempted
RECIPES_PROVENANCE = "recipes_source.json"  # which recipes built the dataset (spec, revision, sha256)
VIDEO_NAME = "video.mp4"
CAMERA_NAME = "camera_params.npy"
VISIBILITY_NAME = "visibility_dict.npy"
THETA_PHI_NAME = "theta_phi_values.npy"
FRAME_FORMATS = ("png", "jpg")
COVERAGE_NAME = "estimate_input_coverage.json"  # the public format's per-pair file (kept when packing)
FETCH_JSON = "fetch.json"  # what fetch took: repository, revision, commit, files
PAIRS_JSON = "pairs.json"  # a fetched tree's pairs: the distribution's index.json, keyed by pair id


@dataclass(frozen=True)
class CaseId:
    """``<Category>_<source id>_<clip index>_obj_<object id>``, parsed from the right.

    A YouTube id may itself hold ``_`` and ``-``, so only the category (left
    of the first ``_``) and the two trailing fields are split off.
    """

    category: str
    source_id: str
    clip: int
    obj_id: str

    @classmethod
    def parse(cls, case_id: str) -> CaseId:
        try:
            head, obj_id = case_id.rsplit("_obj_", 1)
            head, clip = head.rsplit("_", 1)
            category, source_id = head.split("_", 1)
            if not (category and source_id and obj_id) or not clip.isdigit():
                raise ValueError
        except ValueError:
            raise PersistbenchError(
                f"{case_id!r}: not a case id of the form <Category>_<source id>_<clip>_obj_<object id>"
            ) from None
        return cls(category, source_id, int(clip), obj_id)

    def __str__(self) -> str:
        return f"{self.category}_{self.source_id}_{self.clip}_obj_{self.obj_id}"


def case_dir(root: str | os.PathLike, subset: str, case_id: str) -> Path:
    """``<root>/<subset>/<case_id>``: where ``download`` writes a case (both names checked)."""
    return child(root, subset, case_id)


SHARD_RE = re.compile(r"^shard-\d{4}\.tar$")
_PAIR_FILE_RE = (
    r"(?:(?:view_0|center)/(?:video\.mp4|camera_params\.npy|masks/(?:mask_)?\d{4,5}\.png)"
    r"|visibility_dict\.npy|theta_phi_values\.npy|estimate_input_coverage\.json)"
)
_NAME = NAME_PATTERN


# A member of a shard or a sample file: <subset>/<case_id>/<obj_id>/<pair file>, or one of its directories.
PAIR_MEMBER_RE = re.compile(
    rf"^(?:dynamic|static)(?:/{_NAME}(?:/{_NAME}(?:/(?:view_0|center)(?:/masks)?|/{_PAIR_FILE_RE})?)?)?$"
)
PAIR_FILE_RE = re.compile(rf"^(?:dynamic|static)/{_NAME}/{_NAME}/{_PAIR_FILE_RE}$")


@dataclass(frozen=True)
class DistributionLayout:
    """Paths of the sharded distribution (``pack`` writes it, ``fetch`` reads it)::

    shards/shard-0000.tar ...  each expands to <subset>/<case>/obj_<N>/... (pair id <case>_obj_<N>)
    shards/checksums.json      {name: {sha256, bytes}} of every shard (read: "bytes" or "size")
    index.json                 pair id -> {shard, subset, n_frames} (read: keys <subset>/<case>/obj_<N> too)
    pairs.csv                  the same, one row per pair
    samples/                   a few pairs, unarchived, and their own checksums.json
    croissant.json             Croissant 1.0 metadata with the RAI fields
    pack.json                  encoder settings and provenance
    """

    root: Path

    @property
    def shards_dir(self) -> Path:
        return self.root / "shards"

    def shard(self, index: int) -> Path:
        return self.shards_dir / f"shard-{index:04d}.tar"

    @property
    def checksums_json(self) -> Path:
        return self.shards_dir / "checksums.json"

    @property
    def index_json(self) -> Path:
        return self.root / "index.json"

    @property
    def pairs_csv(self) -> Path:
        return self.root / "pairs.csv"

    @property
    def samples_dir(self) -> Path:
        return self.root / "samples"

    @property
    def samples_checksums_json(self) -> Path:
        return self.samples_dir / "checksums.json"

    @property
    def croissant_json(self) -> Path:
        return self.root / "croissant.json"

    @property
    def pack_json(self) -> Path:
        return self.root / "pack.json"


OBJ_PREFIX = "obj_"


def pair_dir(subset: str, case_id: str) -> str:
    """A pair's directory in the distribution, as its card lays it out: ``<subset>/<case>/obj_<object id>``
    (relative, ``/``), where the pair's id ``case_id`` is ``<case>_obj_<object id>``."""
    check_name(subset, "subset")
    check_name(case_id, "case id")
    case, obj = case_id.rsplit(f"_{OBJ_PREFIX}", 1) if f"_{OBJ_PREFIX}" in case_id else (case_id, "")
    CaseId.parse(case_id)
    return f"{subset}/{case}/{check_name(OBJ_PREFIX + obj, f'{case_id}: object folder')}"


def pair_id(case_folder: str, obj_folder: str) -> str:
    """The pair id of ``<case_folder>/<obj_folder>/`` in the nested form: ``<case>_obj_<N>`` for the card's
    ``<case>/obj_<N>/``, the case folder itself for the layout ``pack`` wrote before (``<case>_obj_<N>/<N>/``);
    else ``<case_folder>/<obj_folder>``, which no name check passes (the folder is then named as refused)."""
    if obj_folder.startswith(OBJ_PREFIX):
        return f"{case_folder}_{obj_folder}"
    if case_folder.endswith(f"_{OBJ_PREFIX}{obj_folder}"):
        return case_folder
    return f"{case_folder}/{obj_folder}"


def index_key(key: str) -> tuple[str, str]:
    """An ``index.json`` key as the pair id it names, and which form it was in: ``"path"`` for the card's
    ``<subset>/<case>/<obj_id>``, ``"id"`` for the project page's ``<case>_<obj_id>``."""
    parts = key.split("/")
    if len(parts) == 3 and parts[0] in SUBSETS:
        return pair_id(parts[1], parts[2]), "path"
    return key, "id"


def public_result(scores_dir: str | os.PathLike, subset: str, case_id: str) -> Path:
    """A case's ``paper-v3`` scores in the public toolkit's form: ``scores/<protocol>/public/<subset>__<case_id>/result.json``."""
    return child(Path(scores_dir), "public", f"{subset}__{case_id}", "result.json")


def completion_records_dir(root: str | os.PathLike) -> Path:
    """Where a reconstructed dataset's completion records are: ``<subset>/<case_id>.json`` below it."""
    return confined(root, STATE_DIR, "complete")


def completion_record(root: str | os.PathLike, subset: str, case_id: str) -> Path:
    """The record that a reconstructed case is complete (its ``data.db`` row and ``cases.jsonl`` record): the
    completion marker, written last by the case's worker; the index files are built from these."""
    return child(completion_records_dir(root), subset, f"{case_id}.json")


def fetch_done_path(root: str | os.PathLike, name: str) -> Path:
    """The record that the distribution file ``name`` was verified and extracted into ``root``."""
    return child(confined(root, STATE_DIR), "fetch", f"{name.replace('/', '__')}.json")


@dataclass(frozen=True)
class SynthLayout:
    """What ``persistbench synth`` writes::

    recipes.jsonl                 the recipes (source URLs relative to this folder, or under a base URL)
    synth.json                    the configuration
    sources/<source_id>.mp4       the H.264 source clips
    truth/<case_id>.json          the analytic ground truth
    """

    root: Path

    @property
    def recipes_jsonl(self) -> Path:
        return self.root / "recipes.jsonl"

    @property
    def synth_json(self) -> Path:
        return self.root / SYNTH_RECORD

    def source_clip(self, source_id: str) -> Path:
        return child(self.root, "sources", f"{source_id}.mp4")

    def truth_json(self, case_id: str) -> Path:
        return child(self.root, "truth", f"{case_id}.json")


@dataclass(frozen=True)
class CacheLayout:
    """The download cache (``--cache``)::

    <source_id>/<t0>-<t1>_h<height>.<ext>   a time range of a source (``full_h<height>`` unranged), and .json
    recipes/<sha256[:16]>.jsonl             recipes fetched from an http(s):// or hf:// URL
    """

    root: Path

    def clip_stem(self, source_id: str, span: str, height: int) -> Path:
        """A cache entry without its suffix; ``span`` is ``<t0>-<t1>`` (3 decimals) or ``full``."""
        return child(self.root, source_id, f"{span}_h{height}")

    def recipes_copy(self, url: str) -> Path:
        import hashlib

        return child(self.root, "recipes", f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.jsonl")
