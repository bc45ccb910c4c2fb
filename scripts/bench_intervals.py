"""What the intervals cost: the bootstrap of a classic-v1 summary on 2,000 cases against scoring them.

Runs in one process: (1) ``score`` of the bundled sample's hold run (8 real cases, classic-v1, PSNR and SSIM)
with ``--bootstrap 0`` and with the default 1,000, per case; (2) the intervals of a summary of 2,000
cases (records of classic-v1's shape, five metrics on two splits, two subsets): the scorer's estimands and
1,000 stratified resamples of every number, as ``score`` runs them. Prints medians of ``--repeats`` runs and
the bootstrap's share of scoring 2,000 cases (the per-case time of (1) times 2,000).

    python scripts/bench_intervals.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from bench_executors import prepare, timed  # the sample and its hold run; a median of repeats

from persistbench.core.intervals import summary_blocks
from persistbench.core.score import ScoreOptions, score
from persistbench.suites.persistbench.scoring import estimands

METRICS = ("psnr", "ssim", "iou", "presence", "continuity")


def records(n: int, seed: int = 0) -> list[dict]:
    """``n`` classic-v1 case records (only what the estimands read), half static, half dynamic."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        means = {
            split: {m: (None if rng.random() < 0.05 else float(rng.random())) for m in METRICS}
            for split in ("visible", "invisible")
        }
        out.append({"subset": ("static", "dynamic")[i % 2], "uid": f"case_{i:05d}", "means": means})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ds, run = prepare(Path(tmp))
        n_sample = 8
        per_case = {}
        for resamples in (0, 1000):
            o = ScoreOptions(pred=run, dataset=ds, metrics=("psnr", "ssim"), bootstrap=resamples)
            per_case[resamples] = timed(lambda o=o: score(o, progress=False), args.repeats) / n_sample
    recs = records(args.cases)

    def bootstrap() -> None:
        summary_blocks(estimands(recs), "0" * 64, 1000)

    t_boot = timed(bootstrap, args.repeats)
    est = estimands(recs)
    print(
        f"score, bundled sample (8 cases, psnr+ssim): {per_case[0] * 1000:.1f} ms/case without intervals, "
        f"{per_case[1000] * 1000:.1f} ms/case with (median of {args.repeats})"
    )
    print(f"intervals of {args.cases} cases: {len(est.exprs)} numbers x 1000 resamples in {t_boot * 1000:.0f} ms")
    total = per_case[0] * args.cases
    print(f"share of scoring {args.cases} cases ({total:.0f} s at the sample's rate): {100 * t_boot / total:.2f} %")


if __name__ == "__main__":
    main()
