"""Round one of the catalogue: recipes, PersistBench datasets and runs, protocols, outputs, models."""

from __future__ import annotations

import copy
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from persistbench.core.protocol import SHIPPED
from persistbench.io.images import write_image
from persistbench.io.safeload import save_npy_dict
from persistbench.suites.persistbench.build.download import bundled_recipes
from persistbench.suites.persistbench.dataset import Case, Dataset

from .harness import check

SAMPLE = bundled_recipes()


def recipe_cases(work: Path) -> None:
    base = json.loads(SAMPLE.read_text().splitlines()[0])
    base["source"]["url"] = (SAMPLE.parent / "sources" / f"{base['source']['id']}.mp4").as_uri()

    def case(name: str, edit: Callable[[dict], object], needle: str, raw: str | None = None) -> None:
        obj = copy.deepcopy(base)
        edit(obj)
        (work / "r.jsonl").write_text(raw if raw is not None else json.dumps(obj) + "\n")
        check(
            "recipes",
            name,
            work,
            ["download", "--no-progress", "--recipes", "r.jsonl", "--output", "out", "--cache", "c"],
            needle,
            lambda p: p == "r.jsonl",
        )

    ids = [
        ("case_id ../!x", "case_id", "Synth_a_0_obj_../!x"),
        ("case_id ../../victim", "case_id", "../../victim"),
        ("case_id with newline", "case_id", "Synth_a\nb_0_obj_1"),
        ("case_id with NUL", "case_id", "Synth_a\0_0_obj_1"),
        ("case_id absolute", "case_id", "/etc/passwd"),
        ("case_id 300 chars", "case_id", "Synth_" + "a" * 300 + "_0_obj_1"),
    ]
    for name, _field, value in ids:
        case(name, lambda o, v=value: o.update(case_id=v), "case_id:")
    for name, value in (("object.id ../x", "../x"), ("object.id /etc", "/etc"), ("object.id empty", "")):
        case(name, lambda o, v=value: o["object"].update(id=v), "object.id:")
    for name, value in (("source.id ..", ".."), ("source.id a/b", "a/b"), ("source.id hidden", ".x")):
        case(name, lambda o, v=value: o["source"].update(id=v), "source.id:")
    sizes = [
        ("output.width 20000", lambda o: o["output"].update(width=20000), "output.width"),
        ("output.height 1e9", lambda o: o["output"].update(height=1e9), "output.height"),
        ("output.width odd", lambda o: o["output"].update(width=255), "output.width"),
        ("source.n_frames 1e12", lambda o: o["source"].update(n_frames=10**12), "source.n_frames"),
        ("source.width 1e6", lambda o: o["source"].update(width=10**6), "source.width"),
        ("source.fps 0", lambda o: o["source"].update(fps=0), "source.fps"),
        ("source.fps NaN", lambda o: o["source"].update(fps=float("nan")), "NaN is not JSON"),  # strict JSON first
        ("source.start -1", lambda o: o["source"].update(start=-1), "source.start"),
        ("mask size 1e6 x 1e6", lambda o: o["object"]["masks"][0].update(size=[10**6, 10**6]), "object.masks[0]"),
        ("mask RLE garbage", lambda o: o["object"]["masks"][3].update(counts="\x7f\x7f"), "object.masks[3]"),
        ("fingerprint size 1e5", lambda o: o["fingerprint"].update(size=[10**5, 10**5]), "fingerprint.size"),
        ("pitch 120", lambda o: o["views"]["center"]["pitch_deg"].__setitem__(0, 120), "pitch_deg"),
        ("hfov 0", lambda o: o["output"].update(hfov_deg=0), "output.hfov_deg"),
        ("version 2", lambda o: o.update(version=2), "unknown version"),
        ("missing views", lambda o: o.pop("views"), "views: missing field"),
        ("yaw list too short", lambda o: o["views"]["view_0"].update(yaw_deg=[0.0]), "views.view_0.yaw_deg"),
    ]
    for name, edit, needle in sizes:
        case(name, edit, needle)
    case("not JSON", lambda o: None, "r.jsonl:1: not JSON", raw="{nope\n")
    case("empty file", lambda o: None, "r.jsonl: no recipes", raw="\n")


def dataset_cases(work: Path, ds: Path, run: Path) -> None:
    def damaged(name: str, damage: Callable[[Case], object], needle: str, command: str = "score") -> None:
        copy_ = work / "ds"
        shutil.rmtree(copy_, ignore_errors=True)
        shutil.copytree(ds, copy_)
        damage(Dataset(copy_).cases()[0])
        if command == "score":
            args = ["score", "--no-progress", "--pred", run, "--dataset", "ds", "--metrics", "psnr,iou"]
            allowed = lambda p: p.startswith("ds")  # noqa: E731
        else:
            args = ["infer", "--no-progress", "--model", "hold", "--dataset", "ds", "--output", "r2"]
            allowed = lambda p: p.startswith(("ds", "r2"))  # noqa: E731
        check("datasets", f"{name} ({command})", work, args, needle, allowed)
        shutil.rmtree(work / "r2", ignore_errors=True)

    def pickle_file(payload: bytes) -> Callable[[Case], None]:
        def write(case: Case) -> None:
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {"descr": "|O", "fortran_order": False, "shape": ()})
            case.visibility_path.write_bytes(buf.getvalue() + payload)

        return write

    def huge_header(case: Case) -> None:
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 4, 4)})
        case.view("view_0").camera_path.write_bytes(buf.getvalue())

    def nan_camera(case: Case) -> None:
        cam = case.view("center").camera()
        cam["cam_poses"][1] = np.nan
        save_npy_dict(case.view("center").camera_path, cam)

    damages = [
        ("view_0 frame deleted", lambda c: c.view("view_0").frame_paths[5].unlink(), "frames, the case has", "infer"),
        ("view_0 frame deleted", lambda c: c.view("view_0").frame_paths[5].unlink(), "frames, the case has", "score"),
        (
            "center frame wrong size",
            lambda c: write_image(c.view("center").frame_paths[2], np.zeros((8, 8, 3), np.uint8)),
            "8x8, expected",
            "score",
        ),
        (
            "center frame grayscale",
            lambda c: write_image(c.view("center").frame_paths[2], np.zeros((96, 128), np.uint8)),
            "8-bit RGB",
            "score",
        ),
        (
            "center frame not an image",
            lambda c: c.view("center").frame_paths[2].write_bytes(b"junk"),
            "not a readable image",
            "score",
        ),
        (
            "center mask non-binary",
            lambda c: write_image(c.view("center").mask_paths[2], np.full((96, 128), 3, np.uint8)),
            "not binary",
            "score",
        ),
        ("center camera NaN", nan_camera, "non-finite", "infer"),
        ("center camera NaN", nan_camera, "non-finite", "score"),
        ("camera header 1e12 frames", huge_header, "more than the file holds", "infer"),
        (
            "visibility pickle os.system",
            pickle_file(b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00id\x85R."),
            "refusing to unpickle os.system",
            "score",
        ),
        (
            "visibility pickle bytearray(2 GB)",
            pickle_file(b"\x80\x02cbuiltins\nbytearray\nJ\x00\x00\x00\x7f\x85R."),
            "refusing to unpickle builtins.bytearray",
            "score",
        ),
        ("visibility pickle memo 2^32", pickle_file(b"\x80\x02]r\xff\xff\xff\xff."), "memo index", "score"),
        ("visibility file missing", lambda c: c.visibility_path.unlink(), "visibility_dict.npy: missing", "score"),
        (
            "center masks folder missing",
            lambda c: [p.unlink() for p in c.view("center").mask_paths],
            "masks, the case has",
            "score",
        ),
    ]
    for name, damage, needle, command in damages:
        damaged(name, damage, needle, command)


def run_cases(work: Path, ds: Path, run: Path) -> None:
    def bad_run(name: str, edit: Callable[[Path], object], needle: str) -> None:
        copy_ = work / "run"
        shutil.rmtree(copy_, ignore_errors=True)
        shutil.copytree(run, copy_)
        shutil.rmtree(copy_ / "scores", ignore_errors=True)
        edit(copy_)
        check(
            "prediction runs",
            name,
            work,
            ["score", "--no-progress", "--pred", "run", "--dataset", ds, "--metrics", "psnr,iou"],
            needle,
            lambda p: p.startswith("run"),
        )

    def case_json(edit: Callable[[dict], object]) -> Callable[[Path], None]:
        def apply(root: Path) -> None:
            path = next(root.glob("*/*/case.json"))
            info = json.loads(path.read_text())
            edit(info)
            path.write_text(json.dumps(info))

        return apply

    def huge_png(root: Path) -> None:
        import struct
        import zlib

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0))
        png += chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b"")
        next(root.glob("*/*/frames/frame_0001.png")).write_bytes(png)

    cases = [
        ("case.json frame_indices not a list", case_json(lambda i: i.update(frame_indices="all")), "frame_indices"),
        (
            "case.json frame index out of range",
            case_json(lambda i: i["frame_indices"].__setitem__(0, 10**6)),
            "frame indices do not fit",
        ),
        ("case.json size negative", case_json(lambda i: i.update(size=[-1, 5])), "size: must be"),
        (
            "prediction frame wrong size",
            lambda r: write_image(next(r.glob("*/*/frames/frame_0001.png")), np.zeros((5, 5, 3), np.uint8)),
            "5x5, expected",
        ),
        ("prediction frame 60000x60000 header", huge_png, "decompression-bomb limit"),
        (
            "prediction frame grayscale",
            lambda r: write_image(next(r.glob("*/*/frames/frame_0001.png")), np.zeros((96, 128), np.uint8)),
            "8-bit RGB",
        ),
        (
            "prediction frame missing",
            lambda r: next(r.glob("*/*/frames/frame_0001.png")).unlink(),
            "predicted frames, expected",
        ),
        ("run.json not an object", lambda r: (r / "run.json").write_text("[1]"), "must hold a JSON object"),
        ("run.json not JSON", lambda r: (r / "run.json").write_text("{"), "run.json: not JSON"),
        (
            "public case_ids ../../x",
            lambda r: (r / "run.json").write_text(
                json.dumps({"preprocessing": {"eval_length": 4, "eval_reso": -1}, "case_ids": ["../../x"]})
            ),
            "is not a safe name",
        ),
        (
            "public eval_length 0",
            lambda r: (r / "run.json").write_text(json.dumps({"preprocessing": {"eval_length": 0, "eval_reso": -1}})),
            "eval_length must be",
        ),
        (
            "public eval_reso [0, 5]",
            lambda r: (r / "run.json").write_text(
                json.dumps({"preprocessing": {"eval_length": 4, "eval_reso": [0, 5]}})
            ),
            "eval_reso must be",
        ),
    ]
    for name, edit, needle in cases:
        bad_run(name, edit, needle)


def protocol_cases(work: Path, ds: Path, run: Path) -> None:
    shipped = json.loads((SHIPPED / "classic-v1.json").read_text())
    for name, edit, needle in [
        ("name ../../x", lambda p: p.update(name="../../x"), "name:"),
        ("name with /", lambda p: p.update(name="a/b"), "name:"),
        ("threshold 7", lambda p: p.update(visible_above=7), "visible_above"),
        ("eval_size 0x0", lambda p: p.update(eval_size=[0, 0]), "eval_size"),
        ("eval_size 1e6", lambda p: p.update(eval_size=[10**6, 10**6]), "eval_size"),
        ("unknown metric", lambda p: p.update(metrics=["psnr", "fid"]), "unknown ['fid']"),
        ("not an object", lambda p: p.clear(), "name:"),
    ]:
        proto = copy.deepcopy(shipped)
        edit(proto)
        (work / "p.json").write_text(json.dumps(proto))
        check(
            "protocols",
            name,
            work,
            ["score", "--no-progress", "--pred", run, "--dataset", ds, "--protocol", "p.json"],
            needle,
            lambda p: p == "p.json",
        )


def environment_cases(work: Path, ds: Path) -> None:
    (work / "file").write_text("a regular file")
    commands = {
        "synth": ["synth", "--output", "{bad}", "--scenes", "1"],
        "pack": ["pack", ds, "--output", "{bad}/dist"],
        "fetch": ["fetch", "--output", "{bad}", "--from", ds],
        "report": ["report", ds, "--output", "{bad}/r.html"],
        "demo": ["demo", "--output", "{bad}"],
        "infer": ["infer", "--model", "hold", "--dataset", ds, "--output", "{bad}"],
        "download": ["download", "--output", "{bad}", "--limit", "1", "--cache", "c"],
        "download cache": ["download", "--output", "o", "--limit", "1", "--cache", "{bad}"],
    }
    for where, bad in (("read-only", "/sys/persistbench-x"), ("under a file", "file/x"), ("an existing file", "file")):
        for command, args in commands.items():
            check(
                "outputs",
                f"{command}: {where} output",
                work,
                [a.format(bad=bad) if isinstance(a, str) else a for a in args],
                "Error:",
                lambda p: p == "file",
            )
    check(
        "outputs",
        "fetch: Hub unreachable",
        work,
        ["fetch", "--output", "d", "--repo", "a/b"],
        "127.0.0.1:9",
        lambda p: p == "file" or p.startswith("d"),
        env={"HF_ENDPOINT": "http://127.0.0.1:9"},
    )


def model_cases(work: Path, ds: Path) -> None:
    header = (
        "import numpy as np, sys, time\nfrom persistbench.models import BaseModel, ModelOutput\nclass M(BaseModel):\n"
    )
    hold = (
        "    def predict(self, s):\n        return ModelOutput(np.repeat(s.input_frames[:1], len(s.input_frames), 0))\n"
    )
    for name, body, needle in [
        ("predict calls sys.exit(3)", "    def predict(self, s):\n        sys.exit(3)\n", "sys.exit(3)"),
        ("predict raises", "    def predict(self, s):\n        raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("num_frames = 0", "    num_frames = 0\n" + hold, "num_frames must be"),
        ("resolution = (-5, 10)", "    resolution = (-5, 10)\n" + hold, "resolution must be"),
        (
            "wrong frame count",
            "    def predict(self, s):\n        return ModelOutput(s.input_frames[:2])\n",
            "frames have shape",
        ),
        ("NaN frames", "    def predict(self, s):\n        return ModelOutput(s.input_frames * np.nan)\n", "NaN"),
        (
            "frames out of [0, 1]",
            "    def predict(self, s):\n        return ModelOutput(s.input_frames + 2)\n",
            "must lie in [0, 1]",
        ),
        (
            "masks of the wrong dtype",
            "    def predict(self, s):\n        return ModelOutput(s.input_frames, masks=s.input_frames[..., 0])\n",
            "masks have dtype",
        ),
    ]:
        (work / "m.py").write_text(header + body)
        check(
            "models",
            name,
            work,
            ["infer", "--no-progress", "--model", "m.py:M", "--dataset", ds, "--output", "r"],
            needle,
            lambda p: p == "m.py" or p.startswith("r"),
        )
        shutil.rmtree(work / "r", ignore_errors=True)
    (work / "cfg.json").write_text('{"timeout": 1}')
    adapter = "cmd:sh -c 'sleep 100 & sleep 100; : $0 $1' {input} {output}"
    check(
        "models",
        "cmd: adapter times out",
        work,
        ["infer", "--no-progress", "--model", adapter, "--model-config", "cfg.json", "--dataset", ds, "--output", "r"],
        "timed out",
        lambda p: p in ("cfg.json", "m.py") or p.startswith("r"),
    )
