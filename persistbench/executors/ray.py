"""The Ray executor: cases on a pool of Ray actors, on this machine or across a cluster.

Each actor is one worker process that keeps what the job loads (a model) for every case it runs;
it reserves ``cpus_per_task`` CPUs and ``gpus_per_task`` GPUs (fractions allowed: 0.5 puts two on a
GPU). Only case keys and outcomes travel through Ray; frames are read and written on the shared file
system (the dataset, the output and the caches must be mounted at the same path on every node).
An actor that dies mid-case (killed, out of memory, its node lost) is replaced and the case retried,
at most ``max_retries`` times.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import shutil
import socket
import tempfile
from typing import Any

from persistbench.core.errors import PersistbenchError
from persistbench.executors.base import (
    ExecutorOptions,
    Job,
    Outcome,
    PoolExecutor,
    WorkerLost,
    _Call,
    limit_threads,
    take_job,
)

LOCAL_OBJECT_STORE = 256 * 2**20  # a local cluster's object store: only keys and outcomes go through it
CONNECT_TIMEOUT_S = 5.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PersistbenchError(
            "--executor ray needs Ray: pip install 'persistbench[ray]' (on every node of the cluster)"
        ) from None
    return ray


def check_reachable(address: str) -> None:
    """A ``HOST:PORT`` address must accept a connection within seconds (Ray itself retries for minutes);
    ``auto`` and ``ray://`` addresses are left to Ray, which fails fast on them."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S) as s:
            # Ray's GCS speaks gRPC: HTTP/2, whose server answers a client preface with a SETTINGS frame
            # (type 4). An HTTP/1 server answers with "HTTP/1.1 400", other servers with nothing.
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            head = s.recv(9)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
        raise PersistbenchError(f"--ray-address {address}: no Ray cluster answers there ({reason})") from None
    if len(head) < 4 or head[3] != 4:
        raise PersistbenchError(f"--ray-address {address}: the server there is not a Ray cluster (no gRPC answer)")


class _Worker:
    """The actor: one process running the calls of the job it was given last, in the driver's folder."""

    def __init__(self, threads: int, setup: Any):
        limit_threads(threads)
        if setup is not None:
            setup()
        self.job: Any = None

    def set_job(self, job: Job, cwd: str) -> None:
        if isinstance(self.job, Job):
            self.job.release()
        self.job = take_job(job, cwd)

    def run(self, key: str, item: Any) -> Outcome:
        return self.job(key, item)


class _Actor:
    def __init__(self, handle: Any):
        self.handle = handle
        self.job: Job | None = None
        self.ref: Any = None


class RayExecutor(PoolExecutor):
    """Cases on Ray actors. ``address``: a running cluster (``auto``, ``ray://host:10001``, ``host:6379``);
    None starts a local one with ``num_cpus`` CPUs (default: all) for this run and stops it after.
    ``workers``: actors at once (default: as many as the cluster's CPUs and GPUs allow)."""

    name = "ray"
    cluster = True

    @classmethod
    def from_options(cls, opts: ExecutorOptions) -> RayExecutor:
        return cls(
            address=opts.ray_address,
            cpus_per_task=opts.cpus_per_task,
            gpus_per_task=opts.gpus_per_task,
            workers=opts.workers,
            max_retries=opts.max_retries,
        )

    def __init__(
        self,
        address: str | None = None,
        cpus_per_task: float = 1.0,
        gpus_per_task: float = 0.0,
        num_cpus: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if cpus_per_task <= 0 or gpus_per_task < 0:
            raise PersistbenchError("--cpus-per-task must be > 0 and --gpus-per-task >= 0")
        self.address, self.num_cpus = address, num_cpus
        self.cpus_per_task, self.gpus_per_task = cpus_per_task, gpus_per_task
        self._owns = False
        self._temp: str | None = None
        self._job: Job | None = None
        self._job_ref: Any = None

    def _start(self) -> None:
        ray = import_ray()
        if self.address is not None:
            check_reachable(self.address)
        if ray.is_initialized():  # a caller's session (a notebook, the benchmark): used, not stopped
            self._owns = False
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network at run time
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
        if self.address is None:
            # A local Ray's token is this run's, not written to ~/.ray/auth_token.
            if not (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")):
                os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
            # The session folder (logs, sockets) of a local Ray is ours, and goes when the run ends.
            # Ray's socket paths must fit in 107 bytes: a long $TMPDIR falls back to /tmp.
            base = tempfile.gettempdir()
            self._temp = tempfile.mkdtemp(prefix="pbray", dir=base if len(base) <= 40 else "/tmp")
            options.update(num_cpus=self.num_cpus, object_store_memory=LOCAL_OBJECT_STORE, _temp_dir=self._temp)
        try:
            ray.init(address=self.address, **options)
        except (ConnectionError, RuntimeError, ValueError) as e:
            if self._temp is not None:
                shutil.rmtree(self._temp, ignore_errors=True)
                self._temp = None
            raise PersistbenchError(f"--ray-address {self.address}: cannot connect: {e}".splitlines()[0]) from None
        self._owns = True

    def _stop(self) -> None:
        super()._stop()
        self._job = self._job_ref = None
        if self._owns:
            import_ray().shutdown()
            self._owns = False
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None

    def _pool_size(self) -> int:
        resources = import_ray().cluster_resources()
        n = math.floor(resources.get("CPU", 0) / self.cpus_per_task + 1e-9)
        if self.gpus_per_task > 0:
            n = min(n, math.floor(resources.get("GPU", 0) / self.gpus_per_task + 1e-9))
        if n < 1:
            raise PersistbenchError(
                f"the Ray cluster has {resources.get('CPU', 0)} CPU(s) and {resources.get('GPU', 0)} GPU(s): "
                f"not enough for one task of --cpus-per-task {self.cpus_per_task} --gpus-per-task {self.gpus_per_task}"
            )
        return n

    def _spawn(self) -> _Actor:
        ray = import_ray()
        cls = ray.remote(num_cpus=self.cpus_per_task, num_gpus=self.gpus_per_task, max_restarts=0)(_Worker)
        return _Actor(cls.remote(max(1, math.floor(self.cpus_per_task)), self.worker_setup))

    def _assign(self, worker: _Actor, job: Job, cwd: str) -> None:
        if self._job is not job:  # the job goes into the object store once, not once per actor
            self._job, self._job_ref = job, import_ray().put(job)
        worker.handle.set_job.remote(self._job_ref, cwd)  # an actor runs its calls in the order they were sent

    def _submit(self, worker: _Actor, call: _Call) -> None:
        worker.ref = worker.handle.run.remote(call.key, call.item)

    def _wait(self, busy: list[_Actor]) -> list[tuple[_Actor, Outcome | WorkerLost]]:
        ray = import_ray()
        from ray.exceptions import RayActorError, WorkerCrashedError

        ready, _ = ray.wait([w.ref for w in busy], num_returns=1)
        out: list[tuple[_Actor, Outcome | WorkerLost]] = []
        for worker in busy:
            if worker.ref not in ready:
                continue
            try:
                out.append((worker, ray.get(worker.ref)))
            except (RayActorError, WorkerCrashedError) as e:
                out.append((worker, WorkerLost(f"Ray worker died ({type(e).__name__})")))
        return out

    def _discard(self, worker: _Actor) -> None:
        ray = import_ray()
        try:
            ray.kill(worker.handle)
        except Exception:  # an actor that is gone already
            pass
