"""The judge against hostile and failing endpoints (issue 22, items 3, 5 and 8-9), on real loopback servers.

A cache keyed by the endpoint, a timeout that bounds a whole request and a whole judgment, a circuit
breaker for a judge that keeps failing, bad replies counted as failures of their judgment only, the
summary and the exit code of a scoring whose judge failed, and ``doctor --judge-url``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fakes.judge_server import JudgeServer, completion

from persistbench.backends import JudgeOptions
from persistbench.backends.judge import BadReply, Judge, JudgmentFailed, Request
from persistbench.core.layout import RunLayout
from persistbench.core.protocol import shipped_path
from persistbench.suites.r2m.suite import R2MBench

pytest.importorskip("openai")

REQ = Request("rate it", (np.full((8, 8, 3), 200, np.uint8),))


def _score(obj: dict) -> int:
    v = obj.get("score")
    if type(v) is not int or not 1 <= v <= 5:
        raise BadReply(f"score {v!r} is not an integer in [1, 5]")
    return v


def always(score: int):
    return lambda n, body: completion(json.dumps({"score": score, "reason": "scripted"}))


def _judge(url: str, tmp_path: Path, monkeypatch, **kw) -> Judge:
    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    options = {"retries": 1, "backoff_s": 0.01, **kw}
    return Judge(JudgeOptions(url, "judge-x", **options))


class DripServer:
    """Sends a response's headers, then one byte a second for as long as the client reads (a slow-drip server)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.connections = 0
        self.stop = threading.Event()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        with conn:
            try:
                conn.recv(1 << 20)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
                while not self.stop.is_set():
                    conn.sendall(b" ")
                    time.sleep(1)
            except OSError:
                pass

    def __enter__(self) -> DripServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.sock.close()


# ---------------------------------------------------------------- 3. the cache knows who answered


def test_the_cache_is_keyed_by_the_endpoint(tmp_path, monkeypatch):
    with JudgeServer(always(5)) as a, JudgeServer(always(1)) as b:
        assert _judge(a.url, tmp_path, monkeypatch).ask(REQ, _score).value == 5
        judge_b = _judge(b.url, tmp_path, monkeypatch)
        answer = judge_b.ask(REQ, _score)
        assert (answer.value, answer.cached, len(b.requests)) == (1, False, 1)  # B was asked, not A's answer
        assert answer.judge["judge_url"] == b.url and judge_b.provenance()["judge_url"] == b.url
        again = _judge(a.url, tmp_path, monkeypatch).ask(REQ, _score)
        assert (again.value, again.cached, len(a.requests)) == (5, True, 1)  # A's own answer still cached


def test_the_cache_is_keyed_by_the_model_the_server_reports(tmp_path, monkeypatch):
    listing = [{"id": "judge-x", "object": "model", "owned_by": "me", "root": "/ckpt/qwen-a"}]
    with JudgeServer(always(5), models=listing) as server:
        first = _judge(server.url, tmp_path, monkeypatch).ask(REQ, _score)
        assert first.judge["served_model"] == "/ckpt/qwen-a" and first.judge["answered_by"] == "scripted"
        server.models = [dict(listing[0], root="/ckpt/qwen-b")]  # another checkpoint behind the same URL and name
        second = _judge(server.url, tmp_path, monkeypatch).ask(REQ, _score)
        assert (second.cached, len(server.requests)) == (False, 2)
        assert second.judge["served_model"] == "/ckpt/qwen-b"


def test_the_endpoint_identity_holds_no_credentials(tmp_path, monkeypatch):
    with JudgeServer(always(3)) as server:
        url = server.url.replace("http://", "http://user:hunter2@") + "?api_key=sk-in-query"
        judge = _judge(url, tmp_path, monkeypatch)
        answer = judge.ask(REQ, _score)
        assert answer.judge["judge_url"] == server.url == judge.provenance()["judge_url"]
    stored = "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    assert stored and "hunter2" not in stored and "sk-in-query" not in stored and server.url in stored


def _r2m_protocol(tmp_path: Path) -> Path:
    """r2m-v1 with few pairs per video, so that a scoring asks the judge a few times."""
    config = json.loads(shipped_path("r2m-v1").read_text())
    config["pairs"].update(max_revisit=2, max_short=2, min_short=2)
    path = tmp_path / "r2m-small.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def r2m_run(r2m_tree, tmp_path):
    """One generated video per trajectory and a small protocol: (run, protocol, its scores folder name)."""
    run = Path(shutil.copytree(r2m_tree / "videos" / "pose", tmp_path / "run"))
    for second in run.glob("*/0002.mp4"):
        second.unlink()
    protocol = _r2m_protocol(tmp_path)
    return run, protocol, R2MBench.load_protocol(str(protocol)).dirname


def _cli(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PERSISTBENCH_CACHE": str(tmp_path / "cache"), "PERSISTBENCH_JUDGE_KEY": "sk-never-written"}
    return subprocess.run(
        [sys.executable, "-m", "persistbench", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def _score_r2m(tmp_path, r2m_tree, r2m_run, url, *extra, metrics="frame_psnr,persistent_state"):
    run, protocol, _ = r2m_run
    args = ["score", "--no-progress", "--pred", str(run), "--dataset", str(r2m_tree), "--protocol", str(protocol)]
    args += ["--metrics", metrics, "--allow-partial", "--device", "cpu", "--judge-url", url, "--judge-model", "judge-x"]
    return _cli(tmp_path, *args, "--judge-force", *extra)  # scripted judges that fail their battery on purpose


def _records(run: Path, dirname: str) -> list[dict]:
    paths = [p for p in RunLayout(run).scores_dir(dirname).glob("*/*.json") if p.parent.name != "pairs"]
    assert paths
    return [json.loads(p.read_text()) for p in paths]


def _states(run: Path, dirname: str) -> list:
    records = _records(run, dirname)
    return [v for r in records for k in ("revisit", "baseline", "short") for v in r["values"]["persistent_state"][k]]


@pytest.mark.slow
def test_a_second_judge_under_the_same_name_is_asked_and_named(r2m_tree, r2m_run, tmp_path):
    run, _, dirname = r2m_run
    with JudgeServer(always(5)) as a, JudgeServer(always(1)) as b:
        first = _score_r2m(tmp_path, r2m_tree, r2m_run, a.url)
        assert first.returncode == 0, first.stderr
        assert set(_states(run, dirname)) == {5.0}
        second = _score_r2m(tmp_path, r2m_tree, r2m_run, b.url)
        assert second.returncode == 0, second.stderr
        assert a.requests and b.requests  # B answered itself
    assert set(_states(run, dirname)) == {1.0}
    summary = json.loads(RunLayout(run).summary_json(dirname).read_text())
    assert [j["judge_url"] for j in summary["backends"]["judge"]] == [b.url]
    for record in _records(run, dirname):
        judged = record["judge"]["persistent_state"]
        assert [j["judge_url"] for j in judged["answered_by"]] == [b.url]
        assert judged["failed"] == 0 and judged["asked"] > 0


# ---------------------------------------------------------------- 5. timeouts bound whole requests and judgments


@pytest.mark.slow
def test_a_slow_drip_server_is_cut_at_the_timeout(tmp_path, monkeypatch):
    with DripServer() as server:
        judge = _judge(server.url, tmp_path, monkeypatch, timeout_s=2.0, retries=3)
        start = time.monotonic()
        out = judge.ask_many([REQ], [_score])[0]
        took = time.monotonic() - start
    assert isinstance(out, JudgmentFailed) and out.reason == "timeout", out
    assert took < 15  # the listing and the judgment, each bounded by 2 s; per read it never ends


@pytest.mark.slow
def test_a_judgment_with_its_retries_is_bounded_by_the_timeout(tmp_path, monkeypatch):
    def busy(n, body):
        time.sleep(0.5)
        return 503, {"error": {"message": "busy"}}, {}

    with JudgeServer(busy) as server:
        judge = _judge(server.url, tmp_path, monkeypatch, timeout_s=2.0, retries=50, backoff_s=0.2)
        start = time.monotonic()
        out = judge.ask_many([REQ], [_score])[0]
        took = time.monotonic() - start
    assert isinstance(out, JudgmentFailed) and out.reason in ("HTTP 503", "timeout"), out
    assert len(server.requests) < 10 and took < 15  # 51 attempts of 0.5 s and growing waits, unbounded


def test_a_judge_that_keeps_failing_opens_the_circuit(tmp_path, monkeypatch):
    with JudgeServer(lambda n, body: (500, {"error": {"message": "down"}}, {})) as server:
        judge = _judge(server.url, tmp_path, monkeypatch, retries=0, concurrency=1, max_failures=3)
        reqs = [Request(f"q{i}", REQ.images) for i in range(20)]
        out = judge.ask_many(reqs, [_score] * 20)
    assert all(isinstance(o, JudgmentFailed) for o in out)
    assert [o.reason for o in out[:3]] == ["HTTP 500"] * 3 and {o.reason for o in out[3:]} == {"circuit open"}
    assert len(server.requests) == 3 and "3 judgments in a row failed" in str(out[3])


@pytest.mark.slow
def test_a_slow_drip_judge_does_not_hang_score_and_is_reported(r2m_tree, r2m_run, tmp_path):
    run, _, dirname = r2m_run
    with DripServer() as server:
        result = _score_r2m(
            tmp_path, r2m_tree, r2m_run, server.url, "--judge-timeout", "2", "--judge-max-failures", "3"
        )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert "persistent_state" in result.stderr and "timeout" in result.stderr
    summary = json.loads(RunLayout(run).summary_json(dirname).read_text())
    assert set(summary["judge_failures"]["reasons"]) <= {"timeout", "circuit open"}
    assert summary["judge_failures"]["reasons"]["timeout"] >= 1


# ---------------------------------------------------------------- 8-9. bad replies are counted failures of their judgment


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [b"<html>oops</html>", b'{"choices": "x"}', b"[1]", b'{"choices": [{"message": 7}]}', b"\xff\xfe"],
    ids=["html", "choices-a-string", "a-list", "message-a-number", "not-utf8"],
)
def test_a_200_reply_that_is_not_a_completion_is_a_counted_failure(tmp_path, monkeypatch, body):
    with JudgeServer(lambda n, b: (200, body, {})) as server:
        out = _judge(server.url, tmp_path, monkeypatch).ask_many([REQ, REQ], [_score, _score])
    assert all(isinstance(o, JudgmentFailed) and o.reason == "invalid reply" for o in out), out
    assert len(server.requests) == 6  # each judgment asked 3 times, as for any invalid reply


SCRIPTS = {
    "HTTP 500": lambda n, body: (500, {"error": {"message": "down"}}, {}),
    "HTTP 401": lambda n, body: (401, {"error": {"message": "bad key"}}, {}),
    "invalid reply": lambda n, body: (200, b"<html>gateway</html>", {}),
    "refusal": lambda n, body: completion(None, refusal="I cannot judge that"),
    "out of range": lambda n, body: completion('{"score": 9}'),
}


@pytest.mark.slow
@pytest.mark.parametrize("reason", sorted(SCRIPTS))
def test_when_every_judgment_fails_score_says_why_and_exits_non_zero(r2m_tree, r2m_run, tmp_path, reason):
    run, _, dirname = r2m_run
    with JudgeServer(SCRIPTS[reason]) as server:
        result = _score_r2m(
            tmp_path, r2m_tree, r2m_run, server.url, "--judge-max-failures", "0", "--judge-timeout", "3"
        )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    want = "invalid reply" if reason == "out of range" else reason
    assert "persistent_state" in result.stderr and want in result.stderr
    assert "judge failures" in result.stdout  # the console's summary says so too
    summary = json.loads(RunLayout(run).summary_json(dirname).read_text())
    failures = summary["judge_failures"]
    assert failures["judgments"] > 0 and set(failures["reasons"]) == {want}
    assert summary["failed_metrics"]["persistent_state"]
    block = summary["metrics"]["persistent_state"]
    assert block["failed"] == summary["videos"] and block["excluded"] == 0 and block["valid"] == 0
    assert summary["metrics"]["frame_psnr"]["failed"] == 0  # the other metric of the same videos stands
    assert summary["families"]["appearance"]["nmr"] is not None
    assert set(_states(run, dirname)) == {None}


@pytest.mark.slow
def test_a_bad_reply_costs_only_its_judgment(r2m_tree, r2m_run, tmp_path):
    """Every other judgment is answered: the video's state score stands on the answered pairs."""
    run, _, dirname = r2m_run

    def script(n, body):
        return (200, b"not json", {}) if n % 2 else completion('{"score": 4}')

    with JudgeServer(script) as server:
        result = _score_r2m(tmp_path, r2m_tree, r2m_run, server.url, "--judge-concurrency", "1")
    assert result.returncode == 0, result.stderr
    states = _states(run, dirname)
    assert 4.0 in states
    summary = json.loads(RunLayout(run).summary_json(dirname).read_text())
    assert summary["failed_metrics"] == {} and summary["metrics"]["frame_psnr"]["failed"] == 0


# ---------------------------------------------------------------- doctor --judge-url


@pytest.mark.slow
def test_doctor_checks_the_judge_endpoint(tmp_path):
    listing = [{"id": "judge-x", "object": "model", "owned_by": "me"}, {"id": "other", "object": "model"}]
    with JudgeServer(lambda n, body: completion('{"ok": true}'), models=listing) as server:
        result = _cli(tmp_path, "doctor", "--for", "score", "--judge-url", server.url, "--judge-model", "judge-x")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "judge-x, other" in result.stdout and " s" in result.stdout and len(server.requests) == 1
        missing = _cli(tmp_path, "doctor", "--for", "score", "--judge-url", server.url, "--judge-model", "nope")
        assert missing.returncode == 1 and "nope is not among" in missing.stdout
    with JudgeServer(SCRIPTS["HTTP 401"]) as bad:
        result = _cli(tmp_path, "doctor", "--for", "score", "--judge-url", bad.url, "--judge-model", "judge-x")
    assert result.returncode == 1 and "HTTP 401" in result.stdout and "Traceback" not in result.stderr
    with DripServer() as drip:
        args = ["doctor", "--for", "score", "--judge-url", drip.url, "--judge-timeout", "2"]
        result = _cli(tmp_path, *args, timeout=60)
    assert result.returncode == 1 and "timeout" in result.stdout
