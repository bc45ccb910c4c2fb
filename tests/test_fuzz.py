"""Property-based fuzzing of every parser that takes untrusted bytes.

Each target gets valid input mutated (bytes flipped, cut, inserted; JSON leaves replaced by any JSON
value; nesting deepened) and must either accept it or raise the toolkit's own one-line error
(:class:`PersistbenchError`), never another exception. The budget is small in CI; a longer run by
hand: ``PERSISTBENCH_FUZZ_EXAMPLES=5000 python -m pytest tests/test_fuzz.py``.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistbench.core.errors import PersistbenchError

EXAMPLES = int(os.environ.get("PERSISTBENCH_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("PERSISTBENCH_FUZZ_EXAMPLES"),  # CI: the same examples every run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` with a few byte-level edits: flips, cuts, insertions, repeats."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "repeat", "truncate"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if op == "flip" and out:
            out[at] ^= draw(st.integers(1, 255))
        elif op == "cut":
            del out[at : at + draw(st.integers(1, 64))]
        elif op == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=32))
        elif op == "repeat":
            out[at:at] = bytes(out[at : at + 16]) * draw(st.integers(1, 50))
        else:
            del out[at:]
    return bytes(out)


def _paths(obj: object, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):
            found += _paths(v, (*prefix, i))
    return found


@st.composite
def json_mutated(draw, obj: object) -> bytes:
    """``obj`` as JSON text with one node replaced by any JSON value, deepened, or the text byte-mutated."""
    kind = draw(st.sampled_from(["replace", "replace", "deepen", "bytes"]))
    if kind == "bytes":
        return draw(mutated(json.dumps(obj).encode()))
    obj = json.loads(json.dumps(obj))
    path = draw(st.sampled_from(_paths(obj)))
    if kind == "deepen":
        depth = draw(st.integers(10, 5000))
        text = json.dumps(obj)
        return ("[" * depth + text + "]" * depth).encode()
    value = draw(json_values)
    if not path:
        return json.dumps(value).encode()
    holder = obj
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return json.dumps(obj, allow_nan=True).encode()


def _refuses_cleanly(call, *args) -> None:
    """``call(*args)`` returns, or raises a PersistbenchError whose every line is a complete message
    (a recipe file's errors are one line per problem, each naming the file and line)."""
    try:
        call(*args)
    except PersistbenchError as e:
        lines = str(e).strip().splitlines()
        assert lines and all(line.strip() for line in lines), f"an empty error line: {e!r}"
        assert len(lines) == 1 or all(":" in line for line in lines), f"a multi-line error: {e}"


# ---------------------------------------------------------------- recipes


@pytest.fixture(scope="module")
def recipe_line() -> dict:
    from persistbench.suites.persistbench.build.download import bundled_recipes

    return json.loads(bundled_recipes().read_text().splitlines()[0])


@FUZZ
@given(data=st.data())
def test_recipes(recipe_line, tmp_path, data):
    from persistbench.suites.persistbench.build.recipes import parse_recipes

    text = data.draw(json_mutated(recipe_line)).decode("utf-8", errors="replace")
    _refuses_cleanly(parse_recipes, text + "\n", "r.jsonl", tmp_path)


# ---------------------------------------------------------------- protocols


@pytest.mark.parametrize("suite", ["persistbench", "r2m", "wrop"])
@FUZZ
@given(data=st.data())
def test_protocol_files(suite, tmp_path, data):
    from persistbench.core.protocol import shipped_path
    from persistbench.core.suites import SUITES

    cls = SUITES[suite]
    shipped = json.loads(shipped_path(cls.protocols[0]).read_text())
    path = tmp_path / "p.json"
    path.write_bytes(data.draw(json_mutated(shipped)))
    _refuses_cleanly(cls.load_protocol, str(path))


@pytest.mark.parametrize("name", [[], {}, 3, None])
def test_a_protocol_name_that_is_no_string_is_refused_cleanly(tmp_path, name):
    """Found by the fuzzer: a list as the name once raised TypeError while the scorer was chosen."""
    from persistbench.core.protocol import shipped_path
    from persistbench.core.suites import SUITES

    cls = SUITES["wrop"]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(json.loads(shipped_path(cls.protocols[0]).read_text()) | {"name": name}))
    _refuses_cleanly(cls.load_protocol, str(path))


# ---------------------------------------------------------------- R2M-Bench: trajectories, meta_data, pair files


@pytest.fixture(scope="module")
def r2m_small(tmp_path_factory) -> Path:
    from persistbench.suites.r2m import synth

    return synth.make(tmp_path_factory.mktemp("r2m-fuzz") / "tree", synth.R2MSynthConfig(cases=1, n_poses=41))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_r2m_trajectories(r2m_small, tmp_path, data):
    from persistbench.suites.r2m.data import read_trajectory

    source = json.loads(next((r2m_small / "trajectories").glob("*.json")).read_text())
    path = tmp_path / "trajectory_X_30s.json"
    path.write_bytes(data.draw(json_mutated(source)))
    _refuses_cleanly(read_trajectory, path)


@FUZZ
@given(data=st.data())
def test_r2m_meta_data(r2m_small, tmp_path_factory, data):
    import shutil

    from persistbench.suites.r2m.data import Checkout

    root = tmp_path_factory.mktemp("co")
    shutil.rmtree(root)
    shutil.copytree(r2m_small, root, ignore=shutil.ignore_patterns("videos"))
    meta = next((root / "meta_data").glob("*.json"))
    meta.write_bytes(data.draw(json_mutated(json.loads(meta.read_text()))))
    _refuses_cleanly(lambda: Checkout(root).cases())


@FUZZ
@given(data=st.data())
def test_r2m_pair_files(data):
    from persistbench.suites.r2m.pairs import check_pair_file

    valid = {"revisit": [[0, 30]], "baseline": [[2, 20]], "short": [[5, 9]], "meta": {"seed": 42}}
    raw = data.draw(json_mutated(valid))
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return  # the bytes never reach the checker: the reader refuses them (test_bounded_reads)
    _refuses_cleanly(check_pair_file, obj, "pairs/X.json", 41)


# ---------------------------------------------------------------- WROP: checksums, tar headers, metadata, npz


@pytest.fixture(scope="module")
def wrop_corpus(tmp_path_factory) -> Path:
    from persistbench.suites.wrop.synth import WropSynthConfig, make

    out = tmp_path_factory.mktemp("wrop-fuzz") / "corpus"
    make(out, WropSynthConfig(samples=1, tasks=WropSynthConfig.tasks[:1]))
    return out


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_wrop_checksums(wrop_corpus, data):
    from persistbench.suites.wrop.corpus import parse_checksums

    raw = (wrop_corpus / "train" / "checksums.txt").read_bytes()
    _refuses_cleanly(parse_checksums, data.draw(mutated(raw)), "checksums.txt")


def _one_archive(corpus: Path) -> Path:
    return next((corpus / "train").glob("*.tar"))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_tar_headers(wrop_corpus, tmp_path, data):
    from persistbench.io.tarindex import LocalFile, build_index

    raw = _one_archive(wrop_corpus).read_bytes()
    headers = bytearray(raw)
    # mutate within the first headers (where the parser looks), keeping the data blocks
    head = data.draw(mutated(bytes(headers[:2048])))
    path = tmp_path / "a.tar"
    path.write_bytes(head + bytes(headers[2048:]))
    _refuses_cleanly(lambda: build_index(LocalFile(path), lambda name: None))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_wrop_members(wrop_corpus, tmp_path, data):
    """A sample whose metadata.json or trajectory.npz is mutated, read through the archive reader."""
    from persistbench.suites.wrop.corpus import LocalCorpus, checksums, open_archive

    src = _one_archive(wrop_corpus)
    which = data.draw(st.sampled_from(["metadata.json", "trajectory.npz"]))
    with tarfile.open(src) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for info, content in members:
            if info.name.endswith(which):
                content = (
                    data.draw(json_mutated(json.loads(content)))
                    if which.endswith(".json")
                    else data.draw(mutated(content))
                )
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    root = tmp_path / "c"
    (root / "train").mkdir(parents=True, exist_ok=True)
    (root / "train" / src.name).write_bytes(out.getvalue())
    import hashlib

    digest = hashlib.sha256(out.getvalue()).hexdigest()
    (root / "train" / "checksums.txt").write_text(f"{digest}  {src.name}  {len(members)}\n")

    def read() -> None:
        location = LocalCorpus(root)
        for entry in checksums(location).values():
            archive = open_archive(location, entry)
            for sample in archive.samples:
                archive.metadata(sample)
                archive.video_split(sample)
                archive.trajectory(sample)

    _refuses_cleanly(read)


@FUZZ
@given(data=st.data())
def test_npy_headers(tmp_path, data):
    from persistbench.io.safeload import load_npy

    buf = io.BytesIO()
    np.save(buf, np.arange(24, dtype="<f8").reshape(2, 3, 4))
    path = tmp_path / "x.npy"
    path.write_bytes(data.draw(mutated(buf.getvalue())))
    _refuses_cleanly(load_npy, path)


# ---------------------------------------------------------------- judge replies


replies = st.one_of(
    st.text(max_size=200),
    st.builds(lambda v: f"<answer>{json.dumps(v)}</answer>", json_values),
    st.builds(lambda v: f"```json\n{json.dumps(v)}\n```", json_values),
    st.builds(lambda v: f"<answer>{v!r}</answer>", json_values),  # Python literals, as the public parser reads
    st.builds(lambda n: "<answer>" + "[" * n + "]" * n + "</answer>", st.integers(1, 20000)),
    st.builds(lambda n: '{"score": ' + "9" * n + "}", st.integers(1, 5000)),
)


@FUZZ
@given(text=replies)
def test_judge_replies(text):
    from persistbench.backends.judge import BadReply, extract_json
    from persistbench.suites.persistbench.question import parse_seen, reply_object
    from persistbench.suites.r2m.pair_video import parse_state

    for extract, parsers in (
        (extract_json, (parse_state, parse_seen("F0001"))),
        (reply_object, (parse_seen("F0001"),)),
    ):
        try:
            obj = extract(text)
        except BadReply:
            continue
        assert isinstance(obj, dict)
        for parse in parsers:
            try:
                parse(obj)
            except BadReply:
                pass


# ---------------------------------------------------------------- the submission gate (issue 39)


@pytest.fixture(scope="module")
def submission_parts() -> tuple[dict, dict]:
    """The four members of a small submission that the gate reads whole: reports and manifest agreeing."""
    from persistbench.suites.persistbench.submission import MANIFEST_FORMAT, REPORTS, canonical_sha256

    entry = {"uid": "dynamic__a", "prediction_sha256": "0" * 64, "results": {"metadata": {}}}
    reports = {name: {"name": name} for name in REPORTS}
    reports["results.json"] = [entry]
    cases = {"dynamic__a": {"result_sha256": canonical_sha256(entry), "prediction_sha256": "0" * 64}}
    return reports, {"format": MANIFEST_FORMAT, "reports": {}, "cases": cases}


def _submission(path: Path, members: dict[str, bytes], manifest: dict | bytes) -> Path:
    import hashlib
    import zipfile

    from persistbench.suites.persistbench.submission import MANIFEST

    if isinstance(manifest, dict):  # agreeing with the members as they are now
        manifest = {**manifest, "reports": {n: hashlib.sha256(d).hexdigest() for n, d in members.items()}}
        manifest = json.dumps(manifest, allow_nan=True).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in {**members, MANIFEST: manifest}.items():
            z.writestr(name, data)
    return path


@FUZZ
@given(data=st.data())
def test_submission_members_and_manifests(submission_parts, tmp_path, data):
    """One member's JSON mutated (the manifest then agreeing with it, so the checks behind the hashes are
    reached), or the manifest itself mutated."""
    from persistbench.suites.persistbench import submission

    reports, manifest = submission_parts
    members = {name: json.dumps(value).encode() for name, value in reports.items()}
    target = data.draw(st.sampled_from([*reports, "manifest"]))
    if target == "manifest":
        path = _submission(tmp_path / "s.zip", members, data.draw(json_mutated(manifest)))
    else:
        members[target] = data.draw(json_mutated(reports[target]))
        path = _submission(tmp_path / "s.zip", members, manifest)
    _refuses_cleanly(submission.read, path)


@FUZZ
@given(data=st.data())
def test_submission_zip_bytes(submission_parts, tmp_path, data):
    from persistbench.suites.persistbench import submission

    reports, manifest = submission_parts
    members = {name: json.dumps(value).encode() for name, value in reports.items()}
    good = _submission(tmp_path / "good.zip", members, manifest).read_bytes()
    assert submission.read(tmp_path / "good.zip").results == reports["results.json"]  # the unmutated one passes
    (tmp_path / "s.zip").write_bytes(data.draw(mutated(good)))
    _refuses_cleanly(submission.read, tmp_path / "s.zip")


# ---------------------------------------------------------------- votes: merged and posted (issue 39)

GOOD_VOTE = {
    "pair": "p1", "study": "s1", "rater": "zoe", "case_key": "task/a", "left_run": "hold", "right_run": "flow",
    "answer": "left", "time": "2026-01-01T00:00:00Z", "page_version": "arena-1",
}  # fmt: skip


@pytest.fixture(scope="module")
def vote_store(tmp_path_factory):
    from persistbench.arena.store import Store

    store = Store.create(tmp_path_factory.mktemp("votes") / "study", {"id": "s1", "runs": ["hold", "flow"]})
    store.add_rater("zoe")
    return store


@FUZZ
@given(data=st.data())
def test_merged_votes(vote_store, tmp_path, data):
    lines = data.draw(st.lists(json_mutated(GOOD_VOTE), min_size=1, max_size=3))
    (tmp_path / "votes.jsonl").write_bytes(b"\n".join(lines))
    before = vote_store.votes()
    try:
        vote_store.merge(tmp_path / "votes.jsonl", {"task/a"})
    except PersistbenchError as e:
        assert "\n" not in str(e) and vote_store.votes() == before  # refused whole: nothing stored
    assert all(not v["rater"].startswith("judge:") for v in vote_store.votes())


@pytest.fixture(scope="module")
def vote_app(tmp_path_factory):
    """The arena's real application on a two-run WROP study, and a rater's token."""
    from test_arena import _wrop_runs

    from persistbench.arena.app import build_app
    from persistbench.arena.store import Store
    from persistbench.arena.study import open_study

    root = tmp_path_factory.mktemp("vote-app")
    study = open_study(_wrop_runs(root, ("hold", "flow")))
    store = Store.create(root / "study", study.describe())
    token = store.add_rater("ann")
    return build_app(study, store), token


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_vote_bodies(vote_app, data):
    """Any body and content type: a 2xx or 4xx answer, never a server error (the test client raises them)."""
    from starlette.testclient import TestClient

    app, token = vote_app
    body = data.draw(st.one_of(json_mutated({"pair": "p1", "answer": "left"}), st.binary(max_size=64)))
    kind = data.draw(st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", ""]))
    with TestClient(app) as client:
        reply = client.post(f"/api/vote?t={token}", content=body, headers={"content-type": kind})
    assert reply.status_code < 500, reply.text


# ---------------------------------------------------------------- the SSH job's answer (issue 39)


@FUZZ
@given(data=st.data())
def test_ssh_job_answers(data):
    from persistbench.suites.persistbench.build.remote import MAX_CLIP_BYTES, job_answer

    good = {"ok": True, "path": "clips/a.mp4", "size": 1234, "sha256": "a" * 64}
    failed = {"ok": False, "message": "HTTP Error 403: Forbidden"}
    raw = data.draw(st.one_of(json_mutated(good), json_mutated(failed), st.binary(max_size=200)))
    prefix = data.draw(st.sampled_from([b"", b"progress 10%\n", b"\n\n"]))
    try:
        answer = job_answer(prefix + raw, "host")
    except PersistbenchError as e:
        assert "\n" not in str(e) and str(e).startswith("host")
        return
    assert isinstance(answer["ok"], bool)
    if answer["ok"]:
        assert 0 <= answer["size"] <= MAX_CLIP_BYTES and len(answer["sha256"]) == 64
    else:
        assert isinstance(answer["message"], str) and "\n" not in answer["message"]


# ---------------------------------------------------------------- the Hub's answers (issue 39)


@pytest.fixture(scope="module")
def hub_answers():
    """A loopback Hub whose next answer the test sets: (status, headers, body) for every request."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    state = {"answer": (200, {}, b"{}")}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, body: bool) -> None:
            status, headers, payload = state["answer"]
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", headers.get("Content-Length", str(len(payload))))
            self.end_headers()
            if body:
                self.wfile.write(payload)

        def do_GET(self):
            self.answer(True)

        def do_HEAD(self):
            self.answer(False)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


header_values = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_hub_answers(hub_answers, monkeypatch, data):
    """A repository's description and a file's metadata as the Hub answers them: any status, headers and body
    give a description, or one line."""
    from huggingface_hub import constants

    from persistbench.io import hub

    url, state = hub_answers
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setenv("PERSISTBENCH_HTTP_TIMEOUT", "5")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    info = {"id": "o/r", "sha": "0" * 40, "siblings": [{"rfilename": "a.tar", "size": 3}], "private": False}
    body = data.draw(st.one_of(json_mutated(info), st.binary(max_size=64)))
    status = data.draw(st.sampled_from([200, 200, 206, 302, 401, 404, 429, 500]))
    headers = data.draw(
        st.dictionaries(
            st.sampled_from(["X-Repo-Commit", "X-Linked-Size", "ETag", "X-Linked-Etag", "Location", "Content-Length"]),
            header_values,
            max_size=4,
        )
    )
    state["answer"] = (status, headers, body)
    for call in (lambda: hub.dataset_info("o/r", None), lambda: hub.file_metadata("o/r", "a.tar", None)):
        try:
            call()
        except PersistbenchError as e:
            assert "\n" not in str(e)
