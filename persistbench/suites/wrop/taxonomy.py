"""WROP's task taxonomy: the generator's 150 tasks, their six families and the two dimensions above them.

The table is ``persistbench/data/wrop/taxonomy.json``, transcribed from the generator's
``object_permanence/taxonomy.py`` (repository ``hokindeng/object-permanence`` at the commit the file
names, generator 1.9.1): the only place the families are stored, since the corpus's metadata names
none. Tasks are named as in the corpus (``<name>_task.tar``, ``<name>_<NNNN>``), not by id.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Taxonomy:
    """Task name -> family key, family key -> display name, family key -> dimension key, and names."""

    source: dict
    task_ids: dict[str, str]  # task name -> G id
    families: dict[str, str]  # task name -> family key
    family_names: dict[str, str]  # family key -> display name, in the generator's order
    dimension_of: dict[str, str]  # family key -> dimension key
    dimension_names: dict[str, str]  # dimension key -> display name, in order

    @property
    def reference(self) -> str:
        """Where the table comes from, for messages: ``repository/file@commit``."""
        s = self.source
        return f"{s['repository']}/{s['file']}@{s['commit'][:7]}"


@functools.cache
def taxonomy() -> Taxonomy:
    """The shipped table, read once."""
    data = json.loads(resources.files("persistbench").joinpath("data/wrop/taxonomy.json").read_text())
    family_names = {f["key"]: f["name"] for f in data["families"]}
    dimension_of = {fam: d["key"] for d in data["dimensions"] for fam in d["families"]}
    return Taxonomy(
        data["source"],
        {t["name"]: t["id"] for t in data["tasks"]},
        {t["name"]: t["family"] for t in data["tasks"]},
        family_names,
        dimension_of,
        {d["key"]: d["name"] for d in data["dimensions"]},
    )


def family_name(key: str) -> str:
    """A family's display name (the paper's), or ``key`` itself for one the table does not know."""
    return taxonomy().family_names.get(key, key)


def dimension_name(key: str) -> str:
    return taxonomy().dimension_names.get(key, key)
