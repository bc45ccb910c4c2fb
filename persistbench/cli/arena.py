"""``persistbench arena``: a blind pairwise study of runs, by people in a browser and by a judge."""

from __future__ import annotations

from pathlib import Path

import click

from persistbench.cli.options import (
    JUDGE_FORCE,
    JUDGE_KEY_ENV,
    JUDGE_MIN_ACCURACY,
    JUDGE_MODEL,
    JUDGE_URL,
    judge_timeout,
)


@click.command()
@click.argument("runs", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--output", "-o", required=True, type=click.Path(file_okay=False, path_type=Path), help="The study folder."
)
@click.option("--question", default=None, help="The question raters answer (default: the suite's).")
@click.option("--reference", is_flag=True, help="Show the ground truth beside the context, where the suite has one.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--add-rater", "add_rater", metavar="NAME", multiple=True, help="Add a rater; print their page's URL.")
@click.option("--rater-url", "rater_url", metavar="NAME", multiple=True, help="Print a rater's page URL again.")
@click.option("--close", is_flag=True, help="Close the study: write ratings.json and leaderboard.csv, reveal names.")
@click.option("--ratings", "ratings_only", is_flag=True, help="Write ratings.json and leaderboard.csv now.")
@click.option("--export", type=click.Path(dir_okay=False, path_type=Path), help="Write every vote as JSON lines.")
@click.option(
    "--merge",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Add another study's exported votes.",
)
@click.option("--rounds", type=click.IntRange(10, 100_000), default=1000, show_default=True, help="Bootstrap rounds.")
@JUDGE_URL
@JUDGE_MODEL
@JUDGE_KEY_ENV
@click.option("--judge-concurrency", type=click.IntRange(1, 256), default=4, show_default=True)
@judge_timeout(120.0)
@JUDGE_MIN_ACCURACY
@JUDGE_FORCE
def arena(
    runs,
    output,
    question,
    reference,
    host,
    port,
    add_rater,
    rater_url,
    close,
    ratings_only,
    export,
    merge,
    rounds,
    judge_url,
    judge_model,
    judge_key_env,
    judge_concurrency,
    judge_timeout,
    judge_min_accuracy,
    judge_force,
) -> None:
    """Compare runs blind, in pairs: serve the study's page, add raters, ask a judge, rate.

    \b
    persistbench arena runs/a runs/b runs/c --output study/      # create the study (and serve it)
    persistbench arena --output study/ --add-rater alice         # prints alice's URL (her token)
    persistbench arena --output study/                           # serve it again
    persistbench arena --output study/ --judge-url URL --judge-model M   # the judge as a rater
    persistbench arena --output study/ --close                   # ratings.json, leaderboard.csv; names shown

    Votes are kept in study/arena.sqlite, appended as they come; a restart loses none.
    """
    from persistbench.arena import results
    from persistbench.arena.app import require_web
    from persistbench.arena.store import Store
    from persistbench.arena.study import open_study
    from persistbench.core.outputs import STUDY, check_output

    if not (add_rater or rater_url or merge or judge_url or export or close or ratings_only):
        require_web()  # it will serve the page: say what is missing before anything is made
    if runs:
        check_output(output, inputs=[("run", r) for r in runs], accepts=(STUDY,))
        study = open_study(list(runs), question, reference)
        if study.coverage_note():
            click.echo(f"note: {study.coverage_note()}")
        store = Store.create(output, study.describe())
    else:
        store = Store(output)
        recorded = store.study()
        study = open_study([Path(p) for p in recorded["paths"]], recorded["question"], recorded["reference"])
        if study.id != recorded["id"]:
            raise click.ClickException(f"{output}: its runs' predictions changed since the study began")
    acted = False
    for name in add_rater:
        token = store.add_rater(name)
        click.echo(f"{name}: http://{host}:{port}/?t={token}")
        acted = True
    for name in rater_url:
        click.echo(f"{name}: http://{host}:{port}/?t={store.token(name)}")
        acted = True
    for path in merge:
        click.echo(f"merged {store.merge(path, {study.suite.key(c) for c in study.cases})} new vote(s) from {path}")
        acted = True
    if judge_url:
        from persistbench.arena.judge import battery, judge_study
        from persistbench.backends import JudgeOptions
        from persistbench.backends.judge import Judge
        from persistbench.core import calibration
        from persistbench.core.timing import today

        opts = JudgeOptions(judge_url, judge_model, judge_key_env, judge_concurrency, judge_timeout)
        found = calibration.ask(Judge(opts, cache=False), battery(study))
        line = calibration.check(found, judge_min_accuracy, judge_force)
        found["forced"] = bool(line)
        calibration.record(Path(output), found, today())
        if line and not judge_force:
            raise click.ClickException(f"{Path(output) / calibration.BATTERY}: {line}")
        click.echo(calibration.md_lines({**found, "date": today()})[0].strip())
        added, failures = judge_study(study, store, Judge(opts))
        for line in failures:
            click.echo(line, err=True)
        click.echo(f"the judge gave {added} new vote(s); {len(failures)} pair(s) failed")
        acted = True
    if export:
        click.echo(f"exported {store.export(export)} vote(s) to {export}")
        acted = True
    if close:
        store.close()
    if close or ratings_only:
        summary = results.write(store, study, output, rounds)
        click.echo(
            f"{summary['people']['votes']} vote(s); ratings: {output / 'ratings.json'}, {output / 'leaderboard.csv'}"
        )
        return
    if acted:
        return
    import uvicorn

    from persistbench.arena.app import build_app

    click.echo(f"serving {len(study.cases)} case(s) x {len(study.runs)} runs at http://{host}:{port}/?t=TOKEN")
    uvicorn.run(build_app(study, store), host=host, port=port, log_level="warning")
