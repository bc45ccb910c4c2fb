"""Model adapters: the interface, the built-in models and how ``--model`` finds a model.

``--model`` accepts a built-in name (``hold``, ``reproject``, ``warp``, ``flow``, ``oracle``), a name
registered in the entry point group ``persistbench.models``,
``path/to/file.py:Class``, ``package.module:Class``, or ``"cmd:PROGRAM ARGS
{input} {output}"`` (an external program, see :mod:`.external`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from persistbench.core.errors import PersistbenchError, foreign
from persistbench.models.registry import MODELS

if TYPE_CHECKING:
    from persistbench.models.base import BaseModel

__all__ = ["MODELS", "BaseModel", "ModelInput", "ModelOutput", "load_model", "resolve"]


def __getattr__(name: str):
    # The interface (numpy) is imported on first use: the command line reads MODELS without it.
    if name in ("BaseModel", "ModelInput", "ModelOutput"):
        from persistbench.models import base

        return getattr(base, name)
    raise AttributeError(f"module 'persistbench.models' has no attribute {name!r}")


def _from_module(module: str, name: str, spec: str) -> type:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise PersistbenchError(f"--model {spec}: cannot load {name} from {module}: {e}") from None


def _from_file(path: str, name: str, spec: str) -> type:
    file = Path(path)
    if not file.is_file():
        raise PersistbenchError(f"--model {spec}: no such file {path}")
    module_name = f"persistbench_user_{hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]}"
    loader_spec = importlib.util.spec_from_file_location(module_name, file)
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:  # the user's file: report any error it raises on import
        raise foreign(f"--model {spec}: importing {path} failed: {type(e).__name__}: {e}") from None
    if not hasattr(module, name):
        raise PersistbenchError(f"--model {spec}: {path} defines no {name}")
    return getattr(module, name)


def resolve(spec: str) -> Callable[..., BaseModel]:
    """The model factory (a class, or a partial for ``cmd:``) named by ``spec``."""
    if spec.startswith("cmd:"):
        from persistbench.models.external import CommandModel

        return functools.partial(CommandModel, command=spec[len("cmd:") :])
    if spec in MODELS:
        try:
            return MODELS[spec]
        except Exception as e:  # a built-in, or a third-party package: report whatever its import raises
            raise foreign(f"--model {spec}: {MODELS.spec(spec)} failed to load: {type(e).__name__}: {e}") from None
    target, sep, name = spec.rpartition(":")
    if sep and target.endswith(".py"):
        return _from_file(target, name, spec)
    if sep and target:
        return _from_module(target, name, spec)
    known = ", ".join(MODELS)
    raise PersistbenchError(
        f"--model {spec}: unknown model; use one of {known}, file.py:Class, module:Class or cmd:..."
    )


def load_model(spec: str, device: str = "cpu", config: dict | None = None) -> BaseModel:
    """Instantiate the model ``spec`` with ``device`` and the keyword arguments ``config``."""
    factory = resolve(spec)
    try:
        return factory(device=device, **(config or {}))
    except PersistbenchError:
        raise
    except Exception as e:  # the model's own constructor
        raise foreign(f"--model {spec}: constructing the model failed: {type(e).__name__}: {e}") from None
