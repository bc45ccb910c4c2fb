"""Trigonometry whose every bit is the same on every x86-64 and ARM CPU.

NumPy dispatches ``sin``, ``cos``, ``arctan2`` … to kernels chosen at run time
for the CPU (AVX-512 ones on some machines, libm on others), and they differ
in the last bit. Geometry that decides integer pixels (remap coordinates
rounded to 1/32 px, visibility decisions) would then depend on the machine.
These functions use only IEEE-754 operations that every CPU rounds the same
way (``+ - * /``, ``floor``, comparisons), element by element, so their
results are a function of the input alone.

The polynomials are the classic minimax fits of the Cephes library (Moshier,
"Methods and Programs for Mathematical Functions", 1989): about 1 ulp from
the correctly rounded value for ``|x| < 1e8`` (``tests/test_portable.py``
compares them with NumPy's to 4 ulp).

The trigonometric functions take and return float64 arrays (or scalars) of
any shape, in radians. :func:`matmul` and :func:`inv3` stand in for BLAS and
LAPACK, whose kernels also differ per CPU, for the small matrices of camera
geometry.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sin", "cos", "sincos", "tan", "atan", "atan2", "matmul", "inv3"]

_FOUR_OVER_PI = 1.27323954473516268615
# pi/4 split in three so that y * _PIO4[0] is exact for the y of range reduction.
_PIO4 = (7.85398125648498535156e-1, 3.77489470793079817668e-8, 2.69515142907905952645e-15)
_SIN = (
    1.58962301576546568060e-10,
    -2.50507477628578072866e-8,
    2.75573136213857245213e-6,
    -1.98412698295895385996e-4,
    8.33333333332211858878e-3,
    -1.66666666666666307295e-1,
)
_COS = (
    -1.13585365213876817300e-11,
    2.08757008419747316778e-9,
    -2.75573141792967388112e-7,
    2.48015872888517045348e-5,
    -1.38888888888730564116e-3,
    4.16666666666665929218e-2,
)
_ATAN_P = (
    -8.750608600031904122785e-1,
    -1.615753718733365076637e1,
    -7.500855792314704667340e1,
    -1.228866684490136173410e2,
    -6.485021904942025371773e1,
)
_ATAN_Q = (  # the leading coefficient 1 is implicit
    2.485846490142306297962e1,
    1.650270098316988542046e2,
    4.328810604912902668951e2,
    4.853903996359136964868e2,
    1.945506571482613964425e2,
)
_TAN_3PI_8 = 2.41421356237309504880
_MOREBITS = 6.123233995736765886130e-17  # pi/2 - float(pi/2)
_PI_2 = np.pi / 2
_PI_4 = np.pi / 4


def _horner(z: np.ndarray, coefs: tuple[float, ...], lead: float | None = None) -> np.ndarray:
    acc = np.full_like(z, coefs[0]) if lead is None else z + coefs[0]
    for c in coefs[1:]:
        acc = acc * z + c
    return acc


def sincos(x) -> tuple[np.ndarray, np.ndarray]:
    """``(sin x, cos x)`` of float64 ``x`` (radians)."""
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    j = np.floor(ax * _FOUR_OVER_PI)
    j = j + (j % 2)  # to an even octant: z is then in [-pi/4, pi/4]
    y = j
    octant = (j % 8).astype(np.int64)
    z = ((ax - y * _PIO4[0]) - y * _PIO4[1]) - y * _PIO4[2]
    zz = z * z
    s = z + z * zz * _horner(zz, _SIN)
    c = 1.0 - 0.5 * zz + zz * zz * _horner(zz, _COS)
    swap = (octant == 2) | (octant == 6)
    sin_v = np.where(swap, c, s)
    cos_v = np.where(swap, s, c)
    sin_v = np.where(octant >= 4, -sin_v, sin_v)
    cos_v = np.where((octant == 2) | (octant == 4), -cos_v, cos_v)
    sin_v = np.where(x < 0, -sin_v, sin_v)
    return sin_v, cos_v


def sin(x) -> np.ndarray:
    """``sin x`` of float64 ``x`` (radians)."""
    return sincos(x)[0]


def cos(x) -> np.ndarray:
    """``cos x`` of float64 ``x`` (radians)."""
    return sincos(x)[1]


def tan(x) -> np.ndarray:
    """``tan x`` as ``sin x / cos x``."""
    s, c = sincos(x)
    return s / c


def atan(x) -> np.ndarray:
    """``arctan x`` in ``[-pi/2, pi/2]`` of float64 ``x``."""
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    big = ax > _TAN_3PI_8
    mid = ~big & (ax > 0.66)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(big, -1.0 / np.where(big, ax, 1.0), np.where(mid, (ax - 1.0) / (ax + 1.0), ax))
    base = np.where(big, _PI_2, np.where(mid, _PI_4, 0.0))
    extra = np.where(big, _MOREBITS, np.where(mid, 0.5 * _MOREBITS, 0.0))
    z = t * t
    r = base + ((t * (z * _horner(z, _ATAN_P) / _horner(z, _ATAN_Q, lead=1.0)) + t) + extra)
    r = np.where(np.isinf(ax), _PI_2, r)
    return np.where(x < 0, -r, r)


def atan2(y, x) -> np.ndarray:
    """``arctan2(y, x)`` in ``(-pi, pi]``, with NumPy's conventions for zeros (``atan2(0, -1) = pi``)."""
    y, x = np.broadcast_arrays(np.asarray(y, np.float64), np.asarray(x, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        a = atan(np.where(x == 0, 0.0, y / np.where(x == 0, 1.0, x)))
    a = np.where(x < 0, np.where(np.signbit(y), a - np.pi, a + np.pi), a)
    a = np.where(x == 0, np.where(y > 0, _PI_2, np.where(y < 0, -_PI_2, np.where(np.signbit(x), np.pi, 0.0))), a)
    return np.where((y == 0) & (x == 0), np.where(np.signbit(x), np.copysign(np.pi, y), np.copysign(0.0, y)), a)


def matmul(a, b) -> np.ndarray:
    """``a @ b`` of 2-D float64 arrays ``(n, k) @ (k, m)``, summed in index order."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = a[:, :1] * b[:1]
    for i in range(1, a.shape[1]):
        out = out + a[:, i : i + 1] * b[i : i + 1]
    return out


def inv3(m) -> np.ndarray:
    """Inverse of a ``(3, 3)`` float64 matrix by cofactors (raises ``ZeroDivisionError`` when singular)."""
    (a, b, c), (d, e, f), (g, h, i) = np.asarray(m, np.float64).tolist()
    cof = [[e * i - f * h, c * h - b * i, b * f - c * e], [f * g - d * i, a * i - c * g, c * d - a * f]]
    cof.append([d * h - e * g, b * g - a * h, a * e - b * d])
    det = a * cof[0][0] + b * cof[1][0] + c * cof[2][0]
    return np.array([[v / det for v in row] for row in cof])
