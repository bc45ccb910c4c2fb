"""Which processes of a process group are alive, for the tests that kill runs and adapters."""

from __future__ import annotations

from pathlib import Path


def group_alive(pgid: int) -> list[int]:
    """Pids of the live (not zombie) processes in process group ``pgid``, read from /proc."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive
