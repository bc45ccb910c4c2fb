"""Issue 22, items 5, 6 and 10: one bounded reader for untrusted files.

FIFOs never block, devices behind links are refused, reading stops at the limit, and malformed JSON
or ``.npy`` headers (deep nesting, huge integers, duplicate keys, lying shapes) give one line naming
the file. The commands run as a user runs them, in a child process with a timeout, on real FIFOs and
real symlinks.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from fakes.clirun import refused, run_cli

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import parse_json, read_bounded, read_json
from persistbench.io.safeload import load_npy, load_npy_bytes
from persistbench.io.video import read_frames
from persistbench.suites.r2m import layout


def _image(root: Path) -> Path:
    return next((root / "test_imgs").glob("*.png"))


@pytest.mark.parametrize("which", ["image", "meta_data", "trajectory"])
def test_a_fifo_in_a_checkout_is_refused_without_blocking(checkout, which):
    target = {
        "image": _image(checkout),
        "meta_data": layout.meta_path(checkout, "DDDAAA"),
        "trajectory": layout.trajectory_path(checkout, "DDDAAA"),
    }[which]
    target.unlink()
    os.mkfifo(target)
    refused(run_cli("verify", checkout, timeout=60), target.name, "not a regular file")


def test_a_link_to_a_device_is_refused_not_read(tmp_path):
    run = tmp_path / "run"
    (run / "static").mkdir(parents=True)  # a run's case folders: still a run, not taken for a dataset
    (run / "run.json").symlink_to("/dev/zero")
    refused(run_cli("score", "--pred", run, timeout=60), "run.json", "not a regular file")
    with pytest.raises(PersistbenchError, match="not a regular file"):
        read_json(run / "run.json")


def test_reading_stops_at_the_limit_whatever_the_size_says(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * 600 + b"0]")
    with pytest.raises(PersistbenchError, match=r"big\.json: larger than the 1000 bytes allowed"):
        read_bounded(big, 1000)
    assert len(read_bounded(big, 2000)) == 1203


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' + "1" * 400 + "}", "out of range"),
        ('{"a": 1e400}', "out of range"),
        ('{"a": NaN}', "NaN is not JSON"),
        ('{"a": 1, "a": 2}', "key 'a' appears twice"),
        ('{"a": ' + "9" * 5000 + "}", "not JSON"),
        (b'{"a": "\xff"}', "not JSON"),
    ],
)
def test_strict_json_gives_one_line_naming_the_file(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(PersistbenchError) as e:
        read_json(path)
    assert str(e.value).startswith(f"{path}: ") and needle in str(e.value) and "\n" not in str(e.value)


def test_valid_json_reads_as_before():
    assert parse_json('{"a": [1, 2.5, -3, null, true, "x"], "b": {"c": 9223372036854775807}}', "x") == {
        "a": [1, 2.5, -3, None, True, "x"],
        "b": {"c": 2**63 - 1},
    }


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize("which", ["meta_data", "trajectory"])
def test_deeply_nested_checkout_files_are_refused_by_name(checkout, which):
    path = layout.meta_path(checkout, "DDDAAA") if which == "meta_data" else layout.trajectory_path(checkout, "DDDAAA")
    path.write_text('{"x": ' + _deep(100_000) + "}")
    refused(run_cli("verify", checkout), path.name, "nested too deeply")


@pytest.mark.slow
def test_a_huge_integer_in_a_trajectory_is_refused_by_name(checkout):
    path = layout.trajectory_path(checkout, "DDDAAA")
    text = path.read_text()
    data = json.loads(text)
    first = next(iter(data))
    data[first] = "REPLACE"
    path.write_text(json.dumps(data).replace('"REPLACE"', "1" + "0" * 400))
    refused(run_cli("verify", checkout), path.name, "out of range")


def test_a_deep_protocol_file_is_refused_by_name(tmp_path):
    from persistbench.suites.wrop.suite import Wrop

    proto = tmp_path / "deep.json"
    proto.write_text('{"name": ' + _deep(100_000) + "}")
    with pytest.raises(PersistbenchError, match=r"deep\.json: JSON nested too deeply$"):
        Wrop.load_protocol(str(proto))


def _npy_with_header(shape: tuple[int, ...]) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros(4, np.float64))
    data = bytearray(buf.getvalue())
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}".encode()
    start = 10
    length = int.from_bytes(data[8:10], "little")
    data[start : start + length] = header.ljust(length - 1) + b"\n"
    return bytes(data)


def test_an_npy_header_that_claims_more_than_the_file_holds_is_refused(tmp_path):
    path = tmp_path / "camera_params.npy"
    path.write_bytes(_npy_with_header((10**11,)))
    with pytest.raises(PersistbenchError, match=r"camera_params\.npy: .*more than the file holds"):
        load_npy(path)


@pytest.mark.parametrize(
    "header", [b"{'descr': '<f8', 'shape': (4,", b"{'descr': '<f8' 'fortran_order'}", b"\x00" * 20]
)
def test_a_broken_npy_header_is_one_line(header):
    data = bytearray(_npy_with_header((4,)))
    length = int.from_bytes(data[8:10], "little")
    data[10 : 10 + length] = header.ljust(length - 1) + b"\n"
    with pytest.raises(PersistbenchError, match=r"^m\.npy: unsafe or malformed \.npy file"):
        load_npy_bytes(bytes(data), "m.npy")


def test_a_wrop_trajectory_member_with_a_lying_shape_is_refused():
    from persistbench.suites.wrop.corpus import Archive

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("poses.npy", _npy_with_header((10**11,)))
    corpus = Archive.__new__(Archive)
    corpus.where = lambda sample, name: f"{sample}/{name}"
    corpus.read = lambda sample, name, limit: buf.getvalue()
    with pytest.raises(PersistbenchError, match=r"s/trajectory\.npz: poses: .*more than the file holds"):
        corpus.trajectory("s")


def test_a_fifo_video_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "gen.mp4"
    os.mkfifo(fifo)
    with pytest.raises(PersistbenchError, match=r"gen\.mp4: not a regular file"):
        list(read_frames(fifo))


# ---------------------------------------------------------------- item 10: one line, never a traceback


@pytest.fixture(scope="module")
def scored_hold(r2m, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "hold"
    assert run_cli("infer", "--dataset", r2m, "--model", "hold", "--output", run).returncode == 0
    assert run_cli("score", "--pred", run, "--metrics", "frame_psnr").returncode == 0
    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage",
    [
        {"seconds": "abc"},
        {"phases": "decode"},
        {"phases": {"decode": "fast"}},
        {"attempts": [1]},
        {"status": 7},
    ],
    ids=["seconds", "phases-string", "phase-value", "attempts", "status"],
)
def test_report_leaves_damaged_records_out(scored_hold, tmp_path, damage):
    run = Path(shutil.copytree(scored_hold, tmp_path / "hold"))
    records = sorted((run / ".state" / "records").glob("*.json"))
    assert records
    for path in records:
        path.write_text(json.dumps({**json.loads(path.read_text()), **damage}))
    result = run_cli("report", run, "--out", tmp_path / "r.html")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_report_refuses_a_summary_of_another_shape_in_one_line(scored_hold, tmp_path):
    run = Path(shutil.copytree(scored_hold, tmp_path / "hold"))
    summary = next(run.glob("scores/*/summary.json"))
    data = json.loads(summary.read_text())
    del data["overall"]
    summary.write_text(json.dumps(data))
    refused(run_cli("report", run, "--out", tmp_path / "r.html"), str(run), "not what r2m score writes")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ({"scorer": None}, "names no suite and scorer; score the runs again"),
        ({"scorer": "classic"}, "suite r2m has no scorer 'classic'"),
        ({"suite": "nope"}, "--suite nope: unknown suite"),
    ],
)
def test_report_finds_the_scorer_from_the_scores_header(scored_hold, tmp_path, header, needle):
    """The header's ``suite`` and ``scorer`` say who wrote a summary; one that names none, or another's, is
    refused in one line before anything is written."""
    run = Path(shutil.copytree(scored_hold, tmp_path / "hold"))
    summary = next(run.glob("scores/*/summary.json"))
    data = json.loads(summary.read_text())
    assert (data["suite"], data["scorer"]) == ("r2m", "nmr")
    summary.write_text(json.dumps({**data, **header}))
    refused(run_cli("report", run, "--out", tmp_path / "r.html"), needle)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_report_refuses_runs_of_two_scorers_in_one_line(scored_hold, tmp_path):
    one, two = (Path(shutil.copytree(scored_hold, tmp_path / n)) for n in ("a", "b"))
    summary = next(two.glob("scores/*/summary.json"))
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "suite": "wrop", "scorer": "continuation"}))
    line = refused(run_cli("report", one, two, "--out", tmp_path / "r.html"), "must be scored by one suite's scorer")
    assert "a: r2m/nmr" in line and "b: wrop/continuation" in line
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf"])  # -inf: below the range already
def test_cpus_per_task_must_be_finite(scored_hold, value):
    refused(run_cli("score", "--pred", scored_hold, "--cpus-per-task", value), "--cpus-per-task", "not a finite number")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"tasks": ["a"]}, "dataset.options.tasks: not an option infer records"),  # WROP's, not R2M-Bench's
        ({"colour": "red"}, "dataset.options.colour: not an option infer records"),
        ([1, 2], "dataset.options: must be a JSON object"),
    ],
)
def test_run_json_options_are_checked_as_run_json(scored_hold, tmp_path, options, needle):
    run = Path(shutil.copytree(scored_hold, tmp_path / "hold"))
    info = json.loads((run / "run.json").read_text())
    info["dataset"]["options"] = options
    (run / "run.json").write_text(json.dumps(info))
    line = next(
        line
        for line in (run_cli("score", "--pred", run, "--metrics", "frame_psnr").stderr or "").splitlines()
        if "run.json" in line
    )
    assert needle in line and "--per-task" not in line


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"tasks": [["a"], {"b": 1}]}, "run.json: dataset.options.tasks: must be a list of task names"),
        ({"per_task": -5}, "run.json: dataset.options.per_task: must be a positive integer"),
        ({"per_task": True}, "run.json: dataset.options.per_task: must be a positive integer"),
        ({"categories": 3}, "run.json: dataset.options.categories: must be a file path"),
    ],
)
def test_recorded_case_options_are_checked_by_their_suite(options, needle):
    from persistbench.core.options import recorded
    from persistbench.suites.wrop.suite import Wrop

    with pytest.raises(PersistbenchError) as e:
        recorded(Wrop.option_specs, options, "run.json: dataset.options")
    assert str(e.value) == needle
    assert recorded(Wrop.option_specs, {"tasks": ["a"], "per_task": 2}, "x") == {"tasks": ("a",), "per_task": 2}


# ---------------------------------------------------------------- item 5: a slow-drip server


@pytest.fixture
def drip_server():
    """A loopback HTTP server that sends its headers, then one byte a second."""
    import http.server
    import threading
    import time

    class Drip(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.slow
def test_a_request_is_bounded_as_a_whole(drip_server):
    import time

    from persistbench.io.web import request

    start = time.monotonic()
    with pytest.raises(PersistbenchError, match=r"no complete answer within 2 s"):
        request(drip_server + "/x", 10_000, timeout=2)
    assert time.monotonic() - start < 10


@pytest.mark.slow
def test_fetching_a_wrop_corpus_from_a_drip_server_gives_up(drip_server, tmp_path):
    result = run_cli(
        "fetch",
        "--suite",
        "wrop",
        "--from",
        drip_server,
        "--output",
        tmp_path / "o",
        timeout=120,
        env={"PERSISTBENCH_HTTP_TIMEOUT": "2"},
    )
    refused(result, "no complete answer within 2 s")
