"""The shared case loop of ``download``, ``infer`` and ``score``.

It owns ordering, ``--subset``, ``--limit``, ``--shard K/N``, ``--workers``,
resume (done items are skipped, interrupted ones redone), the progress bar,
per-item locks and checkpoints under ``.state/``. It knows nothing of what
an item means: callers pass the work as a picklable callable.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from .errors import PersistbenchError, os_error_line
from .files import file_lock, write_json
from .names import child

T = TypeVar("T")
_PR_SET_PDEATHSIG = 1  # prctl option, <linux/prctl.h>


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: items whose position in the selection is ``index`` mod ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        try:
            k, n = (int(v) for v in text.split("/"))
            if not 0 <= k < n:
                raise ValueError
        except ValueError:
            raise PersistbenchError(f"--shard {text!r}: expected K/N with 0 <= K < N, e.g. 0/4") from None
        return cls(k, n)


def select(
    items: Sequence[T],
    subset_of: Callable[[T], str],
    subset: str | None = None,
    limit: int | None = None,
    shard: Shard | None = None,
) -> list[T]:
    """Deterministic selection: input order, then subset filter, then the first ``limit``, then the shard."""
    chosen = [it for it in items if subset is None or subset_of(it) == subset]
    if limit is not None:
        chosen = chosen[:limit]
    if shard is not None:
        chosen = chosen[shard.index :: shard.count]
    return chosen


@dataclass
class Outcome:
    key: str
    status: str  # "done", "skipped" or "failed"
    reason: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Job(Generic[T]):
    """One item's work, run in this process or a worker.

    ``work(item)`` does the job and raises :class:`PersistbenchError` with a
    one-line reason on failure. ``state_dir`` holds per-item locks and
    checkpoints: a lock is held while the item runs, so two processes never
    work on the same item, and a checkpoint says "started" until it ends.
    ``is_done(item)``, when given, is asked again once the lock is held, so an
    item that another process finished meanwhile is skipped, not redone.
    """

    work: Callable[[T], object]
    state_dir: Path
    is_done: Callable[[T], bool] | None = None

    def __call__(self, key: str, item: T) -> Outcome:
        start = time.perf_counter()
        checkpoint = child(self.state_dir, "cases", f"{key}.json")
        with file_lock(child(self.state_dir, "locks", f"{key}.lock")):
            if self.is_done is not None and self.is_done(item):
                return Outcome(key, "skipped")
            write_json(checkpoint, {"key": key, "status": "started", "pid": os.getpid()})
            try:
                self.work(item)
            except PersistbenchError as e:
                write_json(checkpoint, {"key": key, "status": "failed", "reason": str(e)})
                return Outcome(key, "failed", str(e).splitlines()[0], time.perf_counter() - start)
            except OSError as e:  # the environment (disk full, permissions), not a bug: one line naming the path
                reason = os_error_line(e)
                write_json(checkpoint, {"key": key, "status": "failed", "reason": reason})
                return Outcome(key, "failed", reason, time.perf_counter() - start)
            except Exception as e:  # a bug, not bad input: keep the traceback for the report
                write_json(checkpoint, {"key": key, "status": "failed", "reason": traceback.format_exc()})
                return Outcome(key, "failed", f"internal error: {type(e).__name__}: {e}", time.perf_counter() - start)
            checkpoint.unlink(missing_ok=True)
        return Outcome(key, "done", "", time.perf_counter() - start)


def die_with_parent(parent: int) -> None:
    """Make this worker process end when ``parent`` does, however the parent ends (``kill -9`` too).

    Linux: the kernel's parent-death signal. Elsewhere: a watchdog thread that
    polls the parent's pid. Either way a worker never outlives its run and
    never writes cases that a rerun is redoing.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    else:  # pragma: no cover - not Linux

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # the parent was gone before the signal was armed
        os._exit(1)


def run(
    items: Sequence[T],
    key_of: Callable[[T], str],
    job: Job[T],
    is_done: Callable[[T], bool],
    workers: int = 1,
    desc: str = "cases",
    progress: bool = True,
) -> list[Outcome]:
    """Run ``job`` over ``items`` (already selected); outcomes come back in item order.

    Items for which ``is_done`` holds are skipped. With ``workers > 1`` items run
    in that many spawned processes.
    """
    from tqdm import tqdm

    outcomes: dict[str, Outcome] = {}
    todo = []
    for it in items:
        if is_done(it):
            outcomes[key_of(it)] = Outcome(key_of(it), "skipped")
        else:
            todo.append(it)
    bar = tqdm(total=len(items), initial=len(items) - len(todo), desc=desc, unit="case", disable=not progress)
    failed = 0

    def finish(o: Outcome) -> None:
        nonlocal failed
        outcomes[o.key] = o
        failed += o.status == "failed"
        bar.set_postfix(failed=failed, refresh=False)
        bar.update(1)

    try:
        if workers <= 1:
            for it in todo:
                finish(job(key_of(it), it))
        else:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, ctx, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
                futures = [pool.submit(job, key_of(it), it) for it in todo]
                try:
                    for f in as_completed(futures):
                        finish(f.result())
                except BaseException:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
    finally:
        bar.close()
    return [outcomes[key_of(it)] for it in items]


def summary(outcomes: Sequence[Outcome]) -> str:
    """``done N, skipped M, failed K`` and one ``  key: reason`` line per failure (key not repeated)."""
    counts = {s: sum(o.status == s for o in outcomes) for s in ("done", "skipped", "failed")}
    lines = [", ".join(f"{s} {n}" for s, n in counts.items())]
    lines += [
        f"  {o.reason if o.reason.startswith(o.key + ':') else f'{o.key}: {o.reason}'}"
        for o in outcomes
        if o.status == "failed"
    ]
    return "\n".join(lines)
