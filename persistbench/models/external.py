"""``cmd:`` models: a program in another environment, exchanging files (docs/adapters.md).

For each case the toolkit writes, into a fresh input directory::

    request.json          {uid, num_frames, resolution: [h, w], n_frames, n_targets, prompt}
    frames/frame_0000.png the input (view_0) frames, RGB
    input_cameras.json    {cam_poses: T x 4 x 4 camera-to-world, cam_intrinsic: 3 x 3} (absent without cameras: WROP)
    target_cameras.json   the same for the center view to render (absent without cameras)

runs ``PROGRAM ARGS`` with ``{input}`` and ``{output}`` replaced by the two
directories, and reads back ``{output}/frames/*.png`` (required),
``{output}/masks/*.png`` (optional, nonzero = object) and
``{output}/output.json`` (optional: ``{"projection": "equirect"}``).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.core.layout import frame_name
from persistbench.io.files import read_json, write_json
from persistbench.io.images import image_size, list_images, read_image, write_image
from persistbench.models.base import BaseModel, ModelInput, ModelOutput

MAX_PANORAMA = (8192, 16384)  # (h, w): the largest frame an external program may return


def _camera_json(cameras: dict) -> dict:
    return {
        "cam_poses": np.asarray(cameras["cam_poses"]).tolist(),
        "cam_intrinsic": np.asarray(cameras["cam_intrinsic"]).tolist(),
    }


class CommandModel(BaseModel):
    """Runs an external program per case.

    Args:
        command: the program and its arguments, with ``{input}`` and ``{output}`` placeholders.
        num_frames, resolution: the sampling the program wants (as a model's class attributes).
        timeout: seconds per case.
        log_dir: where each case's stderr is kept (``<log_dir>/<uid>.log``); set by infer.
    """

    def __init__(
        self,
        device: str = "cpu",
        command: str = "",
        num_frames: int = -1,
        resolution: tuple[int, int] | list[int] = (-1, -1),
        timeout: float = 600.0,
        **kwargs,
    ) -> None:
        super().__init__(device)
        if "{input}" not in command or "{output}" not in command:
            raise PersistbenchError(f"cmd:{command}: the command must contain {{input}} and {{output}}")
        self.command = command
        self.num_frames = int(num_frames)
        self.resolution = (-1, -1) if resolution == -1 else tuple(resolution)
        self.timeout = float(timeout)
        self.log_dir: Path | None = None

    def predict(self, sample: ModelInput) -> ModelOutput:
        with tempfile.TemporaryDirectory(prefix="persistbench-cmd-") as tmp:
            inp, out = Path(tmp) / "input", Path(tmp) / "output"
            out.mkdir(parents=True)
            frames = np.clip(sample.input_frames * 255.0 + 0.5, 0, 255).astype(np.uint8)
            for t, frame in enumerate(frames):
                write_image(inp / "frames" / frame_name(t), frame)
            for name, cameras in (("input", sample.input_cameras), ("target", sample.target_cameras)):
                if cameras is not None:
                    write_json(inp / f"{name}_cameras.json", _camera_json(cameras))
            write_json(
                inp / "request.json",
                {
                    "uid": sample.uid,
                    "num_frames": self.num_frames,
                    "resolution": list(self.resolution),
                    "n_frames": len(frames),
                    "n_targets": sample.num_targets(),
                    "prompt": sample.prompt,
                },
            )
            args = [a.replace("{input}", str(inp)).replace("{output}", str(out)) for a in shlex.split(self.command)]
            log = self.log_dir / f"{sample.uid}.log" if self.log_dir is not None else Path(tmp) / "stderr.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            code = self._run(args, log, sample.uid)
            if code != 0:
                last = _tail(log).strip().splitlines()[-1:] or ["no message"]
                raise PersistbenchError(f"{sample.uid}: {args[0]} exited with {code}: {last[0]}")
            return _read_output(out, sample, args[0])

    def _run(self, args: list[str], log: Path, uid: str) -> int:
        """Run the program in a session of its own, output to ``log``; its whole process group is killed
        on timeout and when it ends (grandchildren included), so nothing it started outlives the case."""
        with open(log, "wb") as sink:
            try:
                proc = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, start_new_session=True
                )
            except OSError as e:
                raise PersistbenchError(f"{uid}: cannot run {args[0]}: {e.strerror}") from None
            try:
                return proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise PersistbenchError(f"{uid}: {args[0]} timed out after {self.timeout:g} s") from None
            finally:
                _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _tail(path: Path, size: int = 4096) -> str:
    """The last ``size`` bytes of a log as text (the log itself can be any length)."""
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - size))
        return f.read().decode(errors="replace")


def _read_output(out: Path, sample: ModelInput, program: str) -> ModelOutput:
    """The program's frames, masks and projection; counts and sizes are checked before any image is decoded."""
    n = sample.num_targets()
    meta_path = out / "output.json"
    meta = read_json(meta_path) if meta_path.is_file() and meta_path.stat().st_size < 1 << 16 else {}
    projection = meta.get("projection", "perspective") if isinstance(meta, dict) else "perspective"
    h, w = sample.input_frames.shape[1:3]
    paths = list_images(out / "frames")
    mask_paths = list_images(out / "masks")
    if len(paths) != n or mask_paths and len(mask_paths) != n:
        raise PersistbenchError(
            f"{sample.uid}: {program} wrote {len(paths)} frames and {len(mask_paths)} masks, expected {n}"
        )
    for p in paths + mask_paths:
        ph, pw = image_size(p)
        if projection == "perspective" and (ph, pw) != (h, w) or ph > MAX_PANORAMA[0] or pw > MAX_PANORAMA[1]:
            raise PersistbenchError(f"{p}: {pw}x{ph}, expected {w}x{h}")
    result = np.stack([read_image(p) for p in paths])
    masks = np.stack([read_image(p, gray=True) > 0 for p in mask_paths]) if mask_paths else None
    return ModelOutput(frames=result, masks=masks, projection=projection)
