"""The executors side by side in one process, on the bundled sample: startup, per-case overhead, speed-up.

    python scripts/bench_executors.py [--repeats 5] [--cases 200] [--work DIR]

Four measurements, each the median of ``--repeats`` runs with the workers already started (their startup
is printed on its own):

1. *Overhead per case*: a job that does nothing (``len`` of the key), over ``--cases`` keys, on one worker:
   what the executor adds to every case (dispatch, the per-case lock, the record written by rename).
2. *Overhead per case on real work*: ``score`` of the bundled sample (8 cases) on one worker, against serial.
3. *Speed-up*: ``score`` of the bundled sample on two workers (processes, and a local Ray with
   ``num_cpus=2``), against serial: the target is >= 1.7x on 2 cores.

4. *Per-case cost of a stage on tiny cases*: ``infer`` (``hold``) and ``score`` of ``--tiny`` cases of a suite
   defined here (two 8 x 8 frames a case, a trivial metric), serial and on two processes: what resolving the
   suite, the protocol, the score context and the model costs each case beside the case's own work.

Scoring uses the protocol's metrics but LPIPS (which needs weights this script does not fetch).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from persistbench.core.case import CaseRef, Prediction, Request
from persistbench.core.infer import InferOptions, infer
from persistbench.core.layout import RunLayout
from persistbench.core.protocol import Scorer
from persistbench.core.records import CaseScores
from persistbench.core.runs import case_record
from persistbench.core.schema import metric_list
from persistbench.core.score import ScoreOptions, score
from persistbench.core.suite import Suite
from persistbench.core.suites import SUITES
from persistbench.executors import Executor, Job, ProcessExecutor, SerialExecutor
from persistbench.io.files import read_json, sha256_file, write_json
from persistbench.io.images import read_image
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
    assert score(ScoreOptions(pred=run, dataset=ds, metrics=METRICS), executor=ex, progress=False).ok


# ---------------------------------------------------------------- tiny cases


class TinyScorer(Scorer):
    """The mean absolute difference of the predicted frames to the case's constant level."""

    name = "tiny"
    schema = {"metrics": metric_list(("psnr",))}

    def score_case(self, suite, case, pred, protocol, ctx) -> dict:
        level = int(case.case_id.removeprefix("c")) % 256
        frames = [read_image(f) for f in pred.files]
        values = [float(abs(f.astype(float) - level).mean()) for f in frames]
        return {**CaseScores.common(protocol, ctx.wanted, ctx.unavailable, pred.digest), "metrics": {"psnr": values}}

    def merge(self, new: dict, old: dict) -> dict:
        return new

    def summarise(self, suite, results, protocol, ctx) -> tuple[dict, dict]:
        return {}, {"cases": len(results)}

    def tables(self, summary: dict) -> tuple[list[str], dict[str, str]]:
        return [f"cases: {summary['cases']}"], {"cases": str(summary["cases"])}

    def report_sections(self, runs, advance):
        return "", [], []


class Tiny(Suite):
    """``--tiny`` cases of two constant 8 x 8 frames, listed in ``tiny.json`` (its protocol beside it)."""

    name, title, subsets = "tiny", "Tiny", ("all",)
    scorers = {"tiny-v1": TinyScorer()}
    protocol_dir = Path(tempfile.gettempdir()) / "persistbench-bench-tiny"

    @classmethod
    def detect(cls, root: Path) -> bool:
        return (Path(root) / "tiny.json").is_file()

    def cases(self) -> list[CaseRef]:
        return [CaseRef("all", f"c{i:05d}") for i in range(read_json(self.root / "tiny.json")["cases"])]

    def fingerprint(self) -> str:
        return sha256_file(self.root / "tiny.json")

    def verify(self, progress: bool = False) -> tuple[list[str], int]:
        return [], len(self.cases())

    def request(self, case, num_frames, resolution, oracle) -> Request:
        frame = np.full((8, 8, 3), int(case.case_id.removeprefix("c")) % 256, np.uint8)
        fields = {"uid": case.case_id, "input_frames": np.stack([frame, frame]) / 255.0, "n_targets": 2}
        return Request(fields=fields, n_frames=2, size=(8, 8), record={"size": [8, 8]})

    def read_prediction(self, run, run_info, case) -> Prediction | None:
        layout = RunLayout(Path(run))
        if case_record(layout, case.subset, case.case_id) is None:
            return None
        frames = tuple(sorted(layout.frames_dir(case.subset, case.case_id).glob("*.png")))
        return Prediction(frames, layout.case_json(case.subset, case.case_id))

    def predicted(self, run, run_info) -> set[str]:
        return {f"all.{p.name}" for p in (Path(run) / "all").glob("*") if (p / "case.json").is_file()}


def register_tiny() -> None:
    """The tiny suite in this process's registry (and each worker's: the executors' ``worker_setup``)."""
    Tiny.protocol_dir.mkdir(exist_ok=True)
    write_json(Tiny.protocol_dir / "tiny-v1.json", {"name": "tiny-v1", "metrics": ["psnr"]})
    if "tiny" not in SUITES:
        SUITES.register("tiny", Tiny)


def tiny_costs(work: Path, n: int, repeats: int) -> list[tuple[str, float, float]]:
    """``(executor, infer ms/case, score ms/case)`` on ``n`` tiny cases, serial and on two processes."""
    register_tiny()
    ds = work / "tiny"
    ds.mkdir(parents=True, exist_ok=True)
    write_json(ds / "tiny.json", {"cases": n})
    rows = []
    for name, make in (("serial", SerialExecutor), ("processes", lambda: ProcessExecutor(workers=2))):
        ex = make()
        ex.worker_setup = register_tiny
        with ex:
            runs = iter(range(repeats * 2))

            def infer_once(ex=ex, runs=runs, name=name) -> None:
                out = work / f"tiny-runs-{name}-{next(runs)}"
                assert infer(InferOptions(dataset=ds, output=out, model="hold"), None, ex, progress=False).ok

            t_infer = timed(infer_once, repeats) / n
            run = work / f"tiny-runs-{name}-0"
            t_score = timed(lambda ex=ex, run=run: score_run_tiny(ex, ds, run), repeats) / n
        rows.append((name, t_infer * 1000, t_score * 1000))
    return rows


def score_run_tiny(ex: Executor, ds: Path, run: Path) -> None:
    result = score(ScoreOptions(pred=run, dataset=ds), executor=ex, progress=False)
    assert result.ok, result.text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--work", type=Path, default=None, help="Keep the sample and run here (default: a temp dir).")
    parser.add_argument("--tiny", type=int, default=2000, help="Tiny cases of measurement 4 (0: skip it).")
    parser.add_argument("--only-tiny", action="store_true", help="Measurement 4 alone.")
    args = parser.parse_args()
    if args.only_tiny:
        with tempfile.TemporaryDirectory() as tmp:
            print_tiny(tiny_costs(args.work or Path(tmp), args.tiny, args.repeats), args.tiny, args.repeats)
        return
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
        if args.tiny:
            print_tiny(tiny_costs(work, args.tiny, args.repeats), args.tiny, args.repeats)


def print_tiny(rows: list[tuple[str, float, float]], n: int, repeats: int) -> None:
    print(f"\n{n} tiny cases (two 8 x 8 frames each), {repeats} repeats, medians:")
    print(f"{'executor':10s} {'infer ms/case':>13s} {'score ms/case':>13s}")
    for name, t_infer, t_score in rows:
        print(f"{name:10s} {t_infer:13.2f} {t_score:13.2f}")


if __name__ == "__main__":
    main()
