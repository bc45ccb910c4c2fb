"""The public PersistBench toolkit (PyPI ``persistbench`` 0.1.7, MIT), run beside ours: its wheel, found
offline in ``$PERSISTBENCH_PUBLIC_WHEELS`` or ``.ci/wheels`` (``.ci/run`` downloads it there), checked against
its pinned sha256, unpacked into a temporary folder and imported by a separate interpreter (both packages are
named ``persistbench``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

WHEEL = "persistbench-0.1.7-py3-none-any.whl"
WHEEL_SHA256 = "6a6c0d05160297e4f57b9ac9e06a6d592a0865778111912a24d3aa19f5125241"

VALIDATE = """
import json, sys, zipfile
from persistbench.submission import validate_report
with zipfile.ZipFile(sys.argv[1]) as z:
    run, results, summary = (json.loads(z.read(n)) for n in ("run.json", "results.json", "summary.json"))
try:
    validate_report(run, results, summary, allow_subset=sys.argv[2] == "1")
except Exception as e:
    print(f"refused: {type(e).__name__}: {e}")
    sys.exit(1)
print("accepted")
"""


def wheel() -> Path | None:
    """The pinned public wheel, where one is found offline."""
    folders = [os.environ.get("PERSISTBENCH_PUBLIC_WHEELS"), Path(__file__).parents[2] / ".ci" / "wheels"]
    for folder in filter(None, folders):
        path = Path(folder) / WHEEL
        if path.is_file():
            if hashlib.sha256(path.read_bytes()).hexdigest() != WHEEL_SHA256:
                raise AssertionError(f"{path}: not the pinned {WHEEL} (sha256 differs)")
            return path
    return None


def unpack(path: Path, into: Path) -> Path:
    """The wheel's files under ``into`` (every member path checked first)."""
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            p = PurePosixPath(name)
            assert not p.is_absolute() and ".." not in p.parts, name
        z.extractall(into)
    return into


def validate(root: Path, zip_path: Path, allow_subset: bool) -> tuple[bool, str]:
    """``(accepted, its line)`` of the public ``validate_report`` on the three reports of ``zip_path``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", VALIDATE, str(zip_path), "1" if allow_subset else "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    line = (out.stdout or out.stderr).strip().splitlines()[-1] if (out.stdout or out.stderr).strip() else ""
    assert out.returncode in (0, 1), out.stderr
    return out.returncode == 0, line


def version(root: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = "import json, persistbench; print(json.dumps([persistbench.__version__, persistbench.__file__]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, check=True)
    v, where = json.loads(out.stdout)
    assert Path(where).is_relative_to(root), where  # theirs, not ours
    return v
