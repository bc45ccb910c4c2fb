"""A keypoint matcher: SuperPoint keypoints matched by LightGlue, through ``transformers``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, weights_and_device

GRAY = (0.2989, 0.587, 0.114)  # the NTSC weights of LightGlue's image processor (torchvision's rgb_to_grayscale)


@dataclass(frozen=True)
class Matches:
    """The keypoints SuperPoint found in each frame and LightGlue's matches, in pixels of the frames given.

    ``points_a``/``points_b`` are ``(M, 2)`` float64 ``(x, y)`` of the matched keypoints, row for row.
    """

    keypoints_a: int
    keypoints_b: int
    points_a: np.ndarray
    points_b: np.ndarray


class PairMatcher:
    """Matches pairs of frames: ``LightGlueForKeypointMatching`` (SuperPoint inside) on grayscale frames
    resized to ``size``; the checkpoint folder is what ``save_pretrained`` writes."""

    def __init__(self, weights, device: str, batch_size: int = 8):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` checkpoint folder."""
        import torch
        from transformers import LightGlueForKeypointMatching

        self.torch, self.device, self.batch_size, self.weights = torch, device, max(1, batch_size), weights
        self.model = LightGlueForKeypointMatching.from_pretrained(
            weights.folder, use_safetensors=True, local_files_only=True
        )
        self.model = self.model.to(device).eval()

    def __call__(
        self,
        pairs: list[tuple[np.ndarray, np.ndarray]],
        long_side: int,
        max_keypoints: int,
        keypoint_threshold: float,
        threshold: float,
    ) -> list[Matches]:
        """The matches of each ``(a, b)`` pair of ``(H, W, 3)`` uint8 RGB frames of one size, as the LightGlue
        package's ``SuperPoint.extract`` prepares them: resized (PIL bilinear) so that the longer side is
        ``long_side`` (the other ``round``-ed), at most ``max_keypoints`` keypoints scoring above
        ``keypoint_threshold``, matches scored above ``threshold`` kept; keypoints mapped back to the frames'
        pixels as that package maps them (``(k + 0.5) / scale - 0.5``); batches of ``batch_size`` pairs."""
        from persistbench.io.images import resize_images

        torch = self.torch
        detector = self.model.keypoint_detector.keypoint_decoder
        detector.max_keypoints, detector.keypoint_threshold = max_keypoints, keypoint_threshold
        out: list[Matches] = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start : start + self.batch_size]
            height, width = chunk[0][0].shape[:2]
            scale = long_side / max(height, width)
            size = (int(round(height * scale)), int(round(width * scale)))
            frames = resize_images(np.stack([f for pair in chunk for f in pair]), size)
            gray = (frames.astype(np.float32) / 255.0) @ np.asarray(GRAY, np.float32)
            x = torch.from_numpy(np.repeat(gray[:, None], 3, axis=1)).reshape(len(chunk), 2, 3, *size)
            with torch.no_grad():
                res = self.model(pixel_values=x.to(self.device))
            resized = np.array([size[1], size[0]], np.float64)
            scales = resized / np.array([width, height], np.float64)
            for i in range(len(chunk)):
                mask = res.mask[i].cpu().numpy() > 0
                # relative -> resized pixels -> the frames' pixels
                kp = (res.keypoints[i].double().cpu().numpy() * resized + 0.5) / scales - 0.5
                idx = res.matches[i, 0].cpu().numpy()[mask[0]]
                score = res.matching_scores[i, 0].float().cpu().numpy()[mask[0]]
                kp_a, kp_b = kp[0][mask[0]], kp[1][mask[1]]
                ok = (idx > -1) & (idx < len(kp_b)) & (score > threshold)
                out.append(Matches(len(kp_a), len(kp_b), kp_a[ok], kp_b[idx[ok]]))
        return out


def load(spec: BackendSpec, opts: BackendOptions) -> PairMatcher:
    """The backend ``spec`` as :class:`PairMatcher` (:attr:`persistbench.backends.BackendSpec.loader`)."""
    return PairMatcher(*weights_and_device(spec, opts), opts.batch_size)
