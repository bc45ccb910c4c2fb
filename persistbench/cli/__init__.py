"""The ``persistbench`` command: argument parsing only; the work happens in the modules.

One module per command (``cli/<command>.py``), the options they share in :mod:`.options` and the
error table in :mod:`.errors`. Suites add commands of their own (PersistBench: ``download``,
``pack``) through :data:`persistbench.core.suites.SUITE_COMMANDS`. Commands are imported when they
are run or listed, and heavy modules (numpy, cv2, torch) only inside them, so ``persistbench --help``
starts fast.
"""

from __future__ import annotations

import os

import click

from persistbench import __version__
from persistbench.cli.errors import ErrorTable
from persistbench.core.registry import Registry

COMMANDS: Registry[click.Command] = Registry(  # the core's commands
    "command",
    {
        "synth": "persistbench.cli.synth:synth",
        "infer": "persistbench.cli.infer:infer",
        "score": "persistbench.cli.score:score",
        "verify": "persistbench.cli.verify:verify",
        "fetch": "persistbench.cli.fetch:fetch",
        "report": "persistbench.cli.report:report",
        "compare": "persistbench.cli.compare:compare",
        "certify": "persistbench.cli.certify:certify",
        "demo": "persistbench.cli.demo:demo",
        "doctor": "persistbench.cli.doctor:doctor",
        "arena": "persistbench.cli.arena:arena",
        "suites": "persistbench.cli.suites:suites",
    },
)


class Main(ErrorTable):
    """The core's commands and every registered suite's, found by name when needed."""

    def _table(self) -> list[Registry[click.Command]]:
        from persistbench.core.suites import SUITE_COMMANDS

        return [COMMANDS, SUITE_COMMANDS]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({name for table in self._table() for name in table})

    def find(self, name: str) -> click.Command | None:
        return next((table[name] for table in self._table() if name in table), None)


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="persistbench")
@click.option(
    "--debug",
    is_flag=True,
    help="Show tracebacks (of models, backends and the judge too); the same as PERSISTBENCH_DEBUG=1.",
)
def main(debug: bool) -> None:
    """Benchmark visual memory of video and 4D models on reprojected 360-degree videos."""
    if debug:
        os.environ["PERSISTBENCH_DEBUG"] = "1"  # worker processes inherit it
