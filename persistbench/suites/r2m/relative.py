"""R2M-Bench's relative scores of one metric on one video: the means of its revisit (R), baseline (B) and short
(S) pair values, memory gain ``MG = sign (R - B)``, dynamic range ``DR = sign (S - B)`` and validity ``DR > epsilon``
(``sign`` is -1 for a metric where lower is better). Pure functions, shared by our scoring and upstream's result
files."""

from __future__ import annotations

import numpy as np

from persistbench.suites.r2m.upstream_metrics import rounded

KINDS = ("revisit", "baseline", "short")  # the pair kinds, as a pair file names them


def relative(
    values: dict[str, list[float | None]], higher_is_better: bool, epsilon: float, digits: int | None = None
) -> dict:
    """A video's R, B, S (means of the non-failed pair values, rounded to ``digits`` decimals unless None), MG,
    DR and validity for one metric."""
    means = {
        k: (rounded(float(np.mean(v)), digits) if (v := [x for x in values[k] if x is not None]) else None)
        for k in KINDS
    }
    failed = sum(x is None for k in KINDS for x in values[k])
    return {**from_means(means, higher_is_better, epsilon), "failed": failed}


def from_means(means: dict[str, float | None], higher_is_better: bool, epsilon: float) -> dict:
    """R, B, S (``means`` by kind, None where a kind has no value), MG, DR and validity for one metric."""
    r, b, s = (means.get(k) for k in KINDS)
    out = {"revisit": r, "baseline": b, "short": s, "memory_gain": None, "dynamic_range": None, "valid": False}
    if r is None or b is None or s is None:
        return out
    sign = 1.0 if higher_is_better else -1.0
    mg, dr = sign * (r - b), sign * (s - b)
    return {**out, "memory_gain": mg, "dynamic_range": dr, "valid": bool(dr > epsilon)}
