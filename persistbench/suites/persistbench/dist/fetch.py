"""``persistbench fetch``: the sharded distribution, checksummed and safely extracted.

Files come from a Hugging Face dataset repository (the revision resolved to a
commit hash, recorded in ``fetch.json``) or from a local directory (``--from``).
Each shard's size and sha256 are checked against ``checksums.json`` before
anything is read from it; then every member is checked (a regular file named
``<subset>/<case_id>/<obj_id>/<pair file>``: no absolute paths, ``..``, links
or devices) before any is written. Members are written by our own code into a
staging directory, which is moved into place only when the whole shard is
out, so a rejected or interrupted shard leaves nothing behind. Verified and
extracted shards are recorded under ``.state/fetch/`` (written by rename, checked
on read) and skipped on a rerun. Files are fetched on an executor, one per call;
``--shard K/N`` fetches every N-th file and ``--aggregate-only`` then writes
``fetch.json`` once every file is there.
"""

from __future__ import annotations

import functools
import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STATE_DIR
from persistbench.core.timing import phase
from persistbench.executors import Executor, Job, RunResult, Selection, SerialExecutor, Shard, check_sharding
from persistbench.io.files import read_json, sha256_file, write_json
from persistbench.io.hub import Source, list_files
from persistbench.io.names import confined, remove_tree
from persistbench.suites.persistbench.dist.manifest import Checksum, pairs_record, read_checksums, read_index
from persistbench.suites.persistbench.layout import (
    CASES_JSONL,
    DB_NAME,
    FETCH_JSON,
    PAIR_FILE_RE,
    PAIR_MEMBER_RE,
    PAIRS_JSON,
    SHARD_RE,
    DistributionLayout,
    fetch_done_path,
    pair_id,
)

DEFAULT_REPO = "persistbench-neurips26/PersistBench"  # the dataset card's repository


REMOTE = DistributionLayout(Path())  # the distribution's paths, relative to its root
CHECKSUMS, INDEX = REMOTE.checksums_json.as_posix(), REMOTE.index_json.as_posix()
SAMPLES = f"{REMOTE.samples_dir.as_posix()}/"


_CHUNK = 1 << 20


def local_source(directory: str | os.PathLike) -> Source:
    root = Path(directory).absolute()
    if not DistributionLayout(root).index_json.is_file():
        raise PersistbenchError(f"{root}: not a persistbench distribution (no index.json)")
    return Source({"from": str(root.resolve())}, root=root)


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
            found = {pair_id(*p.split("/")[1:3]) for p in pairs}
            if expected is not None and found != expected:
                extra, absent = sorted(found - expected), sorted(expected - found)
                raise PersistbenchError(
                    f"{shard.name}: its pairs differ from {INDEX}"
                    + (f"; in the shard only: {', '.join(extra)}" if extra else "")
                    + (f"; in {INDEX} only: {', '.join(absent)}" if absent else "")
                    + "; nothing extracted"
                )
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


def fetch(
    output: str | os.PathLike,
    source: Source,
    include: str = "all",
    executor: Executor | None = None,
    shard: Shard | None = None,
    aggregate_only: bool = False,
    progress: bool = True,
) -> RunResult:
    """Fetch the distribution into ``output`` (a dataset tree in the nested form) on ``executor`` (default:
    serial), one file per call; the result's ``value`` is ``fetch.json``'s record (None for a shard).

    ``include="samples"`` takes only the unarchived sample pairs: checked against ``samples/checksums.json``
    (or the entries an older ``pack`` put in ``shards/checksums.json``), else copied as the card lays them
    out, unchecked (``fetch.json`` says so). With ``shard`` only every ``shard.count``-th file is fetched;
    ``aggregate_only`` writes ``fetch.json`` once all are there. A fetch that got no pair fails.
    """
    check_sharding(shard, aggregate_only)
    output = Path(output).absolute()
    for name in (CASES_JSONL, DB_NAME):
        if (output / name).exists():
            raise PersistbenchError(f"{output}: holds a reconstructed dataset ({name}); fetch into a new directory")
    confined(output, STATE_DIR).mkdir(parents=True, exist_ok=True)  # holds the extraction staging and the done records
    listed = read_checksums(source.get(CHECKSUMS), CHECKSUMS)
    index = read_index(source.get(INDEX), INDEX)
    bad = [n for n in listed if not (SHARD_RE.match(n) or _sample_name(n))]
    if bad:
        raise PersistbenchError(f"{CHECKSUMS}: refused file name {bad[0]!r}")
    if include == "samples":
        wanted = _samples(source, listed)
    else:
        wanted = {n: c for n, c in listed.items() if SHARD_RE.match(n)}
        unknown = sorted({r.shard for r in index.rows.values()} - set(wanted))
        if unknown:
            raise PersistbenchError(f"{INDEX}: pairs in {unknown[0]}, which {CHECKSUMS} does not list")
    names = sorted(wanted)
    pairs_of = {n: {p for p, r in index.rows.items() if r.shard == n} for n in names if SHARD_RE.match(n)}
    is_done = functools.partial(_done, output=output, checksums=wanted)
    result = RunResult("fetch", [])
    if not aggregate_only:
        chosen = Selection(shard=shard).apply(names)
        work = functools.partial(_fetch_one, output=output, source=source, checksums=wanted, pairs_of=pairs_of)
        job = Job("fetch", work, confined(output, STATE_DIR, "fetch"), is_done)
        result = (executor or SerialExecutor()).run(
            job, chosen, key_of=lambda n: n.replace("/", "__"), is_done=is_done, progress=progress
        )
    if shard is not None or not result.ok:
        return result
    missing = [n for n in names if not is_done(n)]
    if missing:
        raise PersistbenchError(
            f"{output}: {len(missing)} file(s) not fetched yet (first: {missing[0]}); run every --shard first"
        )
    if include == "all":
        pairs = sorted(index.rows)
    else:
        pairs = sorted({pair_id(*n.removeprefix(SAMPLES).split("/")[1:3]) for n in names})
    if not pairs:
        where = source.description.get("from") or source.description.get("repo")
        raise PersistbenchError(f"{where}: no pair to fetch (--include {include})")
    kept = {p: r for p, r in pairs_record(index).items() if p in set(pairs)}
    if kept:
        write_json(output / PAIRS_JSON, kept)
    record = {
        **source.description,
        "include": include,
        "files": len(names),
        "pairs": len(pairs),
        "index_keys": list(index.forms),
        "verified": all(c is not None for c in wanted.values()),
    }
    write_json(output / FETCH_JSON, record)
    result.value = record
    return result


def _sample_name(name: str) -> bool:
    """A sample file's name: ``samples/<pair file>`` of the card's tree or of the layout ``pack`` wrote before."""
    return name.startswith(SAMPLES) and bool(PAIR_FILE_RE.match(name.removeprefix(SAMPLES)))


def _samples(source: Source, listed: dict[str, Checksum]) -> dict[str, Checksum | None]:
    """The sample files and their checksums: ``samples/checksums.json``, else the entries an older ``pack``
    put in ``shards/checksums.json``, else every pair file under ``samples/`` (None: nothing to check against)."""
    own = f"{SAMPLES}checksums.json"
    names = list_files(source, SAMPLES)
    if own in names:
        sums = read_checksums(source.get(own), own)
        bad = [n for n in sums if not _sample_name(f"{SAMPLES}{n}")]
        if bad:
            raise PersistbenchError(f"{own}: refused file name {bad[0]!r}")
        return {f"{SAMPLES}{n}": c for n, c in sums.items()}
    old = {n: c for n, c in listed.items() if n.startswith(SAMPLES)}
    if old:
        return old
    return {n: None for n in names if _sample_name(n)}


def _fetch_one(
    name: str, output: Path, source: Source, checksums: dict[str, Checksum | None], pairs_of: dict[str, set[str]]
) -> None:
    """Fetch, check and extract (or copy) one distribution file; its done record last."""
    with phase("transfer"):
        path = source.get((REMOTE.shards_dir / name).as_posix() if SHARD_RE.match(name) else name)
    want = checksums[name]
    with phase("verify"):
        size = path.stat().st_size
        if want is not None and size != want.size:
            raise PersistbenchError(f"{name}: {size} bytes, checksums.json says {want.size}; nothing extracted")
        digest = sha256_file(path)
        if want is not None and digest != want.sha256:
            raise PersistbenchError(f"{name}: sha256 differs from checksums.json; nothing extracted")
    with phase("extract"):
        if SHARD_RE.match(name):
            extract_shard(path, output, pairs_of[name])
        else:
            target = output / name.removeprefix(SAMPLES)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.part")
            shutil.copyfile(path, tmp)
            os.replace(tmp, target)
    write_json(fetch_done_path(output, name), {"name": name, "sha256": digest})


def _done(name: str, output: Path, checksums: dict[str, Checksum | None]) -> bool:
    want = checksums[name]
    try:
        done = read_json(fetch_done_path(output, name)).get("sha256")
    except (PersistbenchError, AttributeError):
        return False
    return done is not None and (want is None or done == want.sha256)
