"""Scoring protocols: JSON files that are the single source of every scoring parameter.

A protocol is shipped (``persistbench/data/protocols/<name>.json``, linked from ``configs/``) or a
file the user passes; either way it is untrusted JSON, checked against the schema of its scorer
(:attr:`persistbench.core.scorer.Scorer.schema`): every field is declared there, a number with its
bounds or the values it may take, and each one acts on the scores. The scorer is chosen here and
only here (:func:`choose_scorer`): a shipped protocol's name names it; any other file gets the
suite's scorer whose schema its fields match best. A protocol whose content differs from the
shipped one of its name scores into ``scores/<name>-<sha256[:8]>/``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import read_json
from persistbench.io.limits import MAX_PIXELS, MAX_SIDE
from persistbench.io.names import name_problem
from persistbench.metrics.registry import METRICS

if TYPE_CHECKING:
    from persistbench.core.scorer import Scorer

Check = Callable[[object], str | None]  # a field's problem, or None


@dataclass(frozen=True)
class Protocol:
    name: str
    config: dict
    sha256: str  # of the canonical JSON: recorded in every output
    dirname: str  # scores/<dirname>/: the name, or name-<sha256[:8]> for a protocol changed from the shipped one
    scorer: Scorer | None = field(default=None, compare=False, repr=False)  # who scores it (chosen when loaded)

    @property
    def metrics(self) -> tuple[str, ...]:
        """What the protocol scores by default."""
        return tuple(self.config["metrics"])

    @property
    def extras(self) -> tuple[str, ...]:
        """What it scores only when asked (``--metrics``): the protocol's ``extras``, where its suite has them."""
        return tuple(self.config.get("extras", ()))

    def params(self, metric: str) -> dict:
        """The parameters of ``metric`` (its section of the protocol; empty when it has none)."""
        section = METRICS[metric].params
        return dict(self.config.get(section, {})) if section else {}


# ---------------------------------------------------------------- schema building blocks


def number(lo: float, hi: float, integer: bool = False, odd: bool = False) -> Check:
    def check(v: object) -> str | None:
        kinds = (int,) if integer else (int, float)
        if isinstance(v, bool) or not isinstance(v, kinds) or not lo <= v <= hi or (odd and v % 2 == 0):
            return f"must be {'an odd ' if odd else 'an ' if integer else 'a '}{'integer' if integer else 'number'} in [{lo}, {hi}]"
        return None

    return check


def interval(lo: float, hi: float) -> Check:
    """``[low, high]`` with ``lo <= low <= high <= hi``."""

    def check(v: object) -> str | None:
        nums = (
            isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
        )
        return None if nums and lo <= v[0] <= v[1] <= hi else f"must be [low, high] within [{lo}, {hi}]"

    return check


def one_of(*values: object) -> Check:
    def check(v: object) -> str | None:
        return None if v in values and type(v) in {type(x) for x in values} else f"must be one of {list(values)}"

    return check


def statement(text: str) -> Check:
    """A field that states in words a rule the scorer's code implements (how it aggregates, what it scores): the
    protocol file documents the rule, the code does not read it, so it must read exactly ``text``."""

    def check(v: object) -> str | None:
        return None if v == text else f"must read exactly {text!r} (it states the scorer's rule, which is code)"

    return check


def size_hw(v: object) -> str | None:
    """A frame size ``[height, width]``: sides in [16, 8192], at most 4K UHD in pixels, aspect at most 8."""
    ok = isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    if not ok or not all(16 <= x <= MAX_SIDE for x in v):
        return f"must be [height, width], integers in [16, {MAX_SIDE}]"
    if v[0] * v[1] > MAX_PIXELS or max(v) > 8 * min(v):
        return f"must hold at most {MAX_PIXELS} pixels (4K UHD), with sides at most 8 times apart"
    return None


def text(shortest: int, longest: int) -> Check:
    """A string of ``shortest`` to ``longest`` characters, printable (no control characters)."""

    def check(v: object) -> str | None:
        ok = isinstance(v, str) and shortest <= len(v) <= longest and v.isprintable()
        return None if ok else f"must be a printable string of {shortest} to {longest} characters"

    return check


def sha256_hex(v: object) -> str | None:
    """A sha256 digest: 64 lowercase hexadecimal digits."""
    return None if isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) else "must be a sha256 (64 hex digits)"


def section(fields: dict[str, Check]) -> Check:
    """A JSON object with exactly ``fields``."""

    def check(v: object) -> str | None:
        if not isinstance(v, dict):
            return "must be a JSON object"
        for key in sorted(set(v) ^ set(fields)):
            return f"{key}: {'unknown field' if key in v else 'missing'}"
        for key, field_check in fields.items():
            problem = field_check(v[key])
            if problem:
                return f"{key}: {problem}"
        return None

    return check


def optional(check: Check) -> Check:
    """``null``, or a value ``check`` accepts."""

    def inner(v: object) -> str | None:
        return (
            None
            if v is None
            else (None if check(v) is None else f"must be null or {check(v).removeprefix('must be ')}")
        )

    return inner


def name_list(v: object) -> str | None:
    """A list of names or glob patterns (letters, digits, ``_ - . * ? [ ]``)."""
    ok = isinstance(v, list) and all(isinstance(x, str) and re.fullmatch(r"[A-Za-z0-9_.*?\[\]-]{1,200}", x) for x in v)
    return None if ok else "must be a list of names or glob patterns"


# The frame metrics' sections, shared by the suites that score frames against a reference.
PSNR_SECTION = section({"data_range": one_of(1.0), "cap_db": number(1.0, 1000.0)})
SSIM_SECTION = section(
    {
        "sigma": number(0.1, 10.0),
        "window": number(3, 51, integer=True, odd=True),
        "k1": number(1e-6, 1.0),
        "k2": number(1e-6, 1.0),
        "covariance": one_of("population", "sample"),
    }
)
LPIPS_SECTION = section(
    {
        "net": one_of("alex"),
        "version": one_of("0.1"),
        "inputs": one_of("[-1, 1]"),
        "reduce": one_of("mask mean of the spatial map"),
    }
)


def metric_list(allowed: tuple[str, ...], empty: bool = False) -> Check:
    """A list of metric names among ``allowed``, none twice; non-empty unless ``empty``."""

    def check(v: object) -> str | None:
        if not (isinstance(v, list) and (v or empty) and all(isinstance(m, str) for m in v)):
            return f"must be a {'' if empty else 'non-empty '}list of metric names"
        unknown = sorted(set(v) - set(allowed))
        if unknown:
            return f"unknown {unknown}; known: {', '.join(allowed)}"
        twice = sorted({m for m in v if v.count(m) > 1})
        return f"{', '.join(twice)} listed twice" if twice else None

    return check


# ---------------------------------------------------------------- loading


def _canonical_sha256(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


SHIPPED = Path(str(resources.files("persistbench") / "data" / "protocols"))  # the built-in suites' protocols


def shipped_path(name: str, directory: Path = SHIPPED) -> Path:
    return directory / f"{name}.json"


def problems(config: object, schema: dict[str, Check]) -> Iterator[str]:
    """What is wrong with a protocol file's content against ``schema`` (field -> check)."""
    if not isinstance(config, dict):
        yield "must be a JSON object"
        return
    problem = name_problem(config.get("name"))
    if problem:
        yield f"name: {problem}"
    for key in sorted(set(config) - set(schema) - {"name"}):
        yield f"{key}: unknown field"
    for key, check in schema.items():
        if key not in config:
            if check(None) is not None:  # a field that may be null may also be left out
                yield f"{key}: missing"
            continue
        problem = check(config[key])
        if problem:
            yield f"{key}: {problem}"


def choose_scorer(config: object, scorers: dict[str, Scorer]) -> Scorer:
    """The scorer of a protocol's content: the one of its shipped name, else the one whose schema shares the
    most fields with it (fewest unknown ones breaking a tie; then the first)."""
    if isinstance(config, dict) and isinstance(config.get("name"), str) and config["name"] in scorers:
        return scorers[config["name"]]
    keys = set(config) - {"name"} if isinstance(config, dict) else set()
    unique = list(dict.fromkeys(scorers.values()))
    return max(unique, key=lambda s: (len(keys & set(s.schema)), -len(keys - set(s.schema))))


def load_protocol(
    spec: str, scorers: dict[str, Scorer], overrides: dict | None = None, directory: Path = SHIPPED
) -> Protocol:
    """A protocol by shipped name (a file ``<name>.json`` in ``directory``) or JSON path, its scorer chosen from
    ``scorers`` (shipped protocol name -> scorer: the suite's) and its content checked against that scorer's
    schema; ``overrides`` replace top-level fields."""
    shipped = tuple(scorers)
    path = Path(spec)
    if not path.is_file():
        path = shipped_path(spec, directory) if name_problem(spec) is None and spec in shipped else path
    if not path.is_file():
        raise PersistbenchError(f"--protocol {spec}: no such protocol (shipped: {', '.join(shipped)}) or file")
    config = read_json(path)
    if overrides and isinstance(config, dict):
        config = {**config, **overrides}
    scorer = choose_scorer(config, scorers)
    problem = next(problems(config, scorer.schema), None) or next(iter(scorer.config_problems(config)), None)
    if problem:
        raise PersistbenchError(f"{path}: {problem}")
    if config["name"] not in shipped and shipped_path(config["name"]).is_file():
        raise PersistbenchError(f"{path}: name {config['name']!r} is another suite's shipped protocol; choose another")
    sha = _canonical_sha256(config)
    original = shipped_path(config["name"], directory if config["name"] in shipped else SHIPPED)
    same = not original.is_file() or _canonical_sha256(read_json(original)) == sha
    dirname = config["name"] if same else f"{config['name']}-{sha[:8]}"
    return Protocol(config["name"], config, sha, dirname, scorer)
