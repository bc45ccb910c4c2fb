"""``persistbench fetch --suite r2m``: R2M-Bench's conditioning images from the Hub (or a local copy) into a checkout.

The images are the Hugging Face dataset ``GD-ML/R2MBench``'s ``test_imgs/`` folder; the metadata
names them ``./generated_imgs/<id>.png`` and the reader resolves that alias, so no symlink is
needed. Every name is checked before anything is written, every file is bounded and its image
header read before it is renamed into place, and the commit the revision resolved to is recorded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ...errors import PersistbenchError
from ...files import atomic_path, copy_bounded, write_json
from ...images import image_size
from ...layout import SUITE_FETCH_JSON
from ...names import check_name
from . import layout

MAX_IMAGE_BYTES = 64 << 20
MAX_IMAGES = 10_000
SUFFIXES = (".png", ".jpg", ".jpeg")


def _hub(repo: str, revision: str | None) -> tuple[dict, list[str], Callable[[str], Path]]:
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    errors = (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError)
    try:
        info = HfApi().dataset_info(repo, revision=revision, files_metadata=False)
    except errors as e:
        raise PersistbenchError(
            f"hf://{repo}@{revision or 'main'}: cannot resolve the revision: {e}".splitlines()[0]
        ) from None
    prefix = f"{layout.HUB_IMAGES}/"
    names = [s.rfilename[len(prefix) :] for s in info.siblings or [] if s.rfilename.startswith(prefix)]

    def get(name: str) -> Path:
        try:
            return Path(hf_hub_download(repo, prefix + name, repo_type="dataset", revision=info.sha))
        except errors as e:
            raise PersistbenchError(f"hf://{repo}/{prefix}{name}@{info.sha[:12]}: {e}".splitlines()[0]) from None

    return {"repo": repo, "revision": revision or "main", "commit": info.sha}, names, get


def _local(directory: Path) -> tuple[dict, list[str], Callable[[str], Path]]:
    folder = directory / layout.HUB_IMAGES
    if not folder.is_dir():
        raise PersistbenchError(f"{folder}: missing (--from takes a local copy of {layout.HUB_REPO})")
    names = [p.name for p in folder.iterdir() if not p.is_dir()]
    for name in names:
        if (folder / name).is_symlink():
            raise PersistbenchError(f"{folder / name}: a link; refused")
    return {"from": str(directory.resolve())}, names, lambda name: folder / name


def fetch_images(output: Path, repo: str | None, revision: str | None, from_dir: str | None, progress: bool) -> dict:
    """Copy the images into ``output/test_imgs/``; returns the record written to ``output/persistbench_fetch.json``."""
    from tqdm import tqdm

    description, names, get = _local(Path(from_dir)) if from_dir else _hub(repo or layout.HUB_REPO, revision)
    if len(names) > MAX_IMAGES:
        raise PersistbenchError(f"{layout.HUB_IMAGES}/: {len(names)} files, at most {MAX_IMAGES} expected")
    for name in names:  # every name is checked before anything is written
        check_name(name, f"{layout.HUB_IMAGES}/{name!r}")
        if not name.lower().endswith(SUFFIXES):
            raise PersistbenchError(f"{layout.HUB_IMAGES}/{name}: not an image name ({', '.join(SUFFIXES)})")
    target = output / layout.HUB_IMAGES
    for name in tqdm(sorted(names), desc="fetch", unit="image", disable=not progress):
        src = get(name)
        if src.stat().st_size > MAX_IMAGE_BYTES:
            raise PersistbenchError(f"{src}: larger than {MAX_IMAGE_BYTES >> 20} MiB; refused")
        with atomic_path(target / name) as tmp, open(src, "rb") as fin, open(tmp, "wb") as fout:
            copy_bounded(fin, fout, MAX_IMAGE_BYTES, str(src))
            fout.flush()
            os.fsync(fout.fileno())
            try:  # a readable image whose header is within bounds, or nothing is renamed
                image_size(tmp)
            except PersistbenchError as e:
                raise PersistbenchError(f"{src}: not a readable image ({str(e).split('(', 1)[-1]}; refused") from None
    record = {**description, "images": len(names), "folder": layout.HUB_IMAGES}
    write_json(output / SUITE_FETCH_JSON, record)
    return record
