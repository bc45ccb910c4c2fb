"""Upstream's persistent-state question (``AMAP-ML/R2MBench`` at 88e0cd9, ``src/metrics/persistent_state.py``).

Upstream asks its judge with a system prompt and a user prompt of its own, the user prompt before the
two frames (earlier, later) at full resolution, at temperature 0 with up to 4096 tokens, and reads the
reply leniently: after a fenced block's markers are stripped, the first top-level ``{...}`` (braces
counted without regard to strings) that parses as JSON and has a ``score`` convertible by ``float``
gives the score; failing that, the first ``"score": <digits>`` in the text; the score is clamped to
[1, 5]. A reply that gives no score is asked again, up to 4 times in all.

The prompts are upstream's text, which this package does not ship (the repository states no licence):
they are read from the checkout being scored, ``src/metrics/persistent_state.py``, as the two string
constants ``EVAL_SYSTEM_PROMPT`` and ``EVAL_USER_PROMPT`` of its syntax tree (never executed), and a
protocol's ``prompt_sha256`` pins them (:attr:`~persistbench.suites.r2m.pair_video.StateQuestion.sha256`). Where our reading is stricter than upstream's (JSON that
Python's ``json`` takes but a strict parser refuses: ``NaN``, duplicate keys; a ``score`` that is not
finite), the reply is asked again instead of scored: docs/metrics.md lists it.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from pathlib import Path

from persistbench.backends.judge import BadReply
from persistbench.core.errors import PersistbenchError
from persistbench.io.files import parse_json, read_bounded
from persistbench.suites.r2m.pair_video import StateQuestion

PROMPT = "upstream-88e0cd9"  # a protocol's persistent_state.prompt that asks upstream's question
NAMES = ("EVAL_SYSTEM_PROMPT", "EVAL_USER_PROMPT")
ATTEMPTS = 4  # evaluate_frame_pairs_gemini: the first round and max_retries=3 more
_SCORE = re.compile(r'"score"\s*:\s*([0-9]+\.?[0-9]*)')


def read_prompts(path: Path) -> tuple[str, str]:
    """``(system, user)``: the two prompt constants of upstream's ``src/metrics/persistent_state.py`` at ``path``;
    a missing file or constant is refused in one line naming the file."""
    if not path.is_file():
        raise PersistbenchError(f"{path}: not there (upstream's persistent-state prompts are read from it)")
    try:
        tree = ast.parse(read_bounded(path, 1 << 20))
    except (SyntaxError, ValueError) as e:
        raise PersistbenchError(f"{path}: not Python ({str(e).splitlines()[0]})") from None
    except (RecursionError, MemoryError):  # an expression nested past the parser's stack
        raise PersistbenchError(f"{path}: nested too deeply to read as upstream's prompts") from None
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in NAMES
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found[node.targets[0].id] = node.value.value
    missing = [n for n in NAMES if n not in found]
    if missing:
        raise PersistbenchError(f"{path}: no string constant {', '.join(missing)}")
    return found[NAMES[0]], found[NAMES[1]]


def question(path: Path) -> StateQuestion:
    """Upstream's question with the prompts of ``path`` (:func:`read_prompts`), read once per process (and again
    when the file changes)."""
    if not path.is_file():
        raise PersistbenchError(f"{path}: not there (upstream's persistent-state prompts are read from it)")
    st = path.stat()
    return _question(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _question(path: Path, mtime_ns: int, size: int) -> StateQuestion:
    system, user = read_prompts(path)
    return StateQuestion(system, user, True, reply, score, ATTEMPTS)


def _unfenced(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        newline = text.find("\n")
        if newline >= 0:
            text = text[newline + 1 :]
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3].rstrip()
    return text


def _objects(text: str):
    """The top-level ``{...}`` spans of ``text`` as upstream finds them: every brace counts, a closing brace
    at depth 0 makes the depth negative (and no later object is found)."""
    depth, start = 0, -1
    for i, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0 and start >= 0:
                yield text[start : i + 1]
                start = -1


def _number(value: object) -> float | None:
    """``float(value)`` as upstream converts a score (numbers, bools, numeric text), None where it cannot or
    the result is not finite."""
    if isinstance(value, (bool, int, float)):
        out = float(value)
    elif isinstance(value, str):
        try:
            out = float(value)
        except ValueError:
            return None
    else:
        return None
    return out if math.isfinite(out) else None


def reply(text: str) -> dict:
    """``{"score": s}`` of a reply by upstream's reading (see the module's docstring); :class:`BadReply` when it
    gives none."""
    text = _unfenced(text)
    for span in _objects(text):
        try:
            obj = parse_json(span, "the reply")
        except PersistbenchError:
            continue
        if isinstance(obj, dict) and "score" in obj and (s := _number(obj["score"])) is not None:
            return {"score": s}
    m = _SCORE.search(text)
    if m:
        return {"score": float(m.group(1))}
    raise BadReply("no score in the reply (upstream's reading)")


def score(obj: dict) -> float:
    """The score of :func:`reply`'s object, clamped to [1, 5] as upstream clamps it."""
    return max(1.0, min(5.0, obj["score"]))
