"""``cmd:`` models: a program in another environment, exchanging files (docs/adapters.md).

For each case the toolkit writes, into a fresh input directory::

    request.json          {uid, num_frames, resolution: [h, w], n_frames}
    frames/frame_0000.png the input (view_0) frames, RGB
    input_cameras.json    {cam_poses: T x 4 x 4 camera-to-world, cam_intrinsic: 3 x 3}
    target_cameras.json   the same for the center view to render

runs ``PROGRAM ARGS`` with ``{input}`` and ``{output}`` replaced by the two
directories, and reads back ``{output}/frames/*.png`` (required),
``{output}/masks/*.png`` (optional, nonzero = object) and
``{output}/output.json`` (optional: ``{"projection": "equirect"}``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..errors import PersistbenchError
from ..layout import frame_name, list_images, read_image, write_image, write_json
from .base import BaseModel, ModelInput, ModelOutput


def _camera_json(cameras: dict) -> dict:
    return {"cam_poses": np.asarray(cameras["cam_poses"]).tolist(), "cam_intrinsic": np.asarray(cameras["cam_intrinsic"]).tolist()}


class CommandModel(BaseModel):
    """Runs an external program per case.

    Args:
        command: the program and its arguments, with ``{input}`` and ``{output}`` placeholders.
        num_frames, resolution: the sampling the program wants (as a model's class attributes).
        timeout: seconds per case.
        log_dir: where each case's stderr is kept (``<log_dir>/<uid>.log``); set by the runner.
    """

    def __init__(self, device: str = "cpu", command: str = "", num_frames: int = -1,
                 resolution: tuple[int, int] | list[int] = (-1, -1), timeout: float = 600.0, **kwargs) -> None:  # fmt: skip
        super().__init__(device)
        if "{input}" not in command or "{output}" not in command:
            raise PersistbenchError(f"cmd:{command}: the command must contain {{input}} and {{output}}")
        self.command = command
        self.num_frames = int(num_frames)
        self.resolution = (int(resolution[0]), int(resolution[1]))
        self.timeout = float(timeout)
        self.log_dir: Path | None = None

    def predict(self, sample: ModelInput) -> ModelOutput:
        with tempfile.TemporaryDirectory(prefix="persistbench-cmd-") as tmp:
            inp, out = Path(tmp) / "input", Path(tmp) / "output"
            out.mkdir(parents=True)
            frames = np.clip(sample.input_frames * 255.0 + 0.5, 0, 255).astype(np.uint8)
            for t, frame in enumerate(frames):
                write_image(inp / "frames" / frame_name(t), frame)
            write_json(inp / "input_cameras.json", _camera_json(sample.input_cameras))
            write_json(inp / "target_cameras.json", _camera_json(sample.target_cameras))
            write_json(inp / "request.json", {"uid": sample.uid, "num_frames": self.num_frames,
                                              "resolution": list(self.resolution), "n_frames": len(frames)})  # fmt: skip
            args = [a.replace("{input}", str(inp)).replace("{output}", str(out)) for a in shlex.split(self.command)]
            try:
                proc = subprocess.run(args, capture_output=True, timeout=self.timeout, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise PersistbenchError(f"{sample.uid}: {args[0]} timed out after {self.timeout:g} s") from None
            except OSError as e:
                raise PersistbenchError(f"{sample.uid}: cannot run {args[0]}: {e.strerror}") from None
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                (self.log_dir / f"{sample.uid}.log").write_bytes(proc.stderr)
            if proc.returncode != 0:
                last = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
                raise PersistbenchError(f"{sample.uid}: {args[0]} exited with {proc.returncode}: {last[0]}")
            paths = list_images(out / "frames")
            if not paths:
                raise PersistbenchError(f"{sample.uid}: {args[0]} wrote no frames to {{output}}/frames")
            result = np.stack([read_image(p) for p in paths])
            mask_paths = list_images(out / "masks")
            masks = np.stack([read_image(p, gray=True) > 0 for p in mask_paths]) if mask_paths else None
            meta = json.loads((out / "output.json").read_text()) if (out / "output.json").is_file() else {}
            return ModelOutput(frames=result, masks=masks, projection=meta.get("projection", "perspective"))
