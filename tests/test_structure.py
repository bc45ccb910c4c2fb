"""The package's structure: no import cycles (module level, inside functions, or for type checkers only: a cycle
of annotations is a cycle of ideas), sealed suites, no suite named outside its folder, and the directions
docs/architecture.md states (scoring never loads model code)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "persistbench"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body (``from . import x`` counts x)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    deps.add(full if full in modules else base)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for d in graph[todo.pop()]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def test_no_import_cycles():
    graph = import_graph()
    # a package's __init__ may re-export its own submodules; anything else importing back is a cycle
    cycles = sorted(
        m
        for m in graph
        if any(m in _reachable(graph, d) for d in graph[m] if not (d.startswith(m + ".") or m.startswith(d + ".")))
    )
    assert not cycles, f"modules on an import cycle: {cycles}"


def test_scoring_does_not_load_models():
    graph = import_graph()
    reach = _reachable(graph, "persistbench.core.score")
    # models.base is the interface's dataclasses; the registry, the built-ins and cmd: adapters are model code
    loaded = {m for m in reach if m == "persistbench.core.infer" or m.startswith("persistbench.models")}
    assert loaded <= {"persistbench.models.base"}, sorted(loaded)


def test_graph_sees_imports():
    """The checker itself: it finds the imports it must judge."""
    graph = import_graph()
    assert "persistbench.io.files" in graph["persistbench.suites.persistbench.dataset"]
    assert "persistbench.io.names" in _reachable(graph, "persistbench.cli.infer")
    # imports for type checkers only count: a suite's scoring names its suite class for its annotations only
    assert "persistbench.suites.r2m.suite" in graph["persistbench.suites.r2m.scoring"]


def test_only_the_ray_executor_imports_ray_and_only_when_it_runs():
    """The demo and the core need no Ray: ``import ray`` appears in one function of executors/ray.py and at no
    module level anywhere."""
    importers = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "ray" or n.startswith("ray.") for n in names):
                importers.setdefault(_module_name(path), []).append(node)
        module_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not any(n in module_level for n in importers.get(_module_name(path), [])), path
    assert set(importers) == {"persistbench.executors.ray"}, sorted(importers)


SUITES_PACKAGE = "persistbench.suites"


def _suite_of(module: str) -> str | None:
    """``persistbench.suites.<s>.…`` -> ``<s>``; None for the core."""
    parts = module.split(".")
    return parts[2] if module.startswith(SUITES_PACKAGE + ".") and len(parts) > 2 else None


def seal_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that cross a suite's folder: into a suite from the core or from another suite."""
    return sorted(
        f"{m} -> {d}" for m, deps in graph.items() for d in deps if _suite_of(d) and _suite_of(d) != _suite_of(m)
    )


def test_suites_are_sealed():
    """Nothing outside ``suites/<s>/`` imports it: the core imports no suite and no suite imports another.
    What two suites share is in the core; the core reaches a suite only through its registry."""
    graph = import_graph()
    assert {_suite_of(m) for m in graph} >= {None, "persistbench", "r2m", "wrop"}
    assert not seal_violations(graph), "\n".join(seal_violations(graph))


def test_seal_check_sees_crossings():
    """The checker itself: an edge from the core into a suite, and one between suites, are reported."""
    graph = {
        "persistbench.core.demo": {"persistbench.suites.wrop.synth"},
        "persistbench.suites.r2m.synth": {"persistbench.suites.persistbench.synth", "persistbench.core.synth"},
        "persistbench.suites.wrop.suite": {"persistbench.suites.wrop.corpus"},
    }
    assert seal_violations(graph) == [
        "persistbench.core.demo -> persistbench.suites.wrop.synth",
        "persistbench.suites.r2m.synth -> persistbench.suites.persistbench.synth",
    ]


# Reads outside io/ that bypass its bounded, regular-file, strict readers, each reviewed: what they read is the
# package's own data or a file this toolkit wrote itself (or is writing), never a path a user or a shared file
# names. A new one fails the test below until it goes through io/files (read_bounded, read_json, open_regular)
# or is added here with its reason.
RAW_READS = {
    ("arena/app.py", "read_text"): "the package's own page, refusal page and assets",
    ("backends/judge.py", "read_text"): "the package's prompt files",
    ("core/certify.py", "read_text"): "this machine's /proc/cpuinfo, for the certificate's hardware",
    ("suites/persistbench/leaderboard.py", "read_text"): "the package's published leaderboard's source file",
    ("suites/persistbench/leaderboard.py", "read_bytes"): "the package's published leaderboard (its sha256 checked)",
    ("suites/wrop/taxonomy.py", "read_text"): "the package's taxonomy.json",
    ("cli/score.py", "read_text"): "the summary.md score just wrote",
    ("suites/wrop/synth.py", "read_bytes"): "the videos synth just encoded",
    ("suites/persistbench/build/remote.py", "read_bytes"): "the package's own ytdl_job.py, sent to the remote",
    ("suites/wrop/fetch.py", "open"): "the part file fetch is writing",
    ("suites/persistbench/dist/pack.py", "open"): "a dataset file hashed after verify's checks, into the tar",
    ("suites/persistbench/dist/fetch.py", "open"): "the target of an extraction, written",
    ("suites/persistbench/build/remote.py", "open"): "the clip being received, and its local copy",
    ("suites/r2m/fetch.py", "open"): "an image copied after its checks, and its temporary",
    ("models/external.py", "open"): "the cmd: model's own log",
    ("suites/persistbench/build/download.py", "open"): "the temporary that fetched recipes are streamed into",
    (
        "suites/persistbench/build/ytdl_job.py",
        "open",
    ): "the clip yt-dlp just wrote (it runs on a remote interpreter too)",
}


def raw_reads() -> set[tuple[str, str]]:
    """``(module path under persistbench/, call)`` of every ``open()``, ``.read_text()`` and ``.read_bytes()``
    outside ``io/``."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("io/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id == "open":
                found.add((rel, "open"))
            elif isinstance(f, ast.Attribute) and f.attr in ("read_text", "read_bytes"):
                found.add((rel, f.attr))
    return found


def test_user_given_paths_are_read_through_io():
    unreviewed = raw_reads() - set(RAW_READS)
    assert not unreviewed, f"reads that bypass io/files: {sorted(unreviewed)}"
    assert not set(RAW_READS) - raw_reads(), "a reviewed read that is gone: remove it from RAW_READS"


# Where a suite may not be named: the layers below and beside the suites (docs/architecture.md). The package's own
# name is also the first suite's; as the distribution's and the program's name it is allowed where listed here.
UNNAMED_IN = ("core/", "cli/", "arena/", "metrics/", "io/", "executors/")
PACKAGE_NAME_USES = {
    "core/doctor.py": "the distribution's version and its install hint",
    "cli/__init__.py": "the program's name in --version",
    "core/layout.py": "the user cache's folder",
}


def named_suites(names: set[str]) -> list[str]:
    """``path:line: literal`` of every string constant (docstrings aside) in :data:`UNNAMED_IN` that is one of
    ``names`` or holds one as a word (``--suite r2m``), the package's own name only where not allowed."""
    import re

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(UNNAMED_IN):
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
                continue
            for name in names:
                if name == "persistbench":
                    hit = node.value == name and rel not in PACKAGE_NAME_USES
                else:
                    hit = re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", node.value) is not None
                if hit:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_no_suite_or_protocol_is_named_outside_the_suites():
    """The core, the command line, the arena, metrics, io and executors name no suite and no shipped protocol:
    what differs between suites is a member of the suite (its question, its checks, its options' help)."""
    from persistbench.core.suites import SUITES

    names = set(SUITES) | {p for n in SUITES for p in SUITES[n].protocols}
    assert {"r2m", "wrop", "paper-v3", "classic-v1"} <= names
    found = named_suites(names)
    assert not found, "\n".join(found)
