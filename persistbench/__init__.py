"""persistbench: does a video or 4D model remember what it no longer sees?

The command line (``persistbench --help``) is a thin layer over the modules
here; see docs/architecture.md for the architecture and docs/data-format.md for the on-disk contracts.
"""

__version__ = "0.1.0"

__all__ = ["BaseModel", "ModelInput", "ModelOutput", "__version__"]


def __getattr__(name: str):
    # The model interface is imported on first use, so ``persistbench --help`` stays light.
    if name in ("BaseModel", "ModelInput", "ModelOutput"):
        from persistbench.models import base

        return getattr(base, name)
    raise AttributeError(f"module 'persistbench' has no attribute {name!r}")
