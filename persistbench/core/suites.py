"""The suite registry: which suites there are, how a dataset root finds its suite, and the suites' commands.

A suite is a :class:`~persistbench.core.suite.Suite` subclass named by ``module:Class``: the built-in
ones in :data:`BUILTIN`, others by an entry point of the group ``persistbench.suites`` (as models
are, in ``persistbench.models``). A suite's own commands (PersistBench's ``download`` and ``pack``)
are click commands named by ``module:function``: :data:`BUILTIN_COMMANDS`, or the entry point group
``persistbench.commands``. Nothing is imported until it is used, and the core names no suite but here.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from persistbench.core.errors import PersistbenchError, UsageError

if TYPE_CHECKING:  # the interface imports numpy; the command line lists suites without it
    from persistbench.core.suite import Suite

BUILTIN: dict[str, str] = {
    "persistbench": "persistbench.suites.persistbench.suite:PersistBench",
    "r2m": "persistbench.suites.r2m.suite:R2MBench",
    "wrop": "persistbench.suites.wrop.suite:Wrop",
}
BUILTIN_COMMANDS: dict[str, str] = {
    "download": "persistbench.suites.persistbench.commands:download",
    "pack": "persistbench.suites.persistbench.commands:pack",
    "package": "persistbench.suites.persistbench.commands:package",
}
SUITE_GROUP = "persistbench.suites"
COMMAND_GROUP = "persistbench.commands"


def _entry_points(group: str, builtin: dict[str, str]) -> dict[str, str]:
    """``builtin`` followed by the entry points of ``group`` (name -> ``module:attr``); a name taken twice is
    an error naming both."""
    from importlib.metadata import entry_points

    out = dict(builtin)
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        if ep.name in out and out[ep.name] != ep.value:
            raise UsageError(f"entry point {group}:{ep.name} ({ep.value}) clashes with {out[ep.name]}")
        out[ep.name] = ep.value
    return out


@functools.cache
def suites() -> dict[str, str]:
    """Every registered suite: name -> ``module:Class`` (built-ins first)."""
    return _entry_points(SUITE_GROUP, BUILTIN)


@functools.cache
def suite_commands() -> dict[str, str]:
    """Every suite's own commands: name -> ``module:function``."""
    return _entry_points(COMMAND_GROUP, BUILTIN_COMMANDS)


def suite_class(name: str) -> type[Suite]:
    """The suite registered as ``name``, imported now."""
    known = suites()
    if name not in known:
        raise UsageError(f"--suite {name}: unknown suite; known: {', '.join(known)}")
    module, cls = known[name].split(":")
    return getattr(importlib.import_module(module), cls)


def detect(root: str | Path) -> str:
    """The name of the suite whose dataset is at ``root``; a one-line error when none or several match."""
    names = list(suites())
    if "://" in str(root):
        found = [name for name in names if suite_class(name).remote]
        if len(found) == 1:
            return found[0]
        raise UsageError(f"{root}: a URL; pass --suite {'|'.join(found)}")
    root = Path(root)
    if not root.is_dir():
        raise PersistbenchError(f"{root}: dataset root does not exist")
    found = [name for name in names if suite_class(name).detect(root)]
    if len(found) != 1:
        what = "no cases: no suite recognises it" if not found else f"several suites match ({', '.join(found)})"
        raise UsageError(f"{root}: {what}; pass --suite {'|'.join(names)}")
    return found[0]


def open_suite(root: str | Path, name: str | None = None, options: dict | None = None) -> Suite:
    """The suite ``name`` (detected from ``root`` when None) bound to the dataset at ``root`` with ``options``
    (names it declares; see :mod:`persistbench.core.options`); a URL root only for suites that read remote data."""
    cls = suite_class(name or detect(root))
    declared = {o.name for o in cls.option_specs}
    for key, value in (options or {}).items():
        if value is not None and key not in declared:
            raise UsageError(f"--{key.replace('_', '-')}: does not apply to --suite {cls.name}")
    if "://" in str(root) and not cls.remote:
        raise UsageError(f"{root}: --suite {cls.name} reads a local dataset folder, not a URL")
    if not cls.remote and not Path(root).is_dir():
        raise PersistbenchError(f"{root}: dataset root does not exist")
    return cls(root if "://" in str(root) else Path(root), options)
