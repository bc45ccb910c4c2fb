"""persistbench.core.stats: bootstrap intervals by their coverage on simulated benchmarks, and against
scipy.stats on the same data; the paired permutation test exact on small inputs; Holm; rank intervals.

``PERSISTBENCH_COVERAGE_SIMS=1000 pytest tests/test_stats.py`` runs the coverage check with the budget of the
closing note (1,000 simulated benchmarks of 200 units, 1,000 resamples each); CI runs 300 of them.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import scipy.stats

from persistbench.core import stats as st

SIMS = int(os.environ.get("PERSISTBENCH_COVERAGE_SIMS", "300"))


def mean_units(x: np.ndarray, strata: int = 2) -> tuple[st.Units, st.Mean]:
    n = len(x)
    keys = tuple(f"{i:05d}" for i in range(n))
    return st.Units(keys, tuple(f"s{i % strata}" for i in range(n)), ("v", "n"), np.stack([x, np.ones(n)], 1)), st.Mean(
        "v", "n"
    )


def nmr_units(mg: np.ndarray, dr: np.ndarray) -> tuple[st.Units, st.Ratio]:
    n = len(mg)
    keys = tuple(f"{i:05d}" for i in range(n))
    units = st.Units(keys, ("t",) * n, ("mg", "dr", "n"), np.stack([mg, dr, np.ones(n)], 1))
    return units, st.Ratio("mg", "dr", "n", 1e-8)


def coverage(draw, truth: float, build, n: int = 200, resamples: int = 1000) -> float:
    rng = np.random.default_rng(12345)
    hits = 0
    for k in range(SIMS):
        units, expr = build(*draw(rng, n))
        interval = st.bootstrap(units, {"x": expr}, resamples, k)["x"]
        hits += interval.low <= truth <= interval.high
    return hits / SIMS


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,draw,truth,build",
    [
        ("normal", lambda r, n: (r.normal(3.0, 2.0, n),), 3.0, mean_units),
        ("skewed", lambda r, n: (r.lognormal(0.0, 0.75, n),), math.exp(0.75**2 / 2), mean_units),
        ("bounded", lambda r, n: (r.beta(0.5, 2.0, n),), 0.2, mean_units),  # in [0, 1], piled up near 0
        ("nmr", lambda r, n: (r.normal(0.3, 0.5, n), r.gamma(2.0, 0.5, n)), 0.3 / (1.0 + 1e-8), nmr_units),
    ],
)
def test_95_percent_intervals_contain_the_truth_93_to_97_percent_of_the_time(name, draw, truth, build):
    assert 0.93 <= coverage(draw, truth, build) <= 0.97


def test_the_percentile_interval_is_scipys_on_the_same_data_within_monte_carlo_error():
    """Both with 20,000 resamples of 300 values; the endpoints' Monte-Carlo error is about 0.03 standard
    errors of the mean, so 0.1 of one is the tolerance."""
    x = np.random.default_rng(1).lognormal(0.0, 0.8, 300)
    units, expr = mean_units(x, strata=1)
    ours = st.bootstrap(units, {"m": expr}, 20_000, 7)["m"]
    theirs = scipy.stats.bootstrap((x,), np.mean, n_resamples=20_000, method="percentile", random_state=3)
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert abs(ours.low - theirs.confidence_interval.low) < 0.1 * se
    assert abs(ours.high - theirs.confidence_interval.high) < 0.1 * se
    assert ours.se == pytest.approx(theirs.standard_error, rel=0.05)
    assert st.point(units, expr) == pytest.approx(x.mean(), abs=1e-12)


def test_resamples_keep_each_stratum_whole_and_are_reproducible():
    strata = ("a",) * 3 + ("b",) * 7
    w = st.resample_weights(strata, 500, 9)
    assert w.shape == (500, 10) and (w[:, :3].sum(axis=1) == 3).all() and (w[:, 3:].sum(axis=1) == 7).all()
    assert np.array_equal(w, st.resample_weights(strata, 500, 9))
    assert not np.array_equal(w, st.resample_weights(strata, 500, 10))
    assert st.seed_of("protocol", "keys") == st.seed_of("protocol", "keys") != st.seed_of("protocol", "keys2")


def test_a_mean_counts_only_units_with_a_value_and_a_mean_of_means_weighs_them_equally():
    # stratum a: values 1, 3 (and one missing); stratum b: 10
    values = np.array([[1.0, 1.0], [3.0, 1.0], [0.0, 0.0], [10.0, 1.0]])
    units = st.Units(("1", "2", "3", "4"), ("a", "a", "a", "b"), ("v", "n"), values)
    a, b = st.Mean("v", "n", ("a",)), st.Mean("v", "n", ("b",))
    assert st.point(units, a) == 2.0 and st.point(units, st.Mean("v", "n")) == pytest.approx(14 / 3)
    assert st.point(units, st.MeanOf((a, b))) == 6.0 and st.point(units, st.Difference(b, a)) == 8.0
    assert st.point(units, st.Scaled(100, a)) == 200.0
    assert st.point(units.subset(["3"]), a) is None  # no unit with a value: no number
    assert st.point(units.subset(["3", "4"]), st.MeanOf((a, b))) == 10.0  # the part without one left out


def _paired_units(a: np.ndarray, b: np.ndarray):
    ua, expr = mean_units(a, strata=1)
    ub, _ = mean_units(b, strata=1)
    return ua, ub, expr


def test_the_sign_flip_test_is_exact_on_small_inputs():
    """12 paired cases: every one of the 4,096 swaps enumerated, as scipy's exact paired permutation test."""
    rng = np.random.default_rng(4)
    a = rng.normal(0.5, 1.0, 12)
    b = a - rng.normal(0.4, 0.6, 12)
    ua, ub, expr = _paired_units(a, b)
    ours = st.paired(ua, ub, {"m": expr}, 2000, 0, 5)["m"]
    theirs = scipy.stats.permutation_test(
        (a, b), lambda x, y: np.mean(x) - np.mean(y), permutation_type="samples", n_resamples=np.inf
    )
    assert ours.exact and ours.p == pytest.approx(theirs.pvalue, abs=1e-12)
    assert ours.difference == pytest.approx(np.mean(a - b), abs=1e-12)
    d = a - b
    assert ours.effect == pytest.approx(d.mean() / d.std(ddof=1), rel=0.1)  # d_z, up to the bootstrap's error


def test_the_sign_flip_test_and_paired_bootstrap_agree_with_scipy_on_larger_inputs():
    """60 paired cases: 20,000 random swaps each side (Monte-Carlo error of p about 0.003: tolerance 0.015);
    the paired bootstrap's interval against scipy's (paired) within 0.1 standard errors."""
    rng = np.random.default_rng(8)
    a = rng.normal(0.0, 1.0, 60)
    b = a - rng.normal(0.25, 1.0, 60)
    ua, ub, expr = _paired_units(a, b)
    ours = st.paired(ua, ub, {"m": expr}, 20_000, 20_000, 11)["m"]
    theirs = scipy.stats.permutation_test(
        (a, b), lambda x, y: np.mean(x) - np.mean(y), permutation_type="samples", n_resamples=20_000, random_state=2
    )
    assert not ours.exact and abs(ours.p - theirs.pvalue) < 0.015
    boot = scipy.stats.bootstrap(
        (a, b),
        lambda x, y: np.mean(x) - np.mean(y),
        paired=True,
        n_resamples=20_000,
        method="percentile",
        random_state=2,
    )
    se = (a - b).std(ddof=1) / math.sqrt(60)
    assert abs(ours.low - boot.confidence_interval.low) < 0.1 * se
    assert abs(ours.high - boot.confidence_interval.high) < 0.1 * se


def test_a_paired_ratio_swaps_whole_units():
    """NMR: a unit's memory gain and dynamic range move together; identical runs differ by nothing (p = 1)."""
    rng = np.random.default_rng(3)
    mg, dr = rng.normal(0.3, 0.5, 15), rng.gamma(2.0, 0.5, 15)
    ua, expr = nmr_units(mg, dr)
    ub, _ = nmr_units(mg - 0.5, dr)
    same = st.paired(ua, ua, {"r": expr}, 500, 0, 1)["r"]
    assert same.difference == 0.0 and same.p == 1.0 and same.exact
    better = st.paired(ua, ub, {"r": expr}, 1000, 0, 1)["r"]
    assert better.difference == pytest.approx(0.5 / (dr.mean() + 1e-8), rel=1e-12) and better.p < 0.01
    assert better.low > 0


def test_holm():
    assert st.holm([0.01, 0.04, 0.03, None]) == [0.03, 0.06, 0.06, None]
    assert st.holm([0.5, 0.9]) == [1.0, 1.0] and st.holm([0.02, 0.9]) == [0.04, 0.9]


def test_rank_intervals_do_not_order_runs_whose_resamples_cross():
    rng = np.random.default_rng(0)
    best = rng.normal(10, 0.1, 1001)
    close = [rng.normal(5, 1.0, 1001), rng.normal(5.1, 1.0, 1001)]
    ranks = st.rank_intervals(np.stack([best, *close], 1), higher_is_better=True)
    assert ranks[0] == (1, 1, 1)
    assert {r[1:] for r in ranks[1:]} == {(2, 3)}  # the two close runs: either may be second


def test_the_minimum_detectable_difference():
    assert st.detectable(1.0) == pytest.approx(2.8016 * math.sqrt(2), rel=1e-4) and st.detectable(None) is None
