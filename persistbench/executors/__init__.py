"""Executors: how a stage's cases reach workers (serial, local processes, Ray). See :mod:`.base`."""

from __future__ import annotations

from persistbench.executors.base import (
    EXECUTORS,
    Executor,
    ExecutorOptions,
    Job,
    Outcome,
    RunResult,
    Selection,
    Shard,
    check_sharding,
    read_records,
)
from persistbench.executors.local import ProcessExecutor, SerialExecutor, die_with_parent

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
    "check_sharding",
    "die_with_parent",
    "read_records",
]
