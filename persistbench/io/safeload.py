"""The safe loader for ``.npy`` files from outside, including the public format's pickled dictionaries.

``np.load(..., allow_pickle=True)`` on a downloaded file runs whatever the
pickle asks for. :func:`load_npy` never does:

* plain arrays load with ``allow_pickle=False``, after checking that the
  header's shape fits in the bytes the file has (no allocation from a header);
* object arrays are unpickled with an allowlist (numpy arrays, scalars and
  dtypes, builtin containers) whose constructors are wrapped so that no call
  can allocate more than the file could hold, after a scan of the opcodes
  that refuses memo indices and globals outside the allowlist before any
  object is built;
* files larger than :data:`MAX_BYTES` are refused unread.
"""

from __future__ import annotations

import collections
import io
import math
import os
import pickle
import pickletools
import tokenize
from typing import Any

import numpy as np

from persistbench.core.errors import PersistbenchError
from persistbench.io.files import read_bounded, write_bytes

MAX_BYTES = 256 << 20  # a camera file of 100,000 frames is 13 MB
MAX_ITEM_BYTES = 1 << 20  # one numpy scalar
MAX_MEMO = 1 << 20  # memo slots: pickle resizes its memo table to the largest index written


def _multiarray():
    try:
        from numpy._core import multiarray  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core import multiarray
    return multiarray


# Stands for ``numpy.ndarray`` inside a pickle: accepted as ``_reconstruct``'s subtype, never callable.
_ARRAY_TYPE = object()


def _reconstruct(subtype: object, shape: object, dtype: object) -> np.ndarray:
    # numpy pickles call _reconstruct(ndarray, (0,), b'b') and fill the array with __setstate__,
    # which checks the data against the shape: only the empty start array is allocated here.
    if subtype is not _ARRAY_TYPE or not isinstance(shape, tuple) or math.prod(shape) != 0:
        raise pickle.UnpicklingError("unexpected numpy array reconstruction")
    return _multiarray()._reconstruct(np.ndarray, shape, dtype)


def _scalar(dtype: object, *data: object) -> object:
    if not isinstance(dtype, np.dtype) or dtype.itemsize > MAX_ITEM_BYTES:
        raise pickle.UnpicklingError("unexpected numpy scalar")
    return _multiarray().scalar(dtype, *data)


_ALLOWED: dict[tuple[str, str], object] = {
    **{(m, "_reconstruct"): _reconstruct for m in ("numpy.core.multiarray", "numpy._core.multiarray")},
    **{(m, "scalar"): _scalar for m in ("numpy.core.multiarray", "numpy._core.multiarray")},
    ("numpy", "ndarray"): _ARRAY_TYPE,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): __import__("_codecs").encode,  # latin-1 bytes in pickles written by Python 2
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
}
_MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GLOBAL_OPS = {"GLOBAL", "INST"}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}") from None


def _scan(data: bytes) -> None:
    """Refuse, before anything is built, globals outside the allowlist and memo indices that would allocate."""
    for op, arg, _ in pickletools.genops(data):
        if op.name in _MEMO_OPS and int(arg) > MAX_MEMO:
            raise pickle.UnpicklingError(f"memo index {arg} out of bounds")
        if op.name in _GLOBAL_OPS:
            module, _, name = str(arg).partition(" ")
            if (module, name) not in _ALLOWED:
                raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")


def load_npy(path: str | os.PathLike) -> Any:
    """Load a ``.npy`` file without running pickled code or allocating more than the file justifies.

    Returns:
        the array; a 0-d object array (the public format's pickled dictionary) is unwrapped to its item.
    Raises:
        PersistbenchError: naming the file, for anything outside the allowlist, a malformed file, one
        that is not a regular file or one larger than :data:`MAX_BYTES`.
    """
    return load_npy_bytes(read_bounded(path, MAX_BYTES), path)


def load_npy_bytes(data: bytes, source: object, objects: bool = True) -> Any:
    """:func:`load_npy` of ``.npy`` bytes (a member of an archive); ``source`` names them in errors.

    With ``objects=False`` only plain arrays are accepted (no pickled dictionary).
    """
    try:
        f = io.BytesIO(data)
        version = np.lib.format.read_magic(f)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = header(f)
        if dtype.hasobject and not objects:
            raise ValueError(f"holds Python objects ({dtype})")
        if not dtype.hasobject:
            if math.prod(shape) * dtype.itemsize > len(data) - f.tell():
                raise ValueError(f"header declares shape {shape} of {dtype}, more than the file holds")
            f.seek(0)
            return np.load(f, allow_pickle=False)
        payload = f.read()
        _scan(payload)
        array = _Unpickler(io.BytesIO(payload)).load()
    except (
        OSError,
        ValueError,
        EOFError,
        SyntaxError,  # the header's dictionary is parsed as a Python literal
        tokenize.TokenError,
        RecursionError,
        pickle.UnpicklingError,
        AttributeError,
        TypeError,
        IndexError,
        KeyError,
    ) as e:
        raise PersistbenchError(f"{source}: unsafe or malformed .npy file: {str(e).splitlines()[0]}") from None
    if not isinstance(array, np.ndarray) or array.shape != shape:
        raise PersistbenchError(f"{source}: malformed .npy file: pickle does not hold the declared array")
    return array.item() if array.shape == () else array


def load_dict(path: str | os.PathLike) -> dict:
    """A public-format pickled dictionary through the safe loader; anything else is refused naming the file."""
    data = load_npy(path)
    if not isinstance(data, dict):
        raise PersistbenchError(f"{path}: expected a pickled dictionary, found {type(data).__name__}")
    return data


def save_npy_dict(path: str | os.PathLike, data: dict) -> str:
    """Write a dictionary in the public format: a pickled 0-d object array, as the public
    toolkit's ``np.load(..., allow_pickle=...).item()`` reads it.

    Returns the sha256 of the bytes written.
    """
    buf = io.BytesIO()
    np.save(buf, np.array(data, dtype=object), allow_pickle=True)  # safe: writing our own data; reads use load_npy
    return write_bytes(path, buf.getvalue())
