"""What ``doctor`` reports of one thing this machine has or lacks: a :class:`Check`. The core's checks are in
:mod:`persistbench.core.doctor`; a suite adds its own (:meth:`persistbench.core.suite.Suite.checks`)."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str  # what was found, or why it is missing
    fix: str = ""
    needed_for: frozenset[str] = field(default_factory=frozenset)  # empty: optional
    used_by: frozenset[str] = field(default_factory=frozenset)  # optional, but of use to these commands

    def concerns(self, wanted: str) -> bool:
        """Whether ``doctor --for wanted`` shows it (``all``: every check)."""
        return wanted == "all" or wanted in self.needed_for | self.used_by


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
