"""Options a suite takes on the command line, declared by the suite and parsed here for every command.

A suite lists its :class:`SuiteOption`\\ s (:attr:`persistbench.core.suite.Suite.option_specs`); each names
the commands that take it. On the command line one is given as ``--<name> VALUE`` (its own option,
for the suites' historical names) or ``-S <name>=VALUE``; both forms always take a value. Options
that select the cases (``case=True``) are recorded in ``run.json`` and read back by ``score``, so
each declares a check of its recorded JSON value too. Nothing here names a suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import click

from persistbench.core.errors import PersistbenchError, UsageError

JsonCheck = Callable[[object], str | None]  # a recorded value's problem, or None


@dataclass(frozen=True)
class SuiteOption:
    """One option of a suite: ``name`` is its key in the options dict (``per_task``; ``--per-task`` on the
    command line); ``type`` converts the command line's text (a click type); ``commands`` are the
    commands that take it (``infer``, ``score``, ``verify``, ``fetch``, ``synth``)."""

    name: str
    help: str
    commands: tuple[str, ...]
    type: click.ParamType = click.STRING
    metavar: str = "VALUE"
    case: bool = False  # selects the cases: recorded in run.json's dataset.options
    json: JsonCheck | None = None  # the check of its value as recorded in run.json (case options)

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"

    def convert(self, text: str) -> object:
        """The option's value from the command line's ``text``; a usage error naming the option."""
        try:
            return self.type.convert(text, None, None)
        except click.BadParameter as e:
            raise UsageError(f"{self.flag}: {e.format_message()}") from None


# ---------------------------------------------------------------- value types shared by suites


class NameList(click.ParamType):
    """``a,b,c`` -> ``("a", "b", "c")`` (blanks dropped; at least one name)."""

    name = "LIST"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = tuple(v.strip() for v in str(value).split(",") if v.strip())
        if not names:
            self.fail(f"{value!r}: no names", param, ctx)
        return names


class ExistingFile(click.ParamType):
    """A file that exists, as an absolute path (links kept, so errors name what was given)."""

    name = "FILE"

    def convert(self, value, param, ctx):
        if not os.path.isfile(value):
            self.fail(f"{value}: no such file", param, ctx)
        return os.path.abspath(value)


class ExistingFolder(click.ParamType):
    """A folder that exists (the path as given)."""

    name = "DIR"

    def convert(self, value, param, ctx):
        if not os.path.isdir(value):
            self.fail(f"{value}: no such folder", param, ctx)
        return value


class Size(click.ParamType):
    """``WxH`` -> ``(w, h)``, both positive: every size on the command line is width x height (a protocol's and the
    package's own sizes are ``(h, w)``; the command converts)."""

    name = "WxH"
    label = "WIDTHxHEIGHT"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            a, b = (int(v) for v in str(value).lower().split("x"))
            if a <= 0 or b <= 0:
                raise ValueError
        except ValueError:
            self.fail(f"{value!r} is not {self.label}", param, ctx)
        return a, b


class FiniteFloat(click.FloatRange):
    """A float range that also refuses ``nan`` and ``inf`` (which every comparison of a plain range lets through)."""

    def convert(self, value, param, ctx):
        out = super().convert(value, param, ctx)
        if out != out or out in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return out


def string_list(v: object) -> str | None:
    return None if isinstance(v, list) and all(isinstance(t, str) for t in v) else "must be a list of task names"


def positive_int(v: object) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else "must be a positive integer"


def file_path(v: object) -> str | None:
    return None if isinstance(v, str) else "must be a file path"


# ---------------------------------------------------------------- parsing


def parse(options: tuple[SuiteOption, ...], suite: str, command: str, given: list[tuple[str, str]]) -> dict:
    """``given`` (``(name, text)`` pairs from ``--name VALUE`` and ``-S name=VALUE``, in order) converted by
    the options ``command`` takes; any other name is a usage error naming the suite."""
    taken = {o.name: o for o in options if command in o.commands}
    out: dict = {}
    for raw, text in given:
        name = raw.replace("-", "_")
        option = taken.get(name)
        if option is None:
            known = ", ".join(o.flag for o in taken.values()) or "none"
            raise UsageError(
                f"--{raw.replace('_', '-')}: does not apply to --suite {suite} {command} (its options: {known})"
            )
        out[name] = option.convert(text)
    return out


def recorded(options: tuple[SuiteOption, ...], values: object, where: str) -> dict:
    """Case options as recorded in ``run.json`` (``where`` names the field), each checked by its ``json``
    check; lists become tuples, as the command line gives them."""
    if not isinstance(values, dict):
        raise PersistbenchError(f"{where}: must be a JSON object")
    cases = {o.name: o for o in options if o.case}
    out = {}
    for key, value in values.items():
        option = cases.get(key)
        if option is None:
            raise PersistbenchError(f"{where}.{key}: not an option infer records")
        problem = option.json(value) if option.json is not None and value is not None else None
        if problem:
            raise PersistbenchError(f"{where}.{key}: {problem}")
        out[key] = tuple(value) if isinstance(value, list) else value
    return out
