"""A judge checked before it judges: a battery of questions whose answers are known by construction.

A scorer that asks a judge builds its battery from the dataset at hand (:meth:`Scorer.judge_battery`):
items whose right answer holds by construction, each asked twice, the second time with its two parts
swapped. ``score`` asks the battery first, without the answer cache (it checks the endpoint as it is now),
records accuracy, self-consistency under swaps, refusals and latency with the judge's identity, keeps
every battery of a run (``scores/<protocol>/judge_battery.json``) so that a later one that answers the
same items differently shows drift, and stops a run whose judge is below ``--judge-min-accuracy`` unless
``--judge-force``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import read_json, write_json

BATTERY = "judge_battery.json"


@dataclass(frozen=True)
class Item:
    """One question of a battery: ``id`` names it (the same item in every run of the same dataset),
    ``request`` and ``parse`` ask it (:class:`~persistbench.backends.judge.Request`), ``expected`` is the
    right answer, ``swapped`` whether this is the item with its parts exchanged."""

    id: str
    request: object
    parse: Callable[[dict], object]
    expected: object  # the right answer, or its description where ``accepts`` judges it
    swapped: bool
    accepts: Callable[[object], bool] | None = None  # None: right when equal to ``expected``

    def right(self, answer: object) -> bool:
        return self.accepts(answer) if self.accepts is not None else answer == self.expected


def ask(judge, items: list[Item]) -> dict:
    """Every item asked once (the judge's answer cache is not read: ``judge.cache`` is off); the figures and
    each item's answer. ``judge`` is a :class:`~persistbench.backends.judge.Judge`."""
    from persistbench.backends.judge import JudgmentFailed

    answers, seconds, identities = {}, [], []
    for item in items:
        t0 = time.perf_counter()
        try:
            got = judge.ask(item.request, item.parse)
        except JudgmentFailed as e:
            answers[_key(item)] = {"answer": None, "failed": e.reason}
            continue
        finally:
            seconds.append(time.perf_counter() - t0)
        answers[_key(item)] = {"answer": got.value, "correct": item.right(got.value)}
        if got.judge not in identities:
            identities.append(got.judge)
    return figures(items, answers) | {
        "latency_s": statistics.median(seconds) if seconds else None,
        "identities": identities,
        "answers": answers,
    }


def _key(item: Item) -> str:
    return f"{item.id}{'~swapped' if item.swapped else ''}"


def figures(items: list[Item], answers: dict) -> dict:
    """Accuracy (right answers over items asked, a refusal counting wrong), self-consistency (items right both
    times or wrong both times, over those answered both times: the swap did not change the judgment) and
    refusals (failed judgments by reason)."""
    right = sum(bool(answers[_key(i)].get("correct")) for i in items)
    pairs = {}
    for i in items:  # right or wrong both times: the swap did not change the judgment
        a = answers[_key(i)]
        pairs.setdefault(i.id, []).append(None if a.get("answer") is None else bool(a.get("correct")))
    both = [a for a in pairs.values() if len(a) == 2 and None not in a]
    refusals: dict[str, int] = {}
    for i in items:
        if answers[_key(i)].get("failed"):
            refusals[answers[_key(i)]["failed"]] = refusals.get(answers[_key(i)]["failed"], 0) + 1
    return {
        "items": len(items),
        "accuracy": right / len(items) if items else None,
        "consistency": sum(a == b for a, b in both) / len(both) if both else None,
        "refusals": dict(sorted(refusals.items())),
    }


def check(result: dict, min_accuracy: float, force: bool) -> str | None:
    """The line that stops a run whose judge answers the battery below ``min_accuracy`` (None: it may go on;
    with ``force`` the line is a warning)."""
    accuracy = result["accuracy"]
    if accuracy is not None and accuracy >= min_accuracy:
        return None
    refused = sum(result["refusals"].values())
    return (
        f"the judge answered {result['items'] - refused} of the {result['items']} calibration questions, "
        f"{100 * (accuracy or 0):.0f}% right (--judge-min-accuracy {min_accuracy:g}); "
        + ("going on (--judge-force)" if force else "check --judge-url/--judge-model, or pass --judge-force")
    )


def record(folder: Path, result: dict, date: str) -> None:
    """Append ``result`` to the run's batteries in ``folder`` (``judge_battery.json``: ``{"batteries": [...]}``,
    oldest first)."""
    write_json(folder / BATTERY, {"batteries": [*batteries(folder), {"date": date, **result}]})


def batteries(folder: Path) -> list[dict]:
    """The run's batteries in ``folder``, oldest first (none: an empty list); a file that is not one is refused
    in one line naming it."""
    path = folder / BATTERY
    if not path.is_file():
        return []
    data = read_json(path)
    entries = data.get("batteries") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("answers"), dict) and isinstance(e.get("items"), int) for e in entries
    ):
        raise PersistbenchError(f"{path}: not a judge battery file (a 'batteries' list of results)")
    return entries


def latest(folder: Path) -> dict | None:
    """The last battery's figures (without its answers), for the summary; None when the run has none."""
    found = batteries(folder)
    return None if not found else {k: v for k, v in found[-1].items() if k != "answers"}


def md_lines(cal: dict | None) -> list[str]:
    """``summary.md``'s line on the judge's calibration."""
    if not cal:
        return []
    pct = lambda v: "n/a" if v is None else f"{100 * v:.0f}%"  # noqa: E731
    refused = ", ".join(f"{k}: {n}" for k, n in cal.get("refusals", {}).items()) or "none"
    line = (
        f"Judge calibration ({cal.get('date')}): {cal['items']} questions with known answers, accuracy "
        f"{pct(cal.get('accuracy'))}, consistent under swaps {pct(cal.get('consistency'))}, refusals {refused}, "
        f"median latency {cal.get('latency_s') or 0:.2f} s."
    )
    return [
        f"**{line} Below --judge-min-accuracy; judged anyway (--judge-force).**\n" if cal.get("forced") else line + "\n"
    ]


def drift(a: dict, b: dict) -> list[str]:
    """The items two batteries (of runs on one dataset) both answered, differently: ``a``'s then ``b``'s."""
    out = []
    for key, x in a.get("answers", {}).items():
        y = b.get("answers", {}).get(key)
        if y is not None and x.get("answer") is not None and y.get("answer") is not None and x["answer"] != y["answer"]:
            out.append(key)
    return sorted(out)
