"""A video object tracker: SAM 2.1's video predictor through ``transformers``."""

from __future__ import annotations

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, weights_and_device


class VideoTracker:
    """Follows objects, given by a mask or by points on the first frame, through a video.

    The checkpoint folder holds the model and its processor's configuration (as
    ``Sam2VideoModel.save_pretrained`` and ``Sam2VideoProcessor.save_pretrained`` write them).
    """

    def __init__(self, weights, device: str):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` checkpoint folder."""
        import torch
        from transformers import Sam2VideoModel, Sam2VideoProcessor

        self.torch, self.device, self.weights = torch, device, weights
        self.model = Sam2VideoModel.from_pretrained(weights.folder, use_safetensors=True, local_files_only=True)
        self.model = self.model.to(device).eval()
        self.processor = Sam2VideoProcessor.from_pretrained(weights.folder, local_files_only=True)

    def track(self, frames: list[np.ndarray], mask: np.ndarray) -> list[np.ndarray]:
        """One ``(H, W)`` bool mask per frame of ``frames`` (``(H, W, 3)`` uint8 RGB), the first prompted
        with ``mask``; mask logits above 0 are the object, as SAM 2's own predictor thresholds them."""
        masks = self._propagate(frames, 1, input_masks=np.asarray(mask, np.uint8))
        return list(masks[0])

    def follow_points(self, frames: list[np.ndarray], points: np.ndarray) -> np.ndarray:
        """``(K, T, H, W)`` bool: the object under each of the ``K`` ``(x, y)`` pixel ``points`` of the first
        frame (one positive click each, segmented on that frame), followed through the ``T`` frames."""
        k = len(points)
        return self._propagate(
            frames,
            k,
            input_points=[[[[float(x), float(y)]] for x, y in points]],
            input_labels=[[[1] for _ in range(k)]],
        )

    def _propagate(self, frames: list[np.ndarray], objects: int, **prompt) -> np.ndarray:
        """``(objects, T, H, W)`` bool masks of the objects ``prompt`` gives on frame 0, through ``frames``."""
        torch = self.torch
        session = self.processor.init_video_session(
            video=list(frames), inference_device=self.device, dtype=torch.float32
        )
        self.processor.add_inputs_to_inference_session(
            inference_session=session, frame_idx=0, obj_ids=list(range(1, objects + 1)), **prompt
        )
        size = [[session.video_height, session.video_width]]
        out = np.zeros((objects, len(frames), session.video_height, session.video_width), bool)
        with torch.no_grad():
            self.model(inference_session=session, frame_idx=0)
            for step in self.model.propagate_in_video_iterator(session, start_frame_idx=0):
                masks = self.processor.post_process_masks([step.pred_masks], original_sizes=size, binarize=True)[0]
                out[:, step.frame_idx] = masks[:, 0].cpu().numpy().astype(bool)
        return out


def load(spec: BackendSpec, opts: BackendOptions) -> VideoTracker:
    """The backend ``spec`` as :class:`VideoTracker` (:attr:`persistbench.backends.BackendSpec.loader`)."""
    return VideoTracker(*weights_and_device(spec, opts))
