"""The arena: ratings against an independent estimator, the schedule, the append-only store, and the page
served for real and driven by headless Chromium with the keyboard (two raters, a server killed mid-study)."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fakes import CHROMIUM

from persistbench.arena import ratings, schedule
from persistbench.arena.judge import combine
from persistbench.cli import main
from persistbench.core.errors import PersistbenchError

HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


def _votes(n: int, k: int, seed: int = 1) -> list[ratings.Vote]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a, b = rng.choice(k, 2, replace=False)
        answer = rng.choice(ratings.ANSWERS, p=[0.4, 0.3, 0.2, 0.1])
        out.append(ratings.Vote(f"c{i % 7}", f"r{i % 3}", int(a), int(b), str(answer), f"cat{i % 2}"))
    return out


# ---------------------------------------------------------------- ratings


def test_bradley_terry_is_choix_maximum_likelihood_on_the_same_votes():
    choix = pytest.importorskip("choix")
    k = 5
    votes = _votes(120, k)
    ours = ratings.bradley_terry(ratings.win_matrix(votes, k))
    data = []  # the same likelihood in whole wins: every half win doubled, the prior tie one win each way
    for v in votes:
        w, loser = (v.left, v.right) if v.answer == "left" else (v.right, v.left)
        data += [(w, loser)] * 2 if v.answer in ("left", "right") else [(v.left, v.right), (v.right, v.left)]
    data += [(i, j) for i in range(k) for j in range(k) if i != j]
    theirs = choix.ilsr_pairwise(k, data, alpha=0, tol=1e-14, max_iter=100_000)
    assert np.abs(ours - (theirs - theirs.mean())).max() < 1e-9


def test_bradley_terry_closed_form_on_two_runs():
    # a wins 3, b wins 1, one tie: with the prior tie, a has 4 of 6 wins -> p_a / p_b = 4 / 2
    votes = [ratings.Vote("c", "r", 0, 1, a) for a in ("left", "left", "right", "tie")]
    votes.append(ratings.Vote("c", "r", 1, 0, "right"))
    s = ratings.bradley_terry(ratings.win_matrix(votes, 2))
    assert s[0] - s[1] == pytest.approx(math.log(2.0), abs=1e-12)


def test_elo_bootstrap_position_and_agreement():
    votes = [ratings.Vote("c1", "r", 0, 1, "left"), ratings.Vote("c2", "r", 1, 0, "right")]
    e = ratings.elo(votes, 2)
    assert e[0] > 1000 > e[1] and e.sum() == pytest.approx(2000)
    many = _votes(60, 3)
    a, b = ratings.bootstrap(many, 3, 50, seed=3), ratings.bootstrap(many, 3, 50, seed=3)
    assert np.array_equal(a, b) and a.std(axis=0).min() > 0
    report = ratings.rate(many, ["x", "y", "z"], rounds=50)
    for r in report["runs"]:
        assert r["bt_interval"][0] <= r["bt_rating"] <= r["bt_interval"][1]
    pos = ratings.position_bias([ratings.Vote("c", "r", 0, 1, "left")] * 9 + [ratings.Vote("c", "r", 0, 1, "right")])
    assert pos["left"] == 9 and pos["left_share"] == 0.9 and pos["p_value"] == pytest.approx(22 / 1024)
    same = [
        ratings.Vote("c", "a", 0, 1, "left"),
        ratings.Vote("c", "b", 1, 0, "right"),
        ratings.Vote("c", "c", 0, 1, "tie"),
    ]
    assert ratings.agreement(same) == {"rater_pairs": 3, "agree": 1, "share": 1 / 3}
    assert combine("left", "right") == "left" and combine("left", "left") == "tie" and combine("tie", "tie") == "tie"


# ---------------------------------------------------------------- schedule


def test_every_case_and_pair_before_repeats_then_the_least_certain_never_the_same_case_twice():
    cases, k = ["a", "b", "c"], 3
    counts: Counter = Counter()
    last = None
    seen = []
    for n in range(9):
        case, i, j = schedule.next_pair(cases, k, counts, np.zeros(k), last, f"s/{n}")
        assert case != last
        counts[(case, min(i, j), max(i, j))] += 1
        seen.append((case, min(i, j), max(i, j)))
        last = case
    assert len(set(seen)) == 9  # all 3 cases x 3 pairs once
    strengths = np.array([0.0, 0.05, 3.0])  # 0 and 1 are close, 2 is far ahead
    picks = {schedule.next_pair(cases, k, counts, strengths, "a", f"t/{n}")[1:] for n in range(20)}
    assert all(sorted(p) == [0, 1] for p in picks) and len(picks) == 2  # both orders drawn


# ---------------------------------------------------------------- the store


def _wrop_runs(root: Path, names: tuple[str, ...] = ("hold", "flow", "hold-again")) -> list[Path]:
    from persistbench.core.infer import InferOptions, infer
    from persistbench.suites.wrop.synth import WropSynthConfig, make

    make(root / "corpus", WropSynthConfig(samples=1, loose=True))
    prompt = root / "corpus" / "trapdoor_drop_task" / "trapdoor_drop_0000" / "prompt.txt"
    prompt.write_text("Continue this scene. " + HOSTILE)
    runs = []
    for name in names:
        model = "flow" if name == "flow" else "hold"
        out = root / "runs" / name
        assert all(
            o.status == "done"
            for o in infer(InferOptions(dataset=root / "corpus", output=out, model=model), progress=False)
        )
        runs.append(out)
    return runs


@pytest.fixture(scope="module")
def wrop_runs(tmp_path_factory) -> list[Path]:
    return _wrop_runs(tmp_path_factory.mktemp("arena"))


@pytest.mark.slow
def test_votes_are_append_only_once_per_pair_and_merge_across_studies(wrop_runs, tmp_path):
    from persistbench.arena.store import Store
    from persistbench.arena.study import open_study

    study = open_study(wrop_runs)
    store = Store.create(tmp_path / "s", study.describe())
    with pytest.raises(PersistbenchError, match="no arena study"):
        Store(tmp_path / "nothing")
    store.add_rater("ann")
    pair = store.show("ann", study.suite.key(study.cases[0]), "hold", "flow")
    assert store.vote(pair, "ann", "left", "t") and not store.vote(pair, "ann", "right", "t")  # stored once
    with sqlite3.connect(store.path) as db, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE votes SET answer = 'right'")
    with sqlite3.connect(store.path) as db, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM votes")
    assert store.export(tmp_path / "votes.jsonl") == 1
    other = Store.create(tmp_path / "t", study.describe())
    cases = {study.suite.key(c) for c in study.cases}
    assert other.merge(tmp_path / "votes.jsonl", cases) == 1 and other.merge(tmp_path / "votes.jsonl", cases) == 0
    assert [{**v, "rater": v["rater"].removeprefix("merged:")} for v in other.votes()] == store.votes()
    assert other.votes()[0]["rater"] == "merged:ann"  # a rater of another study, named as such
    forged = tmp_path / "forged.jsonl"
    forged.write_text(json.dumps({**store.votes()[0], "pair": "x", "left_run": "someone-else"}) + "\n")
    with pytest.raises(PersistbenchError, match="forged.jsonl:1: a vote of other runs"):
        other.merge(forged, cases)
    with pytest.raises(PersistbenchError, match="holds a study of other runs"):
        Store.create(tmp_path / "s", {**study.describe(), "runs": ["a", "b"]})


@pytest.mark.slow
def test_studies_of_each_suite_serve_their_context_and_predictions(wrop_runs, r2m, sample_ds, tmp_path):
    """Three runs of each suite: the context, reference and predictions decoded; R2M-Bench's and
    PersistBench's studies voted on with the keyboard in headless Chromium (WROP's below)."""
    from persistbench.arena.store import Store
    from persistbench.arena.study import open_study
    from persistbench.core.infer import InferOptions, infer

    r2m_runs, pb_runs = [], []
    for model in ("hold", "warp", "flow"):
        out = tmp_path / "r2m" / model
        infer(InferOptions(dataset=r2m, output=out, model=model), progress=False)
        r2m_runs.append(out)
    for model in ("hold", "reproject", "oracle"):
        out = tmp_path / "pb" / model
        infer(InferOptions(dataset=sample_ds, output=out, model=model), progress=False)
        pb_runs.append(out)
    for runs, suite, n in ((wrop_runs, "wrop", 3), (r2m_runs, "r2m", None), (pb_runs, "persistbench", 8)):
        study = open_study(runs, reference=True)
        assert study.suite_name == suite and (n is None or len(study.cases) == n)
        key = study.suite.key(study.cases[0])
        assert study.frames(key, "context") and all(study.frames(key, r) for r in study.runs)
        assert all(f.shape[1] <= 320 and f.dtype == np.uint8 for f in study.frames(key, study.runs[0]))
        if suite != "wrop" and CHROMIUM:  # WROP's study is voted on at length below
            folder = tmp_path / f"{suite}-study"
            made = CliRunner().invoke(
                main, ["arena", *map(str, runs), "--output", str(folder), "--reference", "--add-rater", "ann"]
            )
            token = made.output.split("?t=")[1].strip()
            port = _free_port()
            server = Server(folder, port).start()
            try:
                answers = _vote_in_browser(f"http://127.0.0.1:{port}/?t={token}", ["ArrowLeft", "4", "ArrowRight"])
            finally:
                server.kill()
            assert [v["answer"] for v in Store(folder).votes()] == answers == ["left", "both_wrong", "right"]
    assert open_study(pb_runs, reference=True).frames(study.suite.key(study.cases[0]), "reference")


def _vote_in_browser(url: str, keys: list[str]) -> list[str]:
    """Open the page, press ``keys`` one by one (each waits for the next pair); returns the answers pressed."""
    from playwright.sync_api import sync_playwright

    names = {"ArrowLeft": "left", "1": "left", "ArrowRight": "right", "2": "right", "3": "tie", "4": "both_wrong"}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_context(bypass_csp=True).new_page()
        page.goto(url)
        page.wait_for_selector("body[data-pair]")
        assert page.evaluate("document.getElementById('context').naturalWidth") > 0  # a frame was drawn
        for key in keys:
            before = page.evaluate("document.body.dataset.pair")
            page.keyboard.press(key)
            page.wait_for_function(f"document.body.dataset.pair !== {json.dumps(before)}")
        browser.close()
    return [names[k] for k in keys]


# ---------------------------------------------------------------- the page, for real


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``persistbench arena --output DIR`` in its own process (killed with SIGKILL, as a crash would)."""

    def __init__(self, study: Path, port: int):
        self.study, self.port, self.proc = study, port, None

    def start(self) -> Server:
        cmd = [sys.executable, "-m", "persistbench", "arena", "--output", str(self.study), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/static/app.js", timeout=1)
                return self
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        raise RuntimeError(self.proc.stdout.read().decode()[-2000:] if self.proc.poll() is not None else "no server")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def _status(url: str, data: bytes | None = None) -> int:
    try:
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        return urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (.ci/run installs it)")
def test_raters_vote_with_the_keyboard_through_a_crash_and_nothing_is_lost(tmp_path):
    from playwright.sync_api import sync_playwright

    runs = _wrop_runs(tmp_path, ("hold", "flow", HOSTILE.replace("/", "-")))
    study = tmp_path / "study"
    result = CliRunner().invoke(
        main, ["arena", *map(str, runs), "--output", str(study), "--add-rater", "ann", "--add-rater", "bob"]
    )
    assert result.exit_code == 0, result.output
    urls = dict(line.split(": ", 1) for line in result.output.splitlines() if line.startswith(("ann:", "bob:")))
    port = _free_port()
    tokens = {name: url.split("?t=")[1] for name, url in urls.items()}
    server = Server(study, port).start()
    base = f"http://127.0.0.1:{port}"
    try:
        with urllib.request.urlopen(f"{base}/?t={tokens['ann']}") as r:
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
        for bad in ("", "?t=forged-token"):
            assert _status(f"{base}/{bad}") == 403 and _status(f"{base}/api/next{bad}") == 403
        vote = json.dumps({"pair": "x", "answer": "left"}).encode()
        assert _status(f"{base}/api/vote?t=forged", vote) == 403
        t = tokens["ann"]
        for path in (
            "/api/frame/x/left/0",
            "/api/frame/../../../etc/passwd/0",
            "/static/../arena.sqlite",
            "/static/store.py",
        ):
            assert _status(f"{base}{path}?t={t}") == 404, path
        pressed = {"ann": 0, "bob": 0}
        shown_prompts: set[str] = set()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            # the page's CSP would also stop inline payloads; bypassing it checks that none is ever made markup
            pages = {name: browser.new_context(bypass_csp=True).new_page() for name in tokens}
            for name, page in pages.items():
                page.goto(f"{base}/?t={tokens[name]}")
                page.wait_for_selector("body[data-pair]")
            keys = ["ArrowLeft", "2", "3", "4", "ArrowRight", "1"]
            for step, key in enumerate(keys):
                if step == 3:  # the server dies between votes and comes back
                    server.kill()
                    server.start()
                    for page in pages.values():
                        page.reload()
                        page.wait_for_selector("body[data-pair]")
                for name, page in pages.items():  # both raters at once
                    before = page.evaluate("document.body.dataset.pair")
                    page.keyboard.press(key)
                    page.wait_for_function(f"document.body.dataset.pair !== {json.dumps(before)}")
                    pressed[name] += 1
                    shown_prompts.add(page.inner_text("#prompt"))
            page = pages["ann"]
            bobs = pages["bob"].evaluate("document.body.dataset.pair")
            assert _status(f"{base}/api/frame/{bobs}/left/0?t={tokens['ann']}") == 404  # another rater's pair
            assert _status(f"{base}/api/frame/{bobs}/left/0?t={tokens['bob']}") == 200
            assert page.evaluate("window.pwned") is None  # no payload ran
            assert "Continue this scene. " + HOSTILE in shown_prompts  # shown as text, as written
            body = page.inner_text("body")
            assert "hold" not in body and "flow" not in body  # no run names before the study is closed
            browser.close()
    finally:
        server.kill()
    db = sqlite3.connect(study / "arena.sqlite")
    rows = db.execute("SELECT rater, pair, case_key, answer FROM votes ORDER BY id").fetchall()
    assert Counter(r[0] for r in rows) == {"ann": 6, "bob": 6} and len({r[1] for r in rows}) == 12
    answers = [r[3] for r in rows if r[0] == "ann"]
    assert answers == ["left", "right", "tie", "both_wrong", "right", "left"]
    for rater in ("ann", "bob"):
        mine = [r[2] for r in rows if r[0] == rater]
        assert all(a != b for a, b in zip(mine, mine[1:])), mine  # never the same case twice in a row
    assert len({r[2] for r in rows}) == 3  # every case covered

    closed = CliRunner().invoke(main, ["arena", "--output", str(study), "--close", "--rounds", "50"])
    assert closed.exit_code == 0, closed.output
    summary = json.loads((study / "ratings.json").read_text())
    assert summary["people"]["votes"] == 12 and summary["closed"] and summary["raters"] == ["ann", "bob"]
    assert {r["run"] for r in summary["people"]["runs"]} == {r.name for r in runs}
    board = (study / "leaderboard.csv").read_text().splitlines()
    assert board[0].startswith("rank,run,bt_rating") and len(board) == 4

    # the report's arena section: the hostile run name is text there too
    for run in runs:
        assert (
            CliRunner().invoke(main, ["score", "--pred", str(run), "--metrics", "psnr", "--no-progress"]).exit_code == 0
        )
    html = tmp_path / "report.html"
    made = CliRunner().invoke(main, ["report", *map(str, runs), "--arena", str(study), "--output", str(html)])
    assert made.exit_code == 0, made.output
    page_html = html.read_text()
    assert "Arena: Which continuation is physically right?" in page_html and 'id="arena-people"' in page_html
    assert "<script>window.pwned" not in page_html and "&lt;script&gt;window.pwned" in page_html


@pytest.mark.slow
def test_the_judge_rates_in_both_orders_beside_the_people(wrop_runs, tmp_path, monkeypatch):
    """A loopback judge that always prefers the side that moves away from the context's last frame (and, a
    second one, always says "left"): both orders of every pair asked; a side preference cancels to ties."""
    from fakes.judge_server import JudgeServer, completion, images

    from persistbench.arena.store import Store
    from persistbench.arena.study import open_study

    monkeypatch.setenv("PERSISTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PERSISTBENCH_JUDGE_KEY", "sk-test")
    study = tmp_path / "study"
    assert (
        CliRunner()
        .invoke(main, ["arena", *map(str, wrop_runs), "--output", str(study), "--add-rater", "ann"])
        .exit_code
        == 0
    )
    store = Store(study)
    keys = sorted({f"{c.subset}.{c.case_id}" for c in open_study(wrop_runs).cases})
    for n, (left, right, answer) in enumerate(
        [("flow", "hold", "left"), ("hold-again", "flow", "right"), ("hold", "hold-again", "tie")]
    ):
        pair = store.show("ann", keys[n], left, right)
        assert store.vote(pair, "ann", answer, "t")

    def moving(n, body):
        context, left, right = images(body)
        h = context.shape[0]
        last = context[:, -h:].astype(float)
        far = [float(np.abs(s[:, -h:].astype(float) - last).mean()) for s in (left, right)]
        answer = "tie" if abs(far[0] - far[1]) < 1e-9 else ("left" if far[0] > far[1] else "right")
        return completion(json.dumps({"answer": answer}) if n != 0 else "no json here")  # the first reply is invalid

    with JudgeServer(moving) as server:  # a heuristic rater, not a calibrated judge: forced past its battery
        args = ["arena", "--output", str(study), "--judge-url", server.url, "--judge-model", "judge-x", "--judge-force"]
        first = CliRunner().invoke(main, args)
        assert first.exit_code == 0 and "the judge gave 9 new vote(s); 0 pair(s) failed" in first.output, first.output
        battery = len(json.loads((study / "judge_battery.json").read_text())["batteries"][0]["answers"])
        asked = len(server.requests) - battery  # 3 cases x 3 pairs x 2 orders and one asked again (the first
        assert 10 <= asked <= 19  # reply is invalid), less identical questions
        again = CliRunner().invoke(main, args)
        assert "the judge gave 0 new vote(s)" in again.output
        assert len(server.requests) == asked + 2 * battery  # the votes stored and cached; the battery asked anew
    rated = CliRunner().invoke(main, ["arena", "--output", str(study), "--ratings", "--rounds", "20"])
    assert rated.exit_code == 0, rated.output
    summary = json.loads((study / "ratings.json").read_text())
    assert summary["judge"]["runs"][0]["run"] == "flow" and summary["judge"]["votes"] == 9
    assert summary["people"]["votes"] == 3 and summary["judge_vs_people"]["votes"] == 3
    assert "judge_bt_rating" in (study / "leaderboard.csv").read_text().splitlines()[0]

    with JudgeServer(lambda n, body: completion('{"answer": "left"}')) as biased:
        other = tmp_path / "study2"
        CliRunner().invoke(main, ["arena", *map(str, wrop_runs), "--output", str(other), "--add-rater", "x"])
        stopped = CliRunner().invoke(
            main, ["arena", "--output", str(other), "--judge-url", biased.url, "--judge-model", "left-x"]
        )
        assert stopped.exit_code == 1 and "50% right (--judge-min-accuracy 0.75)" in stopped.output
        assert not Store(other).votes()  # stopped before it rated
        CliRunner().invoke(
            main,
            ["arena", "--output", str(other), "--judge-url", biased.url, "--judge-model", "left-x", "--judge-force"],
        )
    assert {v["answer"] for v in Store(other).votes()} == {"tie"}  # a side preference cancels


@pytest.mark.slow
def test_the_page_shows_the_object_asked_about_and_raters_keep_their_links(sample_ds, tmp_path):
    """Without --reference the rater still sees which object the question is about; a lost link is printed
    again; a page opened without a token says how to get one (not raw JSON); a closed study takes no rater."""
    from persistbench.arena.study import open_study
    from persistbench.core.infer import InferOptions, infer

    runs = []
    for model in ("hold", "reproject"):
        infer(InferOptions(dataset=sample_ds, output=tmp_path / model, model=model), progress=False)
        runs.append(tmp_path / model)
    study = open_study(runs)
    (shown,) = study.frames(study.suite.key(study.cases[0]), "object")
    magenta = (shown[..., 0] > 200) & (shown[..., 1] < 60) & (shown[..., 2] > 200)
    assert magenta.sum() > 20  # the object's outline
    folder = tmp_path / "study"
    made = CliRunner().invoke(main, ["arena", *map(str, runs), "-o", str(folder), "--add-rater", "ann"])
    again = CliRunner().invoke(main, ["arena", "-o", str(folder), "--rater-url", "ann"])
    assert again.exit_code == 0 and again.output == made.output
    unknown = CliRunner().invoke(main, ["arena", "-o", str(folder), "--rater-url", "bob"])
    assert unknown.exit_code == 1 and "no rater named 'bob'; the raters are ann" in unknown.output
    if CHROMIUM:
        from playwright.sync_api import sync_playwright

        port = _free_port()
        server = Server(folder, port).start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = browser.new_page()
                page.goto(f"http://127.0.0.1:{port}/")
                assert "needs your rater link" in page.inner_text("h1") and "--rater-url" in page.content()
                page.goto(made.output.split(": ", 1)[1].strip().replace(":8765", f":{port}"))
                page.wait_for_selector("body[data-pair]")
                page.wait_for_function("document.getElementById('object').naturalWidth > 0")
                assert page.evaluate("document.getElementById('object-box').hidden") is False
                assert page.evaluate("document.getElementById('reference-box').hidden") is True
                browser.close()
        finally:
            server.kill()
    assert CliRunner().invoke(main, ["arena", "-o", str(folder), "--close", "--rounds", "10"]).exit_code == 0
    late = CliRunner().invoke(main, ["arena", "-o", str(folder), "--add-rater", "carl"])
    assert late.exit_code == 1 and "the study is closed; no rater can be added" in late.output


@pytest.mark.slow
def test_merge_takes_only_votes_this_study_could_have_had(wrop_runs, tmp_path):
    """Issue 39: a FIFO, a link to /dev/zero, a non-UTF-8 byte, the judge's name, one run on both sides, an
    unknown case and a 50 MB name are each refused in one line, quickly, with nothing stored."""
    from persistbench.arena.store import Store
    from persistbench.arena.study import open_study

    study = open_study(wrop_runs)
    store = Store.create(tmp_path / "s", study.describe())
    cases = {study.suite.key(c) for c in study.cases}
    good = {
        "pair": "p1", "study": study.id, "rater": "zoe", "case_key": sorted(cases)[0], "left_run": "hold",
        "right_run": "flow", "answer": "left", "time": "2026-01-01T00:00:00Z", "page_version": "arena-1",
    }  # fmt: skip
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "zero").symlink_to("/dev/zero")
    files = {
        "fifo": fifo,
        "zero": tmp_path / "zero",
        "bytes": b'{"pair": "\xff"}\n',
        "judge": {**good, "rater": "judge:Qwen"},
        "same": {**good, "right_run": "hold"},
        "case": {**good, "case_key": "nowhere/none"},
        "name": {**good, "rater": "x" * 50_000},
        "big": {**good, "rater": "x" * 50_000_000},
    }
    needles = {
        "fifo": "not a regular file", "zero": "not a regular file", "bytes": "codec can't decode", "judge": "the judge's name",
        "same": "two different runs", "case": "is not one of this study's", "name": "at most",
        "big": "larger than the",
    }  # fmt: skip
    for name, content in files.items():
        path = content if isinstance(content, Path) else tmp_path / f"{name}.jsonl"
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, dict):
            path.write_text(json.dumps(content) + "\n")
        start = time.monotonic()
        with pytest.raises(PersistbenchError) as caught:
            store.merge(path, cases)
        assert needles[name] in str(caught.value) and "\n" not in str(caught.value), (name, caught.value)
        assert time.monotonic() - start < 10, name
    assert store.votes() == []
    (tmp_path / "good.jsonl").write_text(json.dumps(good) + "\n")
    assert store.merge(tmp_path / "good.jsonl", cases) == 1 and store.votes()[0]["rater"] == "merged:zoe"


def test_a_damaged_store_is_one_line(tmp_path):
    from persistbench.arena.store import Store

    for content in (b"", b"garbage, not sqlite" * 100):
        (tmp_path / "arena.sqlite").write_bytes(content)
        with pytest.raises(PersistbenchError, match="not an arena study"):
            Store(tmp_path)
        result = CliRunner().invoke(main, ["arena", "-o", str(tmp_path), "--close"])
        assert result.exit_code == 1 and "not an arena study" in result.output and result.exception is not None
        assert (tmp_path / "arena.sqlite").read_bytes() == content  # read, never written into


@pytest.mark.slow
def test_the_vote_endpoint_bounds_and_checks_a_body_before_reading_it(wrop_runs, tmp_path):
    """Issue 39: a body past 4 KiB is 413 (declared or streamed), another content type 415, deep nesting,
    a key twice and NaN 400; the server stays up and stores nothing."""
    from persistbench.arena.store import Store

    study = tmp_path / "study"
    made = CliRunner().invoke(main, ["arena", *map(str, wrop_runs[:2]), "-o", str(study), "--add-rater", "ann"])
    token = made.output.split("?t=")[1].strip()
    port = _free_port()
    server = Server(study, port).start()
    url = f"http://127.0.0.1:{port}/api/vote?t={token}"

    def post(body: bytes, kind: str = "application/json", chunked: bool = False) -> int:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            head = f"POST /api/vote?t={token} HTTP/1.1\r\nHost: x\r\nContent-Type: {kind}\r\n"
            if chunked:  # no declared length: the server must stop reading past the bound
                s.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
                try:
                    for i in range(0, len(body), 65536):
                        part = body[i : i + 65536]
                        s.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    s.sendall(b"0\r\n\r\n")
                except OSError:
                    pass  # the server answered and closed early: what is wanted
            else:
                s.sendall((head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body[:65536])
            return int(s.recv(64).split()[1])

    try:
        assert post(b'{"pair": "x", "answer": "left"}', "text/plain") == 415
        assert post(b"x" * 10_000_000) == 413
        assert post(b"x" * 10_000_000, chunked=True) == 413
        assert post(b"[" * 200_000 + b"]" * 200_000) in (400, 413)
        assert post(b"[" * 2000 + b"]" * 2000) == 400
        assert post(b'{"pair": "x", "pair": "y", "answer": "left"}') == 400
        assert post(b'{"pair": NaN, "answer": "left"}') == 400
        assert _status(url, json.dumps({"pair": "x", "answer": "left"}).encode()) == 404  # parsed, no such pair
    finally:
        server.kill()
    assert Store(study).votes() == []


def test_a_study_of_runs_that_predicted_different_cases_says_so():
    from persistbench.arena.study import Study
    from persistbench.core.case import CaseRef

    cases = tuple(CaseRef("static", f"c{i}") for i in range(6))
    study = Study(("a", "b"), (Path("a"), Path("b")), "persistbench", "ds", cases, "q", False, (8, 6))
    assert study.coverage_note() == "the runs predicted different cases (a: 8, b: 6); the study shows the 6 they share"
    assert study.describe()["predicted"] == {"a": 8, "b": 6} and len(study.describe()["cases_fingerprint"]) == 64
    same = Study(("a", "b"), (Path("a"), Path("b")), "persistbench", "ds", cases, "q", False, (6, 6))
    assert same.coverage_note() is None and same.id == study.id  # the study's identity is its shared cases


@pytest.mark.slow
def test_the_arena_judge_answers_its_battery_first(wrop_runs, tmp_path):
    """A judge that prefers the side with something on it passes (the truth against blank frames, both ways);
    its figures are kept in the study folder."""
    from fakes.judge_server import JudgeServer, completion, images

    study = tmp_path / "study"
    assert (
        CliRunner().invoke(main, ["arena", *map(str, wrop_runs), "--output", str(study), "--add-rater", "a"]).exit_code
        == 0
    )

    def sees(n, body):
        _, left, right = images(body)
        return completion(json.dumps({"answer": "left" if left.std() > right.std() else "right"}))

    with JudgeServer(sees) as server:
        args = ["arena", "--output", str(study), "--judge-url", server.url, "--judge-model", "judge-x"]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "accuracy 100%, consistent under swaps 100%" in result.output
    (entry,) = json.loads((study / "judge_battery.json").read_text())["batteries"]
    assert entry["accuracy"] == 1.0 and entry["items"] >= 2 and not entry["forced"]
