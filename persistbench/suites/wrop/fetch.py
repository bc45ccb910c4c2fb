"""``persistbench fetch --suite wrop``: whole archives copied locally, each checked against ``checksums.txt``.

From the Hub (``Hokin/object-permanence``, the revision resolved to a commit) or ``--from`` a
folder or an ``http(s)`` URL of a corpus. Each archive is copied into ``train/<task>_task.tar.part``
by byte ranges, resuming from what a previous attempt left there, then its sha256 and member
count (and every member name: :func:`persistbench.suites.wrop.corpus.build_archive`) are checked
before it is renamed into place; a bad archive leaves nothing behind. Archives are fetched on an
executor, one per call (a worker opens the corpus at the commit the driver resolved); ``--shard K/N``
fetches every N-th. ``train/checksums.txt`` (the lines of the archives fetched) and
``persistbench_fetch.json`` are written last (by the run without ``--shard``, or by
``--aggregate-only``), so the folder is a corpus only once every archive asked for is there.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STATE_DIR, SUITE_FETCH_JSON
from persistbench.core.timing import phase
from persistbench.executors import Executor, Job, RunResult, Selection, SerialExecutor, Shard, check_sharding
from persistbench.io.files import write_json, write_text
from persistbench.io.names import confined
from persistbench.io.tarindex import LocalFile
from persistbench.suites.wrop import corpus, layout

CHUNK = 8 << 20


def _copy(source, part: Path) -> None:
    """Append ``source``'s bytes to ``part`` from where it stops (a resumed download)."""
    have = part.stat().st_size if part.exists() else 0
    if have > source.size:
        part.unlink()
        have = 0
    with open(part, "ab") as f:
        for offset in range(have, source.size, CHUNK):
            data = source.read(offset, min(CHUNK, source.size - offset))
            if not data:
                raise PersistbenchError(f"{source.name}: no bytes at {offset}")
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _check(part: Path, entry: corpus.ArchiveEntry, name: str) -> None:
    """The copied archive's sha256 and member count against ``checksums.txt``; the copy is removed when wrong."""
    h = hashlib.sha256()
    with open(part, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    try:
        if h.hexdigest() != entry.sha256:
            raise PersistbenchError(
                f"{name}: sha256 {h.hexdigest()[:12]}..., {layout.CHECKSUMS} says {entry.sha256[:12]}...; nothing kept"
            )
        archive = corpus.build_archive(LocalFile(part), entry.task)
        members = len(archive.index.members)
        if members != entry.members:
            raise PersistbenchError(f"{name}: {members} members, {layout.CHECKSUMS} says {entry.members}; nothing kept")
    except PersistbenchError as e:
        part.unlink()
        raise PersistbenchError(str(e).replace(str(part), name)) from None


def fetch_corpus(
    output: Path,
    repo: str | None,
    revision: str | None,
    source: str | None,
    tasks: list[str] | None,
    progress: bool,
    executor: Executor | None = None,
    shard: Shard | None = None,
    aggregate_only: bool = False,
) -> RunResult:
    """Copy the chosen tasks' archives into ``output/train/`` on ``executor`` (default: serial); the result's
    ``value`` is the number of archives there (None for a shard)."""
    check_sharding(shard, aggregate_only)
    output = Path(output).absolute()
    where = str(source) if source else f"hf://datasets/{repo or layout.HUB_REPO}" + (f"@{revision}" if revision else "")
    location = corpus.open_location(where)
    entries = corpus.checksums(location)
    chosen = corpus.match_tasks(list(entries), tuple(tasks) if tasks else None, location.id)
    sizes = {t: location.source(layout.archive_path(t)).size for t in chosen}
    is_done = functools.partial(_complete, output=output, entries=entries, sizes=sizes)
    result = RunResult("fetch", [])
    if not aggregate_only:
        work = functools.partial(_fetch_archive, output=output, where=location.id, entries=entries, sizes=sizes)
        job = Job("fetch", work, confined(output, STATE_DIR, "fetch"), is_done)
        todo = Selection(shard=shard).apply(chosen)
        result = (executor or SerialExecutor()).run(job, todo, key_of=lambda t: t, is_done=is_done, progress=progress)
    if shard is not None or not result.ok:
        return result
    missing = [t for t in chosen if not is_done(t)] if aggregate_only else []  # else: each was checked in its run
    if missing:
        raise PersistbenchError(
            f"{output}: {len(missing)} archive(s) not fetched yet (first: {layout.archive_name(missing[0])}); "
            "run every --shard first"
        )
    lines = "".join(f"{entries[t].sha256}  {layout.archive_name(t)}  {entries[t].members}\n" for t in chosen)
    write_text(confined(output, *layout.CHECKSUMS.split("/")), lines)
    write_json(output / SUITE_FETCH_JSON, {"source": location.id, "tasks": chosen})
    result.value = len(chosen)
    return result


def _complete(task: str, output: Path, entries: dict, sizes: dict[str, int]) -> bool:
    """Whether the task's archive is in place: its size and sha256 those of ``checksums.txt``."""
    dest = confined(output, *layout.archive_path(task).split("/"))
    return (
        dest.is_file()
        and dest.stat().st_size == sizes[task]
        and corpus.sha256_of(LocalFile(dest)) == entries[task].sha256
    )


def _fetch_archive(task: str, output: Path, where: str, entries: dict, sizes: dict[str, int]) -> None:
    """Copy one archive into ``.part`` (resuming), check it, rename it into place."""
    src = corpus.open_location(where).source(layout.archive_path(task))
    if src.size != sizes[task]:
        raise PersistbenchError(f"{src.name}: {src.size} bytes now, {sizes[task]} when the fetch began")
    dest = confined(output, *layout.archive_path(task).split("/"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with phase("transfer"):
        _copy(src, part)
    with phase("verify"):
        _check(part, entries[task], src.name)
    os.replace(part, dest)
