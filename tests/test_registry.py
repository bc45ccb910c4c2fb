"""The one registry of names: lazy ``module:attr`` entries, unknown names in one line, a name taken twice refused."""

from __future__ import annotations

import pytest

from persistbench.core.errors import UsageError
from persistbench.core.registry import Registry


def test_entries_load_when_used_and_unknown_names_list_the_known_ones():
    table = Registry("thing", {"path": "pathlib:Path", "answer": 42}, option="--thing")
    assert list(table) == ["path", "answer"] and "path" in table and "nope" not in table
    import pathlib

    assert table["path"] is pathlib.Path and table["answer"] == 42
    with pytest.raises(UsageError, match=r"^--thing nope: unknown thing; known: path, answer$"):
        table["nope"]


def test_a_name_registered_twice_is_refused_and_a_new_one_is_kept_after_a_reread():
    table = Registry("thing", {"a": 1}, "persistbench.no-such-group")
    table.register("b", 2)
    table.register("b", 2)  # the same object again: nothing to refuse
    with pytest.raises(UsageError, match="thing a: already registered as 1"):
        table.register("a", 3)
    assert "zz" not in table  # a miss reads the entry points again ...
    assert table["b"] == 2 and list(table) == ["a", "b"]  # ... and keeps what was registered
