"""Where a case's time goes: the stages mark phases (decode, model, write, ...) and the executor records them;
and the date an output records (:func:`today`).

``with phase("decode"): ...`` adds the block's seconds to the current case's phase ``decode``;
outside a case (no :func:`collect` open) it only runs the block. One case runs at a time per process.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import time
from collections.abc import Iterator

_current: dict[str, float] | None = None


@contextlib.contextmanager
def collect() -> Iterator[dict[str, float]]:
    """Collect the phases of the case run inside the block into the yielded dict (seconds per phase)."""
    global _current
    outer, _current = _current, {}
    try:
        yield _current
    finally:
        _current = outer


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        if _current is not None:
            _current[name] = _current.get(name, 0.0) + time.perf_counter() - start


def today() -> str:
    """The date an output records (``YYYY-MM-DD``, UTC): ``$SOURCE_DATE_EPOCH``'s when set (reproducible
    outputs), else today's."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    now = (
        datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
        if epoch and epoch.isdigit()
        else datetime.datetime.now(datetime.UTC)
    )
    return now.date().isoformat()
