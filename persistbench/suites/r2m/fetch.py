"""``persistbench fetch --suite r2m``: R2M-Bench's conditioning images from the Hub (or a local copy) into a checkout.

The images are the Hugging Face dataset ``GD-ML/R2MBench``'s ``test_imgs/`` folder; the metadata
names them ``./generated_imgs/<id>.png`` and the reader resolves that alias, so no symlink is
needed. Every name is checked before anything is written, every file is bounded and its image
header read before it is renamed into place, and the commit the revision resolved to is recorded.
Images are copied on an executor, one per call (``--shard K/N``, then ``--aggregate-only``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import STATE_DIR, SUITE_FETCH_JSON
from persistbench.core.timing import phase
from persistbench.executors import Executor, Job, RunResult, Selection, SerialExecutor, Shard, check_sharding
from persistbench.io import hub
from persistbench.io.files import atomic_path, copy_bounded, write_json
from persistbench.io.hub import Source
from persistbench.io.images import image_size
from persistbench.io.names import check_name, child, confined
from persistbench.suites.r2m import layout

MAX_IMAGE_BYTES = 64 << 20
MAX_IMAGES = 10_000
SUFFIXES = (".png", ".jpg", ".jpeg")


def _hub(repo: str, revision: str | None) -> tuple[Source, list[str]]:
    info = hub.dataset_info(repo, revision)
    prefix = f"{layout.HUB_IMAGES}/"
    names = [s.rfilename[len(prefix) :] for s in info.siblings or [] if s.rfilename.startswith(prefix)]
    description = {"repo": repo, "revision": revision or "main", "commit": info.sha}
    return Source(description, repo=repo, commit=info.sha), names


def _local(directory: Path) -> tuple[Source, list[str]]:
    folder = directory / layout.HUB_IMAGES
    if not folder.is_dir():
        raise PersistbenchError(f"{folder}: missing (--from takes a local copy of {layout.HUB_REPO})")
    names = [p.name for p in folder.iterdir() if not p.is_dir()]
    for name in names:
        if (folder / name).is_symlink():
            raise PersistbenchError(f"{folder / name}: a link; refused")
    return Source({"from": str(directory.resolve())}, root=directory.absolute()), names


def fetch_images(
    output: Path,
    repo: str | None,
    revision: str | None,
    from_dir: str | None,
    progress: bool,
    executor: Executor | None = None,
    shard: Shard | None = None,
    aggregate_only: bool = False,
) -> RunResult:
    """Copy the images into ``output/test_imgs/`` on ``executor`` (default: serial), one per call; the result's
    ``value`` is the record written to ``output/persistbench_fetch.json`` (None for a shard)."""
    check_sharding(shard, aggregate_only)
    output = Path(output).absolute()
    source, names = _local(Path(from_dir)) if from_dir else _hub(repo or layout.HUB_REPO, revision)
    if len(names) > MAX_IMAGES:
        raise PersistbenchError(f"{layout.HUB_IMAGES}/: {len(names)} files, at most {MAX_IMAGES} expected")
    for name in names:  # every name is checked before anything is written
        check_name(name, f"{layout.HUB_IMAGES}/{name!r}")
        if not name.lower().endswith(SUFFIXES):
            raise PersistbenchError(f"{layout.HUB_IMAGES}/{name}: not an image name ({', '.join(SUFFIXES)})")
    names = sorted(names)
    result = RunResult("fetch", [])
    if not aggregate_only:
        job = Job(
            "fetch", functools.partial(_fetch_image, output=output, source=source), confined(output, STATE_DIR, "fetch")
        )
        todo = Selection(shard=shard).apply(names)
        result = (executor or SerialExecutor()).run(job, todo, key_of=str, progress=progress)
    if shard is not None or not result.ok:
        return result
    missing = [n for n in names if not (output / layout.HUB_IMAGES / n).is_file()]
    if missing:
        raise PersistbenchError(
            f"{output}: {len(missing)} image(s) not fetched yet (first: {missing[0]}); run every --shard first"
        )
    record = {**source.description, "images": len(names), "folder": layout.HUB_IMAGES}
    write_json(output / SUITE_FETCH_JSON, record)
    result.value = record
    return result


def _fetch_image(name: str, output: Path, source: Source) -> None:
    """Copy one image, bounded; renamed into place only when its header reads as an image."""
    with phase("transfer"):
        src = source.get(f"{layout.HUB_IMAGES}/{name}")
        if src.stat().st_size > MAX_IMAGE_BYTES:
            raise PersistbenchError(f"{src}: larger than {MAX_IMAGE_BYTES >> 20} MiB; refused")
        with (
            atomic_path(child(output, layout.HUB_IMAGES, name)) as tmp,
            open(src, "rb") as fin,
            open(tmp, "wb") as fout,
        ):
            copy_bounded(fin, fout, MAX_IMAGE_BYTES, str(src))
            fout.flush()
            os.fsync(fout.fileno())
            try:  # a readable image whose header is within bounds, or nothing is renamed
                image_size(tmp)
            except PersistbenchError as e:
                raise PersistbenchError(f"{src}: not a readable image ({str(e).split('(', 1)[-1]}; refused") from None
