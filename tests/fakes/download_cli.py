"""``persistbench download`` as the download backends' tests run it, and the dataset it writes as bytes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from persistbench.cli import main


def download(recipes: Path, out: Path, *extra: str, env: dict | None = None):
    """``download`` of ``recipes`` into ``out/ds`` with the cache ``out/cache``, no retries, no progress bars."""
    args = ["download", "--recipes", str(recipes), "--output", str(out / "ds"), "--cache", str(out / "cache")]
    return CliRunner().invoke(main, [*args, "--no-progress", "--retries", "0", *extra], env=env)


def tree(root: Path) -> dict[str, bytes]:
    """Every file of a dataset but its run state and the recipes' provenance (which names the recipes' path)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".state" not in p.parts and p.name != "recipes_provenance.json"
    }
