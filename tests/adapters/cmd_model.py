"""A tiny external model for the cmd: adapter tests (see docs/adapters.md).

Usage: python cmd_model.py INPUT OUTPUT [--fail] [--masks]
It answers with the input frames (and, with --masks, masks of the frame's left half).
"""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def main() -> None:
    inp, out = Path(sys.argv[1]), Path(sys.argv[2])
    print("cmd_model: starting", file=sys.stderr)
    if "--fail" in sys.argv:
        print("cmd_model: failing on purpose", file=sys.stderr)
        sys.exit(3)
    request = json.loads((inp / "request.json").read_text())
    cameras = json.loads((inp / "target_cameras.json").read_text())
    assert len(cameras["cam_poses"]) == request["n_frames"]
    shutil.copytree(inp / "frames", out / "frames")
    if "--masks" in sys.argv:
        (out / "masks").mkdir()
        for p in sorted((out / "frames").iterdir()):
            w, h = Image.open(p).size
            mask = np.zeros((h, w), np.uint8)
            mask[:, : w // 2] = 255
            Image.fromarray(mask).save(out / "masks" / p.name.replace("frame_", "mask_"))


if __name__ == "__main__":
    main()
