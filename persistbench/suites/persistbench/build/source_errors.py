"""What a failed source download means, and what to do about it: yt-dlp's messages mapped to one line each.

YouTube refuses downloads for reasons users meet every day; each kind here has a fix that can be acted
on. ``permanent`` kinds are not retried (the source is unavailable to this machine as it is);
``rate_limited`` makes the run slow down (:class:`persistbench.suites.persistbench.build.throttle.Throttle`)
and retry instead of failing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceProblem:
    kind: str
    permanent: bool
    fix: str  # what the user can do, one clause

    def line(self, message: str) -> str:
        """The reason shown for a case: the kind, yt-dlp's own words (first line, bounded) and the fix."""
        first = message.strip().splitlines()[0] if message.strip() else "no message"
        return f"{self.kind.replace('_', ' ')}: {first[:300]} ({self.fix})"


# in order: the first pattern that matches a message names its kind
KINDS: tuple[tuple[re.Pattern, SourceProblem], ...] = tuple(
    (re.compile(p, re.IGNORECASE), SourceProblem(kind, permanent, fix))
    for p, kind, permanent, fix in (
        (
            r"confirm you.re not a bot|captcha",
            "bot_check",
            True,
            "YouTube flags this machine's address: pass --cookies with a signed-in browser's cookies.txt, or "
            "download the clips on another machine and pass --sources-dir",
        ),
        (
            r"HTTP Error 429|Too Many Requests|rate-limited|content isn.t available, try again later",
            "rate_limited",
            False,
            "the run slows down and retries; --sleep-interval S and --rate-limit RATE keep it below the limit",
        ),
        (
            r"confirm your age|age-restricted|age restricted|inappropriate for some users",
            "age_restricted",
            True,
            "needs --cookies from a signed-in account allowed to watch it",
        ),
        (
            r"Private video|is private",
            "private",
            True,
            "only its owner can make it public again; the case cannot be rebuilt",
        ),
        (
            r"available (?:from|in) your (?:location|country)|geo.?restrict|HTTP Error 451",
            "geo_blocked",
            True,
            "download from a country where it is available: --proxy URL, or another machine and --sources-dir",
        ),
        (
            r"HTTP Error 403|Forbidden",
            "forbidden",
            True,
            "the host refuses this machine: pass --cookies or --proxy, or update yt-dlp (pip install -U yt-dlp)",
        ),
        (
            r"Video unavailable|has been removed|account .*terminated|no longer available|HTTP Error 40[04]|"
            r"HTTP Error 410|members-only|Unsupported URL|No such file|copyright",
            "removed",
            True,
            "the source is gone or closed; the case cannot be rebuilt unless someone has the clip (--sources-dir)",
        ),
    )
)
OTHER = SourceProblem("download_failed", False, "retried; check the network, or update yt-dlp: pip install -U yt-dlp")


def explain(message: str) -> SourceProblem:
    """The kind of problem yt-dlp's ``message`` reports (:data:`OTHER` when none matches)."""
    for pattern, problem in KINDS:
        if pattern.search(message):
            return problem
    return OTHER
