"""Recipe schema: validation with line numbers for every kind of error, RLE masks, fingerprints."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes.clirun import peak_rss_mib
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pycocotools import mask as coco

from persistbench.core.errors import PersistbenchError
from persistbench.suites.persistbench.build import recipes


@pytest.fixture
def lines(synth_dir):
    return (synth_dir / "recipes.jsonl").read_text().splitlines()


def write(tmp_path, lines):
    path = tmp_path / "recipes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def edit(line, fn):
    obj = json.loads(line)
    fn(obj)
    return json.dumps(obj)


@pytest.mark.slow
def test_synth_recipes_are_valid(synth_dir):
    rs = recipes.load_recipes(synth_dir / "recipes.jsonl")
    assert [r.line for r in rs] == [1, 2]
    r = rs[0]
    assert r.source.url == (synth_dir / "sources" / f"{r.source.id}.mp4").resolve().as_uri()
    assert r.views["view_0"]["roll_deg"].shape == (r.n_frames,)
    assert len(r.masks) == r.n_frames


@pytest.mark.slow
@pytest.mark.parametrize(
    "mutate,field,message",
    [
        (lambda o: o["source"].pop("fps"), "source.fps", "missing field"),
        (lambda o: o.pop("views"), "views", "missing field"),
        (lambda o: o["views"]["center"]["yaw_deg"].pop(), "views.center.yaw_deg", "expected n_frames = 24"),
        (lambda o: o["object"]["masks"][3].update(counts="0" * 5), "object.masks[3]", "bad RLE"),
        (lambda o: o["object"]["masks"][0].update(counts="\x7f"), "object.masks[0]", "invalid character"),
        (lambda o: o.update(version=2), "version", "unknown version 2"),
        (lambda o: o.update(subset="moving"), "subset", "must be one of"),
        (lambda o: o["views"]["view_0"]["pitch_deg"].__setitem__(0, 95.0), "views.view_0.pitch_deg", "[-90, 90]"),
        (lambda o: o["source"].update(n_frames="24"), "source.n_frames", "expected int"),
        (lambda o: o["output"].update(width=255), "output.width", "even"),
    ],
)
def test_each_error_names_line_and_field(tmp_path, lines, mutate, field, message):
    path = write(tmp_path, [lines[0], edit(lines[1], mutate)])
    with pytest.raises(recipes.RecipeError) as info:
        recipes.load_recipes(path)
    text = str(info.value)
    assert text.startswith(f"{path}:2: {field}: "), text
    assert message in text


@pytest.mark.slow
def test_malformed_json_and_all_errors_reported(tmp_path, lines):
    bad_version = edit(lines[0], lambda o: o.update(version=7))
    path = write(tmp_path, [bad_version, "{not json", lines[1], lines[1]])
    with pytest.raises(PersistbenchError) as info:
        recipes.load_recipes(path)
    got = str(info.value).splitlines()
    assert got[0].startswith(f"{path}:1: version: unknown version 7")
    assert got[1].startswith(f"{path}:2: not JSON")
    assert got[2] == f"{path}:4: case_id: duplicate of line 3"


def test_missing_file_and_empty_file(tmp_path):
    with pytest.raises(PersistbenchError, match="cannot read recipes"):
        recipes.load_recipes(tmp_path / "nope.jsonl")
    empty = write(tmp_path, [""])
    with pytest.raises(PersistbenchError, match="no recipes"):
        recipes.load_recipes(empty)


def test_relative_and_absolute_urls(tmp_path):
    assert recipes.resolve_url("http://127.0.0.1:8000/a.mp4", tmp_path) == "http://127.0.0.1:8000/a.mp4"
    assert recipes.resolve_url("sources/a.mp4", tmp_path) == (tmp_path / "sources" / "a.mp4").as_uri()


def runs_of(mask):
    """Run lengths of a mask in column-major order, starting with a run of zeros (COCO's rule)."""
    flat = mask.flatten(order="F").astype(np.int8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(bounds).tolist()
    return ([0] + runs) if flat[0] else runs


@pytest.mark.slow
@given(arrays(np.uint8, st.tuples(st.integers(1, 24), st.integers(1, 24)), elements=st.integers(0, 1)))
@settings(max_examples=300, deadline=None)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pycocotools' decode under numpy 2
def test_rle_round_trip(mask):
    rle = recipes.encode_mask(mask)
    assert rle["size"] == list(mask.shape)
    assert recipes.check_rle(rle) is None
    assert recipes.rle_counts(rle["counts"]) == runs_of(mask)
    np.testing.assert_array_equal(recipes.decode_mask(rle), mask)
    np.testing.assert_array_equal(recipes.decode_mask_columns(rle), mask.T)
    rows, cols = recipes.mask_pixels(rle)
    want_rows, want_cols = np.nonzero(mask.T)[::-1]  # column-major order, as the runs list them
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, want_cols)
    reference = coco.decode({"size": rle["size"], "counts": rle["counts"].encode()})  # pycocotools' decoder
    np.testing.assert_array_equal(recipes.decode_mask(rle), reference)


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12))
@settings(max_examples=300, deadline=None)
def test_rle_check_never_crashes_on_junk(counts):
    problem = recipes.check_rle({"size": [4, 5], "counts": counts})
    if problem is None:  # a valid string must decode to the declared size
        assert recipes.decode_mask({"size": [4, 5], "counts": counts}).shape == (4, 5)


def test_fingerprint_detects_a_different_source():
    rng = np.random.default_rng(0)
    frames = {i: rng.integers(0, 256, (64, 128, 3), dtype=np.uint8) for i in (0, 5)}
    fp = recipes.make_fingerprint(frames)
    assert recipes.fingerprint_distance(fp, frames) == 0.0
    noisy = {
        i: np.clip(f.astype(int) + rng.integers(-3, 4, f.shape), 0, 255).astype(np.uint8) for i, f in frames.items()
    }
    assert recipes.fingerprint_distance(fp, noisy) < fp["tolerance"]
    other = {i: 255 - f for i, f in frames.items()}
    assert recipes.fingerprint_distance(fp, other) > fp["tolerance"]


@pytest.mark.slow
def test_recipes_are_read_as_a_stream_within_a_memory_budget(tmp_path):
    """Issue 39: 256 MiB of blank lines, locally and over HTTP, cost what one line costs (they took 2.35 GB)."""
    from http.server import BaseHTTPRequestHandler

    from fakes.loopback import LoopbackServer

    blank = tmp_path / "blank.jsonl"
    with open(blank, "wb") as f:
        for _ in range(256):
            f.write(b"\n" * (1 << 20))
    result, peak = peak_rss_mib("download", "--recipes", blank, "--dry-run", "--cache", tmp_path / "c")
    assert result.returncode == 1 and "no recipes" in result.stderr and "Traceback" not in result.stderr
    assert peak < 300, peak

    class Blank(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(256 << 20))
            self.end_headers()
            for _ in range(256):
                self.wfile.write(b"\n" * (1 << 20))

        def log_message(self, *args):
            pass

    with LoopbackServer(Blank) as server:
        result, peak = peak_rss_mib(
            "download", "--recipes", server.url + "/r.jsonl", "--dry-run", "--cache", tmp_path / "h"
        )
    assert result.returncode == 1 and "no recipes" in result.stderr and "Traceback" not in result.stderr
    assert peak < 300, peak
