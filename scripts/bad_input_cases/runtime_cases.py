"""Servers, executors and outputs: hostile judges (items 3, 8-9), slow servers and Ray (item 5),
outputs reached through symlinks (item 7), paths that look like errors (item 1), options (item 10)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .fixtures import Fixtures
from .harness import ROOT, check, fresh

sys.path.insert(0, str(ROOT / "tests"))
from fakes.judge_server import JudgeServer, completion

R2M_JUDGE = ["score", "--no-progress", "--pred", "r2m_run", "--dataset", "r2m", "--judge-model", "judge-x"]


def _answer(score: object) -> tuple[int, dict, dict]:
    return completion(f"<answer>{json.dumps({'score': score, 'reason': 'scripted'})}</answer>")


def _raw(status: int, body: bytes) -> Callable[[int, dict], tuple[int, object, dict]]:
    return lambda n, request: (status, body, {})


class RawJudge(JudgeServer):
    """``JudgeServer`` whose script may answer raw bytes (sent as they are) as well as JSON bodies."""

    def __init__(self, script):
        super().__init__(lambda n, body: script(n, body))
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    n = len(server.requests)
                    server.requests.append(body)
                status, reply, _ = script(n, body)
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd.RequestHandlerClass = Handler


@contextlib.contextmanager
def slow_server(root: Path | None = None, drip: float = 1.0) -> Iterator[str]:
    """An HTTP server on loopback that sends its headers, then one byte every ``drip`` seconds, forever
    (for ``root``: the real bytes of the file asked, so every read makes progress)."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _serve(self, body: bool) -> None:
            path = root / self.path.lstrip("/").split("?")[0] if root else None
            data = path.read_bytes() if path and path.is_file() else b"x" * (1 << 20)
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if not body:
                return
            for byte in data:
                if stop.wait(drip):
                    return
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:
                    return

        def do_GET(self):
            self._serve(True)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._serve(True)

        def do_HEAD(self):
            self._serve(False)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scores(prefix: str) -> Callable[[str], bool]:
    return lambda p: p.startswith(f"{prefix}/scores") or p.startswith("cache")


def judge_cases(fx: Fixtures, work: Path) -> None:
    env = {"PERSISTBENCH_CACHE": str(work / "cache")}
    metrics = ["--metrics", "frame_psnr,persistent_state"]
    failing = [
        ("HTTP 500", _raw(500, b'{"error": {"message": "boom"}}')),
        ("HTTP 401", _raw(401, b'{"error": {"message": "bad key"}}')),
        ("200 with a non-JSON body", _raw(200, b"<html>gateway</html>")),
        ("a refusal", lambda n, r: completion(None, refusal="I cannot help with that")),
        ("score 7 (out of range)", lambda n, r: _answer(7)),
        ("score 2.5", lambda n, r: _answer(2.5)),
        ("score true", lambda n, r: _answer(True)),
        ("no answer tag", lambda n, r: completion("the images look alike")),
        ("finish_reason length", lambda n, r: completion("<answer>{", finish="length")),
    ]
    for name, script in failing:
        fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
        with RawJudge(script) as server:
            args = [*R2M_JUDGE, "--judge-url", server.url, *metrics]
            check("judge", f"every answer {name}", work, args, "persistent_state", _scores("r2m_run"), env=env)

    def kept_psnr(code: int, text: str, w: Path) -> bool:
        record = json.loads(next((w / "r2m_run/scores/r2m-v2").glob("*/*.json")).read_text())
        return "frame_psnr" in record.get("values", {})

    fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
    with RawJudge(_raw(200, b"not json")) as server:
        args = [*R2M_JUDGE, "--judge-url", server.url, *metrics]
        check(
            "judge",
            "a non-JSON reply keeps the video's PSNR",
            work,
            args,
            "",
            _scores("r2m_run"),
            env=env,
            outcome=kept_psnr,
        )

    fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
    with slow_server() as url:
        args = [*R2M_JUDGE, "--judge-url", url + "/v1", "--judge-timeout", "2", *metrics]
        check(
            "judge",
            "a slow-drip judge with --judge-timeout 2",
            work,
            args,
            "persistent_state",
            _scores("r2m_run"),
            env=env,
        )

    fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
    args = [*R2M_JUDGE, "--judge-url", f"http://127.0.0.1:{_free_port()}/v1", *metrics]
    check("judge", "nothing listening", work, args, "persistent_state", _scores("r2m_run"), env=env)

    fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
    asked: dict[str, int] = {}
    with JudgeServer(lambda n, r: _answer(5)) as a, JudgeServer(lambda n, r: _answer(1)) as b:
        v1 = ["--protocol", "r2m-v1"]  # its judge prompts are the toolkit's own (r2m-v2 reads upstream's file)
        first = [*R2M_JUDGE, *v1, "--judge-url", a.url, "--metrics", "persistent_state"]
        from .harness import run

        run(first, work, env)
        second = [*R2M_JUDGE, *v1, "--judge-url", b.url, "--metrics", "persistent_state"]

        def b_asked(code: int, text: str, w: Path) -> bool:
            asked["b"] = len(b.requests)
            return code == 0 and len(b.requests) > 0

        check(
            "judge",
            "judge B after judge A, one cache, one --judge-model",
            work,
            second,
            "",
            _scores("r2m_run"),
            env=env,
            outcome=b_asked,
        )

    for name, url_of in [("nothing listening", lambda: f"http://127.0.0.1:{_free_port()}/v1")]:
        fresh(work)
        check("judge", f"doctor --judge-url: {name}", work, ["doctor", "--judge-url", url_of()], "127.0.0.1")
    fresh(work)
    with RawJudge(_raw(500, b"{}")) as server:
        check("judge", "doctor --judge-url: HTTP 500", work, ["doctor", "--judge-url", server.url], "500")
    with slow_server() as url:
        check("judge", "doctor --judge-url: slow drip", work, ["doctor", "--judge-url", url + "/v1"], "127.0.0.1")


def hang_cases(fx: Fixtures, work: Path) -> None:
    with slow_server(fx.wrop, drip=1.0) as url:
        fresh(work)
        args = ["fetch", "--no-progress", "--suite", "wrop", "--from", url, "--output", "o"]
        drip = {"PERSISTBENCH_HTTP_TIMEOUT": "5"}  # the user's deadline for one request (default 60 s)
        check(
            "hangs",
            "fetch --suite wrop from a slow-drip server",
            work,
            args,
            "127.0.0.1",
            lambda p: p.startswith("o"),
            env=drip,
        )
        fresh(work)
        args = ["infer", "--no-progress", "--model", "hold", "--dataset", url, "--suite", "wrop", "--output", "o"]
        check(
            "hangs",
            "infer --dataset URL of a slow-drip server",
            work,
            args,
            "127.0.0.1",
            lambda p: p.startswith("o"),
            env=drip,
        )
        fresh(work, (fx.wrop_run, "wrop_run"))
        info = json.loads((work / "wrop_run/run.json").read_text())
        info["dataset"]["root"] = url
        (work / "wrop_run/run.json").write_text(json.dumps(info))
        args = ["score", "--no-progress", "--pred", "wrop_run", "--metrics", "psnr"]
        check("hangs", "score --pred RUN whose run.json names a URL", work, args, "run.json", _scores("wrop_run"))

    cases = len(list(fx.wrop_run.glob("*/*/case.json")))

    def all_done(code: int, text: str, w: Path) -> bool:
        return code == 0 and len(list((w / "o").glob("*/*/case.json"))) == cases

    with slow_server() as url:
        host = url.removeprefix("http://")
        fresh(work, (fx.wrop, "wrop"))
        args = ["infer", "--no-progress", "--model", "hold", "--dataset", "wrop", "--output", "o"]
        check(
            "hangs", "--ray-address of an HTTP server", work, [*args, "--executor", "ray", "--ray-address", host], host
        )
    for workers in ("3", "10000"):
        fresh(work, (fx.wrop, "wrop"))
        before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("ray*"))
        ray = [*args, "--executor", "ray", "--workers", workers]

        def clean(code: int, text: str, w: Path, before=before) -> bool:
            return all_done(code, text, w) and set(Path(os.environ.get("TMPDIR", "/tmp")).glob("ray*")) <= before

        check("hangs", f"--executor ray --workers {workers} on a 2-CPU local Ray", work, ray, "", _out, outcome=clean)
    fresh(work, (fx.wrop, "wrop"))
    procs = [*args, "--executor", "processes", "--workers", "10000"]
    check("hangs", "--executor processes --workers 10000", work, procs, "", _out, outcome=all_done)


def _out(p: str) -> bool:
    return p == "o" or p.startswith("o/")


def output_cases(fx: Fixtures, work: Path) -> None:
    def linked(rel: str) -> Callable[[Path], None]:
        def apply(w: Path) -> None:
            target = w.parent / f"{w.name}-outside" / "victim"
            target.mkdir(parents=True, exist_ok=True)
            path = w / rel
            if path.exists():
                import shutil

                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target, target_is_directory=True)

        return apply

    rows = [
        (
            "R2M run: scores a link",
            (fx.r2m, fx.r2m_run),
            "r2m_run/scores",
            ["score", "--no-progress", "--pred", "r2m_run", "--dataset", "r2m", "--metrics", "frame_psnr"],
        ),
        (
            "R2M run: scores/r2m-v2 a link",
            (fx.r2m, fx.r2m_run),
            "r2m_run/scores/r2m-v2",
            ["score", "--no-progress", "--pred", "r2m_run", "--dataset", "r2m", "--metrics", "frame_psnr"],
        ),
        (
            "WROP run: scores a link",
            (fx.wrop, fx.wrop_run),
            "wrop_run/scores",
            ["score", "--no-progress", "--pred", "wrop_run", "--dataset", "wrop", "--metrics", "psnr"],
        ),
        (
            "PersistBench run: scores a link",
            (fx.ds, fx.run),
            "run/scores",
            ["score", "--no-progress", "--pred", "run", "--dataset", "ds", "--metrics", "psnr"],
        ),
        (
            "WROP fetch: train a link",
            (fx.wrop,),
            "o/train",
            ["fetch", "--no-progress", "--suite", "wrop", "--from", "wrop", "--output", "o"],
        ),
        (
            "R2M infer --resume: a trajectory folder a link",
            (fx.r2m, fx.r2m_run),
            "r2m_run/DDDAAA",
            ["infer", "--no-progress", "--model", "warp", "--dataset", "r2m", "--output", "r2m_run", "--resume"],
        ),
        (
            "WROP infer: output a link inside",
            (fx.wrop,),
            "o/"
            + sorted(p.name for p in fx.wrop_run.iterdir() if p.is_dir() and p.name not in ("scores", ".state"))[0],
            ["infer", "--no-progress", "--model", "hold", "--dataset", "wrop", "--output", "o"],
        ),
        # (report --output names a file of the user's: links in that path are the user's own and followed.)
    ]
    for name, sources, rel, args in rows:
        fresh(work, *((s, s.name) for s in sources))
        if rel.startswith("o/"):
            (work / "o").mkdir()
        linked(rel)(work)
        check(
            "symlinked outputs",
            name,
            work,
            args,
            Path(rel).name,
            lambda p, rel=rel: p.startswith(rel.split("/")[0]) and not p.startswith(rel + "/"),
        )


def path_cases(fx: Fixtures, work: Path) -> None:
    def ok(code: int, text: str, w: Path) -> bool:
        return code == 0

    for word in ("mirror", "invalid_data", "Error", "nvalid"):
        fresh(work, (fx.r2m, "r2m"))
        (work / word).mkdir()
        os.rename(work / "r2m", work / word / "r2m")
        import shutil

        shutil.copytree(fx.r2m_run, work / word / "run", symlinks=True)
        info = json.loads((work / word / "run/run.json").read_text())
        info["dataset"]["root"] = str(work / word / "r2m")
        (work / word / "run/run.json").write_text(json.dumps(info))
        args = [
            "score",
            "--no-progress",
            "--pred",
            f"{word}/run",
            "--dataset",
            f"{word}/r2m",
            "--metrics",
            "frame_psnr",
        ]
        check("decoding paths", f"R2M run under {word}/", work, args, "", lambda p: True, outcome=ok)
        fresh(work, (fx.wrop, "wrop"))
        (work / word).mkdir()
        os.rename(work / "wrop", work / word / "wrop")
        args = ["infer", "--no-progress", "--model", "hold", "--dataset", f"{word}/wrop", "--output", "o"]
        check("decoding paths", f"WROP corpus under {word}/", work, args, "", lambda p: True, outcome=ok)
    fresh(work)
    args = ["download", "--no-progress", "--limit", "1", "--output", "ds_mirror", "--cache", "cache_error"]
    check("decoding paths", "download into ds_mirror with cache_error", work, args, "", lambda p: True, outcome=ok)


def option_cases(fx: Fixtures, work: Path) -> None:
    base = ["infer", "--no-progress", "--model", "hold", "--dataset", "wrop", "--output", "o"]
    for option, value in [
        ("--cpus-per-task", "nan"),
        ("--cpus-per-task", "inf"),
        ("--cpus-per-task", "-1"),
        ("--gpus-per-task", "nan"),
        ("--workers", "0"),
        ("--shard", "3/2"),
        ("--shard", "x"),
        ("--per-task", "-5"),
        ("--limit", "-1"),
        ("--max-retries", "nan"),
    ]:
        fresh(work, (fx.wrop, "wrop"))
        check("options", f"{option} {value}", work, [*base, option, value], option)
    fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
    for option, value in [("--judge-timeout", "nan"), ("--judge-concurrency", "0"), ("--judge-url", "ftp://x")]:
        args = [*R2M_JUDGE, "--metrics", "persistent_state", option, value]
        if option != "--judge-url":
            args += ["--judge-url", "http://127.0.0.1:9/v1"]
        check("options", f"{option} {value}", work, args, option, _scores("r2m_run"))
