"""Which pair a rater sees next (pure): every case and pair of runs before any repeats, then the least certain.

Items are ``(case, i, j)`` with ``i < j`` run indices. While some item has fewer votes than the others, the
next one is drawn among the least-voted; once every item has as many, the next is the item whose outcome
is least certain under the current Bradley–Terry strengths (``p (1 - p)`` with ``p`` the chance that ``i``
wins, divided by one plus its votes, so that a close pair is asked again but not forever). Never the case
the rater saw last (when another is possible). Ties are broken, and left/right chosen, by a random
generator seeded by the study, the rater and their number of votes, so a run of the server is reproducible.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

import numpy as np


def next_pair(
    cases: Sequence[str],
    k: int,
    counts: Counter,
    strengths: np.ndarray,
    last_case: str | None,
    seed: str,
) -> tuple[str, int, int]:
    """``(case, left, right)``: the next item for a rater and its left/right order. ``counts[(case, i, j)]`` are
    the votes so far (``i < j``); ``strengths`` the current log-strengths; ``seed`` names the draw."""
    rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:16], 16))
    items = [(c, i, j) for c in cases for i in range(k) for j in range(i + 1, k)]
    allowed = [it for it in items if it[0] != last_case] or items
    least = min(counts[it] for it in items)
    if any(counts[it] > least for it in items):  # coverage first
        pool = [it for it in allowed if counts[it] == least] or allowed
    else:
        p = 1.0 / (1.0 + np.exp(-(np.array([strengths[i] - strengths[j] for _, i, j in allowed]))))
        score = p * (1 - p) / (1 + np.array([counts[it] for it in allowed]))
        pool = [it for it, s in zip(allowed, score, strict=True) if s >= score.max() - 1e-12]
    case, i, j = pool[int(rng.integers(len(pool)))]
    return (case, i, j) if rng.random() < 0.5 else (case, j, i)
