"""Executors on this machine: in this process, or in worker processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from persistbench.executors.base import Executor, Job, Outcome, PoolExecutor, WorkerLost, _Call, limit_threads, take_job

_PR_SET_PDEATHSIG = 1  # prctl option, <linux/prctl.h>


class SerialExecutor(Executor):
    """Every case in this process, one after the other (the reference the others are compared with)."""

    name = "serial"
    one_at_a_time = True

    def _results(self, job: Job, calls: deque[_Call]) -> Iterator[tuple[_Call, Outcome | WorkerLost]]:
        while calls:
            call = calls.popleft()
            call.attempts += 1
            yield call, job(call.key, call.item)


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


def _serve(conn: Connection, parent: int, threads: int, setup: Any) -> None:
    """A worker process: take ``("job", job, cwd)`` and ``("call", key, item)`` messages, answer each call with
    its outcome, stop at ``None``. It uses ``threads`` threads for numerical work."""
    die_with_parent(parent)
    limit_threads(threads)
    if setup is not None:
        setup()
    job = None
    while (message := conn.recv()) is not None:
        if message[0] == "job":
            if isinstance(job, Job):
                job.release()
            job = take_job(*message[1:])
        else:
            conn.send(job(*message[1:]))
    if isinstance(job, Job):
        job.release()


class _Process:
    def __init__(self, process: multiprocessing.process.BaseProcess, conn: Connection):
        self.process, self.conn = process, conn
        self.job: Job | None = None
        self.gone = False  # a message could not be sent: the process is dead


class ProcessExecutor(PoolExecutor):
    """Cases in ``workers`` spawned processes (default: one per CPU core), each loading a job's model once.

    A worker that dies (killed, out of memory) is replaced and its case retried; the others run on.
    """

    name = "processes"

    def _pool_size(self) -> int:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    def _spawn(self) -> _Process:
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        threads = max(1, self._pool_size() // self.size())  # the cores, shared out
        args = (theirs, os.getpid(), threads, self.worker_setup)
        process = ctx.Process(target=_serve, args=args, daemon=True)
        process.start()
        theirs.close()
        return _Process(process, ours)

    def _send(self, worker: _Process, message: tuple) -> None:
        try:
            worker.conn.send(message)
        except OSError:
            worker.gone = True

    def _assign(self, worker: _Process, job: Job, cwd: str) -> None:
        self._send(worker, ("job", job, cwd))

    def _submit(self, worker: _Process, call: _Call) -> None:
        self._send(worker, ("call", call.key, call.item))

    def _wait(self, busy: list[_Process]) -> list[tuple[_Process, Outcome | WorkerLost]]:
        ready = [] if any(w.gone for w in busy) else wait([w.conn for w in busy])
        out: list[tuple[_Process, Outcome | WorkerLost]] = []
        for worker in busy:
            if not (worker.gone or worker.conn in ready):
                continue
            try:
                if worker.gone:
                    raise EOFError
                out.append((worker, worker.conn.recv()))
            except (EOFError, OSError):
                worker.process.join()
                out.append((worker, WorkerLost(f"worker process {worker.process.pid} died ({_death(worker.process)})")))
        return out

    def _discard(self, worker: _Process) -> None:
        self._send(worker, None)
        worker.conn.close()
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()


def _death(process: multiprocessing.process.BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"
