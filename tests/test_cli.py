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


def test_a_suites_options_are_options_of_the_command_once_the_suite_is_known():
    """``--suite`` resolves the suite before parsing: its options show in ``--help`` (another suite's do not),
    and without a suite every suite's are there, each saying whose it is."""
    from click.testing import CliRunner

    from persistbench.cli import main

    def help_of(*args: str) -> str:
        return CliRunner().invoke(main, ["infer", *args, "--help"], terminal_width=200).output

    wrop, r2m, every = help_of("--suite", "wrop"), help_of("--suite", "r2m"), help_of()
    assert "--tasks LIST" in wrop and "--per-task N" in wrop and "[--suite" not in wrop
    assert "--tasks LIST" not in r2m  # (the command's own description still names WROP's options)
    assert "[--suite wrop] Comma-separated task names" in every
    typo = CliRunner().invoke(main, ["infer", "--suite", "wrop", "--model", "hold", "--taks", "a"])
    assert typo.exit_code == 2 and "No such option '--taks'" in typo.output and "--tasks" in typo.output
