"""Model backends: the networks and the judge the model-based scores run on (optional extras).

The networks come from ``transformers`` (extra ``[vision]``), loaded from safetensors only (no
pickle): DINOv2 and DINOv2 with registers, DINOv3, SAM 2.1's video and image predictors, SuperPoint
and LightGlue, Grounding DINO and CLIP. paper-v3's tracker is the ``sam2`` package itself (extra
``[sam2]``, backend ``sam2-package``), because its masks are what the published scores came from;
its ``.pt`` checkpoint is read with torch's tensors-only unpickler. The judge is
any OpenAI-compatible chat endpoint, reached through the ``openai`` package (extra ``[judge]``).

Weights come from ``--weights NAME=DIR`` (a folder with ``config.json`` and ``*.safetensors``) or
from the Hugging Face cache under the backend's default repository; nothing is downloaded unless
``--allow-download``. The place-recognition models no maintained package provides (BoQ, MutualVPR)
are ``torch.export`` archives the user exports from the upstream code (``--weights boq=FILE.pt2``). A backend that cannot be loaded raises :class:`BackendUnavailable` with one
line naming the file and the fix. Loaded backends are kept per process (a worker loads each once).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from persistbench.core.errors import PersistbenchError
from persistbench.core.registry import Registry

if TYPE_CHECKING:
    from persistbench.backends.weights import Weights


class BackendUnavailable(PersistbenchError):
    """A backend cannot run here; the message says which package or file is missing and how to get it."""


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name on the command line, what it does, its extra and its default weights."""

    name: str
    role: str
    extra: str  # the pip extra that provides its package
    modules: tuple[str, ...]  # what must import
    repo: str | None  # default Hub repository of its weights (None: the judge, or a file the user gives)
    cpu: str  # how it runs without a GPU
    # its weights: a transformers checkpoint folder, a torch.export file, torchvision's AlexNet file ("alexnet"),
    # a sam2 package checkpoint ("sam2-checkpoint"); the judge: "endpoint"
    format: str = "transformers"
    loader: str = "persistbench.backends.features:load"  # module:function making it, (spec, BackendOptions) -> backend


BACKENDS: Registry[BackendSpec] = Registry(  # installed packages add theirs: entry point group persistbench.backends
    "backend",
    {
        s.name: s
        for s in (
            BackendSpec(
                "dinov2-reg-large",
                "paper-v3 appearance: DINOv2 ViT-L/14 with registers, masked average-pooled patch features",
                "vision",
                ("torch", "transformers"),
                "facebook/dinov2-with-registers-large",
                "works, slowly",
            ),
            BackendSpec(
                "dinov3-large",
                "paper-v3 matching: DINOv3 ViT-L/16 patch features locate the object in the first prediction frame",
                "vision",
                ("torch", "transformers"),
                "facebook/dinov3-vitl16-pretrain-lvd1689m",
                "works, slowly",
            ),
            BackendSpec(
                "dinov2-base",
                "R2M scene_identity (class-token cosine), object_consistency (masked patch features) and object persistence (crops' class tokens): DINOv2 ViT-B/14",
                "vision",
                ("torch", "transformers"),
                "facebook/dinov2-base",
                "works, slowly",
            ),
            BackendSpec(
                "superpoint-lightglue",
                "R2M geometric: SuperPoint keypoints matched by LightGlue",
                "vision",
                ("torch", "transformers"),
                "ETH-CVG/lightglue_superpoint",
                "works, slowly (seconds a pair at 480 x 640)",
                loader="persistbench.backends.matcher:load",
            ),
            BackendSpec(
                "sam2",
                "R2M object_consistency: SAM 2.1 video predictor (transformers' port) follows objects through frames",
                "vision",
                ("torch", "transformers"),
                "facebook/sam2.1-hiera-large",
                "works, slowly: seconds a frame at 1024 px; R2M's object family (16 objects a pair) wants a GPU",
                loader="persistbench.backends.tracker:load",
            ),
            BackendSpec(
                "sam2-package",
                "paper-v3 tracking: SAM 2.1's video predictor from the sam2 package, as the public toolkit runs it",
                "sam2",
                ("torch", "sam2"),
                "facebook/sam2.1-hiera-large",
                "works, slowly: seconds a frame at 1024 px; holes filled only with the package's CUDA extension",
                "sam2-checkpoint",
                loader="persistbench.backends.sam2_video:load",
            ),
            BackendSpec(
                "grounding-dino",
                "R2M object persistence (upstream's): Grounding DINO finds the objects of a list of concepts in a frame",
                "vision",
                ("torch", "transformers"),
                "IDEA-Research/grounding-dino-tiny",
                "works, slowly (about a second a frame at 800 px)",
                loader="persistbench.backends.grounding:load",
            ),
            BackendSpec(
                "sam2-image",
                "R2M object persistence (upstream's): SAM 2.1's image predictor masks each box",
                "vision",
                ("torch", "transformers"),
                "facebook/sam2.1-hiera-large",
                "works, slowly: seconds a frame at 1024 px",
                loader="persistbench.backends.segmenter:load",
            ),
            BackendSpec(
                "clip-vit-b32",
                "R2M object persistence (upstream's): CLIP ViT-B/32 image-text similarity of a found object to its concept",
                "vision",
                ("torch", "transformers"),
                "openai/clip-vit-base-patch32",
                "works",
                loader="persistbench.backends.clip:load",
            ),
            *(
                BackendSpec(
                    name,
                    f"R2M scene_identity_{name}: {label} place-recognition descriptors (a torch.export archive)",
                    "vision",
                    ("torch",),
                    None,
                    "works, slowly",
                    "torch.export",
                    loader="persistbench.backends.descriptor:load",
                )
                for name, label in (("boq", "BoQ"), ("mutualvpr", "MutualVPR"))
            ),
            BackendSpec(
                "lpips",
                "LPIPS of every suite's lpips and frame_lpips: AlexNet features with the lpips package's linear layers",
                "lpips",
                ("torch", "lpips"),
                None,
                "works",
                "alexnet",
                loader="persistbench.backends.lpips:load",
            ),
            BackendSpec(
                "judge",
                "paper-v3 object permanence and R2M persistent_state: a vision-language judge",
                "judge",
                ("openai",),
                None,
                "a remote endpoint (--judge-url)",
                "endpoint",
                loader="persistbench.backends.judge:load",
            ),
        )
    },
    "persistbench.backends",
)


@dataclass(frozen=True)
class JudgeOptions:
    """Where and how the judge is asked; the key is read from ``key_env`` when the judge is used, never stored."""

    url: str
    model: str
    key_env: str = "PERSISTBENCH_JUDGE_KEY"
    concurrency: int = 4
    timeout_s: float = 120.0  # the most one judgment may take: every request, retry and wait included
    retries: int = 2  # further attempts after a 429, a 5xx, a timeout or a refused connection
    backoff_s: float = 1.0  # first wait; doubled per retry (a Retry-After header wins)
    max_failures: int = 10  # judgments failed in a row after which no more are asked (0: never stop)
    min_accuracy: float = 0.75  # below this share of its calibration battery right, a run stops
    force: bool = False  # judge anyway below min_accuracy (said in the output)


@dataclass(frozen=True)
class BackendOptions:
    """How backends are loaded: ``device`` ("auto": CUDA when present), weights per backend, downloads allowed."""

    device: str = "auto"
    weights: tuple[tuple[str, str], ...] = ()  # (backend, folder or Hub repo id)
    allow_download: bool = False
    batch_size: int = 8
    judge: JudgeOptions | None = None

    def weights_for(self, name: str) -> str | None:
        return dict(self.weights).get(name)


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu`` (also without torch); anything else as given
    (checked by torch)."""
    if device != "auto":
        return device
    try:
        import torch
    except ImportError:
        return "cpu"

    return "cuda" if torch.cuda.is_available() else "cpu"


def require(spec: BackendSpec) -> None:
    """Raise :class:`BackendUnavailable` (one line) when a module the backend needs does not import."""
    import importlib

    for module in spec.modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise BackendUnavailable(
                f"backend {spec.name} needs {module}: pip install 'persistbench[{spec.extra}]'"
            ) from None


def check_backend(name: str, opts: BackendOptions) -> None:
    """Raise :class:`BackendUnavailable` (one line) unless backend ``name`` can be loaded: its modules import,
    its weights are there (or may be downloaded), the judge has an endpoint. Loads no network."""
    spec = BACKENDS[name]
    require(spec)
    if spec.format == "endpoint":
        if opts.judge is None:
            raise BackendUnavailable(NO_JUDGE)
        return
    if spec.format == "alexnet":
        from persistbench.backends.lpips import check_weights

        check_weights(opts.weights_for(name), opts.allow_download)
        return
    from persistbench.backends.weights import resolve

    resolve(spec, opts.weights_for(name), opts.allow_download)


NO_JUDGE = "the judge needs --judge-url URL (an OpenAI-compatible endpoint) and --judge-model NAME"


@functools.lru_cache(maxsize=8)
def load(name: str, opts: BackendOptions):
    """The loaded backend ``name`` (a features extractor, a tracker, a matcher or a judge), once per process and
    options: its spec's ``loader``."""
    from persistbench.core.registry import load_attr

    spec = BACKENDS[name]
    require(spec)
    return load_attr(spec.loader)(spec, opts)


def weights_and_device(spec: BackendSpec, opts: BackendOptions) -> tuple[Weights, str]:
    """A checkpoint backend's weights (found, checked) and the device it runs on."""
    from persistbench.backends.weights import resolve

    return resolve(spec, opts.weights_for(spec.name), opts.allow_download), resolve_device(opts.device)


def provenance(names: list[str], opts: BackendOptions) -> dict:
    """Backend -> what produced the scores: the weights' folder and sha256 and the device, or the judge's
    model and URL (never a credential). Loads each backend (raising :class:`BackendUnavailable`)."""
    out = {}
    for name in names:
        backend = load(name, opts)
        out[name] = (
            backend.provenance()
            if hasattr(backend, "provenance")
            else {**backend.weights.provenance(), "device": backend.device}
        )
    return out


def merged_provenance(records: list[dict]) -> dict:
    """Backend -> the distinct provenance entries of ``records`` (case records with a ``backends`` field)."""
    out: dict = {}
    for r in records:
        for name, info in (r.get("backends") or {}).items():
            out.setdefault(name, [])
            if info not in out[name]:
                out[name].append(info)
    return out
