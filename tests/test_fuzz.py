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
    from persistbench.core.suites import suite_class

    cls = suite_class(suite)
    shipped = json.loads(shipped_path(cls.protocols[0]).read_text())
    path = tmp_path / "p.json"
    path.write_bytes(data.draw(json_mutated(shipped)))
    _refuses_cleanly(cls.load_protocol, str(path))


@pytest.mark.parametrize("name", [[], {}, 3, None])
def test_a_protocol_name_that_is_no_string_is_refused_cleanly(tmp_path, name):
    """Found by the fuzzer: a list as the name once raised TypeError while the scorer was chosen."""
    from persistbench.core.protocol import shipped_path
    from persistbench.core.suites import suite_class

    cls = suite_class("wrop")
    path = tmp_path / "p.json"
    path.write_text(json.dumps(json.loads(shipped_path(cls.protocols[0]).read_text()) | {"name": name}))
    _refuses_cleanly(cls.load_protocol, str(path))


# ---------------------------------------------------------------- R2M-Bench: trajectories, meta_data, pair files


@pytest.fixture(scope="module")
def r2m_small(tmp_path_factory) -> Path:
    from persistbench.suites.r2m import synth

    return synth.make(tmp_path_factory.mktemp("r2m-fuzz") / "tree", synth.R2MSynthConfig(cases=1, n_poses=41))


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


@FUZZ
@given(data=st.data())
def test_wrop_checksums(wrop_corpus, data):
    from persistbench.suites.wrop.corpus import parse_checksums

    raw = (wrop_corpus / "train" / "checksums.txt").read_bytes()
    _refuses_cleanly(parse_checksums, data.draw(mutated(raw)), "checksums.txt")


def _one_archive(corpus: Path) -> Path:
    return next((corpus / "train").glob("*.tar"))


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
    from persistbench.metrics.pair_video import parse_state
    from persistbench.suites.persistbench.paper import parse_seen, reply_object

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
