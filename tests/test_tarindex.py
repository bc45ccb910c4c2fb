"""Archives read in place: the index from headers alone, members by offset, locally and through HTTP Range."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from persistbench.core.errors import PersistbenchError
from persistbench.io.serve import FileServer
from persistbench.io.tarindex import REMOTE_CHUNK, HttpRange, LocalFile, build_index, cached_index, index_path
from persistbench.io.video import LOSSLESS_SETTINGS, encode_video, read_frames


def any_name(name: str) -> str | None:
    return None


def only_under_train(name: str) -> str | None:
    return None if name.startswith("train/") and ".." not in name.split("/") else "outside train/"


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes, kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = (len(data) if kind == tarfile.REGTYPE else 0), kind, link
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, list[np.ndarray]]:
    """A tar of 40 samples (small files, one long name) and one H.264-free lossless video."""
    root = tmp_path_factory.mktemp("tar")
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(6)]
    encode_video(root / "v.mp4", frames, 8.0, LOSSLESS_SETTINGS)
    path = root / "task.tar"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(root / "v.mp4", arcname="train/shard1/x_task/x_0000/input_video.mp4")
        for i in range(40):
            add_bytes(tar, f"train/shard1/x_task/x_{i:04d}/prompt.txt", f"sample {i} ".encode() * (i + 1))
        add_bytes(tar, "train/shard1/x_task/" + "long_" * 30 + "/metadata.json", b"{}")
    return path, frames


def test_the_index_matches_tarfile_and_reads_the_same_bytes(archive):
    path, _ = archive
    index = build_index(LocalFile(path), only_under_train)
    with tarfile.open(path) as tar:
        want = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert sorted(index.members) == sorted(want) and len(want) == 42  # long names (GNU) included
    for name, data in want.items():
        assert index.read(name) == data
    with pytest.raises(PersistbenchError, match="no member 'nope'"):
        index.read("nope")
    with pytest.raises(PersistbenchError, match="more than the 10 allowed"):
        index.read("train/shard1/x_task/x_0039/prompt.txt", limit=10)


def test_pax_archives_and_their_long_names(tmp_path):
    path = tmp_path / "pax.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes(tar, "train/" + "é" * 120 + "/prompt.txt", b"hello")
    index = build_index(LocalFile(path), only_under_train)
    assert [m for m in index.members] == ["train/" + "é" * 120 + "/prompt.txt"]
    assert index.read(next(iter(index.members))) == b"hello"


def test_a_video_member_decodes_in_place(archive, tmp_path):
    path, frames = archive
    index = build_index(LocalFile(path), only_under_train)
    got = list(read_frames(index.ffmpeg_input("train/shard1/x_task/x_0000/input_video.mp4")))
    assert len(got) == len(frames) and all(np.array_equal(a, b) for a, b in zip(got, frames))


@pytest.mark.parametrize(
    ("kind", "name", "link", "needle"),
    [
        (tarfile.SYMTYPE, "train/a/link.mp4", "/etc/passwd", "is a symbolic link; refused"),
        (tarfile.LNKTYPE, "train/a/hard.mp4", "train/a/x", "is a hard link; refused"),
        (tarfile.CHRTYPE, "train/a/dev", "", "is a character device; refused"),
        (tarfile.FIFOTYPE, "train/a/fifo", "", "is a FIFO; refused"),
        (tarfile.REGTYPE, "train/../../evil.txt", "", "outside train/; refused"),
        (tarfile.REGTYPE, "other/file.txt", "", "outside train/; refused"),
    ],
)
def test_unsafe_members_are_refused_naming_the_archive_and_member(tmp_path, kind, name, link, needle):
    path = tmp_path / "bad.tar"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        add_bytes(tar, "train/a/ok.txt", b"fine")
        add_bytes(tar, name, b"data", kind, link)
    with pytest.raises(PersistbenchError, match=needle) as e:
        build_index(LocalFile(path), only_under_train)
    assert str(path) in str(e.value) and repr(name) in str(e.value)


def test_damaged_archives_are_refused(archive, tmp_path):
    path, _ = archive
    data = bytearray(path.read_bytes())
    data[600] ^= 0xFF  # inside the first member's data: not a header, still readable
    ok = tmp_path / "data.tar"
    ok.write_bytes(bytes(data))
    build_index(LocalFile(ok), only_under_train)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # inside the first header
    bad = tmp_path / "header.tar"
    bad.write_bytes(bytes(data))
    with pytest.raises(PersistbenchError, match=r"header\.tar: header at byte 0: checksum mismatch"):
        build_index(LocalFile(bad), only_under_train)
    short = tmp_path / "short.tar"
    short.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(PersistbenchError, match=r"short\.tar: header at byte 0: member data beyond the end"):
        build_index(LocalFile(short), only_under_train)
    twice = tmp_path / "twice.tar"
    with tarfile.open(twice, "w", format=tarfile.GNU_FORMAT) as tar:
        add_bytes(tar, "train/a.txt", b"1")
        add_bytes(tar, "train/a.txt", b"2")
    with pytest.raises(PersistbenchError, match="'train/a.txt' appears twice"):
        build_index(LocalFile(twice), only_under_train)


def test_over_http_only_the_bytes_needed_are_read(archive):
    path, frames = archive
    local = build_index(LocalFile(path), only_under_train)
    with FileServer(path.parent) as server:
        before = len(server.requests)
        remote = build_index(HttpRange(f"{server.url}/{path.name}"), only_under_train)
        assert remote.members == local.members
        indexing = server.requests[before:]
        assert all(r is not None for _, r in indexing[1:])  # after the HEAD, Range requests only
        name = "train/shard1/x_task/x_0007/prompt.txt"
        assert remote.read(name) == local.read(name)
        got = list(read_frames(remote.ffmpeg_input("train/shard1/x_task/x_0000/input_video.mp4")))
        assert all(np.array_equal(a, b) for a, b in zip(got, frames)) and len(got) == len(frames)
    sizes = [int(r.split("-")[1]) - int(r.split("=")[1].split("-")[0]) + 1 for _, r in indexing[1:]]
    assert all(n <= REMOTE_CHUNK for n in sizes) and sum(sizes) < path.stat().st_size  # the video is jumped over


def test_the_index_is_cached_by_size_and_sha256(archive, tmp_path):
    path, _ = archive
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    first = cached_index(LocalFile(copy), "a" * 64, only_under_train)
    assert index_path(copy).is_file()

    class Counting(LocalFile):
        reads = 0

        def read(self, offset, n):
            Counting.reads += 1
            return super().read(offset, n)

    again = cached_index(Counting(copy), "a" * 64, only_under_train)
    assert again.members == first.members and Counting.reads == 0  # from the cache: no header read
    other = cached_index(Counting(copy), "b" * 64, only_under_train)  # another sha256: built anew
    assert other.members == first.members and Counting.reads > 0
    cache = json.loads(index_path(copy).read_text())
    cache["members"][0][0] = "../../etc/passwd"  # an edited cache is checked like the archive
    index_path(copy).write_text(json.dumps(cache))
    Counting.reads = 0
    assert cached_index(Counting(copy), "b" * 64, only_under_train).members == first.members and Counting.reads > 0
