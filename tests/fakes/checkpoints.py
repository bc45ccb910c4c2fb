"""Real architectures (transformers) with random weights, saved as checkpoint folders, for the backends' tests.

Shapes are tiny so that a CPU runs them in milliseconds; the numbers mean nothing except where a
builder says otherwise (LightGlue's, whose layers pass the descriptors through so that it matches).
"""

from __future__ import annotations

import torch

TINY_VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def _vit(folder, config_class: str, model_class: str, seed: int, **config):
    import transformers

    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**TINY_VIT, **config))
    model.eval().save_pretrained(folder)
    return folder


def dinov2_reg(folder):
    return _vit(folder, "Dinov2WithRegistersConfig", "Dinov2WithRegistersModel", 0, patch_size=14, image_size=98)


def dinov2(folder):
    return _vit(folder, "Dinov2Config", "Dinov2Model", 4, patch_size=14, image_size=98)


def dinov3(folder):
    return _vit(folder, "DINOv3ViTConfig", "DINOv3ViTModel", 1, patch_size=16)


def sam2(folder, size=256):
    from transformers import (
        Sam2ImageProcessor,
        Sam2VideoConfig,
        Sam2VideoModel,
        Sam2VideoProcessor,
        Sam2VideoVideoProcessor,
    )

    torch.manual_seed(2)
    cfg = Sam2VideoConfig(
        image_size=size,
        vision_config={
            "model_type": "sam2_vision_model",
            "backbone_feature_sizes": [[size // 4] * 2, [size // 8] * 2, [size // 16] * 2],
            "backbone_config": {"model_type": "sam2_hiera_det_model", "image_size": [size, size]},
        },
        prompt_encoder_config={"image_size": size},
        memory_attention_rope_feat_sizes=[size // 16] * 2,
    )
    Sam2VideoModel(cfg).eval().save_pretrained(folder)
    hw = {"height": size, "width": size}
    Sam2VideoProcessor(
        image_processor=Sam2ImageProcessor(size=hw), video_processor=Sam2VideoVideoProcessor(size=hw)
    ).save_pretrained(folder)
    return folder


def sam2_package(path):
    """The ``sam2`` package's SAM 2.1 hiera-tiny video predictor with random weights, saved as the package saves
    its checkpoints (``{"model": state_dict}``). Its image size is the package's 1024: seconds a frame here."""
    from sam2.build_sam import build_sam2_video_predictor

    torch.manual_seed(9)
    model = build_sam2_video_predictor("configs/sam2.1/sam2.1_hiera_t.yaml", None, device="cpu")
    torch.save({"model": model.state_dict()}, path)
    return path


def lightglue(folder):
    """SuperPoint with random convolutions (its descriptors still follow the image) and a LightGlue whose
    layers add nothing and whose projection is the identity: matches are mutual nearest descriptors."""
    from transformers import LightGlueConfig, LightGlueForKeypointMatching, SuperPointConfig

    torch.manual_seed(3)
    sp = SuperPointConfig(
        encoder_hidden_sizes=[16, 16, 32, 32],
        decoder_hidden_size=32,
        keypoint_decoder_dim=65,
        descriptor_decoder_dim=32,
        max_keypoints=512,
    )
    cfg = LightGlueConfig(
        keypoint_detector_config=sp, descriptor_dim=32, num_hidden_layers=2, num_attention_heads=2, filter_threshold=0.0
    )
    model = LightGlueForKeypointMatching(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("conv_score_b.weight"):  # sharper scores: keypoints where the image has structure
                p.mul_(30.0)
            if name.startswith("keypoint_detector"):
                continue
            if name.endswith("fc2.weight") or name.endswith("fc2.bias") or "matchability" in name:
                p.zero_()
            elif "final_projection" in name:
                p.copy_(torch.eye(p.shape[0]) if p.ndim == 2 else torch.zeros_like(p))
    model.save_pretrained(folder)
    return folder


def exported(path, seed: int = 5):
    """A global-descriptor program (convolution, average pooling, linear) saved by ``torch.export`` with
    dynamic batch and size, as BoQ or MutualVPR exported by a user would be: ``(B, 3, H, W)`` -> ``(B, 16)``."""

    class Descriptor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.head = torch.nn.Linear(8, 16)

        def forward(self, x):
            return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))

    torch.manual_seed(seed)
    dims = {"x": {0: torch.export.Dim("batch"), 2: torch.export.Dim("h"), 3: torch.export.Dim("w")}}
    program = torch.export.export(Descriptor().eval(), (torch.zeros(2, 3, 32, 48),), dynamic_shapes=dims)
    torch.export.save(program, str(path))
    return path


WORDS = (
    "object furniture building vehicle plant person animal sign door window chair table sofa bed cabinet lamp "
    "screen picture shelf tree road wall floor red green blue ball box"
).split()


def grounding_dino(folder):
    """Grounding DINO (a small Swin, a one-layer BERT) and a BERT tokenizer over upstream's concept words."""
    from transformers import BertConfig, BertTokenizer, GroundingDinoConfig, GroundingDinoForObjectDetection, SwinConfig

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?", *WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(7)
    cfg = GroundingDinoConfig(
        backbone_config=SwinConfig(
            embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1], out_features=["stage2", "stage3", "stage4"]
        ),
        text_config=BertConfig(
            vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
        ),
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,  # transformers ties the box heads of the decoder layers after the first
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_queries=30,
        encoder_n_points=2,
        decoder_n_points=2,
    )
    model = GroundingDinoForObjectDetection(cfg).eval()
    with torch.no_grad():  # smaller decoder outputs: token probabilities spread over (0.3, 0.8), not all 1
        model.model.decoder.layer_norm.weight.mul_(0.1)
        model.model.decoder.layer_norm.bias.mul_(0.1)
    model.save_pretrained(folder)
    return folder


def sam2_image(folder, size=256):
    """SAM 2's image model and processor (the predictor upstream's object family masks boxes with)."""
    from transformers import Sam2Config, Sam2ImageProcessor, Sam2Model, Sam2Processor

    torch.manual_seed(8)
    widths = [16, 32, 64, 128]
    cfg = Sam2Config(
        vision_config={
            "model_type": "sam2_vision_model",
            "backbone_feature_sizes": [[size // 4] * 2, [size // 8] * 2, [size // 16] * 2],
            "backbone_channel_list": widths[::-1],
            "backbone_config": {
                "model_type": "sam2_hiera_det_model",
                "image_size": [size, size],
                "hidden_size": widths[0],
                "blocks_per_stage": [1, 1, 1, 1],
                "embed_dim_per_stage": widths,
            },
        },
        prompt_encoder_config={"image_size": size},
    )
    Sam2Model(cfg).eval().save_pretrained(folder)
    Sam2Processor(image_processor=Sam2ImageProcessor(size={"height": size, "width": size})).save_pretrained(folder)
    return folder


def clip(folder):
    """CLIP with a byte-level BPE tokenizer of single characters (no merges)."""
    import json

    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]  # byte-level BPE's alphabet: the
    chars = [chr(b) for b in printable] + [chr(256 + n) for n in range(256 - len(printable))]  # other bytes shifted
    vocab = {t: i for i, t in enumerate([*chars, *(c + "</w>" for c in chars), "<|startoftext|>", "<|endoftext|>"])}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt")).save_pretrained(folder)
    torch.manual_seed(9)
    small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    cfg = CLIPConfig(
        text_config={
            **small,
            "vocab_size": len(vocab),
            "max_position_embeddings": 77,
            "bos_token_id": vocab["<|startoftext|>"],
            "eos_token_id": vocab["<|endoftext|>"],  # where the text embedding is pooled
            "pad_token_id": vocab["<|endoftext|>"],
        },
        vision_config={**small, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    CLIPModel(cfg).eval().save_pretrained(folder)
    return folder
