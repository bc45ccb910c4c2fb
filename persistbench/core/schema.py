"""The checks a protocol's fields are held to: each field of a scorer's schema is a :data:`Check` that returns
what is wrong with a value (one phrase), or None. A protocol file is untrusted JSON: every field is declared,
a number with its bounds, a choice with its values."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from persistbench.io.limits import MAX_PIXELS, MAX_SIDE
from persistbench.io.names import name_problem

Check = Callable[[object], str | None]  # a field's problem, or None


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
