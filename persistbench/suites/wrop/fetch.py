"""``persistbench fetch --suite wrop``: whole archives copied locally, each checked against ``checksums.txt``.

From the Hub (``Hokin/object-permanence``, the revision resolved to a commit) or ``--from`` a
folder or an ``http(s)`` URL of a corpus. Each archive is copied into ``train/<task>_task.tar.part``
by byte ranges, resuming from what a previous attempt left there, then its sha256 and member
count (and every member name: :func:`persistbench.suites.wrop.corpus.build_archive`) are checked
before it is renamed into place; a bad archive leaves nothing behind. ``train/checksums.txt``
(the lines of the archives fetched) and ``persistbench_fetch.json`` are written last, so the
folder is a corpus only once every archive asked for is there.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...errors import PersistbenchError
from ...files import write_json, write_text
from ...layout import SUITE_FETCH_JSON
from ...tarindex import LocalFile
from . import corpus, layout

CHUNK = 8 << 20


def _copy(source, part: Path, progress) -> None:
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
            progress(len(data))
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
    output: Path, repo: str | None, revision: str | None, source: str | None, tasks: list[str] | None, progress: bool
) -> int:
    """Copy the chosen tasks' archives into ``output/train/``; returns how many archives are there."""
    from tqdm import tqdm

    where = str(source) if source else f"hf://datasets/{repo or layout.HUB_REPO}" + (f"@{revision}" if revision else "")
    location = corpus.open_location(where)
    entries = corpus.checksums(location)
    chosen = corpus.match_tasks(list(entries), tuple(tasks) if tasks else None, location.id)
    sources = {t: location.source(layout.archive_path(t)) for t in chosen}
    total = sum(s.size for s in sources.values())
    with tqdm(total=total, desc="fetch", unit="B", unit_scale=True, disable=not progress) as bar:
        for task in chosen:
            dest = output / layout.archive_path(task)
            src, entry = sources[task], entries[task]
            done = (
                dest.is_file() and dest.stat().st_size == src.size and corpus.sha256_of(LocalFile(dest)) == entry.sha256
            )
            if done:
                bar.update(src.size)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_name(dest.name + ".part")
            _copy(src, part, bar.update)
            _check(part, entry, src.name)
            os.replace(part, dest)
    lines = "".join(f"{entries[t].sha256}  {layout.archive_name(t)}  {entries[t].members}\n" for t in chosen)
    write_text(output / layout.CHECKSUMS, lines)
    write_json(output / SUITE_FETCH_JSON, {"source": location.id, "tasks": chosen})
    return len(chosen)
