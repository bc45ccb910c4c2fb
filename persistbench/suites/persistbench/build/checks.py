"""What ``doctor`` checks for PersistBench's ``download``: a recent yt-dlp, a JavaScript runtime for YouTube and,
for ``--backend gcloud``, the Google Cloud CLI signed in with a project. All optional: each says what it is for."""

from __future__ import annotations

from persistbench.core.checks import Check, installed_version

DOWNLOAD = frozenset({"download"})


def checks() -> list[Check]:
    """The three checks, in the order ``doctor`` prints them."""
    return [yt_dlp_age(installed_version("yt-dlp")), _js_runtime(), gcloud_check()]


def _js_runtime() -> Check:
    """deno or Node.js >= 22 for yt-dlp's YouTube extraction; a node that is too old is named with its version."""
    import shutil

    from persistbench.suites.persistbench.build.ytdl_job import MIN_NODE, js_runtime, node_version

    name, used = "JavaScript runtime (YouTube)", frozenset({"download"})
    found = js_runtime()
    if found:
        return Check(name, True, f"{found[0]} at {found[1]}", used_by=used)
    fix = f"pip install deno (into this environment), or Node.js >= {MIN_NODE}; only YouTube sources need it"
    node = shutil.which("node")
    if node:
        version = node_version(node) or "unknown version"
        return Check(
            name, False, f"node {version} at {node}, older than the {MIN_NODE} yt-dlp needs", fix, used_by=used
        )
    return Check(name, False, "neither deno nor node on PATH", fix, used_by=used)


def gcloud_check(exe: str = "gcloud") -> Check:
    """An optional check of the Google Cloud CLI for ``download --backend gcloud``: there, signed in, a project."""
    import shutil

    from persistbench.core.errors import PersistbenchError
    from persistbench.suites.persistbench.build.gcloud_cli import Gcloud, signed_in, version

    name = "gcloud (download --backend gcloud)"
    if shutil.which(exe) is None:
        return Check(
            name,
            False,
            "not on PATH",
            "only --backend gcloud needs it: https://cloud.google.com/sdk/docs/install",
            used_by=DOWNLOAD,
        )
    cli = Gcloud(exe)
    try:
        found, account = version(cli), signed_in(cli)
        project = cli.value("config", "get-value", "project")
    except PersistbenchError as e:
        return Check(name, False, str(e), "check `gcloud info`", used_by=DOWNLOAD)
    if account is None:
        return Check(name, False, f"{found}, nobody signed in", "gcloud auth login", used_by=DOWNLOAD)
    if not project:
        return Check(
            name,
            False,
            f"{found}, signed in as {account}, no project",
            "gcloud config set project ID",
            used_by=DOWNLOAD,
        )
    return Check(name, True, f"{found}, signed in as {account}, project {project}", used_by=DOWNLOAD)


YT_DLP_MAX_AGE_DAYS = 60  # YouTube changes what yt-dlp must do often; older releases stop working


def yt_dlp_age(version: str | None, today=None) -> Check:
    """An optional check that the installed yt-dlp (versions are release dates, ``YYYY.MM.DD``) is recent."""
    import datetime

    today = today or datetime.date.today()
    try:
        y, m, d = (int(x) for x in (version or "").split(".")[:3])
        released = datetime.date(y, m, d)
    except ValueError:
        return Check(
            "yt-dlp release date",
            False,
            f"version {version!r} names no date",
            "pip install -U yt-dlp",
            used_by=DOWNLOAD,
        )
    age = (today - released).days
    fresh = age <= YT_DLP_MAX_AGE_DAYS
    return Check(
        "yt-dlp release date",
        fresh,
        f"{released.isoformat()}, {age} days old",
        "" if fresh else "YouTube breaks yt-dlp releases older than a few weeks: pip install -U yt-dlp",
        used_by=DOWNLOAD,
    )
