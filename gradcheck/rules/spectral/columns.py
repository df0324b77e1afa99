"""The columns of the spectral rows (fft, ifft, rfft, irfft): shape rules, NumPy
forwards (numpy.fft on the complex view), torch calls (torch.fft between
view_as_complex and view_as_real, so that the torch witness runs torch's own FFT
autograd) and SymPy meanings (the DFT's exact coefficients, cos and sin of rational
multiples of pi).

A complex array is held as ``torch.view_as_real`` holds it: a last axis of length 2
(real part, imaginary part). ``axis`` counts the axes of the complex shape (that trailing
2 excluded; negative from its end); every column works with it made negative, so that a
cotangent with one more leading axis (the rounding model's batch) keeps it. ``n`` pads
with zeros or truncates the transformed axis first, as numpy and torch do; ``norm``
scales as theirs: the forward transforms (fft, rfft) by 1, 1/n or 1/sqrt(n) for
"backward", "forward", "ortho"; the inverse ones (ifft, irfft) by 1/n, 1 or 1/sqrt(n).
"""

from __future__ import annotations

import math

import numpy as np

from ...base.shapes import ShapeError
from ..columns import _torch, sympy

NORMS = ("backward", "forward", "ortho")
#: The norm of the adjoint: the adjoint of s·F is s·Fᴴ, the inverse transform scaled by
#: s, which is the inverse's dual norm ("backward" scales an inverse by 1/n).
DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
#: The rows whose operand is in the layout (rfft's is real) and whose result is
#: (irfft's is real).
COMPLEX_IN = {"fft": True, "ifft": True, "rfft": False, "irfft": True}
COMPLEX_OUT = {"fft": True, "ifft": True, "rfft": True, "irfft": False}
INVERSE = {"fft": False, "ifft": True, "rfft": False, "irfft": True}


def negative_axis(axis: int, ndim: int) -> int:
    """``axis`` of an ``ndim``-dimensional (complex) shape, counted from its end."""
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of range for a complex shape of "
                         f"{ndim} dimension{'s' if ndim != 1 else ''}")
    return axis - ndim if axis >= 0 else axis


def complex_shape(x: tuple, name: str) -> tuple:
    """The complex shape of a layout shape ``x`` (its last axis, of length 2, dropped)."""
    if len(x) < 2 or x[-1] != 2:
        raise ShapeError(f"{name} takes a complex array in the view_as_real layout (a last "
                         f"axis of length 2: real, imaginary), got shape {list(x)}")
    return tuple(x[:-1])


def lengths(name: str, shape: tuple, n, axis: int) -> tuple[int, int, int, int]:
    """(d, m, size, count) of row ``name`` on an operand of (layout) ``shape``: the
    negative complex axis, its length, the length the transform reads there (after
    ``n``'s padding or truncation) and the transform's length N (irfft's result's)."""
    cshape = complex_shape(shape, name) if COMPLEX_IN[name] else tuple(shape)
    if not cshape:
        raise ShapeError(f"{name} takes an array of at least one (complex) axis")
    d = negative_axis(axis, len(cshape))
    m = cshape[d]
    if name == "irfft":
        count = 2 * (m - 1) if n is None else n
        size = count // 2 + 1
    else:
        count = size = m if n is None else n
    if count < 1:
        raise ShapeError(f"{name} takes n >= 1 points, got n={count}"
                         + (" (irfft's default 2*(m-1) of one bin)" if n is None else ""))
    return d, m, size, count


def points(name: str, shape: tuple, n, axis: int) -> int:
    """The transform's length N (the ``n`` of its scale)."""
    return lengths(name, shape, n, axis)[3]


def scale(name: str, norm: str, count: int) -> float:
    """The factor s of row ``name`` of N = ``count`` points: y = s · Σ x_j
    exp(∓2πi jk/N)."""
    if norm == "ortho":
        return 1 / math.sqrt(count)
    return 1 / count if (norm == "forward") != INVERSE[name] else 1.0


def shape_rule(name: str):
    def rule(x, n, axis, norm):
        d, m, size, count = lengths(name, tuple(x), n, axis)
        cshape = list(complex_shape(x, name) if COMPLEX_IN[name] else x)
        cshape[d] = count // 2 + 1 if name == "rfft" else count
        return tuple(cshape) + ((2,) if COMPLEX_OUT[name] else ())

    rule.__name__ = f"{name}_shape"
    return rule


# --------------------------------------------------------------------------- layout

def as_complex(x) -> np.ndarray:
    x = np.asarray(x)
    return x[..., 0] + 1j * x[..., 1]


def as_real(z) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


def fit(z, length: int, d: int) -> np.ndarray:
    """``z`` truncated or padded with zeros to ``length`` along (negative) axis ``d``."""
    m = np.shape(z)[d]
    if m >= length:
        return z[(Ellipsis, slice(0, length)) + (slice(None),) * (-d - 1)]
    widths = [(0, 0)] * np.ndim(z)
    widths[d] = (0, length - m)
    return np.pad(z, widths)


# --------------------------------------------------------------------------- NumPy

def _np(name: str):
    def forward(x, n, axis, norm):
        x = np.asarray(x)
        d = negative_axis(axis, x.ndim - COMPLEX_IN[name])
        z = as_complex(x) if COMPLEX_IN[name] else x
        out = getattr(np.fft, name)(z, n=n, axis=d, norm=norm)
        out = as_real(out) if COMPLEX_OUT[name] else out
        return out.astype(x.dtype, copy=False)

    forward.__name__ = f"np_{name}"
    return forward


# --------------------------------------------------------------------------- torch

def _torch_call(name: str):
    def call(x, n, axis, norm):
        torch = _torch()
        dtype = x.dtype
        if dtype in (torch.float16, torch.bfloat16):   # (no CPU FFT kernel in half
            x = x.float()                                # precision: in float32)
        d = negative_axis(axis, x.dim() - COMPLEX_IN[name])
        z = torch.view_as_complex(x.contiguous()) if COMPLEX_IN[name] else x
        out = getattr(torch.fft, name)(z, n=n, dim=d, norm=norm)
        out = torch.view_as_real(out) if COMPLEX_OUT[name] else out
        return out.to(dtype) if out.dtype != dtype else out

    call.__name__ = f"torch_{name}"
    return call


# --------------------------------------------------------------------------- SymPy

def _twiddles(count: int, sign: int):
    """cos and sin of 2πj/N for every j < N (sin with ``sign``), exact: entry jk mod N
    is the twiddle of input j and output k."""
    turns = [2 * sympy.pi * sympy.Rational(j, count) for j in range(count)]
    return [sympy.cos(t) for t in turns], [sign * sympy.sin(t) for t in turns]


def _slices(x, d: int, lead: tuple, fn) -> np.ndarray:
    """``fn(slice)`` along (negative) axis ``d`` of the object array ``x``, whose last
    ``lead`` axes (the layout's pair, or none) stay with each slice."""
    x = np.moveaxis(np.asarray(x, dtype=object), d - len(lead), -1 - len(lead))
    outer = x.shape[:x.ndim - 1 - len(lead)]
    results = {at: fn(x[at]) for at in np.ndindex(*outer)}
    first = next(iter(results.values()))
    out = np.empty(outer + first.shape, dtype=object)
    for at, r in results.items():
        out[at] = r
    return np.moveaxis(out, -1 - (first.ndim - 1), d - (first.ndim - 1))


def _sym(name: str):
    def meaning(x, n, axis, norm):
        x = np.asarray(x, dtype=object)
        d, m, size, big = lengths(name, x.shape, n, axis)
        s = 1 / sympy.sqrt(big) if norm == "ortho" else \
            sympy.Rational(1, big) if scale(name, norm, big) != 1 else sympy.S.One
        cos, sin = _twiddles(big, 1 if INVERSE[name] else -1)
        zero = sympy.S.Zero

        def term(a, b, jk):   # Re and Im of (a + ib)·e^{±2πi jk/N}
            c, t = cos[jk % big], sin[jk % big]
            return a * c - b * t, b * c + a * t

        def one(v):
            pairs = [tuple(v[j]) if COMPLEX_IN[name] else (v[j], zero) for j in range(m)]
            pairs = (pairs + [(zero, zero)] * size)[:size]
            if name == "irfft":   # the Hermitian half: interior bins count twice
                return np.array([s * sympy.Add(*[
                    (1 if k == 0 or 2 * k == big else 2) * term(a, b, j * k)[0]
                    for k, (a, b) in enumerate(pairs)]) for j in range(big)], dtype=object)
            outs = range(big // 2 + 1) if name == "rfft" else range(big)
            terms = [[term(a, b, j * k) for j, (a, b) in enumerate(pairs)] for k in outs]
            return np.array([(s * sympy.Add(*[t[0] for t in row]),
                              s * sympy.Add(*[t[1] for t in row])) for row in terms],
                            dtype=object)

        return _slices(x, d, (1,) if COMPLEX_IN[name] else (), one)

    meaning.__name__ = f"sym_{name}"
    return meaning


NAMES = ("fft", "ifft", "rfft", "irfft")
NUMPY = {name: _np(name) for name in NAMES}
TORCH = {name: _torch_call(name) for name in NAMES}
SYMPY = {name: _sym(name) for name in NAMES}
SHAPES = {name: shape_rule(name) for name in NAMES}
