"""The arena's web app (Starlette, extra ``[arena]``): a blind pairwise page for raters holding a token.

Routes (every one but ``/app.js`` needs ``?t=<rater token>``; a missing or unknown token gets 403):

* ``GET /`` the page (static HTML: no study data in it, so nothing of a run or a case is ever parsed as
  markup; its script fills text nodes only), with a Content-Security-Policy that allows scripts from
  ``/app.js`` alone; without a valid token, a page saying how to get one's link again;
* ``GET /api/next`` the rater's pair: the pending one if any (a reload, a restart), else a new one from
  :func:`.schedule.next_pair`; run names are not in it until the study is closed;
* ``GET /api/frame/{pair}/{role}/{i}`` frame ``i`` of ``context``, ``object`` (the object asked about,
  outlined in the target's first frame, where the suite has one), ``reference``, ``left`` or ``right`` of one
  of the rater's pairs, as PNG;
* ``POST /api/vote`` ``{"pair", "answer"}`` (``application/json``, at most :data:`MAX_VOTE_BYTES`, strict JSON,
  else 415, 413 or 400 before anything is parsed or stored): the vote is stored (once per pair) before the next pair is
  returned.

Handlers that read the store or decode frames run in Starlette's thread pool, so one rater's slow first
frames do not hold another's vote.
"""

from __future__ import annotations

from collections import Counter
from importlib import resources

import numpy as np

from persistbench.arena import ratings, schedule
from persistbench.arena.store import Store
from persistbench.arena.study import Study
from persistbench.core.errors import PersistbenchError
from persistbench.io.files import parse_json

PAGE_VERSION = "arena-1"
ROLES = ("context", "object", "reference", "left", "right")
MAX_VOTE_BYTES = 4096  # {"pair", "answer"} is well under 100 bytes
CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'"


WEB_MODULES = ("starlette", "uvicorn")


def require_web() -> None:
    """One line naming the extra when the page's web stack (Starlette, uvicorn) does not import."""
    import importlib

    missing = []
    for module in WEB_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise PersistbenchError(
            f'arena serves its page with {" and ".join(missing)}, not installed: pip install -e ".[arena]" '
            "(or pip install 'persistbench[arena]')"
        )


def build_app(study: Study, store: Store):
    """The Starlette application serving ``study`` from ``store``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    keys = [study.suite.key(c) for c in study.cases]
    static = resources.files("persistbench.arena")

    def rater_of(request: Request) -> str | None:
        return store.rater(request.query_params.get("t"))

    def refused() -> Response:
        return JSONResponse({"error": "a valid rater token is needed (?t=...)"}, status_code=403)

    def page_refused() -> Response:
        html = static.joinpath("refused.html").read_text()
        return Response(html, status_code=403, media_type="text/html", headers={"Content-Security-Policy": CSP})

    def pair_json(pair: str) -> dict:
        shown = store.shown(pair)
        key = shown["case_key"]
        roles = {"left": shown["left_run"], "right": shown["right_run"]}
        roles = {**{r: r for r in ("context", "object", "reference")}, **roles}
        n = {
            r: len(study.frames(key, name)) if (r != "reference" or study.reference) else 0 for r, name in roles.items()
        }
        votes = store.votes()
        out = {
            "pair": pair,
            "question": study.question,
            "prompt": study.prompt(key),
            "case": key,
            "frames": n,
            "progress": {
                "votes": len(votes),
                "mine": sum(v["rater"] == shown["rater"] for v in votes),
                "covered": len({v["case_key"] for v in votes}),
                "cases": len(keys),
            },
            "page_version": PAGE_VERSION,
        }
        if store.closed():
            out["runs"] = {"left": shown["left_run"], "right": shown["right_run"]}
        return out

    def new_pair(rater: str) -> str:
        votes = store.votes()
        runs = list(study.runs)
        counts: Counter = Counter()
        rated = []
        for v in votes:
            if v["case_key"] in keys and v["left_run"] in runs and v["right_run"] in runs:
                i, j = runs.index(v["left_run"]), runs.index(v["right_run"])
                counts[(v["case_key"], min(i, j), max(i, j))] += 1
                rated.append(ratings.Vote(v["case_key"], v["rater"], i, j, v["answer"]))
        strengths = ratings.bradley_terry(ratings.win_matrix(rated, len(runs)))
        mine = sum(v["rater"] == rater for v in votes)
        case, left, right = schedule.next_pair(
            keys, len(runs), counts, strengths, store.last_case(rater), f"{study.id}/{rater}/{mine}"
        )
        return store.show(rater, case, runs[left], runs[right])

    def page(request: Request) -> Response:
        if rater_of(request) is None:
            return page_refused()
        html = static.joinpath("page.html").read_text()
        return Response(html, media_type="text/html", headers={"Content-Security-Policy": CSP})

    def asset(request: Request) -> Response:
        name = request.path_params["name"]
        kinds = {"app.js": "text/javascript", "app.css": "text/css"}
        if name not in kinds:
            return Response("not found", status_code=404)
        return Response(static.joinpath(name).read_text(), media_type=kinds[name])

    def next_(request: Request) -> Response:
        rater = rater_of(request)
        if rater is None:
            return refused()
        return JSONResponse(pair_json(store.pending(rater) or new_pair(rater)))

    def frame(request: Request) -> Response:
        rater = rater_of(request)
        if rater is None:
            return refused()
        shown = store.shown(request.path_params["pair"])
        role, i = request.path_params["role"], request.path_params["i"]
        if (
            shown is None
            or shown["rater"] != rater
            or role not in ROLES
            or (role == "reference" and not study.reference)
        ):
            return JSONResponse({"error": "no such frame"}, status_code=404)
        name = {"left": shown["left_run"], "right": shown["right_run"]}.get(role, role)
        frames = study.frames(shown["case_key"], name)
        if not 0 <= i < len(frames):
            return JSONResponse({"error": "no such frame"}, status_code=404)
        return Response(_png(frames[i]), media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})

    async def vote(request: Request) -> Response:
        rater = rater_of(request)
        if rater is None:
            return refused()
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return JSONResponse({"error": "a vote is sent as application/json"}, status_code=415)
        data = await bounded_body(request)
        if data is None:
            return JSONResponse({"error": f"a vote is at most {MAX_VOTE_BYTES} bytes"}, status_code=413)
        try:
            body = parse_json(data, "the vote")
        except PersistbenchError:
            body = None
        if (
            not isinstance(body, dict)
            or body.get("answer") not in ratings.ANSWERS
            or not isinstance(body.get("pair"), str)
        ):
            return JSONResponse(
                {"error": f"a vote is {{pair, answer}} with answer in {list(ratings.ANSWERS)}"}, status_code=400
            )
        return await run_in_threadpool(record, rater, body["pair"], body["answer"])

    async def bounded_body(request: Request) -> bytes | None:
        """The request's body, or None past :data:`MAX_VOTE_BYTES` (a declared length is checked first)."""
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_VOTE_BYTES):
            return None
        data = b""
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_VOTE_BYTES:
                return None
        return data

    def record(rater: str, pair: str, answer: str) -> Response:
        """Store the vote, then choose the next pair (in a worker thread: the page's other requests go on)."""
        shown = store.shown(pair)
        if shown is None or shown["rater"] != rater:
            return JSONResponse({"error": "no such pair for this rater"}, status_code=404)
        if store.closed():
            return JSONResponse({"error": "the study is closed"}, status_code=409)
        store.vote(pair, rater, answer, PAGE_VERSION)
        return JSONResponse(pair_json(store.pending(rater) or new_pair(rater)))

    def failed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=500)

    return Starlette(
        exception_handlers={PersistbenchError: failed},
        routes=[
            Route("/", page),
            Route("/static/{name}", asset),
            Route("/api/next", next_),
            Route("/api/frame/{pair}/{role}/{i:int}", frame),
            Route("/api/vote", vote, methods=["POST"]),
        ],
    )


def _png(frame: np.ndarray) -> bytes:
    from persistbench.io.images import encode_image

    return encode_image(frame, "png")
