#!/usr/bin/env python
"""Parity of our ``paper-v3`` scorer with the public PersistBench toolkit's ``default-three-paper-v3``.

Runs the PUBLIC scorer (PyPI ``persistbench`` 0.1.7: ``ReleaseEngine`` + ``PersistBenchMetric``) and
OURS (``persistbench.suites.persistbench.paper.score_case``) on the same synthetic cases, with the same
deterministic stub networks injected at the network level on both sides, and one scripted loopback
judge that both ask. Compares the per-frame scores (1e-6) and the sha256 of every intermediate input:
the ground truth and prediction at the evaluation size, what each stub network receives (DINOv3
matching, SAM 2 tracking, DINOv2 appearance) and every request the judge receives.

Both packages are imported as ``persistbench``, so the public side runs in a throwaway venv (default
``~/.cache/persistbench-parity/venv-0.1.7``, reused when ready): ``persistbench==0.1.7 --no-deps``
(from ``--wheels DIR``, ``$PERSISTBENCH_PUBLIC_WHEELS`` or ``.ci/wheels`` when the pinned wheel is
there, else the package index), the public scoring's imports that this interpreter lacks (easydict,
loguru, pyzmq) and a ``.pth`` that appends this interpreter's site-packages (torch, numpy, PIL, cv2,
openai) AFTER the venv's own, so ``import persistbench`` there is the public one (checked).

Usage (from the repository root, with the project's interpreter):

    .venv/bin/python scripts/parity_public.py                 # every scenario
    .venv/bin/python scripts/parity_public.py -k base -k c1   # scenarios whose name contains base or c1
    .venv/bin/python scripts/parity_public.py --list
    options: --wheels DIR, --venv DIR, --keep DIR (keep the work files), --json FILE (the full report)

Exit 0 only when everything agrees; where a documented deviation exists (docs/metrics.md, paper-v3:
a failed judgment fails the public case but leaves our object permanence null; the judge's retry rules
are ours), the documented behaviour is checked on both sides instead, and the table says so.
The stubs stand for DINOv2-with-registers, DINOv3 and, except in ``h_real_sam2``, SAM 2: that scenario
runs the real ``sam2`` package (hiera-tiny, seeded random weights) on both sides, the public model
server's predictor against our ``sam2-package`` backend (it needs ``pip install 'persistbench[sam2]'``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_VERSION = "0.1.7"
WHEEL = f"persistbench-{PUBLIC_VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "6a6c0d05160297e4f57b9ac9e06a6d592a0865778111912a24d3aa19f5125241"
# what the public scoring path imports at module level and this project's environment does not ship:
# easydict (metrics, scores), loguru (everywhere), zmq (model_server.base_client, imported by the metric)
PUBLIC_DEPS = {"easydict": "easydict==1.14", "loguru": "loguru==0.7.3", "zmq": "pyzmq==27.3.0"}
JUDGE_MODEL = "Qwen/Qwen3.8-27B"  # the public judge profile's model (configs/judge.yaml) and our protocol's
TOL = 1e-6

# ==================================================================== stub networks (both interpreters)

STUBS = r'''
import hashlib as _hashlib
import numpy as _np
import torch as _torch

FEATURE_DIM = 32
TRACK_DISTANCE = 90.0  # RGB distance to the prompt's mean colour that the stub tracker keeps


def sha(array) -> str:
    """sha256 of an array's dtype, shape and bytes."""
    a = _np.ascontiguousarray(array)
    h = _hashlib.sha256()
    h.update(str(a.dtype).encode())
    h.update(repr(tuple(a.shape)).encode())
    h.update(a.tobytes())
    return h.hexdigest()


class StubViT:
    """A ViT stand-in: each whole ``patch`` x ``patch`` patch of the normalised input (rows and columns past
    the last whole patch dropped, as a strided patch embedding drops them), flattened, times a fixed
    seeded matrix, through tanh (float64, one sample at a time so that batching cannot change a bit).
    Records the sha256 of every sample as the patch embedding sees it."""

    def __init__(self, patch: int, seed: int):
        self.patch = patch
        rng = _np.random.default_rng(seed)
        k = 3 * patch * patch
        self.weight = _torch.from_numpy(rng.standard_normal((k, FEATURE_DIM)) / _np.sqrt(k))
        self.inputs = []

    def tokens(self, x):
        p = self.patch
        b, _, h, w = x.shape
        gh, gw = h // p, w // p
        out = []
        for i in range(b):
            xi = x[i, :, : gh * p, : gw * p].detach().to(_torch.float32).contiguous()
            self.inputs.append(sha(xi.numpy()))
            patches = xi.reshape(3, gh, p, gw, p).permute(1, 3, 0, 2, 4).reshape(gh * gw, 3 * p * p)
            out.append(_torch.tanh(patches.to(_torch.float64) @ self.weight).to(_torch.float32))
        return _torch.stack(out)


def colour_track(frames, prompt):
    """The SAM 2 stand-in: every frame's mask is the pixels within TRACK_DISTANCE of the mean colour under
    the prompt mask in the first frame (all empty for an empty prompt). Returns the masks and the sha256
    of what it received (frames, prompt) and gave."""
    prompt = _np.asarray(prompt) > 0
    frames = [_np.asarray(f, _np.uint8) for f in frames]
    record = {"frames": sha(_np.stack(frames)), "prompt": sha(prompt), "n": len(frames)}
    if prompt.any():
        mean = frames[0][prompt].astype(_np.float64).mean(axis=0)
        masks = [_np.sqrt(((f.astype(_np.float64) - mean) ** 2).sum(-1)) < TRACK_DISTANCE for f in frames]
    else:
        masks = [_np.zeros(prompt.shape, bool) for _ in frames]
    record["masks"] = sha(_np.stack(masks))
    return masks, record


SEED_DINOV3, SEED_DINOV2 = 1603, 1402
'''

# ==================================================================== the public side (child program)

CHILD = r'''
import json, os, sys, time, traceback
job = json.load(open(sys.argv[1]))
os.environ.setdefault("TQDM_DISABLE", "1")

import persistbench
info = {"persistbench_file": persistbench.__file__, "version": persistbench.__version__}
if not persistbench.__file__.startswith(job["venv_site"]):
    json.dump({"fatal": f"import persistbench gave {persistbench.__file__}, not the venv's", **info},
              open(job["out"], "w"))
    sys.exit(2)

import numpy as np
import torch
from PIL import Image
from loguru import logger
logger.remove()
logger.add(sys.stderr, level="ERROR")
torch.set_num_threads(1)

import persistbench._legacy.metrics.persist_bench as pbm
import persistbench._legacy.scores.appearance_preservation as ap
import persistbench._legacy.scores.object_permanence as op
from persistbench._legacy.model_server.modules.dinov3_model import DINOWrapperV3
from persistbench._legacy.utils.qwen_utils import VlmFilter
from persistbench.runner import ReleaseEngine, SavedModelSpec
from persistbench.aggregation import extract_scores

STATE = {}


def _wrapper():
    """The DINOv3 model server's wrapper (its input normalisation), its network replaced by the stub and
    without the .cuda() of its forward."""
    w = DINOWrapperV3.__new__(DINOWrapperV3)
    torch.nn.Module.__init__(w)
    w.register_buffer("_imagenet_mean", torch.tensor([0.485, 0.456, 0.406]))
    w.register_buffer("_imagenet_std", torch.tensor([0.229, 0.224, 0.225]))
    return w


WRAPPER = _wrapper()


class FakeClient:
    """ModelClient (the ZeroMQ client of the model servers) answered in-process: 'dinov3' as
    DINOv3ModelServer.handle_request -> DINOWrapperV3.forward, 'sam2' as SAM2ModelServer ->
    SAM2VideoPredictor.__call__ (JPEG frames of video_dir in int(stem) order, read with PIL as RGB)."""

    def __init__(self, model_name, *args, **kwargs):
        self.model_name = model_name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def call(self, method, **kwargs):
        if self.model_name == "dinov3":
            with torch.no_grad():
                x_norm = WRAPPER._transform_input(kwargs["x"])
                return STATE["dinov3"].tokens(x_norm).cpu()
        if self.model_name == "sam2":
            video_dir = kwargs["video_dir"]
            names = [p for p in os.listdir(video_dir) if os.path.splitext(p)[-1] in (".jpg", ".jpeg", ".JPG", ".JPEG")]
            names.sort(key=lambda p: int(os.path.splitext(p)[0]))
            frames = [np.asarray(Image.open(os.path.join(video_dir, n)).convert("RGB")) for n in names]
            if STATE["sam2"] is None:
                masks, record = colour_track(frames, kwargs["mask"])
                STATE["tracker"].append(record)
                obj = kwargs.get("obj_id", 1)
                return {i: {obj: m[None]} for i, m in enumerate(masks)}
            with torch.no_grad():  # as SAM2ModelServer.handle_request calls SAM2VideoPredictor.__call__
                result = STATE["sam2"](**kwargs)
            masks = [result[i][1][0] if 1 in result.get(i, {}) else np.zeros(frames[0].shape[:2], bool)
                     for i in range(len(frames))]
            STATE["tracker"].append({"frames": sha(np.stack(frames)), "prompt": sha(np.asarray(kwargs["mask"]) > 0),
                                     "n": len(frames), "masks": sha(np.stack(masks))})
            return result
        raise RuntimeError(f"no stub for {self.model_name}")


class FakeLauncher:
    def start(self, *args, **kwargs):
        pass


class StubDinoV2:
    """torch.hub's dinov2_vitl14_reg as the appearance score uses it: forward_features -> x_norm_patchtokens."""

    def forward_features(self, x):
        return {"x_norm_patchtokens": STATE["dinov2"].tokens(x)}


pbm.ModelClient = FakeClient
ap._DINOScorer.model = property(lambda self: StubDinoV2())

CAP = {}
_pre, _match, _track = (pbm.PersistBenchMetric._preprocess, pbm.PersistBenchMetric._find_best_match,
                        pbm.PersistBenchMetric._track_pred)


def u8(frames):
    return np.rint(np.asarray(frames, np.float32) * 255.0).astype(np.uint8)


def pre(self, **kw):
    d = _pre(self, **kw)
    CAP.update(gt_frames=sha(u8(d.gt_frames)), gt_masks=sha(np.asarray(d.gt_masks, bool)),
               pred_frames=sha(u8(d.pred_frames)), eval_size=[int(d.actual_h), int(d.actual_w)],
               start=int(d.track_start_frame_idx))
    return d


def match(self, data_dict):
    r = _match(self, data_dict)
    CAP.update(gt_box_px=list(r.gt_bbox_first.to_pixel_coords()), pred_box_px=list(r.pred_bbox_first.to_pixel_coords()),
               matching_score=float(r.matching_score))
    return r


def track(self, data_dict, find_best_match_result):
    r = _track(self, data_dict, find_best_match_result)
    CAP.update(placed=sha(np.asarray(r.pred_mask_first, bool)), tracked_frames=[int(i) for i in r.valid_mask_frames],
               pred_masks=sha(np.asarray(r.pred_masks, bool)))
    return r


pbm.PersistBenchMetric._preprocess = pre
pbm.PersistBenchMetric._find_best_match = match
pbm.PersistBenchMetric._track_pred = track

metric = pbm.PersistBenchMetric(backend_launcher=FakeLauncher())  # the runtime's construction, defaults
out = {**info, "scenarios": {}}
for sc in job["scenarios"]:
    sam2 = None
    if sc.get("sam2"):  # the public model server's own predictor, on the real sam2 package
        from persistbench._legacy.model_server.modules.sam2_video import SAM2VideoPredictor
        sam2 = SAM2VideoPredictor(model_cfg=sc["sam2"]["config"], checkpoint=sc["sam2"]["checkpoint"],
                                  device=torch.device("cpu"))
    STATE.update(dinov3=StubViT(16, SEED_DINOV3), dinov2=StubViT(14, SEED_DINOV2), tracker=[], sam2=sam2)
    CAP.clear()
    os.environ["QWEN_LOCAL_BASE_URL"] = sc["judge_url"]
    metric.object_permanence_score.vlm = VlmFilter()  # its clients read the URL when made
    engine = ReleaseEngine(sc["work"], SavedModelSpec({"eval_length": sc["eval_length"], "eval_reso": sc["eval_reso"]}),
                           sc["predictions"])
    engine.metric = metric
    rec = {}
    t0 = time.time()
    try:
        engine._link_existing_results(sc["item"])
        result = engine._run_metric(sc["item"])
        extract_scores(result, sc["n_pred"])  # as run_evaluation checks each case
        rec.update(ok=True, results=result["results"])
    except Exception as e:
        rec.update(ok=False, error=type(e).__name__, message=str(e)[:400], trace=traceback.format_exc()[-1500:])
    rec.update(seconds=round(time.time() - t0, 2), capture=dict(CAP),
               dinov3_inputs=STATE["dinov3"].inputs, dinov2_inputs=STATE["dinov2"].inputs,
               tracker=STATE["tracker"])
    out["scenarios"][sc["name"]] = rec
json.dump(out, open(job["out"], "w"))
'''

# ==================================================================== the public venv


def find_wheel(option: str | None) -> Path | None:
    for folder in (
        option,
        os.environ.get("PERSISTBENCH_PUBLIC_WHEELS"),
        ROOT / ".ci" / "wheels",
        Path.cwd() / ".ci" / "wheels",
    ):
        if folder and (Path(folder) / WHEEL).is_file():
            path = Path(folder) / WHEEL
            if hashlib.sha256(path.read_bytes()).hexdigest() != WHEEL_SHA256:
                raise SystemExit(f"{path}: not the pinned {WHEEL} (sha256 differs)")
            return path
    return None


def public_python(venv: Path, wheels: str | None) -> tuple[Path, str]:
    """The throwaway venv's interpreter and its site-packages, built when missing or stale."""
    py = venv / "bin" / "python"
    host_site = sysconfig.get_paths()["purelib"]
    marker = venv / ".parity-ready.json"
    want = {"wheel_sha256": WHEEL_SHA256, "host_site": host_site, "host": sys.executable}
    if not (marker.is_file() and json.loads(marker.read_text()) == want and py.exists()):
        print(f"building the public toolkit's venv in {venv} ...", flush=True)
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
        wheel = find_wheel(wheels)
        if wheel is not None:
            subprocess.run([*pip, "--no-index", str(wheel)], check=True)
        else:
            subprocess.run([*pip, f"persistbench=={PUBLIC_VERSION}"], check=True)
        missing = []
        for module, dist in PUBLIC_DEPS.items():
            try:
                __import__(module)
            except ImportError:
                missing.append(dist)
        if missing:
            local = [str(wheel.parent)] if wheel is not None else []
            try:
                if not local:
                    raise subprocess.CalledProcessError(1, "no local wheels")
                subprocess.run([*pip, "--no-index", "--find-links", local[0], *missing], check=True)
            except subprocess.CalledProcessError:
                subprocess.run([*pip, *missing], check=True)
        site = subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        # appended after the venv's own site-packages: the venv's persistbench wins, torch & co come from ours
        Path(site, "zz_parity_host_site.pth").write_text(host_site + "\n")
        marker.write_text(json.dumps(want))
    site = subprocess.run(
        [str(py), "-P", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    ).stdout.strip()
    return py, site


# ==================================================================== the scripted judge

OBJECT_RGB = (205, 40, 42)  # what the judge looks for in the prediction crop
JUDGE_DISTANCE, JUDGE_FRACTION = 50.0, 0.05
_TAG = re.compile(r'"tag": "(F\d{4})"')


def _canonical(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class JudgeServer:
    """An OpenAI-compatible loopback endpoint: ``/<side>/<scenario>/v1/{models,chat/completions}``. It answers
    from the prediction crop (the second image): visible iff at least JUDGE_FRACTION of its pixels lie
    within JUDGE_DISTANCE of OBJECT_RGB. ``scripts[scenario][tag]`` lists what the first attempts of
    each side get ("http500", "garbage": no JSON, "badvalue": visible not a boolean, "empty": empty content,
    "pyliteral": a Python dict, "untagged": fenced JSON in prose); later attempts are answered.
    Every completion request is recorded (its canonical sha256, the prompt's and each image's)."""

    def __init__(self, scripts: dict[str, dict[str, list[str]]]):
        self.scripts = scripts
        self.lock = threading.Lock()
        self.attempts: dict[tuple, int] = {}
        self.requests: dict[tuple, list[dict]] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": JUDGE_MODEL, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.strip("/").split("/")
                if len(parts) < 4 or not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": "not found"})
                side, scenario = parts[0], parts[1]
                self._send(*server.answer(side, scenario, json.loads(body)))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def base(self, side: str, scenario: str) -> str:
        return f"{self.url}/{side}/{scenario}/v1"

    def answer(self, side: str, scenario: str, body: dict) -> tuple[int, dict]:
        import cv2

        user = next(m for m in body["messages"] if m["role"] == "user")
        prompt = next(c["text"] for c in user["content"] if c["type"] == "text")
        images = [
            base64.b64decode(c["image_url"]["url"].split(",", 1)[1])
            for c in user["content"]
            if c["type"] == "image_url"
        ]
        m = _TAG.search(prompt)
        tag = m.group(1) if m else "?"
        with self.lock:
            k = (side, scenario, tag)
            attempt = self.attempts.get(k, 0)
            self.attempts[k] = attempt + 1
            self.requests.setdefault((side, scenario), []).append(
                {
                    "tag": tag,
                    "attempt": attempt,
                    "body": _canonical(body),
                    "prompt": hashlib.sha256(prompt.encode()).hexdigest(),
                    "images": [hashlib.sha256(i).hexdigest() for i in images],
                    "settings": {
                        k2: body.get(k2) for k2 in ("model", "temperature", "max_tokens", "chat_template_kwargs")
                    },
                }
            )
        script = self.scripts.get(scenario, {}).get(tag, [])
        action = script[attempt] if attempt < len(script) else "ok"
        if action == "http500":
            return 500, {"error": {"message": "scripted failure", "type": "server_error"}}
        if action == "garbage":
            content = "I am not sure what the images show."
        elif action == "empty":
            content = ""
        elif action == "badvalue":  # JSON, but "visible" is not a boolean
            content = "<answer>" + json.dumps({"tag": tag, "visible": "yes", "reason": "scripted"}) + "</answer>"
        else:
            pred = cv2.cvtColor(cv2.imdecode(np.frombuffer(images[-1], np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
            d = np.sqrt(((pred.astype(np.float64) - np.array(OBJECT_RGB)) ** 2).sum(-1))
            visible = bool((d < JUDGE_DISTANCE).mean() >= JUDGE_FRACTION)
            answer = {"reference_description": "a red object", "tag": tag, "visible": visible, "reason": "scripted"}
            if action == "pyliteral":  # a Python dict (single quotes, True/False) in the answer tags
                content = f"<answer>{answer!r}</answer>"
            elif action == "untagged":  # no tags, the object inside prose and a fenced block
                content = f"Here is my assessment:\n```json\n{json.dumps(answer)}\n```\nDone."
            else:
                content = f"<thinking>\nscripted\n</thinking>\n<answer>\n{json.dumps(answer)}\n</answer>"
        return 200, {
            "id": "chatcmpl-parity",
            "object": "chat.completion",
            "created": 0,
            "model": JUDGE_MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


# ==================================================================== synthetic cases


def render(h: int, w: int, t: float, obj: dict | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A frame and its object mask: a textured blue-green background and, when ``obj`` is given, a striped
    red ellipse at ``obj['c']`` = (x, y) (fractions of the frame) with radii ``obj['r']``, or a thin
    vertical line when ``obj['line']``; ``obj['rgb']`` overrides its colour (a decoy)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    u, v = (xx + 0.5) / w, (yy + 0.5) / h
    tex = np.sin(17 * u + 5 * t) * np.cos(13 * v - 3 * t)
    img = np.stack([40 + 50 * u + 12 * tex, 115 + 55 * v + 10 * tex, 160 + 50 * u * v - 10 * tex], -1)
    mask = np.zeros((h, w), bool)
    if obj is not None:
        cx, cy = obj["c"]
        if obj.get("line"):
            mask[int(h * 0.3) : int(h * 0.7), int(cx * w)] = True
        else:
            rx, ry = obj.get("r", (0.13, 0.17))
            mask = ((u - cx) / rx) ** 2 + ((v - cy) / ry) ** 2 <= 1.0
        stripes = (np.floor((u - cx) * 40 + (v - cy) * 25) % 2)[..., None]
        base = np.array(obj.get("rgb", OBJECT_RGB), np.float64)
        img = np.where(mask[..., None], base + stripes * np.array([-22, -8, 10]), img)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8), mask


def write_png(path: Path, image: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path)


def build_case(root: Path, sc: dict) -> dict:
    """The case (our dataset layout, which is the public release's per-object layout) and a public-form
    prediction run for it; returns the paths both sides need."""
    from PIL import Image

    T, (H, W) = sc["frames"], sc["size"]
    uid = f"static__{sc['case']}"
    case = root / "dataset" / "static" / sc["case"]
    gt_objects = sc["gt_objects"]
    for t in range(T):
        frame, mask = render(H, W, t / T, gt_objects[t])
        if t in sc.get("gt_empty", ()):
            mask[:] = False
        for view in ("view_0", "center"):
            write_png(case / view / "frames" / f"frame_{t:04d}.png", frame)
        write_png(case / "center" / "masks" / f"mask_{t:04d}.png", mask.astype(np.uint8) * 255)
    cams = {
        "cam_poses": np.tile(np.eye(4), (T, 1, 1)),
        "cam_intrinsic": np.array([[W, 0, W / 2], [0, W, H / 2], [0, 0, 1.0]]),
    }
    for view in ("view_0", "center"):
        np.save(case / view / "camera_params.npy", np.array(cams, dtype=object), allow_pickle=True)
    vis = np.asarray(sc["visibility"], np.float64)
    visibility = {"view_0_visibility": vis, "view_1_visibility": np.ones(T, bool)}
    np.save(case / "visibility_dict.npy", np.array(visibility, dtype=object), allow_pickle=True)

    # the prediction: the model's frames (sampled as the public engine samples them), rendered at full size
    # with the prediction's object, centre-cropped and resized (PIL bilinear) to the model's resolution
    L, reso = sc["eval_length"], sc["eval_reso"]
    n = T if L == -1 else L
    idx = [0] * n if T == 1 else (np.linspace(0, T - 1, n).round().astype(int).tolist() if n > 1 else [0])
    from persistbench.geometry.sampling import crop_box

    x0, y0, cw, ch = crop_box((H, W), (-1, -1) if reso == -1 else tuple(reso))
    out_hw = (H, W) if reso == -1 else tuple(reso)
    run = root / "predictions"
    pred_dir = run / uid / "prediction"
    for i, t in enumerate(idx):
        frame, _ = render(H, W, t / T, sc["pred_objects"](i, t))
        crop = Image.fromarray(frame[y0 : y0 + ch, x0 : x0 + cw])
        if (ch, cw) != out_hw:
            crop = crop.resize((out_hw[1], out_hw[0]), Image.BILINEAR)
        write_png(pred_dir / f"{i:05d}.png", np.asarray(crop))
    (run / uid / "input").mkdir(parents=True, exist_ok=True)
    for name in ("input_camera_params.npy", "target_camera_params.npy"):
        sampled = {"cam_poses": cams["cam_poses"][idx], "cam_intrinsic": cams["cam_intrinsic"]}
        np.save(run / uid / name, np.array(sampled, dtype=object), allow_pickle=True)
    run_info = {
        "schema_version": 1,
        "stage": "inference",
        "name": "parity",
        "case_ids": [uid],
        "preprocessing": {"eval_length": L, "eval_reso": reso},
    }
    (run / "run.json").write_text(json.dumps(run_info))
    item = {
        "uid": uid,
        "case_id": sc["case"],
        "subset": "static",
        "fov": 90,
        "use_stationary": 1,
        "output_dir": "",
        "obj_id": "obj",
        "overlap_mode": "none",
        "window_ratio": 0.0,
        "window_move_ratio": 0.0,
        "visibility_dict_path": str(case / "visibility_dict.npy"),
        "object_dir": str(case),
    }
    return {
        "uid": uid,
        "case": case,
        "run": run,
        "run_info": run_info,
        "item": item,
        "n_pred": n,
        "root": root / "dataset",
    }


def moving(T: int, **kw):
    """GT object path: left to right with a vertical wobble."""
    return [{"c": (0.25 + 0.5 * t / max(1, T - 1), 0.5 + 0.12 * math.sin(2 * math.pi * t / T)), **kw} for t in range(T)]


def pred_objects(T: int, shift=(0.04, -0.03), missing=(), decoy=(), thin=()):
    """The prediction's object at model frame ``i`` (GT frame ``t``): shifted; absent on ``missing``;
    an orange decoy (tracked, but not the object for the judge) on ``decoy``."""

    def obj(i, t):
        if i in missing:
            return None
        c = (0.25 + 0.5 * t / max(1, T - 1) + shift[0], 0.5 + 0.12 * math.sin(2 * math.pi * t / T) + shift[1])
        if i in decoy:
            return {"c": c, "r": (0.07, 0.09), "rgb": (235, 105, 70)}
        return {"c": c, "r": (0.12, 0.16)}

    return obj


def scenarios() -> list[dict]:
    base_vis = [0.0] * 4 + [1.0] * 10 + [0.5] * 3 + [0.0] * 6 + [1.0] * 7  # 30 frames: start 4
    common = dict(
        case="c_base",
        frames=30,
        size=(120, 160),
        eval_length=-1,
        eval_reso=-1,
        visibility=base_vis,
        gt_objects=moving(30),
        pred_objects=pred_objects(30, missing=range(16, 20), decoy=range(21, 24)),
    )
    last = "F0029"
    return [
        dict(
            name="base",
            about="30 frames 120x160, eval -1/-1 (eval size 384x512), start 4, object lost 16-19, decoy 21-23",
            **common,
        ),
        dict(
            name="a_no_visible",
            about="no frame visible: start 0",
            **{**common, "case": "c_novis", "visibility": [0.0] * 10 + [0.5] * 10 + [0.0] * 10},
        ),
        dict(
            name="b1_empty_gt_mask",
            about="GT mask empty on frames 10 and 29 (29 is always judged): no permanence",
            expect="no_reference",
            **{**common, "case": "c_emptygt", "gt_empty": (10, 29)},
        ),
        dict(
            name="b2_empty_gt_at_start",
            about="GT mask empty on the start frame 4: whole-frame match box, empty prompt",
            expect="no_reference",
            **{**common, "case": "c_emptystart", "gt_empty": (4,)},
        ),
        dict(
            name="c1_invalid_then_ok",
            about=f"judge: {last} gets a reply without JSON, one with visible='yes', then a valid one",
            judge={last: ["garbage", "badvalue"]},
            **common,
        ),
        dict(
            name="c2_http500_once",
            about=f"judge: {last} gets one HTTP 500, then a valid reply",
            judge={last: ["http500"]},
            **common,
        ),
        dict(
            name="c3_invalid_always",
            about=f"judge: {last} never gets a valid reply",
            expect="judge_fails",
            judge={last: ["garbage"] * 20},
            **common,
        ),
        dict(
            name="c4_http500_always",
            about=f"judge: {last} always gets HTTP 500",
            expect="judge_fails",
            judge={last: ["http500"] * 40},
            **common,
        ),
        dict(
            name="c5_empty_once",
            about=f"judge: {last} gets one empty reply, then a valid one (asked again on both sides)",
            judge={last: ["empty"]},
            **common,
        ),
        dict(
            name="c6_reply_forms",
            about=f"judge: {last} answers with a Python dict, every other frame without tags (fenced JSON in prose)",
            judge={last: ["pyliteral"], **{f"F{i:04d}": ["untagged"] for i in range(0, 29)}},
            **common,
        ),
        dict(
            name="d_odd_sizes",
            about="GT 100x150, eval -1/-1: eval size 341x512 (not multiples of 14 or 16)",
            **{**common, "case": "c_odd", "size": (100, 150)},
        ),
        dict(
            name="e_length_over_clip",
            about="GT 20 frames, eval_length 30 (frames repeated)",
            **{
                **common,
                "case": "c_len",
                "frames": 20,
                "eval_length": 30,
                "visibility": ([0.0] * 3 + [1.0] * 17),
                "gt_objects": moving(20),
                "pred_objects": pred_objects(20, missing=range(12, 15)),
            },
        ),
        dict(
            name="f1_reso_portrait",
            about="GT 120x200, eval_reso [90, 70]: crop 93x120, eval size 384x298",
            **{
                **common,
                "case": "c_port",
                "size": (120, 200),
                "eval_reso": [90, 70],
                "gt_objects": moving(30, r=(0.06, 0.17)),
                "pred_objects": pred_objects(30, shift=(0.01, 0.0), missing=range(16, 20)),
            },
        ),
        dict(
            name="f2_reso_wide_len",
            about="GT 120x160, eval_reso [101, 333] + eval_length 12: crop 160x48, eval size 155x512",
            **{
                **common,
                "case": "c_wide",
                "eval_reso": [101, 333],
                "eval_length": 12,
                "gt_objects": moving(30, r=(0.1, 0.3)),
                "pred_objects": pred_objects(30, shift=(0.02, 0.0), missing=(6, 7)),
            },
        ),
        dict(
            name="g_thin_gt_mask",
            about="GT 384x512 (eval size = GT size), 12 frames; frame 6's GT mask a 1-pixel line (public crops are inclusive, never empty)",
            **{
                **common,
                "case": "c_thin",
                "frames": 12,
                "size": (384, 512),
                "visibility": [1.0] * 12,
                "gt_objects": [
                    ({"c": (0.5, 0.5), "line": True} if t == 6 else {"c": (0.3 + 0.03 * t, 0.5)}) for t in range(12)
                ],
                "pred_objects": lambda i, t: {"c": (0.32 + 0.03 * t, 0.5), "r": (0.12, 0.16)},
            },
        ),
        dict(
            name="h_real_sam2",
            about="the real sam2 package on both sides (SAM 2.1 hiera-tiny, seeded random weights, 1024 px): "
            "the public model server's predictor vs our sam2-package backend; 8 frames, start 2",
            sam2=True,
            **{
                **common,
                "case": "c_sam2",
                "frames": 8,
                "visibility": [0.0] * 2 + [1.0] * 6,
                "gt_objects": moving(8),
                "pred_objects": pred_objects(8, missing=(5,)),
            },
        ),
    ]


SAM2_CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"


def sam2_checkpoint(path: Path) -> dict:
    """A SAM 2.1 hiera-tiny checkpoint of the sam2 package with seeded random weights (as the package saves
    them), for the scenarios that run the real tracker on both sides."""
    import torch
    from sam2.build_sam import build_sam2_video_predictor

    if not path.is_file():
        torch.manual_seed(25)
        model = build_sam2_video_predictor(SAM2_CONFIG, None, device="cpu")
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": model.state_dict()}, path)
    return {"config": SAM2_CONFIG, "checkpoint": str(path)}


# ==================================================================== our side


def run_ours(sc: dict, built: dict, judge_url: str) -> dict:
    from types import SimpleNamespace

    import torch

    import persistbench.suites.persistbench.paper as paper
    from persistbench.backends import BackendOptions, JudgeOptions
    from persistbench.backends.features import PatchFeatures
    from persistbench.backends.judge import Judge
    from persistbench.core.layout import RunLayout
    from persistbench.suites.persistbench.dataset import Case
    from persistbench.suites.persistbench.predictions import read_prediction
    from persistbench.suites.persistbench.suite import PersistBench

    ns = globals()
    stubs = {
        "dinov3": ns["StubViT"](16, ns["SEED_DINOV3"]),
        "dinov2": ns["StubViT"](14, ns["SEED_DINOV2"]),
        "tracker": [],
    }

    class StubHF:
        """A transformers ViT's forward: last_hidden_state = class token, registers, patch tokens."""

        def __init__(self, vit, registers):
            self.vit, self.config = (
                vit,
                SimpleNamespace(patch_size=vit.patch, num_register_tokens=registers, hidden_size=ns["FEATURE_DIM"]),
            )

        def __call__(self, pixel_values):
            patches = self.vit.tokens(pixel_values)
            b = patches.shape[0]
            cls = patches.mean(dim=1, keepdim=True)
            regs = torch.zeros((b, self.config.num_register_tokens, patches.shape[2]))
            return SimpleNamespace(last_hidden_state=torch.cat([cls, regs, patches], dim=1))

    def features(vit, registers):
        f = PatchFeatures.__new__(PatchFeatures)  # its __init__ loads a checkpoint; the rest is ours, unchanged
        f.torch, f.device, f.batch_size, f.weights = torch, "cpu", 8, None
        f.model = StubHF(vit, registers)
        f.patch, f.skip, f.dim = vit.patch, 1 + registers, ns["FEATURE_DIM"]
        return f

    class StubTracker:
        def track(self, frames, mask):
            masks, record = ns["colour_track"](frames, mask)
            stubs["tracker"].append(record)
            return masks

    class RecordedTracker:
        """Our sam2-package backend, recording what it receives and gives as the public side records it."""

        def __init__(self, checkpoint: str):
            from persistbench.backends.sam2_video import Sam2PackageTracker
            from persistbench.backends.weights import Weights

            path = Path(checkpoint)
            self.tracker = Sam2PackageTracker(Weights("sam2-package", path.parent, str(path), (path,)), "cpu")

        def track(self, frames, mask):
            masks = self.tracker.track(frames, mask)
            stubs["tracker"].append(
                {
                    "frames": ns["sha"](np.stack(frames)),
                    "prompt": ns["sha"](np.asarray(mask) > 0),
                    "n": len(frames),
                    "masks": ns["sha"](np.stack(masks)),
                }
            )
            return masks

    opts = BackendOptions(device="cpu", judge=JudgeOptions(url=judge_url, model=JUDGE_MODEL))
    loaded = {
        "dinov3-large": features(stubs["dinov3"], 4),
        "dinov2-reg-large": features(stubs["dinov2"], 4),
        "sam2-package": RecordedTracker(sc["sam2"]["checkpoint"]) if sc.get("sam2") else StubTracker(),
        "judge": Judge(opts.judge, cache=False),
    }
    cap = {}
    original_track = paper._track

    def track(refs, ref_masks, preds, start, cfg, o):
        cap.update(
            gt_frames=ns["sha"](refs),
            gt_masks=ns["sha"](np.asarray(ref_masks, bool)),
            pred_frames=ns["sha"](preds),
            eval_size=list(refs.shape[1:3]),
            start=int(start),
        )
        masks, score = original_track(refs, ref_masks, preds, start, cfg, o)
        cap.update(pred_masks=ns["sha"](np.stack([np.asarray(m, bool) for m in masks])))
        return masks, score

    saved = paper.load, paper.provenance, paper._track
    paper.load = lambda name, o: loaded[name]
    paper.provenance = lambda names, o: {n: {"stub": True} for n in names}
    paper._track = track
    t0 = time.time()
    try:
        protocol = PersistBench.load_protocol("paper-v3")
        case = Case(built["root"], "static", sc["case"], built["case"])
        pred = read_prediction(RunLayout(built["run"]), built["run_info"], case)
        record = paper.score_case(case, pred, protocol, protocol.metrics, opts).to_json()
        rec = {"ok": True, "record": record}
    except Exception as e:  # reported, not hidden
        import traceback

        rec = {"ok": False, "error": type(e).__name__, "message": str(e)[:400], "trace": traceback.format_exc()[-1500:]}
    finally:
        paper.load, paper.provenance, paper._track = saved
    rec.update(
        seconds=round(time.time() - t0, 2),
        capture=cap,
        dinov3_inputs=stubs["dinov3"].inputs,
        dinov2_inputs=stubs["dinov2"].inputs,
        tracker=stubs["tracker"],
    )
    if rec["ok"] and stubs["tracker"]:
        rec["capture"]["placed"] = stubs["tracker"][0]["prompt"]
    return rec


# ==================================================================== comparison

METRICS = ("object_permanence", "motion_continuity", "appearance_preservation")


def frame_diff(a: list, b: list) -> tuple[float, int]:
    """Largest |a - b| over frames where both have a value, and the number of frames where only one has."""
    both = [abs(x - y) for x, y in zip(a, b) if x is not None and y is not None]
    only = sum((x is None) != (y is None) for x, y in zip(a, b)) + abs(len(a) - len(b))
    return max(both, default=0.0), only


def compare(
    sc: dict, pub: dict, ours: dict, pub_numbers: dict | None, judge: JudgeServer
) -> tuple[list[list[str]], bool, list[str]]:
    """Rows of the scenario's table, whether it agrees, and notes."""
    rows, ok, notes = [], True, []
    expect = sc.get("expect")

    def row(what, value, good, how="numeric"):
        nonlocal ok
        ok &= bool(good)
        rows.append([what, value, "yes" if good else "NO", how])

    if not ours.get("ok"):
        row("our scorer ran", f"{ours.get('error')}: {ours.get('message')}", False, "-")
        return rows, False, [ours.get("trace", "")]
    rec = ours["record"]
    numbers = pub_numbers  # the public run whose scores are compared (this scenario's, or its twin's)
    if expect == "judge_fails":
        good = (not pub.get("ok")) and pub.get("error") == "JudgeRequestError"
        row(
            "public: whole case fails",
            f"{pub.get('error')}: {str(pub.get('message'))[:70]}" if not pub.get("ok") else "scored",
            good,
            "documented",
        )
        op = rec["metrics"]["object_permanence"]
        good = (
            rec["judge"]["failed"] > 0
            and all(v is None for v in op)
            and all(rec["means"][s]["object_permanence"] is None for s in ("visible", "invisible"))
        )
        row(
            "ours: permanence null, failure counted",
            f"failed={rec['judge']['failed']} reasons={rec['judge'].get('reasons')}",
            good,
            "documented",
        )
    elif expect == "no_reference":
        # a frame to judge has an empty GT mask: the public toolkit's _reference_for_frame raises RuntimeError,
        # which _add_permanence_judge turns into NaN permanence for the whole case; ours leaves it null
        good = bool(pub.get("ok")) and all(v is None for v in pub["results"]["object_permanence"]["per_frame"]["score"])
        row(
            "public: permanence NaN for the case",
            "all null" if good else f"{pub.get('error') or 'has values'}",
            good,
            "exact",
        )
        good = all(v is None for v in rec["metrics"]["object_permanence"]) and not rec["judge"]["failed"]
        row("ours: permanence null (no reference)", str(rec["judge"]["reason"])[:60], good, "exact")
    if expect != "judge_fails" and not pub.get("ok"):
        row("public scorer ran", f"{pub.get('error')}: {str(pub.get('message'))[:80]}", False, "-")
        return rows, False, [pub.get("trace", "")]

    if numbers is None or not numbers.get("ok"):
        row("public numbers", "none to compare", False, "-")
        return rows, False, notes
    res = numbers["results"]
    meta = res["metadata"]
    row(
        "visible / invisible masks",
        "equal" if (meta["visible_mask"], meta["invisible_mask"]) == (rec["visible"], rec["invisible"]) else "differ",
        (meta["visible_mask"], meta["invisible_mask"]) == (rec["visible"], rec["invisible"]),
        "exact",
    )
    row(
        "track start",
        f"{meta['track_start_frame_idx']} vs {rec['start']}",
        meta["track_start_frame_idx"] == rec["start"],
        "exact",
    )
    d = abs(meta["matching_score"] - rec["matching_score"])
    row("matching score", f"{d:.2e}", d <= TOL)
    skip_op = expect == "judge_fails"
    for m in METRICS:
        if skip_op and m == "object_permanence":
            continue
        theirs, mine = res[m]["per_frame"]["score"], rec["metrics"][m]
        diff, only = frame_diff(theirs, mine)
        n = sum(v is not None for v in mine)
        good = diff <= TOL and only == 0
        row(f"{m} per frame", f"max|d|={diff:.2e}, {n} frames, {only} only-one", good)
        if only:
            where = [i for i, (x, y) in enumerate(zip(theirs, mine)) if (x is None) != (y is None)]
            notes.append(
                f"{m}: frames with a value on one side only: {where} "
                f"(public {[theirs[i] for i in where]}, ours {[mine[i] for i in where]})"
            )
        for s in ("visible", "invisible"):
            a, b = res[m]["scalars"][s], rec["means"][s][m]
            good = (a is None) == (b is None) and (a is None or abs(a - b) <= TOL)
            row(
                f"{m} {s} mean",
                "both null"
                if a is None and b is None
                else f"{a} vs {b}"
                if (a is None) != (b is None)
                else f"{abs(a - b):.2e}",
                good,
            )
    pt = set(numbers["capture"].get("tracked_frames", []))
    mt = {i for i, t in enumerate(rec["tracked"]) if t}
    row(
        "tracked frames",
        "equal" if pt == mt else f"public-only {sorted(pt - mt)}, ours-only {sorted(mt - pt)}",
        pt == mt,
        "exact",
    )

    # the intermediate inputs (this scenario's public run when it got that far)
    pc, oc = pub.get("capture", {}), ours["capture"]
    row(
        "eval size (h, w)",
        f"{pc.get('eval_size')} vs {oc.get('eval_size')}",
        pc.get("eval_size") == oc.get("eval_size"),
        "exact",
    )
    for key, label in (
        ("gt_frames", "GT frames @ eval size"),
        ("gt_masks", "GT masks @ eval size"),
        ("pred_frames", "pred frames @ eval size"),
        ("placed", "placed mask (matching result)"),
        ("pred_masks", "tracked masks"),
    ):
        a, b = pc.get(key), oc.get(key)
        row(label, "sha256 equal" if a == b else f"{str(a)[:12]} vs {str(b)[:12]}", a is not None and a == b, "sha256")
    for key, label in (("frames", "tracker input frames (double JPEG)"), ("prompt", "tracker input prompt mask")):
        a = [r[key] for r in pub.get("tracker", [])]
        b = [r[key] for r in ours.get("tracker", [])]
        row(
            label,
            f"{len(a)} vs {len(b)} call(s), sha256 {'equal' if a == b else 'differ'}",
            bool(a) and a == b,
            "sha256",
        )
    for key, label in (("dinov3_inputs", "DINOv3 inputs (matching)"), ("dinov2_inputs", "DINOv2 inputs (appearance)")):
        # a public case that failed at the judge never reached appearance: its twin's inputs are the same case's
        src = numbers if key == "dinov2_inputs" and expect == "judge_fails" else pub
        a, b = sorted(src.get(key, [])), sorted(ours.get(key, []))
        row(
            label,
            f"{len(a)} vs {len(b)} samples, sha256 {'equal' if a == b else 'differ'}",
            a == b and (bool(a) or key == "dinov2_inputs"),
            "sha256",
        )
    # the judge
    pr = judge.requests.get(("public", sc["name"]), [])
    orr = judge.requests.get(("ours", sc["name"]), [])
    if expect == "judge_fails":
        # compare the first attempt of each frame asked by both (the retry rules differ by design)
        ptags = {r["tag"]: r for r in pr if r["attempt"] == 0}
        otags = {r["tag"]: r for r in orr if r["attempt"] == 0}
        common = sorted(set(ptags) & set(otags))
        same = all(ptags[t]["body"] == otags[t]["body"] for t in common)
        row(
            "judge requests (first attempts, frames asked by both)",
            f"{len(common)} frames, sha256 {'equal' if same else 'differ'}",
            same and bool(common),
            "sha256",
        )
        row(
            "judge attempts on the scripted frame",
            f"public {sum(r['tag'] == next(iter(sc['judge'])) for r in pr)}, ours {sum(r['tag'] == next(iter(sc['judge'])) for r in orr)}",
            True,
            "info",
        )
    elif expect == "no_reference":
        # the public toolkit submits the batch's requests before it finds the empty reference and discards their
        # answers; ours asks nothing then: every request of ours must be one of the public's
        a = {(r["tag"], r["attempt"], r["body"]) for r in pr}
        b = {(r["tag"], r["attempt"], r["body"]) for r in orr}
        row(
            "judge requests: ours a subset of the public's",
            f"public {len(a)} (answers discarded), ours {len(b)}",
            b <= a,
            "sha256, known",
        )
    else:
        a = sorted((r["tag"], r["attempt"], r["body"]) for r in pr)
        b = sorted((r["tag"], r["attempt"], r["body"]) for r in orr)
        row(
            "judge requests (whole body)",
            f"{len(a)} vs {len(b)} requests, sha256 {'equal' if a == b else 'differ'}",
            a == b,
            "sha256",
        )
        if a != b:
            pa = {(r["tag"], r["attempt"]): r for r in pr}
            ob = {(r["tag"], r["attempt"]): r for r in orr}
            for k in sorted(set(pa) | set(ob)):
                x, y = pa.get(k), ob.get(k)
                if x is None or y is None:
                    notes.append(f"judge request {k} only on the {'public' if y is None else 'our'} side")
                elif x["body"] != y["body"]:
                    why = [n for n in ("prompt", "images", "settings") if x[n] != y[n]]
                    notes.append(
                        f"judge request {k}: differs in {why or ['other fields']}"
                        + (f" public {x['settings']} ours {y['settings']}" if "settings" in why else "")
                    )
    return rows, ok, notes


def table(rows: list[list[str]]) -> str:
    head = ["check", "value", "agree", "how"]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(4)]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


# ==================================================================== main


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-k", action="append", default=[], help="only scenarios whose name contains this (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--wheels", help="a folder holding the pinned public wheel (installed with --no-index)")
    ap.add_argument("--venv", default=str(Path.home() / ".cache" / "persistbench-parity" / f"venv-{PUBLIC_VERSION}"))
    ap.add_argument("--keep", help="write the cases and both sides' work files here and keep them")
    ap.add_argument("--json", help="write the full report (both sides' records) to this file")
    ap.add_argument("--timeout", type=float, default=900, help="seconds the public side may take (default 900)")
    args = ap.parse_args()

    all_sc = scenarios()
    if args.list:
        for sc in all_sc:
            print(f"{sc['name']:20} {sc['about']}")
        return 0
    chosen = [sc for sc in all_sc if not args.k or any(k in sc["name"] for k in args.k)]
    names = {sc["name"] for sc in chosen}
    for sc in list(chosen):  # a scenario whose numbers come from its twin needs that twin
        if sc.get("expect") == "judge_fails" and "base" not in names:
            chosen.insert(0, next(s for s in all_sc if s["name"] == "base"))
            names.add("base")

    exec(STUBS, globals())
    import torch

    torch.set_num_threads(1)
    py, venv_site = public_python(Path(args.venv).expanduser(), args.wheels)
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="parity-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["PERSISTBENCH_CACHE"] = str(work / "our-cache")
    t_start = time.time()
    try:
        built = {}
        for sc in chosen:
            built[sc["name"]] = build_case(work / "cases" / sc["name"], sc)
            if sc.get("sam2"):
                sc["sam2"] = sam2_checkpoint(work / "sam2-tiny.pt")
        with JudgeServer({sc["name"]: sc.get("judge", {}) for sc in chosen}) as judge:
            job = {
                "out": str(work / "public.json"),
                "venv_site": venv_site,
                "scenarios": [
                    {
                        "name": sc["name"],
                        "judge_url": judge.base("public", sc["name"]),
                        "work": str(work / "public" / sc["name"]),
                        "predictions": str(built[sc["name"]]["run"]),
                        "item": built[sc["name"]]["item"],
                        "eval_length": sc["eval_length"],
                        "eval_reso": sc["eval_reso"],
                        "n_pred": built[sc["name"]]["n_pred"],
                        "sam2": sc.get("sam2"),
                    }
                    for sc in chosen
                ],
            }
            (work / "job.json").write_text(json.dumps(job))
            child = work / "public_side.py"
            child.write_text(STUBS + "\n" + CHILD)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
            env.update(
                {
                    # as the public runtime's judge_environment sets them for a self-hosted judge
                    "VLM_PROVIDER": "qwen_local",
                    "VLM_MODEL_NAME": JUDGE_MODEL,
                    "QWEN_LOCAL_API_KEY": "EMPTY",
                    "QWEN_LOCAL_MAX_TOKENS": "2048",
                    "TQDM_DISABLE": "1",
                    "OMP_NUM_THREADS": "1",
                }
            )
            print(f"public side: {py} (scenarios: {', '.join(sc['name'] for sc in chosen)})", flush=True)
            with open(work / "public.stdout", "w") as so, open(work / "public.stderr", "w") as se:
                proc = subprocess.Popen(
                    [str(py), "-P", str(child), str(work / "job.json")], cwd=str(work), env=env, stdout=so, stderr=se
                )
                ours = {}
                try:
                    for sc in chosen:  # ours in-process, while the public side runs
                        ours[sc["name"]] = run_ours(sc, built[sc["name"]], judge.base("ours", sc["name"]))
                        print(
                            f"  ours: {sc['name']} {'scored' if ours[sc['name']]['ok'] else 'FAILED'} in {ours[sc['name']]['seconds']} s",
                            flush=True,
                        )
                    proc.wait(timeout=args.timeout)
                except BaseException:
                    proc.kill()
                    proc.wait()
                    raise
            if not (work / "public.json").is_file():
                print((work / "public.stderr").read_text()[-3000:])
                print("the public side wrote no results")
                return 1
            public = json.loads((work / "public.json").read_text())
            if "fatal" in public:
                print(f"public side: {public['fatal']}")
                return 1
            print(f"public persistbench {public['version']} imported from {public['persistbench_file']}")
            all_ok = True
            report = {"public": public, "ours": ours, "tables": {}}
            for sc in chosen:
                pub = public["scenarios"][sc["name"]]
                twin = public["scenarios"].get("base") if sc.get("expect") == "judge_fails" else pub
                rows, ok, notes = compare(sc, pub, ours[sc["name"]], twin, judge)
                all_ok &= ok
                print(
                    f"\n## {sc['name']}: {sc['about']}  [{'AGREE' if ok else 'DIFFER'}; public {pub['seconds']} s, ours {ours[sc['name']]['seconds']} s]"
                )
                if sc.get("expect") == "judge_fails":
                    print(
                        "   (documented deviation: public fails the case; motion/appearance compared with the public 'base' run of the same case)"
                    )
                print(table(rows))
                for n in notes:
                    print("   note: " + n.strip().replace("\n", "\n         "))
                report["tables"][sc["name"]] = {"rows": rows, "agree": ok, "notes": notes}
            if args.json:
                Path(args.json).write_text(json.dumps(report, indent=1, default=str))
        print(
            f"\n{'ALL AGREE' if all_ok else 'DIFFERENCES FOUND'} ({len(chosen)} scenarios, {time.time() - t_start:.0f} s)"
        )
        return 0 if all_ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
