"""How sure a summary number is: bootstrap intervals over a run's units, paired comparisons of runs, ranks.

Pure functions on arrays (docs/metrics.md, "Intervals and comparisons"). A suite's scorer describes its
summary as :class:`Units` (one row per unit, the case or video a resample draws whole: its stratum and
its columns of sums) and an expression per summary number (:class:`Mean`, :class:`Ratio`, :class:`MeanOf`,
:class:`Difference`, :class:`Scaled`) that gives that number from the units' column sums. A resample is a
row of counts, how often each unit is drawn (stratified: each stratum keeps its size), so every resample
of every number is one matrix product: no Python loop per resample. With every count 1 an expression
gives the summary's own number.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
Z_975, Z_80 = 1.959963984540054, 0.8416212335729143  # standard normal quantiles: 97.5 % and 80 %
EXACT_BELOW = 20  # paired permutation tests enumerate every sign flip below this many units


@dataclass(frozen=True)
class Units:
    """``values[i, j]``: unit ``keys[i]``'s contribution to column ``columns[j]`` (0 where it has none: a
    mean's count column says which units have a value); ``strata[i]`` the stratum a resample keeps the
    size of."""

    keys: tuple[str, ...]
    strata: tuple[str, ...]
    columns: tuple[str, ...]
    values: np.ndarray  # (n, c) float64

    def __post_init__(self) -> None:
        if self.values.shape != (len(self.keys), len(self.columns)) or len(self.strata) != len(self.keys):
            raise ValueError("units: keys, strata, columns and values do not fit together")

    def subset(self, keys: Sequence[str]) -> Units:
        """These units only, in the order of ``keys`` (each of which must be one of ``self.keys``)."""
        at = {k: i for i, k in enumerate(self.keys)}
        idx = [at[k] for k in keys]
        return Units(tuple(keys), tuple(self.strata[i] for i in idx), self.columns, self.values[idx])

    def fingerprint(self) -> str:
        """sha256 of the sorted unit keys, one a line: which cases a number stands on."""
        return fingerprint(self.keys)


@dataclass(frozen=True)
class Estimands:
    """A summary's numbers as expressions over its units: ``exprs`` name -> expression (a name is the
    number's ``leaderboard.csv`` column); ``unit`` says what a unit is (``cases``, ``videos``, ``samples``),
    ``strata`` what keeps its size in a resample (None: nothing); ``headline`` the numbers that rank and
    compare runs, each with whether higher is better."""

    units: Units
    exprs: dict[str, object]
    unit: str
    strata: str | None
    headline: dict[str, bool]


def fingerprint(keys: Sequence[str]) -> str:
    return hashlib.sha256("".join(f"{k}\n" for k in sorted(keys)).encode()).hexdigest()


class Sums:
    """Column sums of resampled units, per stratum: ``per_stratum[b, s, j]`` = the sum of column ``j`` over
    stratum ``s``'s units in resample ``b``."""

    def __init__(self, units: Units, weights: np.ndarray):
        self.strata = sorted(set(units.strata))
        self.column = {c: j for j, c in enumerate(units.columns)}
        self.per_stratum = np.zeros((weights.shape[0], len(self.strata), len(units.columns)))
        members = np.asarray(units.strata)
        for s, name in enumerate(self.strata):
            idx = np.nonzero(members == name)[0]
            self.per_stratum[:, s, :] = weights[:, idx] @ units.values[idx]

    def total(self, column: str, strata: tuple[str, ...] | None) -> np.ndarray:
        """``(B,)`` sums of ``column`` over ``strata`` (None: all)."""
        j = self.column[column]
        if strata is None:
            return self.per_stratum[:, :, j].sum(axis=1)
        idx = [self.strata.index(s) for s in strata if s in self.strata]
        return self.per_stratum[:, idx, j].sum(axis=1)


def seed_sums(seeds: Sequence[Units], weights: np.ndarray, seed: int) -> Sums:
    """Sums over a group of runs of one model with different seeds (the same units and columns): each unit a
    resample draws is drawn again from one of the seeds, uniformly (cases resampled, then seeds within each
    case), so that the spread includes the seeds' (two-stage bootstrap). One seed: :class:`Sums` itself."""
    if len(seeds) == 1:
        return Sums(seeds[0], weights)
    rng = np.random.default_rng(seed + 2)
    split = rng.multinomial(weights.astype(np.int64), np.full(len(seeds), 1.0 / len(seeds)))  # (B, n, S)
    out = Sums(seeds[0], split[:, :, 0].astype(float))
    for k in range(1, len(seeds)):
        out.per_stratum += Sums(seeds[k], split[:, :, k].astype(float)).per_stratum
    return out


def seed_mean(seeds: Sequence[Units]) -> Units:
    """The seeds' units averaged, column by column: a group's units for the paired permutation test."""
    first = seeds[0]
    return Units(first.keys, first.strata, first.columns, np.mean([u.values for u in seeds], axis=0))


def seed_values(seeds: Sequence[Units], expr) -> tuple[float, float | None]:
    """A number over a group of seeds: the mean of each seed's value, and their standard deviation (None for
    one seed); NaN when a seed has none."""
    values = [float(expr(Sums(u, np.ones((1, len(u.keys)))))[0]) for u in seeds]
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else None


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Mean:
    """``sum(num) / sum(count)`` over the units of ``strata`` (None: all): a mean over the units that have a
    value, when ``num`` holds value x has-value and ``count`` has-value. NaN where no unit has one."""

    num: str
    count: str
    strata: tuple[str, ...] | None = None

    def __call__(self, sums: Sums) -> np.ndarray:
        n = sums.total(self.count, self.strata)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, sums.total(self.num, self.strata) / np.where(n > 0, n, 1), np.nan)


@dataclass(frozen=True)
class Ratio:
    """``mean(num) / (mean(den) + epsilon)`` over the units with ``count``: R2M-Bench's NMR of a trajectory,
    mean memory gain over mean dynamic range of the valid videos."""

    num: str
    den: str
    count: str
    epsilon: float
    strata: tuple[str, ...] | None = None

    def __call__(self, sums: Sums) -> np.ndarray:
        n = sums.total(self.count, self.strata)
        safe = np.where(n > 0, n, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = (sums.total(self.num, self.strata) / safe) / (
                sums.total(self.den, self.strata) / safe + self.epsilon
            )
        return np.where(n > 0, value, np.nan)


@dataclass(frozen=True)
class MeanOf:
    """The mean of ``parts`` that have a value (NaN where none has): a mean of means, each weighing equally."""

    parts: tuple

    def __call__(self, sums: Sums) -> np.ndarray:
        values = np.stack([p(sums) for p in self.parts])
        have = ~np.isnan(values)
        n = have.sum(axis=0)
        return np.where(n > 0, np.where(have, values, 0.0).sum(axis=0) / np.where(n > 0, n, 1), np.nan)


@dataclass(frozen=True)
class Difference:
    """``a - b`` (a gap: visible minus invisible)."""

    a: object
    b: object

    def __call__(self, sums: Sums) -> np.ndarray:
        return self.a(sums) - self.b(sums)


@dataclass(frozen=True)
class Scaled:
    """``factor`` x ``part`` (scores x 100)."""

    factor: float
    part: object

    def __call__(self, sums: Sums) -> np.ndarray:
        return self.factor * self.part(sums)


# ---------------------------------------------------------------- resampling


def seed_of(*parts: str) -> int:
    """A resampling seed from strings (the protocol's sha256, the units' fingerprint): the same inputs give
    the same resamples whatever the workers, shards or restarts."""
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:6], "little")  # exact in JSON readers


def resample_weights(strata: Sequence[str], resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` counts: how often each unit is drawn in each resample, with replacement within its
    stratum (each stratum keeps its size)."""
    rng = np.random.default_rng(seed)
    members = np.asarray(strata)
    weights = np.zeros((resamples, len(members)))
    for name in sorted(set(strata)):
        idx = np.nonzero(members == name)[0]
        m = len(idx)
        drawn = rng.integers(0, m, size=(resamples, m)) + (np.arange(resamples) * m)[:, None]
        weights[:, idx] = np.bincount(drawn.ravel(), minlength=resamples * m).reshape(resamples, m)
    return weights


def point(units: Units, expr) -> float | None:
    """The number itself (every unit once); None where it has no value."""
    value = float(expr(Sums(units, np.ones((1, len(units.keys)))))[0])
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class Interval:
    """A number's bootstrap percentile interval and the spread of its resamples (their standard deviation:
    the standard error); ``missing`` resamples gave no value (a stratum drawn without one)."""

    low: float | None
    high: float | None
    se: float | None
    missing: int

    def to_json(self) -> list:
        return [self.low, self.high]


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> Interval:
    """The ``level`` percentile interval (linear interpolation, as ``numpy.percentile``) of ``(B,)``
    resampled values, NaNs left out and counted."""
    ok = values[~np.isnan(values)]
    if len(ok) < 2:
        return Interval(None, None, None, int(len(values) - len(ok)))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ok, [tail, 100 - tail])
    return Interval(float(low), float(high), float(np.std(ok, ddof=1)), int(len(values) - len(ok)))


def bootstrap(units: Units, exprs: dict[str, object], resamples: int, seed: int) -> dict[str, Interval]:
    """Each expression's percentile interval over the same ``resamples`` stratified resamples of ``units``."""
    sums = Sums(units, resample_weights(units.strata, resamples, seed))
    return {name: percentile_interval(expr(sums)) for name, expr in exprs.items()}


def detectable(se: float | None, power_z: float = Z_80, alpha_z: float = Z_975) -> float | None:
    """The smallest difference between two runs of this spread that a two-sided 5 % test finds with 80 %
    power: ``(z_0.975 + z_0.8) sqrt(2) se``, ``se`` the number's standard error (two independent runs of the
    same spread; a paired comparison of correlated runs can see less)."""
    return None if se is None else (alpha_z + power_z) * math.sqrt(2.0) * se


# ---------------------------------------------------------------- paired comparisons


@dataclass(frozen=True)
class Paired:
    """A and B on the same units: each one's value, the difference A - B, its paired-bootstrap interval, the
    two-sided paired permutation p-value (``exact``: every swap enumerated), and the effect size (the
    difference over the standard deviation of a unit's difference, the bootstrap's standard error times
    sqrt(units): Cohen's d_z for a mean; None when the differences do not vary)."""

    value_a: float | None
    value_b: float | None
    difference: float | None
    low: float | None
    high: float | None
    p: float | None
    exact: bool
    effect: float | None
    units: int

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _swap_sums(a: Units, b: Units, flips: np.ndarray) -> tuple[Sums, Sums]:
    """Sums of A and B where unit ``i`` of resample ``r`` is swapped between them when ``flips[r, i]``."""
    ones = np.ones_like(flips)
    delta = Units(a.keys, a.strata, a.columns, b.values - a.values)
    sa, sb, sd = Sums(a, ones), Sums(b, ones), Sums(delta, flips)
    sa.per_stratum = sa.per_stratum + sd.per_stratum
    sb.per_stratum = sb.per_stratum - sd.per_stratum
    return sa, sb


def _flips(n: int, permutations: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Which units each permutation swaps: all ``2**n`` ways below :data:`EXACT_BELOW` units, else drawn."""
    if n < EXACT_BELOW:
        return ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(float), True
    return rng.integers(0, 2, size=(permutations, n)).astype(float), False


def paired(
    a: Units | Sequence[Units],
    b: Units | Sequence[Units],
    exprs: dict[str, object],
    resamples: int,
    permutations: int,
    seed: int,
    chunk: int = 1 << 14,
) -> dict[str, Paired]:
    """Compare each of ``exprs`` on runs A and B over the same units (same keys and columns, in the same
    order): the same resamples and swaps serve every expression. A side may be a group of seeds (a sequence
    of units): its value is the mean over its seeds, its resamples draw seeds within cases
    (:func:`seed_sums`), and the permutation test swaps its seed-averaged units."""
    seeds_a, seeds_b = ([x] if isinstance(x, Units) else list(x) for x in (a, b))
    a, b = seed_mean(seeds_a), seed_mean(seeds_b)
    if a.keys != b.keys or a.columns != b.columns:
        raise ValueError("paired: the runs' units differ")
    n = len(a.keys)
    observed = {name: (seed_values(seeds_a, e)[0], seed_values(seeds_b, e)[0]) for name, e in exprs.items()}
    live = {name: e for name, e in exprs.items() if not math.isnan(observed[name][0] - observed[name][1])}
    w = resample_weights(a.strata, resamples, seed)
    wa, wb = seed_sums(seeds_a, w, seed), seed_sums(seeds_b, w, seed + 7)
    intervals = {name: percentile_interval(e(wa) - e(wb)) for name, e in live.items()}
    flips, exact = _flips(n, permutations, np.random.default_rng(seed + 1))
    extreme = dict.fromkeys(live, 0)
    total = dict.fromkeys(live, 0)
    for start in range(0, len(flips), chunk):
        sa, sb = _swap_sums(a, b, flips[start : start + chunk])
        for name, e in live.items():
            stat = e(sa) - e(sb)
            stat = stat[~np.isnan(stat)]
            far = abs(observed[name][0] - observed[name][1]) * (1 - 1e-12)  # equal up to summation order
            extreme[name] += int(np.count_nonzero(np.abs(stat) >= far))
            total[name] += len(stat)
    out = {}
    for name in exprs:
        va, vb = observed[name]
        if name not in live:
            out[name] = Paired(_num(va), _num(vb), None, None, None, None, False, None, n)
            continue
        iv, diff = intervals[name], va - vb
        p = extreme[name] / total[name] if exact else (extreme[name] + 1) / (total[name] + 1)
        spread = (iv.se or 0.0) * math.sqrt(n)
        effect = diff / spread if spread > 1e-9 * max(1.0, abs(diff)) else None  # None: the units do not vary
        out[name] = Paired(va, vb, diff, iv.low, iv.high, min(1.0, p), exact, effect, n)
    return out


def _num(v: float) -> float | None:
    return None if math.isnan(v) else v


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of ``pvalues`` (None stays None and does not count)."""
    known = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(known)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def rank_intervals(values: np.ndarray, higher_is_better: bool, level: float = LEVEL) -> list[tuple[int, int, int]]:
    """Per run ``(rank, low, high)``: its rank among the runs (1 = best) on the number itself (row 0 of
    ``values``, ``(B + 1, runs)``) and the ``level`` percentile interval of its ranks over the resamples
    (rows 1..B). Ties share the best rank; a run without a value in a resample ranks last there."""
    v = np.where(np.isnan(values), -np.inf if higher_is_better else np.inf, values)
    v = -v if higher_is_better else v
    ranks = (v[:, :, None] > v[:, None, :]).sum(axis=2) + 1  # how many runs are strictly better, plus one
    tail = (1 - level) / 2 * 100
    low = np.floor(np.percentile(ranks[1:], tail, axis=0)).astype(int)
    high = np.ceil(np.percentile(ranks[1:], 100 - tail, axis=0)).astype(int)
    return [(int(ranks[0, j]), int(low[j]), int(high[j])) for j in range(values.shape[1])]
