"""The suite registry: which suites there are, how a dataset root finds its suite, and the suites' commands.

A suite is a :class:`~persistbench.core.suite.Suite` subclass named by ``module:Class``: the built-in
ones in :data:`persistbench.suites.BUILTIN`, others by an entry point of the group ``persistbench.suites``
(as models are, in ``persistbench.models``). A suite's own commands are click commands named by
``module:function``: :data:`persistbench.suites.BUILTIN_COMMANDS`, or the entry point group
``persistbench.commands``. Both are :class:`~persistbench.core.registry.Registry` s: nothing is imported
until it is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from persistbench.core.errors import PersistbenchError, UsageError
from persistbench.core.registry import Registry
from persistbench.suites import BUILTIN, BUILTIN_COMMANDS

if TYPE_CHECKING:  # the interface imports numpy; the command line lists suites without it
    import click

    from persistbench.core.suite import Suite

SUITES: Registry[type[Suite]] = Registry("suite", BUILTIN, "persistbench.suites", option="--suite")
SUITE_COMMANDS: Registry[click.Command] = Registry("command", BUILTIN_COMMANDS, "persistbench.commands")


def detect(root: str | Path) -> str:
    """The name of the suite whose dataset is at ``root``; a one-line error when none or several match."""
    names = list(SUITES)
    if "://" in str(root):
        found = [name for name in names if SUITES[name].remote]
        if len(found) == 1:
            return found[0]
        raise UsageError(f"{root}: a URL; pass --suite {'|'.join(found)}")
    root = Path(root)
    if not root.is_dir():
        raise PersistbenchError(f"{root}: dataset root does not exist")
    found = [name for name in names if SUITES[name].detect(root)]
    if len(found) != 1:
        what = "no cases: no suite recognises it" if not found else f"several suites match ({', '.join(found)})"
        raise UsageError(f"{root}: {what}; pass --suite {'|'.join(names)}")
    return found[0]


def open_suite(root: str | Path, name: str | None = None, options: dict | None = None) -> Suite:
    """The suite ``name`` (detected from ``root`` when None) bound to the dataset at ``root`` with ``options``
    (names it declares; see :mod:`persistbench.core.options`); a URL root only for suites that read remote data."""
    cls = SUITES[name or detect(root)]
    declared = {o.name for o in cls.option_specs}
    for key, value in (options or {}).items():
        if value is not None and key not in declared:
            raise UsageError(f"--{key.replace('_', '-')}: does not apply to --suite {cls.name}")
    if "://" in str(root) and not cls.remote:
        raise UsageError(f"{root}: --suite {cls.name} reads a local dataset folder, not a URL")
    if not cls.remote and not Path(root).is_dir():
        raise PersistbenchError(f"{root}: dataset root does not exist")
    return cls(root if "://" in str(root) else Path(root), options)
