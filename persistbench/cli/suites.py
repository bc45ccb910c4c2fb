"""``persistbench suites``: the registered suites, their protocols and options."""

from __future__ import annotations

import click


@click.command()
def suites() -> None:
    """List every registered suite (built-in, or from the entry point group persistbench.suites): its
    protocols (the first is the default) and the options each command takes (--NAME VALUE or -S NAME=VALUE)."""
    from persistbench.core.suites import SUITES

    for name, spec in SUITES.entries().items():
        cls = SUITES[name]
        click.echo(f"{name}: {cls.title} ({spec})")
        click.echo(f"  protocols: {', '.join(cls.protocols)}")
        click.echo(f"  subsets: {', '.join(cls.subsets)}")
        for option in cls.option_specs:
            what = f"{option.flag} {option.metavar}"
            click.echo(f"  {what:24s} {', '.join(option.commands)}: {option.help}")
