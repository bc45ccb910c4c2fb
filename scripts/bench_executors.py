"""The executors side by side in one process, on the bundled sample: startup, per-case overhead, speed-up.

    python scripts/bench_executors.py [--repeats 5] [--cases 200] [--work DIR]

Three measurements, each the median of ``--repeats`` runs with the workers already started (their startup
is printed on its own):

1. *Overhead per case*: a job that does nothing (``len`` of the key), over ``--cases`` keys, on one worker:
   what the executor adds to every case (dispatch, the per-case lock, the record written by rename).
2. *Overhead per case on real work*: ``score`` of the bundled sample (8 cases) on one worker, against serial.
3. *Speed-up*: ``score`` of the bundled sample on two workers (processes, and a local Ray with
   ``num_cpus=2``), against serial: the target is >= 1.7x on 2 cores.

Scoring uses the protocol's metrics but LPIPS (which needs weights this script does not fetch).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from persistbench.core.infer import InferOptions, infer
from persistbench.core.score import ScoreOptions, score
from persistbench.executors import Executor, Job, ProcessExecutor, SerialExecutor
from persistbench.suites.persistbench.build.download import DownloadOptions, download, resolve_recipes
from persistbench.suites.persistbench.build.sources import SourceOptions

METRICS = ("psnr", "ssim", "iou", "presence", "continuity")


def prepare(work: Path) -> tuple[Path, Path]:
    """The bundled sample reconstructed, and a ``hold`` run on it (not timed)."""
    ds, run = work / "ds", work / "runs" / "hold"
    if not (ds / "cases.jsonl").is_file():
        opts = DownloadOptions(output=ds, sources=SourceOptions(cache=work / "cache"), progress=False)
        assert download(resolve_recipes(None, work / "cache"), opts).ok
    if not (run / "run.json").is_file():
        assert infer(InferOptions(dataset=ds, output=run, model="hold"), progress=False).ok
    return ds, run


def timed(fn, repeats: int) -> float:
    """Median seconds of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def empty_run(ex: Executor, n: int, state: Path) -> None:
    """``n`` cases of a job that does nothing (``len`` of the key)."""
    assert ex.run(Job("bench", len, state), [f"case{i}" for i in range(n)], key_of=str, progress=False).ok


def score_run(ex: Executor, ds: Path, run: Path) -> None:
    assert score(ScoreOptions(pred=run, dataset=ds, metrics=METRICS), ex, progress=False).ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--work", type=Path, default=None, help="Keep the sample and run here (default: a temp dir).")
    args = parser.parse_args()
    from persistbench.executors.ray import RayExecutor

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        ds, run = prepare(work)
        state = work / "bench-state"
        n_score = 8
        print(f"bundled sample: {n_score} cases; {args.repeats} repeats, medians; workers started beforehand\n")

        rows = []
        for name, make in (
            ("serial", lambda w: SerialExecutor()),
            ("processes", lambda w: ProcessExecutor(workers=w)),
            ("ray", lambda w: RayExecutor(num_cpus=2, workers=w)),
        ):
            for workers in (1, 2) if name != "serial" else (1,):
                ex = make(workers)
                t = time.perf_counter()
                ex.__enter__()
                init = time.perf_counter() - t
                empty_run(ex, workers, state)  # starts the workers and gives them a job
                startup = time.perf_counter() - t
                try:
                    empty = timed(lambda ex=ex: empty_run(ex, args.cases, state), args.repeats) / args.cases
                    scored = timed(lambda ex=ex: score_run(ex, ds, run), args.repeats)
                finally:
                    ex.__exit__()
                rows.append((name, workers, init, startup, empty, scored))

        serial_score = rows[0][5]
        head = f"{'executor':10s} {'workers':>7s} {'init s':>8s} {'startup s':>9s} {'empty ms/case':>13s} "
        head += f"{'score s':>8s} {'overhead ms/case':>16s} {'vs serial':>9s}"
        print(head)
        print("-" * len(head))
        for name, workers, init, startup, empty, scored in rows:
            overhead = (scored - serial_score) / n_score * 1000 if workers == 1 else float("nan")
            print(
                f"{name:10s} {workers:7d} {init:8.2f} {startup:9.2f} {empty * 1000:13.2f} {scored:8.2f} "
                f"{overhead:16.1f} {serial_score / scored:8.2f}x"
            )
        print(
            "\ninit: starting the executor (Ray: a local cluster); startup: init + the workers up with a job; "
            "empty: a job doing nothing, per case, on that many workers; overhead: one worker's score time "
            "minus serial's, per case; vs serial: serial's score time over this one's."
        )


if __name__ == "__main__":
    main()
