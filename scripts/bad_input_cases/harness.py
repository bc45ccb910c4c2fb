"""Running one bad input through the real CLI and recording how it was handled.

Each input is a command run in its own work folder beside an ``outside/`` folder that nothing may
touch. A row records: refused (non-zero exit, or the named case failed), one clean line (no
traceback, the message names the file or case), nothing written outside the allowed paths, the
time it took (killed at :data:`LIMIT_S`) and the command's peak resident memory (its own and its
children's, as a small launcher process measures it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LIMIT_S = 60.0  # a command still running then is killed and its row fails "bounded time"
MEMORY_MB = 2048  # peak RSS allowed for one command (torch and Ray alone take ~600 MB)
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Row:
    group: str
    name: str
    refused: bool
    clean: bool
    confined: bool
    seconds: float
    rss_mb: float
    expect: str  # "refuse": the input must be refused; "accept": handled correctly (e.g. shown escaped)
    budget_mb: float = MEMORY_MB

    @property
    def timely(self) -> bool:
        return self.seconds < LIMIT_S

    @property
    def bounded(self) -> bool:
        return self.rss_mb < self.budget_mb

    @property
    def ok(self) -> bool:
        return self.refused and self.clean and self.confined and self.timely and self.bounded


ROWS: list[Row] = []
VERBOSE = False


# The command runs as the only child of a small launcher that reports its peak RSS: measured from the harness
# itself, a child forked from it would count the harness's own memory (Linux keeps the pre-exec peak).
_LAUNCHER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def run(args: list, cwd: Path, env: dict | None = None, limit: float = LIMIT_S) -> tuple[int, str, float, float]:
    """Run ``persistbench ARGS`` in ``cwd``; return (exit code, output, seconds, peak RSS in MB)."""
    out = tempfile.TemporaryFile()
    with tempfile.NamedTemporaryFile(suffix=".rss", delete=False) as f:
        rss_file = Path(f.name)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER, rss_file, sys.executable, "-m", "persistbench", *map(str, args)],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(limit, kill)
    timer.start()
    proc.wait()
    timer.cancel()
    seconds = time.monotonic() - start
    kill()  # whatever the command left running in its session (a hung grandchild)
    out.seek(0)
    text = rss_file.read_text()
    rss_file.unlink()
    rss = int(text) / 1024 if text else float("inf")  # killed at the limit: no measure, and no claim of one
    return proc.returncode, out.read().decode(errors="replace"), seconds, rss


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> a digest of what is there (content of files, target of links), for every entry."""
    state = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            state[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if path.stat().st_size < 1 << 26 else "big"
        elif path.is_dir():
            state[rel] = "dir"
        else:
            state[rel] = "special"
    return state


def check(
    group: str,
    name: str,
    work: Path,
    args: list,
    needle: str | tuple[str, ...],
    allowed: Callable[[str], bool] = lambda p: False,
    *,
    env: dict | None = None,
    outcome: Callable[[int, str, Path], bool] | None = None,
    memory_mb: float = MEMORY_MB,
) -> Row:
    """Run ``args`` in ``work`` and record the row.

    ``needle``: what the message must contain (the file, member or case it names; any of a tuple).
    ``allowed``: the relative paths of ``work`` the command may create or change (its output).
    ``outcome``: for inputs that must be *accepted* safely (e.g. shown escaped in a report), a test
    of (exit code, output, work) that replaces "refused"; the message check then only forbids
    tracebacks. ``memory_mb``: the peak RSS allowed.
    """
    outside = work.parent / f"{work.name}-outside"
    outside.mkdir(exist_ok=True)
    (outside / "keep.txt").write_text("untouched\n")
    before, before_out = snapshot(work), snapshot(outside)
    code, text, seconds, rss = run(args, work, env)
    after = snapshot(work)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p) and not allowed(p)}
    temps = {p for p in after if p.endswith(".tmp") or ".tmp-" in p}
    confined = not changed and not temps and snapshot(outside) == before_out
    needles = (needle,) if isinstance(needle, str) else needle
    traceback = "Traceback" in text or "Fatal Python error" in text
    if outcome is None:
        refused, clean, expect = code != 0, not traceback and any(n in text for n in needles), "refuse"
    else:
        refused, clean, expect = outcome(code, text, work), not traceback, "accept"
    row = Row(group, name, refused, clean, confined, seconds, rss, expect, memory_mb)
    ROWS.append(row)
    if not row.ok or VERBOSE:
        flags = (
            f"rc={code} refused={refused} clean={clean} confined={confined} {seconds:.1f}s {rss:.0f}MB "
            f"changed={sorted(changed)[:3]} temps={sorted(temps)[:3]}"
        )
        print(f"  {'ok' if row.ok else '!!'} {group}: {name}: {flags}")
        if not row.ok:
            print("     " + text.strip().replace("\n", "\n     ")[-700:])
    shutil.rmtree(outside, ignore_errors=True)
    return row


def fresh(work: Path, *sources: tuple[Path, str]) -> Path:
    """Empty ``work`` and copy each (source, name) into it; return ``work``."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for src, name in sources:
        shutil.copytree(src, work / name, symlinks=True)
    return work


def table(rows: list[Row]) -> str:
    """The per-group summary: tried, refused or handled, one clean line, nothing outside, time, memory."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    head = "| group | tried | refused / handled | one clean line | nothing written outside | bounded time | bounded memory | max RSS (MB) | slowest (s) |"
    lines = [head, "|" + " --- |" * 9]

    def line(name: str, rs: list[Row]) -> str:
        return (
            f"| {name} | {len(rs)} | {sum(r.refused for r in rs)} | {sum(r.clean for r in rs)} | "
            f"{sum(r.confined for r in rs)} | {sum(r.timely for r in rs)} | {sum(r.bounded for r in rs)} | "
            f"{max(r.rss_mb for r in rs):.0f} | {max(r.seconds for r in rs):.1f} |"
        )

    lines += [line(g, rs) for g, rs in groups.items()]
    lines.append(line("**all**", rows))
    return "\n".join(lines)
