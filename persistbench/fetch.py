"""``persistbench fetch``: the sharded distribution, checksummed and safely extracted.

Files come from a Hugging Face dataset repository (the revision resolved to a
commit hash, recorded in ``fetch.json``) or from a local directory (``--from``).
Each shard's size and sha256 are checked against ``checksums.json`` before
anything is read from it; then every member is checked (a regular file named
``<subset>/<case_id>/<obj_id>/<pair file>``: no absolute paths, ``..``, links
or devices) before any is written. Members are written by our own code into a
staging directory, which is moved into place only when the whole shard is
out, so a rejected or interrupted shard leaves nothing behind. Verified and
extracted shards are recorded under ``.state/fetch/`` and skipped on a rerun.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .errors import PersistbenchError
from .files import read_json, sha256_file, write_json
from .layout import (
    CASES_JSONL,
    DB_NAME,
    FETCH_JSON,
    PAIR_FILE_RE,
    PAIR_MEMBER_RE,
    SHARD_RE,
    STATE_DIR,
    DistributionLayout,
    fetch_done_path,
)
from .names import remove_tree

DEFAULT_REPO = "persistbench/persistbench"
REMOTE = DistributionLayout(Path())  # the distribution's paths, relative to its root
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    """Where the distribution's files come from: ``get(name)`` returns a local path to the file."""

    description: dict
    get: Callable[[str], Path]


def local_source(directory: str | os.PathLike) -> Source:
    root = Path(directory)
    if not DistributionLayout(root).index_json.is_file():
        raise PersistbenchError(f"{root}: not a persistbench distribution (no index.json)")

    def get(name: str) -> Path:
        path = root / name
        if not path.is_file():
            raise PersistbenchError(f"{path}: missing from the distribution")
        return path

    return Source({"from": str(root.resolve())}, get)


def hub_source(repo: str, revision: str | None) -> Source:
    """A Hugging Face dataset repository; ``revision`` (branch, tag or commit) is resolved to a commit first."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    errors = (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError)  # offline mode raises an OSError

    try:
        sha = HfApi().dataset_info(repo, revision=revision).sha
    except errors as e:
        raise PersistbenchError(
            f"hf://{repo}@{revision or 'main'}: cannot resolve the revision: {e}".splitlines()[0]
        ) from None

    def get(name: str) -> Path:
        try:
            return Path(hf_hub_download(repo, name, repo_type="dataset", revision=sha))
        except errors as e:
            raise PersistbenchError(f"hf://{repo}/{name}@{sha[:12]}: {e}".splitlines()[0]) from None

    return Source({"repo": repo, "revision": revision or "main", "commit": sha}, get)


def check_member(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` may not be extracted, or None when it is a regular file or directory of a pair."""
    name = member.name
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("/"):
        return "absolute path"
    if ".." in path.parts or "\\" in name:
        return "path leaves the output directory"
    if member.issym() or member.islnk():
        return f"link to {member.linkname!r}"
    if not (member.isfile() or member.isdir()):
        return "not a regular file or directory"
    if not (PAIR_FILE_RE.match(name) if member.isfile() else PAIR_MEMBER_RE.match(name.rstrip("/"))):
        return "name outside <subset>/<case_id>/<obj_id>/<pair file>"
    return None


def extract_shard(shard: Path, output: Path, expected: set[str] | None = None) -> list[str]:
    """Extract a verified shard into ``output``; returns the pair directories written.

    Every member is checked before any byte is written (and, with ``expected``, that
    the shard holds exactly those pair ids); the shard is written to a staging
    directory and its pairs are renamed into place at the end.
    """
    try:
        with tarfile.open(shard, "r:") as tar:
            members = tar.getmembers()
            for m in members:
                reason = check_member(m)
                if reason:
                    raise PersistbenchError(f"{shard.name}: refused member {m.name!r}: {reason}; nothing extracted")
            pairs = sorted({"/".join(m.name.split("/")[:3]) for m in members if m.isfile()})
            if expected is not None and {p.split("/")[1] for p in pairs} != expected:
                raise PersistbenchError(f"{shard.name}: its pairs differ from index.json; nothing extracted")
            staging = Path(tempfile.mkdtemp(prefix=f".{shard.name}.", dir=output / STATE_DIR))
            try:
                for m in members:
                    if m.isdir():
                        continue
                    target = staging / m.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with tar.extractfile(m) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst, _CHUNK)
                for rel in pairs:
                    dest = output / rel
                    remove_tree(output, dest)  # an older copy of the pair
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(staging / rel, dest)
            finally:
                remove_tree(output, staging)
    except (tarfile.TarError, EOFError) as e:
        raise PersistbenchError(f"{shard.name}: not a readable tar: {e}") from None
    return pairs


def fetch(output: str | os.PathLike, source: Source, include: str = "all", progress: bool = True) -> dict:
    """Fetch the distribution into ``output`` (a dataset tree in the nested form); returns ``fetch.json``.

    ``include="samples"`` takes only the unarchived sample pairs.
    """
    from tqdm import tqdm

    output = Path(output)
    for name in (CASES_JSONL, DB_NAME):
        if (output / name).exists():
            raise PersistbenchError(f"{output}: holds a reconstructed dataset ({name}); fetch into a new directory")
    (output / STATE_DIR).mkdir(parents=True, exist_ok=True)  # holds the extraction staging and the done records
    checksums = read_json(source.get(REMOTE.checksums_json.as_posix()))
    index = read_json(source.get(REMOTE.index_json.as_posix()))
    samples = f"{REMOTE.samples_dir.as_posix()}/"
    if include == "samples":
        names = sorted(n for n in checksums if n.startswith(samples))
    else:
        names = sorted(n for n in checksums if SHARD_RE.match(n))
    bad = [n for n in names if not (SHARD_RE.match(n) or PAIR_FILE_RE.match(n.removeprefix(samples)))]
    if bad:
        raise PersistbenchError(f"checksums.json: refused file name {bad[0]!r}")
    todo = [n for n in names if not _done(output, n, checksums[n]["sha256"])]
    total = sum(int(checksums[n]["bytes"]) for n in todo)
    with tqdm(total=total, unit="B", unit_scale=True, desc="fetch", disable=not progress) as bar:
        for name in todo:
            path = source.get((REMOTE.shards_dir / name).as_posix() if SHARD_RE.match(name) else name)
            want = checksums[name]
            size = path.stat().st_size
            if size != int(want["bytes"]):
                raise PersistbenchError(f"{name}: {size} bytes, checksums.json says {want['bytes']}; nothing extracted")
            if sha256_file(path, bar.update) != want["sha256"]:
                raise PersistbenchError(f"{name}: sha256 differs from checksums.json; nothing extracted")
            if SHARD_RE.match(name):
                extract_shard(path, output, {k for k, row in index.items() if row["shard"] == name})
            else:
                target = output / name.removeprefix(samples)
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.part")
                shutil.copyfile(path, tmp)
                os.replace(tmp, target)
            write_json(fetch_done_path(output, name), {"name": name, "sha256": want["sha256"]})
    pairs = len(index) if include == "all" else len({"/".join(n.removeprefix(samples).split("/")[:3]) for n in names})
    record = {**source.description, "include": include, "files": len(names), "pairs": pairs}
    write_json(output / FETCH_JSON, record)
    return record


def _done(output: Path, name: str, sha256: str) -> bool:
    try:
        return read_json(fetch_done_path(output, name)).get("sha256") == sha256
    except PersistbenchError:
        return False
