"""The benchmark suites and how a dataset root finds its suite.

Each suite is a folder here with a :class:`~persistbench.suites.base.Suite` subclass, registered by
one line in :data:`SUITES` (name -> ``module:Class``); it is imported only when used.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PersistbenchError, UsageError

if TYPE_CHECKING:  # the interface imports numpy; the command line reads SUITES without it
    from .base import Suite

SUITES: dict[str, str] = {
    "persistbench": "persistbench.suites.persistbench.suite:PersistBench",
    "r2m": "persistbench.suites.r2m.suite:R2MBench",
    "wrop": "persistbench.suites.wrop.suite:Wrop",
}

CASE_OPTIONS = ("tasks", "per_task", "categories")  # every suite's case_options (command-line names)


def suite_class(name: str) -> type[Suite]:
    """The suite registered as ``name``, imported now."""
    if name not in SUITES:
        raise UsageError(f"--suite {name}: unknown suite; known: {', '.join(SUITES)}")
    module, cls = SUITES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def detect(root: str | Path) -> str:
    """The name of the suite whose dataset is at ``root``; a one-line error when none or several match."""
    if "://" in str(root):
        found = [name for name in SUITES if suite_class(name).remote]
        if len(found) == 1:
            return found[0]
        raise UsageError(f"{root}: a URL; pass --suite {'|'.join(found)}")
    root = Path(root)
    if not root.is_dir():
        raise PersistbenchError(f"{root}: dataset root does not exist")
    found = [name for name in SUITES if suite_class(name).detect(root)]
    if len(found) != 1:
        what = "no cases: no suite recognises it" if not found else f"several suites match ({', '.join(found)})"
        raise UsageError(f"{root}: {what}; pass --suite {'|'.join(SUITES)}")
    return found[0]


def open_suite(root: str | Path, name: str | None = None, options: dict | None = None) -> Suite:
    """The suite ``name`` (detected from ``root`` when None) bound to the dataset at ``root``; a URL root
    only for suites that read remote data."""
    cls = suite_class(name or detect(root))
    for key, value in (options or {}).items():
        if key in CASE_OPTIONS and value is not None and key not in cls.case_options:
            raise UsageError(f"--{key.replace('_', '-')}: does not apply to --suite {cls.name}")
    if "://" in str(root) and not cls.remote:
        raise UsageError(f"{root}: --suite {cls.name} reads a local dataset folder, not a URL")
    if not cls.remote and not Path(root).is_dir():
        raise PersistbenchError(f"{root}: dataset root does not exist")
    return cls(root if "://" in str(root) else Path(root), options)
