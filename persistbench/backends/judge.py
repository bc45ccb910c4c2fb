"""A vision-language judge behind any OpenAI-compatible chat endpoint, asked strictly and cached.

A request is a prompt and images; its reply must be one JSON object (bare, in ``<answer>`` tags or
in a fenced block) that the caller's ``parse`` accepts. Handled, each as a failed judgment (an
exception, never a number): a truncated reply (``finish_reason`` "length"), a refusal (the
``refusal`` field, or a reply without a JSON object), a value out of range or of the wrong type
(``parse`` raises :class:`BadReply`), an empty reply. Invalid replies are asked again up to
``attempts`` times in all (the public toolkit's rule); 429, 5xx, timeouts and refused connections
are retried ``JudgeOptions.retries`` times with exponential backoff (``Retry-After`` wins). At most
``concurrency`` requests are in flight. Answers that parse are cached on disk by the sha256 of
(model, sampling settings, prompt, images), so a re-run asks nothing again. The API key is read
from the environment variable ``key_env`` and is written nowhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import PersistbenchError
from ..files import read_json, write_json
from ..layout import judge_answer
from . import JudgeOptions

SYSTEM_PROMPT = "You are a helpful assistant."


def prompt_template(name: str) -> str:
    """A judge prompt shipped with the protocols (``data/protocols/prompts/<name>.txt``)."""
    from importlib import resources

    return (resources.files("persistbench") / "data" / "protocols" / "prompts" / f"{name}.txt").read_text()


class BadReply(ValueError):
    """A reply that is not a valid answer (the message says why)."""


class JudgmentFailed(PersistbenchError):
    """A judgment that could not be obtained (after the retries); counted, never scored."""


@dataclass(frozen=True)
class Request:
    """One question: a prompt, the images shown before it (``(H, W, 3)`` uint8 RGB), and sampling settings."""

    prompt: str
    images: tuple[np.ndarray, ...]
    temperature: float = 0.0
    max_tokens: int = 2048
    enable_thinking: bool = False


@dataclass(frozen=True)
class Answer:
    value: object  # what ``parse`` returned
    raw: str  # the reply's text
    cached: bool


def png(image: np.ndarray) -> bytes:
    """PNG bytes of an RGB uint8 image (OpenCV's encoder, as the public toolkit sends its crops)."""
    import cv2

    ok, buf = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR))
    if not ok:
        raise PersistbenchError("an image could not be encoded as PNG for the judge")
    return buf.tobytes()


def request_digest(model: str, req: Request) -> str:
    """The cache key: sha256 of the model, the sampling settings, the prompt and each image's PNG sha256."""
    body = {
        "model": model,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "enable_thinking": req.enable_thinking,
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
        obj = json.loads(text[start : end + 1])
    except json.JSONDecodeError as e:
        raise BadReply(f"invalid JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise BadReply("the reply's JSON is not an object")
    return obj


class Judge:
    """The client; :meth:`ask_many` asks several questions at once, at most ``concurrency`` in flight."""

    def __init__(self, opts: JudgeOptions, cache: bool = True):
        import openai

        self.opts, self.cache, self.openai = opts, cache, openai
        self.client = openai.OpenAI(
            base_url=opts.url,
            api_key=os.environ.get(opts.key_env) or "EMPTY",
            timeout=opts.timeout_s,
            max_retries=0,  # retried here, where they are counted
        )
        self.requests = 0  # HTTP requests sent (retries included)

    def provenance(self) -> dict:
        return {"judge_model": self.opts.model, "judge_url": _without_credentials(self.opts.url)}

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
        """One judgment (cached); raises :class:`JudgmentFailed`."""
        digest = request_digest(self.opts.model, req)
        path = judge_answer(digest)
        if self.cache and path.is_file():
            try:
                raw = read_json(path)["raw"]
                return Answer(parse(extract_json(raw)), raw, True)
            except (PersistbenchError, BadReply, KeyError, TypeError):
                pass  # a damaged or stale entry: ask again
        problem = "no attempt"
        for _ in range(3):
            raw = self._send(req)
            try:
                value = parse(extract_json(raw))
            except BadReply as e:
                problem = f"{e}: {raw[:80]!r}"
                continue
            if self.cache:
                write_json(path, {"model": self.opts.model, "raw": raw})
            return Answer(value, raw, False)
        raise JudgmentFailed(f"judge {self.opts.model}: no valid reply after 3 attempts ({problem})")

    def _messages(self, req: Request) -> list[dict]:
        content = [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png(i)).decode()}}
            for i in req.images
        ]
        return [
            {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
            {"role": "user", "content": [*content, {"type": "text", "text": req.prompt}]},
        ]

    def _send(self, req: Request) -> str:
        """The text of one completion; transient errors retried with backoff, the others raised as failures."""
        oa = self.openai
        wait = self.opts.backoff_s
        for attempt in range(self.opts.retries + 1):
            self.requests += 1
            try:
                done = self.client.chat.completions.create(
                    model=self.opts.model,
                    messages=self._messages(req),
                    temperature=req.temperature,
                    max_tokens=req.max_tokens,
                    extra_body={"chat_template_kwargs": {"enable_thinking": req.enable_thinking}},
                )
            except (oa.RateLimitError, oa.InternalServerError, oa.APITimeoutError, oa.APIConnectionError) as e:
                if attempt == self.opts.retries:
                    raise JudgmentFailed(
                        f"judge {self.opts.model}: {_short(e)} (after {attempt + 1} attempts)"
                    ) from None
                time.sleep(_retry_after(e) or wait)
                wait *= 2
                continue
            except oa.APIError as e:
                raise JudgmentFailed(f"judge {self.opts.model}: {_short(e)}") from None
            if not done.choices:
                raise JudgmentFailed(f"judge {self.opts.model}: a reply without choices")
            choice = done.choices[0]
            if getattr(choice.message, "refusal", None):
                raise JudgmentFailed(f"judge {self.opts.model}: refused ({choice.message.refusal[:80]!r})")
            if choice.finish_reason == "length":
                raise JudgmentFailed(f"judge {self.opts.model}: the reply was truncated at max_tokens={req.max_tokens}")
            text = choice.message.content
            if not isinstance(text, str) or not text.strip():
                raise JudgmentFailed(f"judge {self.opts.model}: an empty reply")
            return text
        raise AssertionError("unreachable")


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
