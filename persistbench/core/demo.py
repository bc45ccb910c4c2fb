"""``persistbench demo``: every suite's whole chain, offline, on data made on the spot.

Each suite that has a demo (:meth:`persistbench.core.suite.Suite.demo` returns a
:class:`~persistbench.core.suite.DemoResult`) runs it in turn on one pool of workers: the first registered suite
into the output directory itself,
the others into ``<output>/<name>/``; each writes its report and prints its table. Servers a demo
starts are stopped before it returns, whatever happens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.executors import RunResult


def demo(
    out: str | Path = "persistbench-demo", workers: int = 2, progress: bool = True, echo: Callable[[str], None] = print
) -> dict:
    """Run every suite's demo into ``out`` (new or empty); returns ``{"report", "summaries"}`` of the first
    suite and ``{"<name>_report", "<name>_summaries"}`` of each other."""
    from persistbench.core.suites import SUITES
    from persistbench.executors import ExecutorOptions

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        done = " (a finished demo: open its report.html)" if (out / "report.html").is_file() else ""
        raise PersistbenchError(
            f"{out}: exists and is not empty{done}; to run the demo again, pass --output {out.name}-2 or remove {out}"
        )
    start = time.perf_counter()

    def step(text: str) -> None:
        echo(f"[{time.perf_counter() - start:6.1f} s] {text}")

    made: dict = {}
    with ExecutorOptions(workers=workers).build() as ex:  # one pool of workers for every stage
        for name in SUITES:
            i = len(made) // 2
            result = SUITES[name].demo(out if i == 0 else out / name, ex, progress, step)
            if result is None:
                continue
            echo(result.table)
            prefix = "" if i == 0 else f"{name}_"
            made[f"{prefix}report"], made[f"{prefix}summaries"] = result.report, result.summaries
    reports = [str(v) for k, v in made.items() if k.endswith("report")]
    step(f"done: open {', '.join(reports[:-1])} and {reports[-1]}" if len(reports) > 1 else f"done: open {reports[0]}")
    return made


def checked(result: RunResult) -> RunResult:
    """The result; an error when a case failed."""
    if not result.ok:
        raise PersistbenchError(f"demo: {result.stage} failed:\n{result.text()}")
    return result


def cell(v: float | None, width: int) -> str:
    return f"{'n/a' if v is None else f'{v:.4f}':>{width}s}"
