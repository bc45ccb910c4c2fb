"""Ratings of a pairwise study (pure functions): Bradley–Terry, online Elo, bootstrap intervals and the diagnostics.

A vote compares two runs on one case, shown left and right; its answer is ``left``, ``right``, ``tie``
or ``both_wrong``. For the ratings a tie and "both wrong" are half a win to each side (the
Bradley–Terry likelihood with fractional wins, as Elo scores a draw); how many votes were "both wrong"
is reported beside them.

Bradley–Terry: ``P(i beats j) = p_i / (p_i + p_j)``, fitted by maximum likelihood with Hunter's MM
iteration on the matrix of (fractional) wins plus a prior of one virtual tie between every two runs
(half a win each way), which keeps the estimate finite when a run wins or loses every comparison.
Strengths are reported as Elo-scaled ratings, ``1000 + 400 log10(p_i / geometric mean)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ANSWERS = ("left", "right", "tie", "both_wrong")
SCALE = 400 / math.log(10)  # natural-log strength -> Elo points
PRIOR = 0.5  # virtual wins each way between every two runs
ELO_K = 32.0


@dataclass(frozen=True)
class Vote:
    """One judgment: ``left`` and ``right`` are run indices, ``answer`` one of :data:`ANSWERS`."""

    case: str
    rater: str
    left: int
    right: int
    answer: str
    category: str = ""

    @property
    def left_score(self) -> float:
        """The left run's share of the win: 1, 0 or 1/2."""
        return {"left": 1.0, "right": 0.0}.get(self.answer, 0.5)


def win_matrix(votes: Sequence[Vote], k: int, weights: Sequence[float] | None = None) -> np.ndarray:
    """``(k, k)`` float64: ``W[i, j]`` the (weighted, fractional) wins of run ``i`` over run ``j``."""
    w = np.zeros((k, k))
    for v, weight in zip(votes, weights if weights is not None else [1.0] * len(votes), strict=True):
        w[v.left, v.right] += weight * v.left_score
        w[v.right, v.left] += weight * (1.0 - v.left_score)
    return w


def bradley_terry(wins: np.ndarray, prior: float = PRIOR, tol: float = 1e-12, max_iter: int = 10_000) -> np.ndarray:
    """Log-strengths ``(k,)`` (mean 0) maximising the Bradley–Terry likelihood of ``wins`` (``W[i, j]``: wins of
    ``i`` over ``j``) plus ``prior`` virtual wins each way between every two runs; Hunter's MM iteration."""
    k = len(wins)
    w = wins + prior * (1.0 - np.eye(k))
    n = w + w.T  # comparisons between every two runs
    won = w.sum(axis=1)
    p = np.ones(k)
    for _ in range(max_iter):
        denom = (n / (p[:, None] + p[None, :])).sum(axis=1)
        new = np.where(won > 0, won / np.where(denom > 0, denom, 1.0), 1e-300)
        new /= np.exp(np.mean(np.log(new)))
        if np.max(np.abs(np.log(new) - np.log(p))) < tol:
            p = new
            break
        p = new
    s = np.log(p)
    return s - s.mean()


def elo(votes: Sequence[Vote], k: int, k_factor: float = ELO_K, start: float = 1000.0) -> np.ndarray:
    """Online Elo ratings ``(k,)`` after ``votes`` in their order (ties: half a win)."""
    r = np.full(k, start)
    for v in votes:
        expected = 1.0 / (1.0 + 10 ** ((r[v.right] - r[v.left]) / 400))
        delta = k_factor * (v.left_score - expected)
        r[v.left] += delta
        r[v.right] -= delta
    return r


def bootstrap(votes: Sequence[Vote], k: int, rounds: int = 1000, seed: int = 0) -> np.ndarray:
    """``(rounds, k)`` Bradley–Terry log-strengths of votes resampled over cases and raters together: each
    round draws cases and raters with replacement, and a vote counts as often as its case times its rater."""
    cases = sorted({v.case for v in votes})
    raters = sorted({v.rater for v in votes})
    ci = np.array([cases.index(v.case) for v in votes], int)
    ri = np.array([raters.index(v.rater) for v in votes], int)
    rng = np.random.default_rng(seed)
    out = np.zeros((rounds, k))
    for b in range(rounds):
        case_n = np.bincount(rng.integers(0, len(cases), len(cases)), minlength=len(cases))
        rater_n = np.bincount(rng.integers(0, len(raters), len(raters)), minlength=len(raters))
        out[b] = bradley_terry(win_matrix(votes, k, (case_n[ci] * rater_n[ri]).astype(float)))
    return out


def rate(votes: Sequence[Vote], runs: Sequence[str], rounds: int = 1000, seed: int = 0) -> dict:
    """Everything the study reports about ``votes`` between ``runs``: per run the Bradley–Terry rating with its
    bootstrap 95 % interval, the Elo rating, wins, ties and votes; the win-rate matrix; position bias."""
    k = len(runs)
    wins = win_matrix(votes, k)
    bt = bradley_terry(wins)
    boot = bootstrap(votes, k, rounds, seed) if votes else np.zeros((0, k))
    lo, hi = (np.percentile(boot, q, axis=0) if len(boot) else bt for q in (2.5, 97.5))
    elo_r = elo(votes, k)
    table = []
    for i, name in enumerate(runs):
        mine = [v for v in votes if i in (v.left, v.right)]
        table.append(
            {
                "run": name,
                "bt_rating": 1000 + SCALE * bt[i],
                "bt_interval": [1000 + SCALE * lo[i], 1000 + SCALE * hi[i]],
                "elo": float(elo_r[i]),
                "votes": len(mine),
                "wins": sum((v.left == i) == (v.answer == "left") for v in mine if v.answer in ("left", "right")),
                "ties": sum(v.answer == "tie" for v in mine),
                "both_wrong": sum(v.answer == "both_wrong" for v in mine),
            }
        )
    order = sorted(range(k), key=lambda i: -bt[i])
    games = wins + wins.T
    rates = np.where(games > 0, wins / np.where(games > 0, games, 1), np.nan)
    return {
        "method": "Bradley-Terry maximum likelihood (ties and 'both wrong' as half wins; one virtual tie between "
        "every two runs), Elo-scaled; online Elo (K=32, start 1000) in vote order; 95 % intervals from "
        f"{rounds} bootstrap rounds over cases and raters",
        "runs": [table[i] for i in order],
        "win_rate": {runs[i]: {runs[j]: _num(rates[i, j]) for j in range(k) if j != i} for i in range(k)},
        "position": position_bias(votes),
        "votes": len(votes),
    }


def position_bias(votes: Sequence[Vote]) -> dict:
    """Left and right wins among decisive votes, the left share and a two-sided binomial p-value against 1/2."""
    left = sum(v.answer == "left" for v in votes)
    right = sum(v.answer == "right" for v in votes)
    n = left + right
    p = None
    if n:
        tail = sum(math.comb(n, x) for x in range(0, min(left, right) + 1)) / 2**n
        p = min(1.0, 2 * tail)
    return {"left": left, "right": right, "left_share": left / n if n else None, "p_value": p}


def agreement(votes: Sequence[Vote]) -> dict:
    """Between raters on the same case and pair of runs: how many rater pairs judged it alike (the same winner,
    or both a tie-like answer), over how many such rater pairs."""
    by_item: dict[tuple, dict[str, str]] = {}
    for v in votes:
        a, b = sorted((v.left, v.right))
        outcome = "tie" if v.answer in ("tie", "both_wrong") else str(v.left if v.answer == "left" else v.right)
        by_item.setdefault((v.case, a, b), {})[v.rater] = outcome
    pairs = agree = 0
    for answers in by_item.values():
        vals = list(answers.values())
        for i in range(len(vals)):
            for j in range(i + 1, len(vals)):
                pairs += 1
                agree += vals[i] == vals[j]
    return {"rater_pairs": pairs, "agree": agree, "share": agree / pairs if pairs else None}


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)
