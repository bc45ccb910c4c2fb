"""A loopback OpenAI-compatible chat endpoint with scripted replies, for the judge's tests.

``script`` is a function of (request number, the request's JSON) returning ``(status, body, headers)``:
a completion made by :func:`completion`, an error body, or anything else (``bytes`` are sent as they
are). Every request is recorded (its headers too, to check that the key is sent and where).
``models`` is what ``GET /v1/models`` lists (``None``: 404, as on a server without the listing).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def completion(text: str | None, finish: str = "stop", refusal: str | None = None) -> tuple[int, dict, dict]:
    message = {"role": "assistant", "content": text, "refusal": refusal}
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    return 200, body, {}


def seen(request: dict, visible: bool = True) -> tuple[int, dict, dict]:
    """A valid permanence answer for the frame tag the prompt asks about."""
    prompt = request["messages"][-1]["content"][-1]["text"]
    tag = re.search(r'"tag": "(F\d{4})"', prompt).group(1)
    answer = json.dumps({"reference_description": "a ball", "tag": tag, "visible": visible, "reason": "scripted"})
    return completion(f"<thinking>\nok\n</thinking>\n<answer>\n{answer}\n</answer>")


def looks(request: dict) -> tuple[int, dict, dict]:
    """A permanence answer that looks: the object is seen when the middles of the two crops (the part the
    tags do not cover) have about the same colour (mean absolute difference under 40 grey levels)."""
    a, b = (
        im[im.shape[0] // 4 : 3 * im.shape[0] // 4, im.shape[1] // 4 : 3 * im.shape[1] // 4] for im in images(request)
    )
    same = float(np.abs(a.astype(float).mean(axis=(0, 1)) - b.astype(float).mean(axis=(0, 1))).mean()) < 40
    return seen(request, visible=same)


def images(request: dict) -> list[np.ndarray]:
    """The RGB images a request shows (decoded from its PNG data URLs)."""
    import cv2

    out = []
    for part in request["messages"][-1]["content"]:
        if part["type"] == "image_url":
            data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
            out.append(cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB))
    return out


def state(request: dict) -> tuple[int, dict, dict]:
    """A persistent-state answer that looks at the two images: 5 when equal, one less per 8 grey levels of mean
    absolute difference in the ninth of the frame (a 3 x 3 grid) that differs most, at least 1."""
    a, b = images(request)
    d = np.abs(a.astype(float) - b.astype(float)).mean(axis=2)
    h, w = d.shape
    diff = max(
        float(d[i * h // 3 : (i + 1) * h // 3, j * w // 3 : (j + 1) * w // 3].mean())
        for i in range(3)
        for j in range(3)
    )
    answer = json.dumps({"score": max(1, 5 - int(diff // 8)), "reason": "scripted"})
    return completion(f"<answer>{answer}</answer>")


class JudgeServer:
    def __init__(self, script, models: list[dict] | None = None):
        self.script, self.requests, self.headers = script, [], []
        self.models, self.listings = models, 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    n = len(server.requests)
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, reply, headers = server.script(n, body)
                self._reply(status, reply, headers)

            def do_GET(self):
                with server.lock:
                    server.listings += 1
                if self.path.rstrip("/").endswith("/models") and server.models is not None:
                    self._reply(200, {"object": "list", "data": server.models}, {})
                else:
                    self._reply(404, {"error": {"message": "not found"}}, {})

            def _reply(self, status, reply, headers):
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> JudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
