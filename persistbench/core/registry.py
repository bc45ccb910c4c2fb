"""Named things, one way: a :class:`Registry` maps a name to an object, or to ``module:attr`` imported when the
name is first used, and adds the entry points of an installed package's group.

Every table of the toolkit is one (the commands, the suites and their commands, models, executors, backends, a
suite's scorers): a name taken twice is an error naming both, an unknown name is one line that lists the known
ones, and nothing is imported to list the names.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from persistbench.core.errors import UsageError

T = TypeVar("T")


def load_attr(spec: str) -> object:
    """The object ``module:attr`` names, imported now (``attr`` may be dotted)."""
    module, _, attr = spec.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Registry(Mapping[str, T], Generic[T]):
    """``what`` by name: the ``builtin`` entries (objects or ``module:attr`` strings), then the entry points of
    ``group`` when one is given (read on first use). An unknown name reads ``{option} NAME: unknown {what}; known:
    ...`` (``option``: the command-line option that names one, if any)."""

    def __init__(self, what: str, builtin: Mapping[str, T | str], group: str | None = None, option: str = ""):
        self.what, self.group, self.option = what, group, option
        self._builtin = dict(builtin)
        self._entries: dict[str, T | str] | None = None
        self._loaded: dict[str, T] = {}

    def entries(self) -> dict[str, T | str]:
        """Name -> object or ``module:attr``, nothing imported: the built-ins, then the group's entry points
        (sorted by name); an entry point that takes a built-in's name or another's is an error naming both."""
        if self._entries is None:
            out = dict(self._builtin)
            if self.group:
                from importlib.metadata import entry_points

                for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
                    if ep.name in out and out[ep.name] != ep.value:
                        raise UsageError(f"entry point {self.group}:{ep.name} ({ep.value}) clashes with {out[ep.name]}")
                    out[ep.name] = ep.value
            self._entries = out
        return self._entries

    def register(self, name: str, obj: T | str) -> None:
        """Add ``name`` for this process (a notebook's suite, a benchmark's own); a name taken by something else
        is an error naming both."""
        taken = self.entries().get(name, obj)
        if taken is not obj and taken != obj:
            raise UsageError(f"{self.what} {name}: already registered as {taken}")
        self._builtin[name] = obj
        self._entries = None

    def _lookup(self, name: str) -> dict[str, T | str]:
        """The table, read again when it lacks ``name`` (a package installed since it was read)."""
        if name not in self.entries():
            self._entries = None
        return self.entries()

    def spec(self, name: str) -> T | str:
        """What ``name`` is registered as, not imported; a one-line error naming the known ones when unknown."""
        entries = self._lookup(name)
        if name not in entries:
            where = f"{self.option} {name}" if self.option else name
            raise UsageError(f"{where}: unknown {self.what}; known: {', '.join(entries)}")
        return entries[name]

    def __getitem__(self, name: str) -> T:
        if name not in self._loaded:
            spec = self.spec(name)
            self._loaded[name] = load_attr(spec) if isinstance(spec, str) else spec
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._lookup(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self.entries())
