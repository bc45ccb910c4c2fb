"""The one name rule for identifiers that become path components, and paths confined to a root.

Every identifier read from outside (a recipe's case id, object id and source
id, a protocol's name, a run's case ids, a dataset's subset and case folders)
passes :func:`check_name` where it enters, and every path built from such
identifiers goes through :func:`child`, which refuses anything that is not a
plain name below its root. Destructive operations go through
:func:`remove_tree`, which proves the path is inside its root first (docs/data-format.md,
"Threat model").
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from persistbench.core.errors import PersistbenchError

MAX_NAME = 200  # leaves room for suffixes such as ".json" and ".lock" under the usual 255-byte limit
NAME_PATTERN = r"[A-Za-z0-9_-][A-Za-z0-9_.-]*"
_NAME_RE = re.compile(NAME_PATTERN)


def name_problem(value: object) -> str | None:
    """Why ``value`` may not be a path component, or None when it may.

    A name is a string of ASCII letters, digits, ``_``, ``.`` and ``-`` that
    does not start with ``.`` (so never ``.``, ``..``, hidden or empty), at most
    :data:`MAX_NAME` characters. A YouTube id may start with ``_`` or ``-``, so
    those may lead; the public toolkit's ``safe_component`` (letter or digit
    first) accepts a subset of these names.
    """
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_NAME:
        return f"is {len(value)} characters long, at most {MAX_NAME} allowed"
    if not _NAME_RE.fullmatch(value):
        bad = next((c for c in value if not (c.isascii() and (c.isalnum() or c in "_.-"))), value[0])
        return f"{value!r} is not a safe name (letters, digits, '_', '.', '-', not starting with '.'; found {bad!r})"
    return None


def check_name(value: object, what: str) -> str:
    """Return ``value`` if it is a safe name; else raise ``PersistbenchError`` naming ``what`` (e.g. ``file:3: case_id``)."""
    problem = name_problem(value)
    if problem:
        raise PersistbenchError(f"{what}: {problem}")
    return value  # type: ignore[return-value]


def child(root: str | os.PathLike, *names: str) -> Path:
    """``root / name / ...`` where every part is a safe name, so the result stays inside ``root``.

    A part that already exists as a symbolic link must lead to somewhere inside
    ``root`` too: runs, datasets and outputs are shared, and a link planted in
    one (``scores -> ~/.ssh``) would otherwise take reads and writes elsewhere.
    Links above ``root`` (the user's own) are not looked at.

    Raises:
        PersistbenchError: naming the root and the offending part.
    """
    for name in names:
        problem = name_problem(name)
        if problem:
            raise PersistbenchError(f"{root}: refusing to build a path from {name!r}: {problem}")
    return confined(root, *names)


def confined(root: str | os.PathLike, *parts: str) -> Path:
    """``root / part / ...`` for parts the toolkit names itself (``.state``, ``test_imgs``), refusing links out.

    Any part that exists as a symbolic link must resolve inside ``root``
    (see :func:`child`, which also checks that each part is a safe name).

    Raises:
        PersistbenchError: naming the link and the root.
    """
    path = Path(root)
    for part in parts:
        path = path / part
        if os.path.islink(path):
            check_inside(root, path)
    return path


def check_inside(root: str | os.PathLike, path: str | os.PathLike) -> None:
    """Refuse ``path`` unless, links followed, it lies strictly inside ``root`` (the one rule for links).

    Raises:
        PersistbenchError: ``<path>: leads to <target>, outside <root>; links must stay inside it``.
    """
    if not is_inside(root, path):
        raise PersistbenchError(f"{path}: leads to {os.path.realpath(path)}, outside {root}; links must stay inside it")


def is_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` resolves (links followed) to a location strictly below ``root``."""
    base = os.path.realpath(root)
    target = os.path.realpath(path)
    return target != base and os.path.commonpath([base, target]) == base


def remove_tree(root: str | os.PathLike, path: str | os.PathLike) -> None:
    """Remove the directory ``path`` (if it exists) after proving it lies strictly inside ``root``.

    Raises:
        PersistbenchError: when ``path`` is ``root`` itself or outside it; nothing is removed.
    """
    if not is_inside(root, path):
        raise PersistbenchError(f"{path}: refusing to remove a directory outside {root}")
    if os.path.islink(path):
        os.unlink(path)
    else:
        shutil.rmtree(path, ignore_errors=True)
