"""CLIP image and text embeddings through ``transformers``, preprocessed as OpenAI's ``clip`` package does.

OpenAI's ``clip.load`` preprocessing: torchvision's ``Resize(n_px, BICUBIC)`` of a PIL image (the
shorter side ``n_px``, the other truncated), ``CenterCrop(n_px)``, and CLIP's own mean and standard
deviation; the text is its BPE tokens between start and end markers. ``transformers``' ``CLIPModel``
converted from OpenAI's checkpoints computes the same projected embeddings; both are L2-normalised.
"""

from __future__ import annotations

import numpy as np

from persistbench.backends import BackendOptions, BackendSpec, weights_and_device

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ClipEmbedder:
    """A CLIP checkpoint folder (``CLIPModel`` and its tokenizer)."""

    def __init__(self, weights, device: str):
        """``weights``: a :class:`~persistbench.backends.weights.Weights` checkpoint folder."""
        import torch
        from transformers import AutoTokenizer, CLIPModel

        self.torch, self.device, self.weights = torch, device, weights
        self.model = CLIPModel.from_pretrained(weights.folder, use_safetensors=True, local_files_only=True)
        self.model = self.model.to(device).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(weights.folder, local_files_only=True)
        self.size = int(self.model.config.vision_config.image_size)

    def pixels(self, image: np.ndarray) -> np.ndarray:
        """``(n_px, n_px, 3)`` float32 in [0, 1]: ``image`` (``(H, W, 3)`` uint8 RGB) resized and cropped as OpenAI's
        preprocessing does."""
        from persistbench.io.images import transformed

        return transformed(image[None], self.size, "torchvision-bicubic", self.size)[0]

    def images(self, images: list[np.ndarray]) -> np.ndarray:
        """``(N, D)`` float32 L2-normalised image embeddings of ``(H, W, 3)`` uint8 RGB images (any sizes)."""
        torch = self.torch
        x = torch.from_numpy(np.stack([self.pixels(i) for i in images])).permute(0, 3, 1, 2)
        x = (x - torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)) / torch.tensor(CLIP_STD).view(1, 3, 1, 1)
        with torch.no_grad():
            out = self.model.get_image_features(pixel_values=x.to(self.device)).pooler_output
        return torch.nn.functional.normalize(out.float(), dim=-1).cpu().numpy()

    def texts(self, texts: list[str]) -> np.ndarray:
        """``(N, D)`` float32 L2-normalised text embeddings (a text longer than the model's context is cut, where
        OpenAI's ``clip.tokenize`` refuses it)."""
        torch = self.torch
        context = int(self.model.config.text_config.max_position_embeddings)
        tokens = self.tokenizer(texts, padding=True, truncation=True, max_length=context, return_tensors="pt")
        with torch.no_grad():
            out = self.model.get_text_features(
                input_ids=tokens["input_ids"].to(self.device), attention_mask=tokens["attention_mask"].to(self.device)
            ).pooler_output
        return torch.nn.functional.normalize(out.float(), dim=-1).cpu().numpy()


def load(spec: BackendSpec, opts: BackendOptions) -> ClipEmbedder:
    """The backend ``spec`` as :class:`ClipEmbedder` (:attr:`persistbench.backends.BackendSpec.loader`)."""
    return ClipEmbedder(*weights_and_device(spec, opts))
