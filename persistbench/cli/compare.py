"""``persistbench compare``: paired comparisons of scored runs on the cases they share."""

from __future__ import annotations

import click


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
@click.option(
    "--output",
    "-o",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for compare.json and compare.md.",
)
@click.option("--protocol", default=None, help="The scores' folder (default: each run's only one).")
@click.option(
    "--resamples",
    type=click.IntRange(100, 100_000),
    default=1000,
    show_default=True,
    help="Paired-bootstrap resamples.",
)
@click.option(
    "--permutations",
    type=click.IntRange(100, 1_000_000),
    default=10_000,
    show_default=True,
    help="Random swaps of the permutation test from 20 shared cases on (fewer: every swap, exact).",
)
@click.option(
    "--cases",
    "cases_only",
    is_flag=True,
    help="Compare which cases two datasets (or the datasets of two runs) have, from their availability manifests.",
)
def compare(runs, output, protocol, resamples, permutations, cases_only) -> None:
    """Is run A better than run B? Paired comparisons on the cases every run scored.

    Per summary number and pair of runs: the difference, its paired-bootstrap 95% interval, the paired
    permutation test's p-value (exact below 20 cases), Holm's adjustment over the pairs and the effect size;
    the runs' ranks with their 95% intervals. Runs scored on different datasets or protocols are refused; runs
    on different case sets are compared on the cases they share, and the count is printed first.

    \b
    Examples:
      persistbench compare runs/hold runs/reproject
      persistbench compare runs/a runs/b runs/c --output comparison/
      persistbench compare --cases reconstructed/ ../colleague/reconstructed/
    """
    from pathlib import Path

    from persistbench.core.compare import compare as run_compare
    from persistbench.core.compare import markdown
    from persistbench.core.errors import UsageError
    from persistbench.core.report import judge_warnings, load_runs, scorer_of
    from persistbench.io.files import write_json, write_text

    if len(runs) < 2:
        raise UsageError("compare: name at least two runs")
    if cases_only:
        _compare_cases(runs)
        return
    loaded = load_runs(list(runs), protocol)
    _, scorer = scorer_of(loaded)
    estimands = [scorer.estimands(r["results"]["cases"], r["summary"]) for r in loaded]
    if any(e is None for e in estimands):
        raise UsageError(f"compare: {scorer.name} scores have no intervals to compare")
    common = set.intersection(*(set(e.units.keys) for e in estimands))
    unit = estimands[0].unit
    click.echo(
        f"comparing on {len(common)} {unit} every run has ("
        + ", ".join(f"{r['name']}: {len(e.units.keys)}" for r, e in zip(loaded, estimands))
        + ")"
    )
    for warning in judge_warnings(loaded):
        click.echo(f"note: {warning}")
    result = run_compare(loaded, estimands, resamples, permutations)
    out = Path(output)
    write_json(out / "compare.json", result.to_json())
    write_text(out / "compare.md", markdown(result, estimands[0].headline))
    for number in [n for n in estimands[0].headline if n in result.numbers]:
        for p in result.numbers[number]["pairs"]:
            verdict = f"{p['better']} is better" if p["better"] else "no difference shown"
            click.echo(
                f"{number}: {p['a']} - {p['b']} = {_fmt(p['difference'])} [{_fmt(p['low'])}, {_fmt(p['high'])}], "
                f"p (Holm) {_fmt(p['p_holm'])}: {verdict}"
            )
    click.echo(f"compare: {out / 'compare.md'}, {out / 'compare.json'}")


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _compare_cases(paths: tuple[str, ...]) -> None:
    """How the datasets at ``paths`` (or those their runs were inferred on) differ in their available cases."""
    from pathlib import Path

    from persistbench.core.errors import PersistbenchError, UsageError
    from persistbench.core.intervals import available_differences, available_line, available_summary
    from persistbench.core.score import dataset_of
    from persistbench.core.suites import detect, open_suite

    if len(paths) != 2:
        raise UsageError("compare --cases: name two datasets (or runs)")
    manifests = []
    for path in paths:
        root = dataset_of(path) if (Path(path) / "run.json").is_file() else path
        manifest = open_suite(root, detect(root), {}).availability()
        if manifest is None:
            raise PersistbenchError(
                f"{root}: no availability manifest (a dataset built by persistbench download has one)"
            )
        manifests.append(manifest)
        click.echo(f"{path}: {available_line(available_summary(manifest))}")
    only_a, only_b = available_differences(*manifests)
    for path, only in zip(paths, (only_a, only_b)):
        click.echo(f"only in {path}: {len(only)}" + (": " + ", ".join(only) if only else ""))
    if not only_a and not only_b:
        click.echo("the same cases are available in both")
