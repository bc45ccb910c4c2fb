"""The judge as a rater: the study's question put to an OpenAI-compatible judge through the judge backend.

Every case and pair of runs is asked in both orders (run ``i`` left, then right); the two answers are put
back on the runs, and a pair whose orders disagree counts as a tie, which cancels a judge's preference
for a side. The judge sees three images: the context, the left and the right prediction, each a strip of
up to :data:`STRIP` frames evenly spaced. Its reply must be a JSON object ``{"answer": "left" | "right" |
"tie" | "both_wrong"}`` (strict parsing, asked again when invalid, answers cached by the backend). The
votes are stored as rater ``judge:<model>`` with a pair id made of the case and runs, so asking again adds
nothing.
"""

from __future__ import annotations

import numpy as np

from persistbench.arena.ratings import ANSWERS
from persistbench.arena.store import JUDGE_PREFIX, Store, now
from persistbench.arena.study import Study

STRIP = 6
PROMPT = (
    "You compare two predictions of the same scene. Image 1 is the context the models were given; image 2 is the "
    "LEFT prediction and image 3 the RIGHT prediction, each a strip of frames in time order.\n"
    "Question: {question}\n{prompt}"
    'Reply with one JSON object and nothing else: {{"answer": "left"}}, {{"answer": "right"}}, '
    '{{"answer": "tie"}} or {{"answer": "both_wrong"}}.'
)


def strip(frames: tuple[np.ndarray, ...], n: int = STRIP) -> np.ndarray:
    """Up to ``n`` frames evenly spaced, side by side at the first frame's height."""
    import cv2

    idx = np.unique(np.linspace(0, len(frames) - 1, min(n, len(frames))).round().astype(int))
    h = frames[0].shape[0]
    tiles = [
        f if f.shape[0] == h else cv2.resize(f, (max(1, round(f.shape[1] * h / f.shape[0])), h))
        for f in (frames[i] for i in idx)
    ]
    return np.concatenate(tiles, axis=1)


def parse(obj: dict) -> str:
    from persistbench.backends.judge import BadReply

    answer = obj.get("answer") if isinstance(obj, dict) else None
    if answer not in ANSWERS:
        raise BadReply(f"answer must be one of {list(ANSWERS)}")
    return answer


def combine(first: str, second: str) -> str:
    """The answer for ``(i left, j right)`` from ``first`` (asked so) and ``second`` (asked with the sides
    swapped): agreeing orders keep their answer, disagreeing ones make a tie."""
    swapped = {"left": "right", "right": "left"}.get(second, second)
    return first if first == swapped else "tie"


def _request(study: Study, key: str, left: np.ndarray, right: np.ndarray):
    from persistbench.backends.judge import Request

    prompt = study.prompt(key)
    text = PROMPT.format(question=study.question, prompt=f"Prompt given to the models: {prompt}\n" if prompt else "")
    return Request(text, (strip(study.frames(key, "context")), left, right))


def battery(study: Study, count: int = 4) -> list:
    """The arena judge's calibration battery (:mod:`persistbench.core.calibration`): for the first ``count`` cases,
    the ground truth (where the suite has one; else the first run's prediction) against blank grey frames of the
    same size: the truth is the better side, asked with it on the left, then on the right."""
    from persistbench.core.calibration import Item

    out = []
    for case in study.cases[:count]:
        key = study.suite.key(case)
        shown = strip(study.frames(key, "reference") or study.frames(key, study.runs[0]))
        blank = np.full_like(shown, 128)
        out.append(Item(f"{key}/blank", _request(study, key, shown, blank), parse, "left", False))
        out.append(Item(f"{key}/blank", _request(study, key, blank, shown), parse, "right", True))
    return out


def judge_study(study: Study, store: Store, judge, progress: bool = False) -> tuple[int, list[str]]:
    """Ask ``judge`` (a :class:`persistbench.backends.judge.Judge`) about every case and pair of runs in both
    orders; store the combined votes. Returns how many were added and the failures (one line each)."""
    from persistbench.backends.judge import JudgmentFailed

    k = len(study.runs)
    items = [(study.suite.key(c), i, j) for c in study.cases for i in range(k) for j in range(i + 1, k)]
    reqs, keys = [], []
    for key, i, j in items:
        a, b = strip(study.frames(key, study.runs[i])), strip(study.frames(key, study.runs[j]))
        reqs += [_request(study, key, a, b), _request(study, key, b, a)]
        keys.append((key, i, j))
    answers = judge.ask_many(reqs, [parse] * len(reqs))
    name = JUDGE_PREFIX + judge.opts.model
    votes, failures = [], []
    for n, (key, i, j) in enumerate(keys):
        first, second = answers[2 * n], answers[2 * n + 1]
        bad = [a for a in (first, second) if isinstance(a, JudgmentFailed)]
        if bad:
            failures.append(f"{key}: {study.runs[i]} vs {study.runs[j]}: {bad[0]}")
            continue
        votes.append(
            {
                "pair": f"{name}/{key}/{study.runs[i]}/{study.runs[j]}",
                "study": study.id,
                "rater": name,
                "case_key": key,
                "left_run": study.runs[i],
                "right_run": study.runs[j],
                "answer": combine(first.value, second.value),
                "time": now(),
                "page_version": "judge",
            }
        )
    return store.append(votes), failures
