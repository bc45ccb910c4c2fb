"""Running the real command in a child process, as a user does, and reading its one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_cli(*args: object, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m persistbench ARGS`` with its output captured; ``env`` is added to the environment."""
    return subprocess.run(
        [sys.executable, "-m", "persistbench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
    )


def refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    """A non-zero exit, no traceback, and one output line holding every needle; returns that line."""
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "Traceback" not in out and "internal error" not in out, out
    lines = [line for line in out.splitlines() if all(n in line for n in needles)]
    assert lines, out
    return lines[0]


def peak_rss_mib(*args: object, timeout: float = 900) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m persistbench ARGS`` as the only child of a fresh interpreter: its outcome and its peak
    resident memory in MiB (the memory budgets of hostile inputs are measured with it)."""
    code = (
        "import json, resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'persistbench', *sys.argv[1:]], capture_output=True, text=True)\n"
        "print(json.dumps([r.returncode, r.stdout, r.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    rc, stdout, stderr, kib = json.loads(out.stdout)
    return subprocess.CompletedProcess(args, rc, stdout, stderr), kib / 1024
