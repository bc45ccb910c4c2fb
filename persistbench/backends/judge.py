"""A vision-language judge behind any OpenAI-compatible chat endpoint, asked strictly and cached.

A request is a prompt and images; its reply must be one JSON object (bare, in ``<answer>`` tags or
in a fenced block) that the caller's ``parse`` accepts. Handled, each as a failed judgment (a
:class:`JudgmentFailed` with a short ``reason`` for counting, never a number): a truncated reply
(``finish_reason`` "length"), a refusal (the ``refusal`` field), an empty reply, and invalid replies:
an HTTP body that is not a completion (not JSON, not an object, no choices, over 8 MiB), a reply
without a JSON object, a value out of range or of the wrong type (``parse`` raises
:class:`BadReply`). Invalid replies are asked again up to 3 times in all (the public toolkit's
rule); 429, 5xx, timeouts and refused connections are retried ``JudgeOptions.retries`` times with
exponential backoff (``Retry-After`` wins).

Time: ``JudgeOptions.timeout_s`` bounds a whole judgment, every attempt and wait included, and each
request gets what is left of it as a bound on the whole exchange (connection to last byte): the
HTTP client's own timeouts are per read, so a server that drips a byte a second would hold it
forever. After ``max_failures`` judgments in a row failed, the judge is not asked again in this
process (the circuit opens; each further judgment fails at once, reason "circuit open"), so a judge
that keeps failing costs a run about ``max_failures / concurrency + 1`` timeouts.

At most ``concurrency`` requests are in flight. Answers that parse are cached on disk by the sha256
of (the endpoint's identity, sampling settings, prompt, images), so a re-run asks nothing again and
another judge is never credited with an answer it did not give. The identity is the URL without
credentials or query, the model asked for, and what ``GET /models`` reports serving under that name
(vLLM's checkpoint ``root``, else the id; None when the server lists nothing). Every answer says
which judge gave it (:attr:`Answer.judge`). The API key is read from the environment variable
``key_env`` and is written nowhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from persistbench.backends import NO_JUDGE, BackendOptions, BackendSpec, BackendUnavailable, JudgeOptions
from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import judge_answer
from persistbench.io.files import parse_json, read_json, write_json

SYSTEM_PROMPT = "You are a helpful assistant."
MAX_REPLY_BYTES = 8 << 20  # an HTTP body larger than this is an invalid reply, not read further
ATTEMPTS = 3  # invalid replies: asked again up to this many times in all (the public toolkit's rule)


def prompt_template(name: str) -> str:
    """A judge prompt shipped with the protocols (``data/protocols/prompts/<name>.txt``)."""
    from importlib import resources

    return (resources.files("persistbench") / "data" / "protocols" / "prompts" / f"{name}.txt").read_text()


class BadReply(ValueError):
    """A reply that is not a valid answer (the message says why); asked again up to the request's attempts,
    then counted under ``reason`` (empty, refused and truncated replies too, as the public toolkit retries
    them)."""

    def __init__(self, message: str, reason: str = "invalid reply"):
        super().__init__(message)
        self.reason = reason


class JudgmentFailed(PersistbenchError):
    """A judgment that could not be obtained (after the retries); counted, never scored.

    ``reason`` is a short class for counting ("timeout", "unreachable", "HTTP 500", "refusal",
    "truncated", "empty reply", "invalid reply", "circuit open"); the message adds the details."""

    def __init__(self, model: str, reason: str, detail: str = ""):
        super().__init__(f"judge {model}: {reason}" + (f" ({detail})" if detail else ""))
        self.reason = reason


@dataclass(frozen=True)
class Answer:
    value: object  # what ``parse`` returned
    raw: str  # the reply's text
    cached: bool
    judge: dict  # who gave it: the endpoint's identity and ``answered_by``, the model its reply named


def png(image: np.ndarray) -> bytes:
    """PNG bytes of an RGB uint8 image (OpenCV's encoder, as the public toolkit sends its crops)."""
    import cv2

    ok, buf = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR))
    if not ok:
        raise PersistbenchError("an image could not be encoded as PNG for the judge")
    return buf.tobytes()


def request_digest(identity: dict, req: Request) -> str:
    """The cache key: sha256 of the endpoint's identity (:meth:`Judge.identity`), the sampling settings, the
    prompt and each image's PNG sha256."""
    body = {
        "judge": identity,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "enable_thinking": req.enable_thinking,
        "system": req.system,
        "text_first": req.text_first,
        "prompt": req.prompt,
        "images": [hashlib.sha256(png(i)).hexdigest() for i in req.images],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract_json(text: str) -> dict:
    """The JSON object of a reply: inside ``<answer>`` tags, else a fenced block, else the outermost braces."""
    for pattern in (_ANSWER, _FENCED):
        m = pattern.search(text)
        if m:
            inner = m.group(1).strip()
            fenced = _FENCED.search(inner)
            text = fenced.group(1) if fenced else inner
            break
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise BadReply("no JSON object in the reply (a refusal?)")
    try:
        obj = parse_json(text[start : end + 1], "the reply")
    except PersistbenchError as e:
        raise BadReply(str(e).removeprefix("the reply: ")) from None
    if not isinstance(obj, dict):
        raise BadReply("the reply's JSON is not an object")
    return obj


@dataclass(frozen=True)
class Request:
    """One question: a prompt, the images shown with it (``(H, W, 3)`` uint8 RGB), and sampling settings.

    The user turn holds the images, then the prompt (``text_first``: the prompt, then the images), after a
    system turn of ``system``. ``enable_thinking`` None sends no chat-template arguments. ``extract`` turns a
    reply's text into the JSON object the caller's parser reads; an invalid reply is asked again up to
    ``attempts`` times in all."""

    prompt: str
    images: tuple[np.ndarray, ...]
    temperature: float = 0.0
    max_tokens: int = 2048
    enable_thinking: bool | None = False
    system: str = SYSTEM_PROMPT
    text_first: bool = False
    extract: Callable[[str], dict] = field(default=extract_json, compare=False)
    attempts: int = field(default=ATTEMPTS, compare=False)


def _json_body(body: bytes) -> object:
    try:
        return parse_json(body, "the HTTP body")
    except PersistbenchError:
        raise BadReply(f"the HTTP body is not JSON: {body[:80]!r}") from None


def completion_of(body: bytes) -> tuple[dict, str | None, str | None]:
    """The first choice of a chat completion's HTTP body, the model the body names and its
    ``system_fingerprint`` (the serving configuration, where the server gives one); :class:`BadReply` when the
    body is not a completion (untrusted bytes: every field's type is checked)."""
    obj = _json_body(body)
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadReply(f"the HTTP body is not a chat completion (no choices): {body[:80]!r}")
    choice = choices[0]
    if not isinstance(choice.get("message"), dict):
        raise BadReply(f"the completion's choice has no message: {body[:80]!r}")
    model, fingerprint = obj.get("model"), obj.get("system_fingerprint")
    return (
        choice,
        model[:200] if isinstance(model, str) else None,
        fingerprint[:200] if isinstance(fingerprint, str) else None,
    )


class _Late(Exception):
    """A request's deadline passed."""


class Judge:
    """The client; :meth:`ask_many` asks several questions at once, at most ``concurrency`` in flight."""

    def __init__(self, opts: JudgeOptions, cache: bool = True):
        import httpx2  # the pinned openai's HTTP client: its transport errors while a body streams
        import openai

        self.opts, self.cache, self.openai, self.httpx = opts, cache, openai, httpx2
        self.client = openai.OpenAI(
            base_url=opts.url,
            api_key=os.environ.get(opts.key_env) or "EMPTY",
            timeout=opts.timeout_s,
            max_retries=0,  # retried here, where they are counted
        )
        self.requests = 0  # HTTP requests sent (retries included)
        self._lock = threading.Lock()
        self._identity: dict | None = None
        self._models: list[str] | str | None = None  # the ids GET /models listed, or why it could not
        self._failed_in_a_row, self._last_failure = 0, ""

    # ------------------------------------------------------------ the endpoint

    def identity(self) -> dict:
        """Who answers (the cache key's first part): ``judge_url`` (no credentials, no query), ``judge_model``
        (asked for) and ``served_model`` (what ``GET /models`` reports for it: vLLM's ``root``, else its id;
        None when unlisted). Asked once per judge, within ``timeout_s``."""
        with self._lock:
            if self._identity is None:
                served = None
                try:
                    listed = self._listing()
                    self._models = [e["id"] for e in listed]
                    entry = next((e for e in listed if e["id"] == self.opts.model), None)
                    if entry is not None:
                        root = entry.get("root")
                        served = root if isinstance(root, str) and root else entry["id"]
                except JudgmentFailed as e:
                    self._models = str(e)
                self._identity = {
                    "judge_url": _without_credentials(self.opts.url),
                    "judge_model": self.opts.model,
                    "served_model": served,
                }
            return self._identity

    def provenance(self) -> dict:
        return dict(self.identity())

    def models(self) -> list[str]:
        """The model ids the endpoint lists; raises :class:`JudgmentFailed` when it could not be listed."""
        self.identity()
        if isinstance(self._models, str):
            raise JudgmentFailed(self.opts.model, "no model listing", self._models)
        return list(self._models or [])

    def _listing(self) -> list[dict]:
        """``GET /models``' entries that have a string ``id``."""
        deadline = time.monotonic() + self.opts.timeout_s
        try:
            obj = _json_body(self._exchange(deadline, lambda c: c.models.with_streaming_response.list()))
        except _Late:
            raise JudgmentFailed(
                self.opts.model, "timeout", f"GET /models took over {self.opts.timeout_s:g} s"
            ) from None
        except BadReply as e:
            raise JudgmentFailed(self.opts.model, "invalid reply", str(e)) from None
        except Exception as e:
            if self._transient(e) or isinstance(e, self.openai.APIError):
                raise JudgmentFailed(self.opts.model, _reason(e), _short(e)) from None
            raise
        data = obj.get("data") if isinstance(obj, dict) else None
        return (
            [e for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)] if isinstance(data, list) else []
        )

    def _exchange(self, deadline: float, open_stream: Callable) -> bytes:
        """The body of one request, the whole exchange cut off at ``deadline`` (``time.monotonic()``).

        ``open_stream(client)`` opens a streamed response on a client of the request's own, in a worker
        thread; at the deadline that client is closed (its worker then ends at its next read, within the
        client's per-read timeout) and :class:`_Late` is raised. Bodies over :data:`MAX_REPLY_BYTES` are
        :class:`BadReply`."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Late
        http = self.openai.DefaultHttpxClient()
        client = self.client.with_options(http_client=http, timeout=remaining)
        box: dict = {}
        finished = threading.Event()

        def run() -> None:
            try:
                with open_stream(client) as response:
                    chunks, size = [], 0
                    for chunk in response.iter_bytes():
                        size += len(chunk)
                        if size > MAX_REPLY_BYTES:
                            raise BadReply(f"the HTTP body is over {MAX_REPLY_BYTES >> 20} MiB")
                        chunks.append(chunk)
                    box["body"] = b"".join(chunks)
            except BaseException as e:  # handed to the waiting thread
                box["error"] = e
            finally:
                finished.set()

        threading.Thread(target=run, name="judge-request", daemon=True).start()
        done = finished.wait(remaining)
        http.close()
        if not done:
            raise _Late
        if "error" in box:
            raise box["error"]
        return box["body"]

    def _transient(self, e: Exception) -> bool:
        oa = self.openai
        transient = (oa.RateLimitError, oa.InternalServerError, oa.APITimeoutError, oa.APIConnectionError)
        return isinstance(e, transient) or isinstance(e, self.httpx.TransportError)

    # ------------------------------------------------------------ judgments

    def ask_many(
        self, reqs: Sequence[Request], parsers: Sequence[Callable[[dict], object]]
    ) -> list[Answer | JudgmentFailed]:
        """Each request's :class:`Answer` (by its own parser), or the :class:`JudgmentFailed` that says why it
        has none; at most ``concurrency`` requests in flight."""
        if not reqs:
            return []

        def one(i: int) -> Answer | JudgmentFailed:
            try:
                return self.ask(reqs[i], parsers[i])
            except JudgmentFailed as e:
                return e

        with ThreadPoolExecutor(max_workers=max(1, min(self.opts.concurrency, len(reqs)))) as pool:
            return list(pool.map(one, range(len(reqs))))

    def ask(self, req: Request, parse: Callable[[dict], object]) -> Answer:
        """One judgment (cached), within ``timeout_s``; raises :class:`JudgmentFailed`."""
        identity = self.identity()
        path = judge_answer(request_digest(identity, req))
        if self.cache and path.is_file():
            try:
                entry = read_json(path)
                if entry["judge"] == identity:
                    raw = entry["raw"]
                    who = {"answered_by": entry["answered_by"], "system_fingerprint": entry.get("system_fingerprint")}
                    return Answer(parse(req.extract(raw)), raw, True, {**identity, **who})
            except (PersistbenchError, BadReply, KeyError, TypeError):
                pass  # a damaged or stale entry: ask again
        with self._lock:
            if self.opts.max_failures and self._failed_in_a_row >= self.opts.max_failures:
                raise JudgmentFailed(
                    self.opts.model,
                    "circuit open",
                    f"{self._failed_in_a_row} judgments in a row failed, the last: {self._last_failure}; "
                    "no more are asked in this run",
                )
        try:
            raw, who, value = self._judgment(req, parse, time.monotonic() + self.opts.timeout_s)
        except JudgmentFailed as e:
            with self._lock:
                self._failed_in_a_row += 1
                self._last_failure = e.reason
            raise
        with self._lock:
            self._failed_in_a_row = 0
        if self.cache:
            write_json(path, {"judge": identity, **who, "raw": raw})
        return Answer(value, raw, False, {**identity, **who})

    def _judgment(self, req: Request, parse: Callable[[dict], object], deadline: float):
        """(reply text, who answered: ``{answered_by, system_fingerprint}`` as the reply names them, the parsed
        value): invalid replies asked again, all by ``deadline``."""
        last = BadReply("no attempt")
        for _ in range(req.attempts):
            try:
                raw, answered_by, fingerprint = self._send(req, deadline)
                return raw, {"answered_by": answered_by, "system_fingerprint": fingerprint}, parse(req.extract(raw))
            except BadReply as e:
                last = e
        raise JudgmentFailed(
            self.opts.model, last.reason, f"no valid reply after {req.attempts} attempts: {str(last)[:160]}"
        )

    def _messages(self, req: Request) -> list[dict]:
        images = [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png(i)).decode()}}
            for i in req.images
        ]
        text = [{"type": "text", "text": req.prompt}]
        return [
            {"role": "system", "content": [{"type": "text", "text": req.system}]},
            {"role": "user", "content": text + images if req.text_first else images + text},
        ]

    def _send(self, req: Request, deadline: float) -> tuple[str, str | None, str | None]:
        """The text of one completion, the model and the system fingerprint it names; transient errors retried with backoff until
        ``deadline``; :class:`BadReply` for a body that is not a completion; the other failures raised."""
        model, wait = self.opts.model, self.opts.backoff_s
        messages = self._messages(req)

        def open_stream(client):
            return client.chat.completions.with_streaming_response.create(
                model=model,
                messages=messages,
                temperature=req.temperature,
                max_tokens=req.max_tokens,
                extra_body=None
                if req.enable_thinking is None
                else {"chat_template_kwargs": {"enable_thinking": req.enable_thinking}},
            )

        for attempt in range(self.opts.retries + 1):
            with self._lock:
                self.requests += 1
            try:
                body = self._exchange(deadline, open_stream)
            except _Late:
                raise JudgmentFailed(
                    model, "timeout", f"no reply within the {self.opts.timeout_s:g} s a judgment may take"
                ) from None
            except BadReply:
                raise
            except Exception as e:
                if not self._transient(e):
                    if isinstance(e, self.openai.APIError):
                        raise JudgmentFailed(model, _reason(e), _short(e)) from None
                    raise
                pause = _retry_after(e) or wait
                if attempt == self.opts.retries or time.monotonic() + pause >= deadline:
                    raise JudgmentFailed(model, _reason(e), f"{_short(e)}, after {attempt + 1} attempts") from None
                time.sleep(pause)
                wait *= 2
                continue
            choice, answered_by, fingerprint = completion_of(body)
            message = choice["message"]
            refusal = message.get("refusal")
            if refusal:
                raise BadReply(f"refused: {str(refusal)[:80]!r}", "refusal")
            if choice.get("finish_reason") == "length":
                raise BadReply(f"the reply was cut at max_tokens={req.max_tokens}", "truncated")
            text = message.get("content")
            if not isinstance(text, str) or not text.strip():
                raise BadReply("the reply has no text", "empty reply")
            return text, answered_by, fingerprint
        raise AssertionError("unreachable")


def tally(answers: Sequence[Answer | JudgmentFailed]) -> dict:
    """What a set of judgments gave: ``asked``, ``failed``, ``reasons`` (reason -> count, sorted) and
    ``answered_by`` (the distinct judges that gave the answers, :attr:`Answer.judge`)."""
    reasons = Counter(a.reason for a in answers if isinstance(a, JudgmentFailed))
    judges: list[dict] = []
    for a in answers:
        if isinstance(a, Answer) and a.judge not in judges:
            judges.append(a.judge)
    return {
        "asked": len(answers),
        "failed": sum(reasons.values()),
        "reasons": dict(sorted(reasons.items())),
        "answered_by": judges,
    }


def merge_tallies(tallies: Sequence[dict]) -> dict:
    """The :func:`tally` of the union of several tallies' judgments."""
    reasons: Counter = Counter()
    judges: list[dict] = []
    for t in tallies:
        reasons.update(t.get("reasons") or {})
        judges += [j for j in t.get("answered_by") or [] if j not in judges]
    return {
        "asked": sum(t.get("asked", 0) for t in tallies),
        "failed": sum(reasons.values()),
        "reasons": dict(sorted(reasons.items())),
        "answered_by": judges,
    }


def identity_line(judge: dict) -> str:
    """One judge identity of :attr:`Answer.judge` as text: the model asked for, the one served, the one the reply
    named and its system fingerprint."""
    return " / ".join(str(judge.get(k)) for k in ("judge_model", "served_model", "answered_by", "system_fingerprint"))


def failure_line(t: dict) -> str:
    """``"12 of 40 judgments failed (HTTP 500: 10, timeout: 2)"`` for a :func:`tally`."""
    why = ", ".join(f"{r}: {n}" for r, n in t["reasons"].items())
    return f"{t['failed']} of {t['asked']} judgments failed" + (f" ({why})" if why else "")


def _reason(e: Exception) -> str:
    """A transport or HTTP error's class for counting: ``HTTP <status>``, ``timeout`` or ``unreachable``."""
    status = getattr(e, "status_code", None)
    if status:
        return f"HTTP {status}"
    timeouts = tuple(t for t in (getattr(type(e), "__mro__", ())) if "Timeout" in t.__name__)
    return "timeout" if timeouts else "unreachable"


def _short(e: Exception) -> str:
    status = getattr(e, "status_code", None)
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"HTTP {status}: {text[:120]}" if status else text[:120]


def _retry_after(e: Exception) -> float | None:
    response = getattr(e, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(60.0, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


def _without_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part or a query (where keys are sometimes put)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def load(spec: BackendSpec, opts: BackendOptions) -> Judge:
    """The judge at the endpoint ``opts.judge`` names."""
    if opts.judge is None:
        raise BackendUnavailable(NO_JUDGE)
    return Judge(opts.judge)
