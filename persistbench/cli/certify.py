"""``persistbench certify``: a certificate of a scored run, and its check."""

from __future__ import annotations

import click

from persistbench.cli.options import backend_options


@click.command()
@backend_options
@click.argument("run", type=click.Path(file_okay=False, exists=True))
@click.option("--protocol", default=None, help="The scores' folder (default: the run's only one).")
@click.option("--dataset", default=None, help="The run's dataset (default: the one its run.json names).")
@click.option(
    "--check",
    "cert",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="Check RUN against this certificate instead of writing one.",
)
@click.option("--sample", type=click.IntRange(0), default=5, show_default=True, help="--check: cases scored again.")
@click.option(
    "--tolerance",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="--check: largest accepted difference of a re-scored number (0: exact, as on the same stack).",
)
def certify(run, protocol, dataset, cert, sample, tolerance, backends) -> None:
    """Write RUN/certificate.json (what the run's numbers stand on, every file's sha256), or --check a run
    against one: edited files, missing cases, predictions replaced, a summary or weights that do not follow,
    and sampled cases scored again from their predictions (model-based metrics need the scoring's --weights
    and --judge-url).

    \b
    Examples:
      persistbench certify runs/mymodel
      persistbench certify runs/mymodel --check runs/mymodel/certificate.json --sample 20
    """
    from pathlib import Path

    from persistbench.core import certify as cert_mod

    if cert is None:
        click.echo(f"certificate: {cert_mod.write(Path(run), protocol, dataset)}")
        return
    problems, checked = cert_mod.check(Path(cert), Path(run), sample, tolerance, backends, dataset)
    for line in problems:
        click.echo(line)
    if problems:
        raise click.ClickException(f"{cert}: {len(problems)} problem(s); {checked} case(s) scored again")
    click.echo(f"{cert}: the run follows from it ({checked} case(s) scored again, every file's sha256 equal)")
