"""R2M-Bench checkouts and runs: missing checks (item 11), sizes within the limits that cost too much
(item 4), hangs on special files (item 5), resume that trusts case.json (item 12), misc (item 15)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .fixtures import Fixtures
from .harness import check, fresh

TRAJ = "r2m/trajectories/trajectory_DDDAAA_30s.json"
META = "r2m/meta_data/data_single_DDDAAA_100.json"
IMAGE = "r2m/test_imgs/0001.png"
VIDEO = "r2m_run/DDDAAA/0001/gen.mp4"
CASE = "r2m_run/DDDAAA/0001/case.json"
VERIFY = ["verify", "r2m"]
INFER = ["infer", "--no-progress", "--model", "warp", "--dataset", "r2m", "--output", "o"]
SCORE = ["score", "--no-progress", "--pred", "r2m_run", "--dataset", "r2m", "--metrics", "frame_psnr"]


def _video(path: Path, width: int, height: int, frames: int) -> None:
    from imageio_ffmpeg import get_ffmpeg_exe

    path.unlink(missing_ok=True)
    subprocess.run(
        [get_ffmpeg_exe(), "-v", "error", "-y", "-f", "lavfi", "-i", f"color=black:s={width}x{height}:r=16"]
        + ["-frames:v", str(frames), "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)],
        check=True,
    )


def edit_json(rel: str, change: Callable[[object], object], replace: bool = False) -> Callable[[Path], None]:
    """Edit the JSON file ``rel`` in place (``change`` mutates it), or replace it by what ``change`` returns."""

    def apply(work: Path) -> None:
        path = work / rel
        data = json.loads(path.read_text())
        out = change(data)
        path.write_text(json.dumps(out if replace else data))

    return apply


def _reflection(t: dict) -> None:
    m = np.array(t["5"]["extrinsic"])
    m[:3, 0] *= -1
    t["5"]["extrinsic"] = m.tolist()


def _poses(n: int) -> Callable[[Path], None]:
    def apply(work: Path) -> None:
        t = json.loads((work / TRAJ).read_text())
        first = t["0"]
        step = np.array(first["extrinsic"])
        out = {}
        for i in range(n):
            e = step.copy()
            e[0, 3] += 0.001 * (i % 500)
            out[str(i)] = {"extrinsic": e.tolist(), "K": first["K"]}
        (work / TRAJ).write_text(json.dumps(out))

    return apply


def _png_truncated(work: Path) -> None:
    data = (work / IMAGE).read_bytes()
    (work / IMAGE).write_bytes(data[: len(data) // 2])


def _huge_image(work: Path) -> None:
    import cv2

    cv2.imwrite(str(work / IMAGE), np.zeros((8192, 8192, 3), np.uint8))


def _link_outside(rel: str) -> Callable[[Path], None]:
    def apply(work: Path) -> None:
        target = work.parent / f"{work.name}-elsewhere" / Path(rel).name
        target.parent.mkdir(exist_ok=True)
        if target.is_dir():  # left by the previous row
            shutil.rmtree(target)
        os.replace(work / rel, target)
        (work / rel).symlink_to(target, target_is_directory=target.is_dir())

    return apply


def _fifo(rel: str) -> Callable[[Path], None]:
    def apply(work: Path) -> None:
        (work / rel).unlink()
        os.mkfifo(work / rel)

    return apply


def _pairs(work: Path, edit: Callable[[dict], object]) -> None:
    path = work / "r2m_run/scores/r2m-v2/pairs/DDDAAA.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _redone(code: int, text: str, work: Path) -> bool:
    return code == 0 and (work / "r2m_run/DDDAAA/0001/gen.mp4").is_file()


def _handled(code: int, text: str, work: Path) -> bool:
    """For inputs that may be refused or scored: either way, within the bounds the row checks."""
    return code == 0 or "Error:" in text


def cases(fx: Fixtures, work: Path) -> None:
    checkout = [
        ("reflection extrinsic (det -1)", _reflection),
        ("K last row [5, 7, -3]", lambda t: t["5"]["K"].__setitem__(2, [5, 7, -3])),
        ("principal point 0.1", lambda t: [t[k]["K"][i].__setitem__(2, 0.1) for k in t for i in (0, 1)]),
        ("focal length 0", lambda t: t["5"]["K"][0].__setitem__(0, 0.0)),
        ("translation NaN", lambda t: t["5"]["extrinsic"][0].__setitem__(3, float("nan"))),
        ("translation 1e300", lambda t: t["5"]["extrinsic"][0].__setitem__(3, 1e300)),
        ("extrinsic 3x4", lambda t: t["5"].__setitem__("extrinsic", t["5"]["extrinsic"][:3])),
        ("K a string", lambda t: t["5"].__setitem__("K", "identity")),
        ("missing frame 7", lambda t: t.pop("7")),
        ("frame key -1", lambda t: t.__setitem__("-1", t["0"])),
        ("frame key 1e3", lambda t: t.__setitem__("1e3", t["0"])),
        ("frame key with a Unicode digit", lambda t: t.__setitem__("١٢", t.pop("12"))),
        ("empty trajectory", lambda t: t.clear()),
    ]
    for name, change in checkout:
        for command, args in (("verify", VERIFY), ("infer", INFER)):
            fresh(work, (fx.r2m, "r2m"))
            edit_json(TRAJ, change)(work)
            check("R2M checkouts", f"{name} ({command})", work, args, "trajectory_DDDAAA_30s.json", _out)

    def dup(work: Path) -> None:
        text = (work / TRAJ).read_text()
        (work / TRAJ).write_text(text.replace('{"', '{"0": ' + json.dumps(json.loads(text)["1"]) + ', "', 1))

    meta = [
        ("duplicate trajectory key '0'", dup, "trajectory_DDDAAA_30s.json"),
        (
            "pose_json_path ../../../",
            edit_json(META, lambda m: m[0].__setitem__("pose_json_path", "../../../" + m[0]["pose_json_path"])),
            "data_single_DDDAAA_100.json",
        ),
        (
            "pose_json_path absolute",
            edit_json(META, lambda m: m[0].__setitem__("pose_json_path", "/etc/passwd")),
            "data_single_DDDAAA_100.json",
        ),
        (
            "image ../../x.png",
            edit_json(META, lambda m: m[0].__setitem__("image", "../../x.png")),
            "data_single_DDDAAA_100.json",
        ),
        ("image not a string", edit_json(META, lambda m: m[0].__setitem__("image", 5)), "data_single_DDDAAA_100.json"),
        ("meta_data not a list", edit_json(META, lambda m: {"a": m}, replace=True), "data_single_DDDAAA_100.json"),
        ("meta_data empty", edit_json(META, lambda m: [], replace=True), "data_single_DDDAAA_100.json"),
        (
            "meta_data 100,000 entries",
            edit_json(META, lambda m: m * 100_000, replace=True),
            "data_single_DDDAAA_100.json",
        ),
        ("truncated PNG", _png_truncated, "0001.png"),
        ("image is a FIFO", _fifo(IMAGE), "0001.png"),
        ("trajectory is a FIFO", _fifo(TRAJ), "trajectory_DDDAAA_30s.json"),
        ("meta_data is a FIFO", _fifo(META), "data_single_DDDAAA_100.json"),
        ("image linked outside the checkout", _link_outside(IMAGE), "0001.png"),
        ("trajectories linked outside the checkout", _link_outside("r2m/trajectories"), "trajectories"),
        ("image 8192x8192", _huge_image, "0001.png"),
    ]
    for name, damage, needle in meta:
        for command, args in (("verify", VERIFY), ("infer", INFER)):
            fresh(work, (fx.r2m, "r2m"))
            damage(work)
            linked = "linked outside" in name  # the stated rule: links are followed and must resolve to files
            check(
                "R2M checkouts",
                f"{name} ({command})",
                work,
                args,
                needle,
                _out,
                outcome=_handled if linked else None,
            )

    sizes = [
        ("trajectory of 20,000 poses", _poses(20_000)),
        ("trajectory of 100,000 poses", _poses(100_000)),
    ]
    for name, damage in sizes:
        for command, args in (("verify", VERIFY), ("score", SCORE)):
            fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
            damage(work)
            check("sizes", f"R2M {name} ({command})", work, args, "trajectory", _scores, outcome=_handled)

    predictions = [
        ("gen.mp4 4096x4096, 161 frames", lambda w: _video(w / VIDEO, 4096, 4096, 161), "gen.mp4"),
        ("gen.mp4 16x16", lambda w: _video(w / VIDEO, 16, 16, 161), "gen.mp4"),
        ("gen.mp4 of 20,000 frames", lambda w: _video(w / VIDEO, 128, 96, 20_000), "gen.mp4"),
        ("gen.mp4 a FIFO", _fifo(VIDEO), "gen.mp4"),
        ("gen.mp4 empty", lambda w: (w / VIDEO).write_bytes(b""), "gen.mp4"),
        (
            "gen.mp4 linked to /dev/zero",
            lambda w: ((w / VIDEO).unlink(), (w / VIDEO).symlink_to("/dev/zero")),
            "gen.mp4",
        ),
        (
            "--pairs: 300,000 duplicate pairs",
            lambda w: _pairs(w, lambda d: d.update(revisit=[[0, 100]] * 100_000, baseline=[[0, 50]] * 100_000)),
            "DDDAAA.json",
        ),
        ("--pairs: frame 10^9", lambda w: _pairs(w, lambda d: d.update(revisit=[[0, 10**9]])), "DDDAAA.json"),
        ("--pairs: a pair of strings", lambda w: _pairs(w, lambda d: d.update(revisit=[["a", "b"]])), "DDDAAA.json"),
    ]
    for name, damage, needle in predictions:
        fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
        args = SCORE + (["--pairs", "r2m_run/scores/r2m-v2/pairs"] if name.startswith("--pairs") else [])
        damage(work)
        group = "sizes" if "4096" in name or "20,000" in name or "300,000" in name else "R2M runs"
        # Frames beyond the trajectory are ignored (as upstream does): decoding stops at its last pose.
        outcome = _handled if "20,000 frames" in name else None
        check(group, f"R2M {name}", work, args, needle, _scores, outcome=outcome)

    fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
    _pairs(work, lambda d: d.update(meta={"JUNK": "x" * (30 << 20)}, extra="JUNK"))
    check(  # a meta over 64 KiB is refused; unknown keys are never copied (tests/test_checks.py)
        "R2M runs",
        "--pairs: a 30 MB meta is refused",
        work,
        [*SCORE, "--pairs", "r2m_run/scores/r2m-v2/pairs"],
        ("DDDAAA.json", "meta: must be an object of at most 64 KiB"),
        _scores,
    )

    protocol = json.loads((Path(__file__).resolve().parents[2] / "persistbench/data/protocols/r2m-v1.json").read_text())
    for name, change in [
        ("min_short = max_short = 100000", lambda p: p["pairs"].update(min_short=100_000, max_short=100_000)),
        ("n_pairs 10^9", lambda p: p["pairs"].update(n_pairs=10**9)),
        ("seed a string", lambda p: p["pairs"].update(seed="x")),
        ("named classic-v1", lambda p: p.update(name="classic-v1")),
        ("a metric twice", lambda p: p.update(metrics=["frame_psnr", "frame_psnr"])),
        ("an unknown metric", lambda p: p.update(metrics=["frame_psnr", "fid"])),
    ]:
        fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
        p = json.loads(json.dumps(protocol))
        change(p)
        (work / "p.json").write_text(json.dumps(p))
        args = ["score", "--no-progress", "--pred", "r2m_run", "--dataset", "r2m", "--protocol", "p.json"]
        check("protocols", f"R2M protocol {name}", work, args, "p.json", lambda x: x == "p.json" or _scores(x))

    resume = [
        ("gen.mp4 deleted", lambda w: (w / VIDEO).unlink(), _redone),
        ("case.json poses 1e30", edit_json(CASE, lambda c: c.update(poses=1e30)), _redone),
        ("case.json size ['x', -1]", edit_json(CASE, lambda c: c.update(size=["x", -1])), _redone),
        (
            "case.json files ../../../etc/passwd",
            edit_json(CASE, lambda c: c.update(files={"../../../etc/passwd": "0" * 64})),
            _redone,
        ),
        ("gen.mp4 replaced by other bytes", lambda w: (w / VIDEO).write_bytes(b"\0" * 1000), _redone),
    ]
    for name, damage, outcome in resume:
        fresh(work, (fx.r2m, "r2m"), (fx.r2m_run, "r2m_run"))
        damage(work)
        args = ["infer", "--no-progress", "--model", "warp", "--dataset", "r2m", "--output", "r2m_run", "--resume"]
        check(
            "resume",
            f"R2M infer --resume: {name}",
            work,
            args,
            "0001",
            lambda p: p.startswith("r2m_run"),
            outcome=outcome,
        )


def _out(path: str) -> bool:
    return path == "o" or path.startswith("o/")


def _scores(path: str) -> bool:
    return path.startswith("r2m_run/scores")
