"""Reading samples of a WROP-sized tar in place, against tarfile's sequential scan and a full extraction.

Generates a tar of ``--samples`` samples x 5 members (50,000 members at the default 10,000: small
files and tiny lossless videos), then, in one process: builds our index from the headers
(:func:`persistbench.io.tarindex.build_index`) and reads ``--read`` random samples' members; lists the
archive with ``tarfile`` (``getmembers``, which reads every header the same way) and reads the
same members through it; extracts the whole archive with ``tarfile.extractall`` and reads the
members from disk; and builds the index and reads the same samples over loopback HTTP (Range
requests), counting the bytes served against the archive's size. Then decodes one video member in
place (ffmpeg's ``subfile`` protocol) and from an extracted copy, once each untimed (both in the page
cache), then alternately, ``--decode-repeat`` times. Prints medians and ratios; the targets are
reading 10 samples from a fresh tar >= 20x faster than extracting it, and decoding in place no slower.

Run: ``python scripts/bench_wrop.py [--samples 10000] [--read 10] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from persistbench.io.serve import FileServer
from persistbench.io.tarindex import HttpRange, LocalFile, build_index
from persistbench.io.video import encode_video, read_frames

MEMBERS = ("input_video.mp4", "target_video.mp4", "prompt.txt", "trajectory.npz", "metadata.json")


def make_tar(path: Path, samples: int, video: bytes) -> list[str]:
    """A tar in WROP's layout; returns the sample folders."""
    rng = np.random.default_rng(0)
    folders = []
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(samples):
            folder = f"train/shard{1 + i * 5 // samples}/bench_task/bench_{i:05d}"
            folders.append(folder)
            npz = io.BytesIO()
            np.savez(npz, xpos=rng.random((120, 3, 3), dtype=np.float32))
            for name, data in zip(
                MEMBERS,
                (video, video, b"Continue this scene as a short video. " * 8, npz.getvalue(), b'{"video_split": {}}'),
            ):
                info = tarfile.TarInfo(f"{folder}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return folders


def check(name: str) -> str | None:
    return None if name.startswith("train/shard") and ".." not in name.split("/") else "outside the layout"


def ours(path: Path, picks: list[str]) -> float:
    start = time.perf_counter()
    index = build_index(LocalFile(path), check)
    for folder in picks:
        for name in MEMBERS:
            index.read(f"{folder}/{name}")
    return time.perf_counter() - start


def tarfile_scan(path: Path, picks: list[str]) -> float:
    start = time.perf_counter()
    with tarfile.open(path) as tar:
        members = {m.name: m for m in tar.getmembers()}
        for folder in picks:
            for name in MEMBERS:
                tar.extractfile(members[f"{folder}/{name}"]).read()
    return time.perf_counter() - start


def extraction(path: Path, picks: list[str], out: Path) -> float:
    start = time.perf_counter()
    with tarfile.open(path) as tar:
        tar.extractall(out, filter="data")
    for folder in picks:
        for name in MEMBERS:
            (out / folder / name).read_bytes()
    return time.perf_counter() - start


def _range_bytes(header: str) -> int:
    a, b = header.removeprefix("bytes=").split("-")
    return int(b) - int(a) + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--read", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--decode-repeat", type=int, default=41)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        yy, xx = np.mgrid[:180, :320]
        frames = [  # a smooth moving pattern: H.264 makes it ~40 KB, as small as WROP's 1280x720 clips are large
            (127.5 + 127.5 * np.sin(np.stack([xx / 23 + t / 5, yy / 17 - t / 7, (xx + yy) / 31], -1))).astype(np.uint8)
            for t in range(60)
        ]
        encode_video(tmp / "v.mp4", frames, 24.0)
        t0 = time.perf_counter()
        folders = make_tar(tmp / "task.tar", args.samples, (tmp / "v.mp4").read_bytes())
        made = time.perf_counter() - t0
        size = (tmp / "task.tar").stat().st_size
        picks = random.Random(0).sample(folders, args.read)
        times = {"ours: index + read": [], "tarfile: scan + read": [], "extract all + read": []}
        for k in range(args.repeat):
            times["ours: index + read"].append(ours(tmp / "task.tar", picks))
            times["tarfile: scan + read"].append(tarfile_scan(tmp / "task.tar", picks))
            times["extract all + read"].append(extraction(tmp / "task.tar", picks, tmp / f"x{k}"))
        with FileServer(tmp) as server:
            http = []
            for _ in range(args.repeat):
                server.requests.clear()
                start = time.perf_counter()
                remote = build_index(HttpRange(f"{server.url}/task.tar"), check)
                for folder in picks:
                    for name in MEMBERS:
                        remote.read(f"{folder}/{name}")
                http.append(time.perf_counter() - start)
            served = sum(_range_bytes(r) for _, r in server.requests if r)
            requests = len(server.requests)
        index = build_index(LocalFile(tmp / "task.tar"), check)
        member = f"{picks[0]}/input_video.mp4"
        decode = {"decode in place (subfile)": [], "decode the extracted file": []}
        for source in (index.ffmpeg_input(member), tmp / "x0" / member):  # both in the page cache first
            list(read_frames(source))
        for k in range(args.decode_repeat):  # alternate which goes first: neither gets the warmer cache
            order = [("decode in place (subfile)", index.ffmpeg_input(member))]
            order.append(("decode the extracted file", tmp / "x0" / member))
            for name, source in order if k % 2 else order[::-1]:
                start = time.perf_counter()
                got = list(read_frames(source))
                decode[name].append(time.perf_counter() - start)
                if name.startswith("decode in place"):
                    in_place = got
                else:
                    extracted = got
        assert all(np.array_equal(a, b) for a, b in zip(in_place, extracted)) and len(in_place) == 60
    n = 5 * args.samples
    print(
        f"tar: {args.samples} samples, {n} members, {size / 2**20:.0f} MiB (made in {made:.0f} s); read {args.read} samples"
    )
    base = statistics.median(times["extract all + read"])
    for name, ts in times.items():
        print(f"{name:28s} {statistics.median(ts):8.3f} s   {base / statistics.median(ts):7.1f}x vs extraction")
    print(
        f"{'ours over HTTP (loopback)':28s} {statistics.median(http):8.3f} s   {base / statistics.median(http):7.1f}x "
        f"vs extraction; {requests} requests, {served / 2**20:.1f} MiB served = {100 * served / size:.1f} % of the tar"
    )
    ref = statistics.median(decode["decode the extracted file"])
    for name, ts in decode.items():
        print(f"{name:28s} {statistics.median(ts) * 1000:8.1f} ms  {ref / statistics.median(ts):7.2f}x")


if __name__ == "__main__":
    main()
