"""Executors: how a stage's cases reach workers (serial, local processes, Ray). See :mod:`.base`."""

from __future__ import annotations

from dataclasses import dataclass

from persistbench.core.errors import UsageError
from persistbench.executors.base import (
    DEFAULT_MAX_RETRIES,
    Executor,
    Job,
    Outcome,
    RunResult,
    Selection,
    Shard,
    read_records,
)
from persistbench.executors.local import ProcessExecutor, SerialExecutor, die_with_parent

EXECUTORS = ("serial", "processes", "ray")

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorOptions",
    "Job",
    "Outcome",
    "ProcessExecutor",
    "RunResult",
    "Selection",
    "SerialExecutor",
    "Shard",
    "die_with_parent",
    "read_records",
]


@dataclass(frozen=True)
class ExecutorOptions:
    """The command line's executor options. ``kind`` None: serial for one worker, processes for more."""

    kind: str | None = None
    workers: int | None = None
    ray_address: str | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.0
    max_retries: int = DEFAULT_MAX_RETRIES

    def __post_init__(self) -> None:
        kind = self.resolved
        if kind not in EXECUTORS:
            raise UsageError(f"--executor {kind}: one of {', '.join(EXECUTORS)}")
        if kind != "ray" and (self.ray_address or self.gpus_per_task or self.cpus_per_task != 1.0):
            raise UsageError("--ray-address, --cpus-per-task and --gpus-per-task need --executor ray")
        if kind == "serial" and (self.workers or 1) > 1:
            raise UsageError(
                f"--executor serial runs one case at a time; --workers {self.workers} needs processes or ray"
            )

    @property
    def resolved(self) -> str:
        if self.kind is not None:
            return self.kind
        return "processes" if (self.workers or 1) > 1 else "serial"

    def build(self) -> Executor:
        """A new executor of this kind (not started: use it as a context manager, or let ``run`` start it)."""
        kind = self.resolved
        if kind == "serial":
            return SerialExecutor(max_retries=self.max_retries)
        if kind == "processes":
            return ProcessExecutor(workers=self.workers, max_retries=self.max_retries)
        from persistbench.executors.ray import RayExecutor

        return RayExecutor(
            address=self.ray_address,
            cpus_per_task=self.cpus_per_task,
            gpus_per_task=self.gpus_per_task,
            workers=self.workers,
            max_retries=self.max_retries,
        )
