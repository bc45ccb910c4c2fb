"""WROP corpora and runs: tar headers (item 13), members and predictions beyond the limits (item 4),
metadata and trajectories, protocols, run.json options (items 10, 14), slow servers (item 5)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .fixtures import Fixtures
from .harness import check, fresh
from .r2m_cases import _video

TAR = "wrop/train/trapdoor_drop_task.tar"
VERIFY = ["verify", "wrop"]
INFER = ["infer", "--no-progress", "--model", "hold", "--dataset", "wrop", "--output", "o"]
SCORE = ["score", "--no-progress", "--pred", "wrop_run", "--dataset", "wrop", "--metrics", "psnr"]
Members = list[tuple[tarfile.TarInfo, bytes]]


def _members(path: Path) -> Members:
    with tarfile.open(path) as tar:
        return [(m, tar.extractfile(m).read() if m.isfile() else b"") for m in tar.getmembers()]


def _block(info: tarfile.TarInfo, data: bytes) -> bytes:
    pad = (-len(data)) % 512
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict") + data + b"\0" * pad


def _pax(records: dict[str, str]) -> bytes:
    """A PAX extended header block (type ``x``) holding ``records``, written by hand (tarfile would check them)."""
    body = b""
    for key, value in records.items():
        line = f" {key}={value}\n".encode()
        n = len(line) + 1
        while len(str(n)) + len(line) != n:
            n = len(str(n)) + len(line)
        body += str(n).encode() + line
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, len(body)
    return _block(info, body)


def rewrite(work: Path, edit: Callable[[Members], bytes | Members], rel: str = TAR, recount: bool = True) -> None:
    """Rebuild the archive ``rel`` from ``edit(members)`` (a new member list, or raw archive bytes) and,
    with ``recount``, give ``checksums.txt`` its new sha256 and member count, so only the damage is wrong."""
    path = work / rel
    out = edit(_members(path))
    if not isinstance(out, bytes):
        out = b"".join(_block(m, d) for m, d in out) + b"\0" * 1024
    path.write_bytes(out)
    if recount:
        sums = path.parent / "checksums.txt"
        lines = []
        for line in sums.read_text().splitlines():
            digest, name, count = line.split()
            if name == path.name:
                try:
                    with tarfile.open(path, errorlevel=0) as tar:
                        count = str(len(tar.getmembers()))
                except (tarfile.TarError, OSError):  # the damage may be one tarfile cannot read either
                    pass
                digest = hashlib.sha256(out).hexdigest()
            lines.append(f"{digest}  {name}  {count}")
        sums.write_text("\n".join(lines) + "\n")


def member(name_end: str, change: Callable[[tarfile.TarInfo, bytes], tuple[tarfile.TarInfo, bytes]]):
    """An edit that changes the first member whose name ends with ``name_end``."""

    def edit(members: Members) -> Members:
        out, done = [], False
        for info, data in members:
            if not done and info.name.endswith(name_end):
                info, data = change(info, data)
                info.size, done = len(data), True
            out.append((info, data))
        return out

    return edit


def metadata(change: Callable[[dict], object]):
    def apply(info: tarfile.TarInfo, data: bytes):
        meta = json.loads(data)
        change(meta)
        return info, json.dumps(meta).encode()

    return member("metadata.json", apply)


def npz(arrays: Callable[[dict], dict]):
    def apply(info: tarfile.TarInfo, data: bytes):
        with np.load(io.BytesIO(data)) as z:
            content = {k: z[k] for k in z.files}
        buf = io.BytesIO()
        np.savez(buf, **arrays(content))
        return info, buf.getvalue()

    return member("trajectory.npz", apply)


def _huge_npz_header(info: tarfile.TarInfo, data: bytes):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**11,)})
    raw = io.BytesIO()
    import zipfile

    with zipfile.ZipFile(raw, "w") as z:
        z.writestr("xpos.npy", buf.getvalue() + b"\0" * 64)
    return info, raw.getvalue()


def _object_npz(info: tarfile.TarInfo, data: bytes):
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    raw = io.BytesIO()
    import zipfile

    with zipfile.ZipFile(raw, "w") as z:
        z.writestr("xpos.npy", buf.getvalue())
    return info, raw.getvalue()


def _pax_size(members: Members) -> bytes:
    out = b""
    for info, data in members:
        if info.name.endswith("prompt.txt"):
            out += _pax({"size": str(10**15)})
        out += _block(info, data)
    return out + b"\0" * 1024


def _pax_path(value: str):
    def edit(members: Members) -> bytes:
        out = b""
        for i, (info, data) in enumerate(members):
            if i == 1:
                out += _pax({"path": value})
            out += _block(info, data)
        return out + b"\0" * 1024

    return edit


def _bad_checksum(members: Members) -> bytes:
    raw = bytearray(b"".join(_block(m, d) for m, d in members) + b"\0" * 1024)
    raw[148:156] = b"0000000\0"
    return bytes(raw)


def _truncated(members: Members) -> bytes:
    raw = b"".join(_block(m, d) for m, d in members)
    return raw[: len(raw) // 2]


def _size_beyond_end(members: Members) -> bytes:
    info, data = members[-1]
    header = bytearray(_block(info, data)[:512])
    header[124:136] = b"77777777777\0"
    header[148:156] = b"        "
    header[148:156] = f"{sum(header):06o}\0 ".encode()
    return b"".join(_block(m, d) for m, d in members[:-1]) + bytes(header) + data


def _special(kind: bytes, name: str, link: str = ""):
    def edit(members: Members) -> Members:
        info = tarfile.TarInfo(members[0][0].name.rsplit("/", 1)[0] + "/" + name)
        info.type, info.linkname = kind, link
        return [*members, (info, b"")]

    return edit


def _renamed(new: str):
    def edit(members: Members) -> Members:
        info, data = members[0]
        info.name = new
        return [(info, data), *members[1:]]

    return edit


def _many_members(members: Members) -> Members:
    base = members[0][0].name.rsplit("/", 1)[0]
    extra = []
    for i in range(20_000):
        info = tarfile.TarInfo(f"{base}/extra_{i}.txt")
        extra.append((info, b""))
    return [*members, *extra]


def _scores(path: str) -> bool:
    return path.startswith("wrop_run/scores")


def _out(path: str) -> bool:
    return path == "o" or path.startswith("o/")


def cases(fx: Fixtures, work: Path) -> None:
    headers = [
        ("PAX size 10^15 for prompt.txt", lambda w: rewrite(w, _pax_size)),
        ("PAX path ../../escape", lambda w: rewrite(w, _pax_path("../../escape.txt"))),
        ("PAX path absolute", lambda w: rewrite(w, _pax_path("/etc/passwd"))),
        ("member ../x", lambda w: rewrite(w, _renamed("../x/input_video.mp4"))),
        ("member absolute", lambda w: rewrite(w, _renamed("/tmp/input_video.mp4"))),
        ("member a symlink", lambda w: rewrite(w, _special(tarfile.SYMTYPE, "prompt2.txt", "/etc/passwd"))),
        ("member a hard link", lambda w: rewrite(w, _special(tarfile.LNKTYPE, "prompt2.txt", "/etc/passwd"))),
        ("member a character device", lambda w: rewrite(w, _special(tarfile.CHRTYPE, "zero"))),
        ("member a FIFO", lambda w: rewrite(w, _special(tarfile.FIFOTYPE, "fifo"))),
        ("header checksum wrong", lambda w: rewrite(w, _bad_checksum)),
        ("archive truncated", lambda w: rewrite(w, _truncated)),
        ("member size beyond the archive", lambda w: rewrite(w, _size_beyond_end)),
        ("20,000 extra members", lambda w: rewrite(w, _many_members)),
        ("member count in checksums.txt wrong", lambda w: rewrite(w, lambda m: m[:-1], recount=False)),
        (
            "checksums.txt names ../x.tar",
            lambda w: (w / "wrop/train/checksums.txt").write_text(f"{'0' * 64}  ../x.tar  10\n"),
        ),
        ("checksums.txt not text", lambda w: (w / "wrop/train/checksums.txt").write_bytes(b"\xff\0" * 100)),
        ("archive is a FIFO", lambda w: ((w / TAR).unlink(), __import__("os").mkfifo(w / TAR))),
        ("archive linked to /dev/zero", lambda w: ((w / TAR).unlink(), (w / TAR).symlink_to("/dev/zero"))),
    ]
    members = [
        ("metadata: an unknown split method", metadata(lambda m: m["video_split"].update(method="by_magic"))),
        ("metadata: no video_split", metadata(lambda m: m.pop("video_split"))),
        ("metadata: nested 100,000 deep", member("metadata.json", lambda i, d: (i, b"[" * 100_000 + b"]" * 100_000))),
        ("metadata: a 400-digit integer", member("metadata.json", lambda i, d: (i, b'{"a": ' + b"9" * 400 + b"}"))),
        ("metadata: 2 MB", member("metadata.json", lambda i, d: (i, b'{"a": "' + b"x" * (2 << 20) + b'"}'))),
        ("metadata: not JSON", member("metadata.json", lambda i, d: (i, b"{"))),
        ("trajectory.npz: an object array", member("trajectory.npz", _object_npz)),
        ("trajectory.npz: header of shape (10^11,)", member("trajectory.npz", _huge_npz_header)),
        ("trajectory.npz: not a zip", member("trajectory.npz", lambda i, d: (i, b"PK\3\4garbage"))),
        (
            "trajectory.npz: xpos NaN",
            npz(lambda c: {**c, **{k: np.full_like(v, np.nan) for k, v in c.items() if v.dtype.kind == "f"}}),
        ),
        ("prompt.txt: invalid UTF-8", member("prompt.txt", lambda i, d: (i, b"\xff\xfe\xfd"))),
        ("prompt.txt: 1 MB", member("prompt.txt", lambda i, d: (i, b"a" * (1 << 20)))),
        ("input_video.mp4: not a video", member("input_video.mp4", lambda i, d: (i, b"\0" * 4096))),
        ("input_video.mp4: empty", member("input_video.mp4", lambda i, d: (i, b""))),
    ]
    for name, damage in headers + [(n, lambda w, e=e: rewrite(w, e)) for n, e in members]:
        for command, args in (("verify", VERIFY), ("infer", INFER)):
            fresh(work, (fx.wrop, "wrop"))
            damage(work)
            needle = ("trapdoor_drop", "checksums.txt")
            check("WROP corpora", f"{name} ({command})", work, args, needle, _out)

    def video_member(width: int, height: int, frames: int):
        def apply(w: Path) -> None:
            _video(w / "v.mp4", width, height, frames)
            data = (w / "v.mp4").read_bytes()
            (w / "v.mp4").unlink()
            rewrite(w, member("input_video.mp4", lambda i, d: (i, data)))

        return apply

    for name, damage in [
        ("input_video.mp4 4096x4096", video_member(4096, 4096, 16)),
        ("input_video.mp4 of 20,000 frames", video_member(64, 48, 20_000)),
    ]:
        for command, args in (("verify", VERIFY), ("infer", INFER)):
            fresh(work, (fx.wrop, "wrop"))
            damage(work)
            check("sizes", f"WROP {name} ({command})", work, args, "input_video.mp4", _out)

    gen = next(fx.wrop_run.glob("*/*/gen.mp4")).relative_to(fx.wrop_run.parent).as_posix()
    for name, (width, height, frames) in {
        "gen.mp4 4096x4096": (4096, 4096, 16),
        "gen.mp4 16x16": (16, 16, 16),
        "gen.mp4 320x192 (twice the size asked)": (320, 192, 16),
        "gen.mp4 of 20,000 frames": (160, 96, 20_000),
    }.items():
        fresh(work, (fx.wrop, "wrop"), (fx.wrop_run, "wrop_run"))
        _video(work / gen, width, height, frames)
        group = "sizes" if "4096" in name or "20,000" in name else "WROP runs"
        # Frames beyond the target's length are ignored: decoding stops there (as the tests check).
        outcome = (lambda code, text, w: code == 0) if "20,000" in name else None
        check(group, f"WROP {name}", work, SCORE, "gen.mp4", _scores, outcome=outcome)

    protocol = json.loads(
        (Path(__file__).resolve().parents[2] / "persistbench/data/protocols/wrop-cont-v1.json").read_text()
    )
    for name, change in [
        ("eval_size [8192, 8192]", lambda p: p.update(eval_size=[8192, 8192])),
        ("eval_size [1, 8192]", lambda p: p.update(eval_size=[1, 8192])),
        ("named classic-v1", lambda p: p.update(name="classic-v1")),
        ("named r2m-v1", lambda p: p.update(name="r2m-v1")),
        ("a metric twice", lambda p: p.update(metrics=["psnr", "psnr"])),
        ("exclude_tasks a string", lambda p: p.update(exclude_tasks="all")),
    ]:
        fresh(work, (fx.wrop, "wrop"), (fx.wrop_run, "wrop_run"))
        p = json.loads(json.dumps(protocol))
        change(p)
        (work / "p.json").write_text(json.dumps(p))
        args = ["score", "--no-progress", "--pred", "wrop_run", "--dataset", "wrop", "--protocol", "p.json"]
        check("protocols", f"WROP protocol {name}", work, args, "p.json", lambda x: x == "p.json" or _scores(x))

    def options(change: Callable[[dict], object]) -> Callable[[Path], None]:
        def apply(w: Path) -> None:
            info = json.loads((w / "wrop_run/run.json").read_text())
            change(info["dataset"].setdefault("options", {}))
            (w / "wrop_run/run.json").write_text(json.dumps(info))

        return apply

    for name, change in [
        ("per_task -5", lambda o: o.update(per_task=-5)),
        ("tasks [['a'], {'b': 1}]", lambda o: o.update(tasks=[["a"], {"b": 1}])),
        ("categories 5", lambda o: o.update(categories=5)),
        ("an unknown option", lambda o: o.update(colour="red")),
    ]:
        fresh(work, (fx.wrop, "wrop"), (fx.wrop_run, "wrop_run"))
        options(change)(work)
        args = ["score", "--no-progress", "--pred", "wrop_run", "--metrics", "psnr"]
        check("WROP runs", f"run.json dataset.options {name}", work, args, "run.json", _scores)
