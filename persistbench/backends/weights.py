"""Where a backend's weights are, and their identity (sha256), without downloading unless asked."""

from __future__ import annotations

import functools
import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from persistbench.backends import BackendSpec, BackendUnavailable
from persistbench.io.files import sha256_file


@dataclass(frozen=True)
class Weights:
    """A checkpoint folder: ``config.json`` plus safetensors files, and what identifies it in outputs."""

    name: str  # the backend
    folder: Path
    source: str  # the folder as given, or the Hub repository and its cached revision
    files: tuple[Path, ...]  # the *.safetensors files, sorted

    @property
    def sha256(self) -> str:
        """The sha256 of the single weights file, or of ``name\\0sha256\\n`` lines over several (sorted)."""
        return _digest(self.files)

    def provenance(self) -> dict:
        return {"weights": self.source, "sha256": self.sha256}


@functools.lru_cache(maxsize=16)
def _digest(files: tuple[Path, ...]) -> str:
    if len(files) == 1:
        return sha256_file(files[0])
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


def checkpoint(name: str, folder: Path, source: str) -> Weights:
    """Check that ``folder`` holds a loadable checkpoint (``config.json`` and safetensors, never pickles)."""
    if not (folder / "config.json").is_file():
        raise BackendUnavailable(f"{folder}: no config.json (backend {name} needs a transformers checkpoint folder)")
    files = tuple(sorted(folder.glob("*.safetensors")))
    if not files:
        pickles = sorted(p.name for p in folder.glob("*.bin"))
        why = f" ({', '.join(pickles)} are pickles, which are not loaded)" if pickles else ""
        raise BackendUnavailable(f"{folder}: no *.safetensors weights for backend {name}{why}")
    return Weights(name, folder, source, files)


def resolve(spec: BackendSpec, given: str | None, allow_download: bool) -> Weights:
    """The weights of ``spec``: ``given`` (a folder, or a Hub repository id), else its default repository,
    taken from the Hugging Face cache; fetched only with ``allow_download``. A ``torch.export`` backend takes
    ``given`` as a file and has no default."""
    if spec.format == "torch.export":
        return exported(spec.name, given)
    if spec.format == "sam2-checkpoint":
        return sam2_checkpoint(spec, given, allow_download)
    if given and Path(given).expanduser().is_dir():
        folder = Path(given).expanduser().resolve()
        return checkpoint(spec.name, folder, str(folder))
    if given and (given.startswith((".", "/", "~")) or given.count("/") != 1):
        raise BackendUnavailable(f"--weights {spec.name}={given}: no such folder")
    repo = given or spec.repo
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(
            snapshot_download(
                repo, allow_patterns=["*.json", "*.safetensors", "*.txt"], local_files_only=not allow_download
            )
        )
    except LocalEntryNotFoundError:
        raise BackendUnavailable(
            f"backend {spec.name}: {repo} is not in the Hugging Face cache; pass --weights {spec.name}=DIR "
            f"(a folder with config.json and model.safetensors) or --allow-download to fetch it"
        ) from None
    except Exception as e:  # the Hub's errors: no such repository, gated, offline
        raise BackendUnavailable(f"backend {spec.name}: {repo}: {str(e).splitlines()[0]}") from None
    return checkpoint(spec.name, folder, f"{repo}@{folder.name}")


def exported(name: str, given: str | None) -> Weights:
    """A ``torch.export`` archive given as ``--weights NAME=FILE.pt2`` (no default: the user exports it)."""
    how = f"pass --weights {name}=FILE.pt2, the model saved by torch.export (docs/metrics.md, R2M-Bench)"
    if not given:
        raise BackendUnavailable(f"backend {name}: no weights; {how}")
    path = Path(given).expanduser()
    if not path.is_file():
        raise BackendUnavailable(f"--weights {name}={given}: no such file; {how}")
    if not zipfile.is_zipfile(path):
        raise BackendUnavailable(f"{path}: not a torch.export archive (a zip written by torch.export.save); {how}")
    path = path.resolve()
    return Weights(name, path.parent, str(path), (path,))


SAM2_FILES = {"facebook/sam2.1-hiera-large": "sam2.1_hiera_large.pt"}  # the package's checkpoint in its Hub repository


def sam2_checkpoint(spec: BackendSpec, given: str | None, allow_download: bool) -> Weights:
    """A ``sam2`` package checkpoint: ``--weights NAME=FILE.pt``, else ``sam2.1_hiera_large.pt`` of the default
    repository from the Hugging Face cache (fetched only with ``allow_download``). Its contents are checked
    when the backend loads it."""
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise BackendUnavailable(f"--weights {spec.name}={given}: no such file (a SAM 2.1 checkpoint, *.pt)")
        path = path.resolve()
        return Weights(spec.name, path.parent, str(path), (path,))
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    filename = SAM2_FILES[spec.repo]
    try:
        path = Path(hf_hub_download(spec.repo, filename, local_files_only=not allow_download))
    except LocalEntryNotFoundError:
        raise BackendUnavailable(
            f"backend {spec.name}: {spec.repo}/{filename} is not in the Hugging Face cache; pass "
            f"--weights {spec.name}=FILE.pt or --allow-download to fetch it"
        ) from None
    except Exception as e:  # the Hub's errors: no such repository, offline
        raise BackendUnavailable(f"backend {spec.name}: {spec.repo}: {str(e).splitlines()[0]}") from None
    return Weights(spec.name, path.parent, f"{spec.repo}/{filename}@{path.parent.name}", (path,))
