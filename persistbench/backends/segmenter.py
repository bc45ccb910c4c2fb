"""Box-prompted masks on one image: SAM 2.1's image predictor through ``transformers``.

As upstream's ``SAM2ImagePredictor`` is asked (``multimask_output=False``, which with SAM 2.1's
``dynamic_multimask_via_stability`` picks the most stable of the multimask outputs when the single
mask is unstable): one mask per box, the mask logits above 0 the object, and the predicted IoU as
its score. The image is embedded once for all of its boxes (and kept for the next call on the same
pixels: upstream embeds it again for each concept); each box is its own prompt.
"""

from __future__ import annotations

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, weights_and_device


class BoxSegmenter:
    """A SAM 2 checkpoint folder (``Sam2Model`` and ``Sam2Processor``, as their ``save_pretrained`` write them)."""

    def __init__(self, weights, device: str):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` checkpoint folder."""
        import torch
        from transformers import Sam2Model, Sam2Processor

        self.torch, self.device, self.weights = torch, device, weights
        self.model = Sam2Model.from_pretrained(weights.folder, use_safetensors=True, local_files_only=True)
        self.model = self.model.to(device).eval()
        self.processor = Sam2Processor.from_pretrained(weights.folder, local_files_only=True)
        self._last: tuple[bytes, object] | None = None  # (the image's digest, its embeddings)

    def _embeddings(self, image: np.ndarray, pixels):
        import hashlib

        digest = hashlib.sha256(np.ascontiguousarray(image).data).digest() + repr(image.shape).encode()
        if self._last is None or self._last[0] != digest:
            with self.torch.no_grad():
                self._last = digest, self.model.get_image_embeddings(pixels.to(self.device))
        return self._last[1]

    def __call__(self, image: np.ndarray, boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(masks (N, H, W) bool, scores (N,) float32)`` for ``N`` ``(x0, y0, x1, y1)`` pixel boxes on ``image``
        (``(H, W, 3)`` uint8 RGB)."""
        h, w = image.shape[:2]
        if len(boxes) == 0:
            return np.zeros((0, h, w), bool), np.zeros(0, np.float32)
        torch = self.torch
        inputs = self.processor(images=image, input_boxes=[[[float(v) for v in b] for b in boxes]], return_tensors="pt")
        embeddings = self._embeddings(image, inputs["pixel_values"])
        with torch.no_grad():
            out = self.model(
                image_embeddings=embeddings, input_boxes=inputs["input_boxes"].to(self.device), multimask_output=False
            )
        masks = self.processor.post_process_masks(out.pred_masks.cpu(), inputs["original_sizes"])[0]
        return masks[:, 0].numpy().astype(bool), out.iou_scores[0, :, 0].float().cpu().numpy()


def load(spec: BackendSpec, opts: BackendOptions) -> BoxSegmenter:
    """The backend ``spec`` as :class:`BoxSegmenter` (:attr:`persistbench.backends.BackendSpec.loader`)."""
    return BoxSegmenter(*weights_and_device(spec, opts))
