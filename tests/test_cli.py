"""The command line stays a thin, fast layer."""

from __future__ import annotations

import subprocess
import sys


def test_help_imports_no_heavy_module():
    code = (
        "import sys\n"
        "from persistbench.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('cv2', 'torch', 'numpy', 'lpips', 'yt_dlp'))\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Usage: " in out and "synth" in out and "verify" in out
    assert out.strip().endswith("HEAVY []")


def test_console_script_runs():
    out = subprocess.run(
        [sys.executable, "-m", "persistbench", "--version"], capture_output=True, text=True, check=True
    )
    assert "persistbench, version" in out.stdout
