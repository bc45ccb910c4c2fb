"""Where published files come from: a local folder, or a Hugging Face repository pinned to a commit.

:class:`Source` is picklable, so workers on other machines read from the same place; ``hub_source``
resolves a branch or tag to its commit first, and :func:`hub_errors` are what huggingface_hub raises for
a file or revision it cannot get. Used by every suite's ``fetch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError


@dataclass(frozen=True)
class Source:
    """Where the distribution's files come from: a local folder (``root``), or a Hub dataset repository at a
    commit. Picklable, so workers on other machines fetch from the same place."""

    description: dict
    root: Path | None = None
    repo: str | None = None
    commit: str | None = None

    def get(self, name: str) -> Path:
        """A local path to the distribution file ``name`` (downloaded into the Hub cache first)."""
        if self.root is not None:
            path = self.root / name
            if not path.is_file():
                raise PersistbenchError(f"{path}: missing from the distribution")
            return path
        from huggingface_hub import hf_hub_download

        try:
            return Path(hf_hub_download(self.repo, name, repo_type="dataset", revision=self.commit))
        except hub_errors() as e:
            raise PersistbenchError(f"hf://{self.repo}/{name}@{self.commit[:12]}: {e}".splitlines()[0]) from None


def hub_errors() -> tuple[type[BaseException], ...]:
    """What huggingface_hub raises for a file or revision it cannot get (offline, missing, refused)."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    return (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError)  # offline mode raises an OSError


def hub_source(repo: str, revision: str | None) -> Source:
    """A Hugging Face dataset repository; ``revision`` (branch, tag or commit) is resolved to a commit first."""
    from huggingface_hub import HfApi

    try:
        sha = HfApi().dataset_info(repo, revision=revision).sha
    except hub_errors() as e:
        raise PersistbenchError(
            f"hf://{repo}@{revision or 'main'}: cannot resolve the revision: {e}".splitlines()[0]
        ) from None
    return Source({"repo": repo, "revision": revision or "main", "commit": sha}, repo=repo, commit=sha)
