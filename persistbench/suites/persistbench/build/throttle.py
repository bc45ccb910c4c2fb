"""Slowing down when a host rate-limits: one delay shared by every worker that uses the same source cache.

The state is ``<cache>/.throttle.json`` (``{"delay": seconds}``), read and written under a file lock, so
processes, shards on one machine and restarts see the same delay. A rate-limited download doubles it
(from ``base``, at most :data:`MAX_DELAY`); a download that succeeds halves it (to 0 below ``base / 2``);
every download first waits the current delay.
"""

from __future__ import annotations

import time
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import file_lock, read_json, write_json

MAX_DELAY = 300.0


class Throttle:
    def __init__(self, cache: Path, base: float):
        self.path, self.base = Path(cache) / ".throttle.json", max(base, 0.05)

    def delay(self) -> float:
        try:
            value = read_json(self.path, limit=4096).get("delay", 0.0)
        except (PersistbenchError, AttributeError):  # missing, unreadable or foreign: no delay
            return 0.0
        return float(value) if isinstance(value, int | float) and 0 <= value <= MAX_DELAY else 0.0

    def _update(self, change) -> float:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self.path.with_suffix(".lock")):
            new = change(self.delay())
            write_json(self.path, {"delay": new})
        return new

    def wait(self) -> None:
        """Sleep the current delay (before a download)."""
        d = self.delay()
        if d > 0:
            time.sleep(d)

    def slow_down(self) -> float:
        """After a rate-limited download: the delay doubled (at least ``base``); returns it."""
        return self._update(lambda d: min(MAX_DELAY, max(2 * d, self.base)))

    def recover(self) -> None:
        """After a download that went through: the delay halved, 0 below half of ``base``."""
        if self.delay() > 0:
            self._update(lambda d: d / 2 if d / 2 >= self.base / 2 else 0.0)
