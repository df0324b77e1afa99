"""The columns' functions: SymPy meanings, NumPy forwards, torch calls and hazards.

SymPy and torch are imported when a column that needs them is first called (``s`` and
``t`` look a function up at call time), so importing the table costs only NumPy and
parsing or listing cases stays instant.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from ..base.shapes import ShapeError


class _LazyModule:
    """A module imported on first attribute access (``sympy`` below: only the columns'
    bodies touch it, when called)."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


sympy = _LazyModule("sympy")


def _torch():
    import torch  # imported lazily: listing cases must not pay for torch

    return torch


def sympy_fn(fname: str) -> Callable[..., Any]:
    """``sympy.<fname>``, looked up when called (SymPy is imported lazily)."""

    def call(*args, **kwargs):
        return getattr(sympy, fname)(*args, **kwargs)

    call.__name__ = f"sympy_{fname}"
    return call


def torch_fn(fname: str) -> Callable[..., Any]:
    """``torch.<fname>``, looked up when called (torch is imported lazily)."""

    def call(*args):
        return getattr(_torch(), fname)(*args)

    call.__name__ = f"torch_{fname}"
    return call


def cfunction(name: str):
    """SymPy's C99 functions (``expm1``, ``log1p``): differentiable like ``exp(x) - 1``
    and ``log(1 + x)``, but lambdify prints them as NumPy's accurate ``expm1``/``log1p``,
    so the float64 reference does not lose the digits those forms cancel near 0."""
    from sympy.codegen import cfunctions

    return getattr(cfunctions, name)


def sym_sigmoid(x):
    # 1 / (1 + exp(-x)), written so that exp never overflows: the float64 reference
    # stays exact to rounding at any |x| (its derivative too).
    return sympy.Piecewise((1 / (1 + sympy.exp(-x)), x >= 0),
                           (sympy.exp(x) / (1 + sympy.exp(x)), True))


def sym_softplus(x):
    # log(1 + exp(x)) as x + log1p(exp(-x)) for x > 0 and log1p(exp(x)) otherwise: no
    # overflow, and no 1 + tiny rounding to 1 (softplus(-60) is 8.8e-27, not 0).
    log1p = cfunction("log1p")
    return sympy.Piecewise((x + log1p(sympy.exp(-x)), x > 0),
                           (log1p(sympy.exp(x)), True))


def reduce_objects(a: np.ndarray, axis: tuple[int, ...], keepdims: bool,
                    combine: Callable[[list], Any]) -> np.ndarray:
    """Reduce an object array of SymPy scalars over ``axis`` with ``combine(elements)``."""
    a = np.asarray(a, dtype=object)
    keep = [d for d in range(a.ndim) if d not in axis]
    moved = np.transpose(a, keep + list(axis))
    kept_shape = moved.shape[: len(keep)]
    flat = moved.reshape(kept_shape + (-1,))
    out = np.empty(kept_shape, dtype=object)
    for idx in np.ndindex(*kept_shape):
        out[idx] = combine(list(flat[idx]))
    if keepdims:
        out = out.reshape([1 if d in axis else n for d, n in enumerate(a.shape)])
    return out


def sym_reduction(combine: Callable[[list], Any]) -> Callable[..., np.ndarray]:
    return lambda a, axis, keepdims: reduce_objects(a, axis, keepdims, combine)


def top_two_gap(x, axis, keepdims):
    """Gap between the largest two elements along ``axis`` (where max switches)."""
    x = np.asarray(x, dtype=float)
    keep = [d for d in range(x.ndim) if d not in axis]
    flat = np.transpose(x, keep + list(axis)).reshape([x.shape[d] for d in keep] + [-1])
    if flat.shape[-1] < 2:
        return None
    part = -np.partition(-flat, 1, axis=-1)
    gap = part[..., 0] - part[..., 1]
    if keepdims:
        gap = gap.reshape([1 if d in axis else n for d, n in enumerate(x.shape)])
    return gap


def runner_up_gaps(x, axis, keepdims):
    """max's hazard, shaped like its argument: each element's distance below the largest
    of its slice along ``axis``, the largest itself (np.argmax's pick) none (inf). Their
    smallest is the gap between the largest two, where max switches; shaped so that
    sampling redraws the runners-up near the top and keeps the top: redrawing it too
    would only uncover the next element, as close (a thousand elements drawn in [-2, 2]
    lie 0.004 apart, 0.05 is the margin kept)."""
    x = np.asarray(x, dtype=float)
    if int(np.prod([x.shape[d] for d in axis], dtype=np.int64)) < 2:
        return None
    gaps = np.max(x, axis=axis, keepdims=True) - x
    return np.where(one_hot(np.argmax)(x, axis) > 0, np.inf, gaps)


def runner_down_gaps(x, axis, keepdims):
    """min's hazard: :func:`runner_up_gaps` of -x (each element's distance above the
    smallest of its slice, the smallest itself none)."""
    return runner_up_gaps(-np.asarray(x, dtype=float), axis, keepdims)


def one_hot(pick):
    """One-hot mask of the element ``pick`` (np.argmax/np.argmin) selects along ``axis``."""

    def mask(x, axis, keepdims=False):   # keepdims: the calling convention's
        x = np.asarray(x, dtype=float)
        keep = [d for d in range(x.ndim) if d not in axis]
        moved = np.transpose(x, keep + list(axis))
        flat = moved.reshape(moved.shape[: len(keep)] + (-1,))
        hot = np.zeros_like(flat)
        np.put_along_axis(hot, pick(flat, axis=-1)[..., None], 1.0, axis=-1)
        return np.transpose(hot.reshape(moved.shape), np.argsort(keep + list(axis)))

    return mask


def sym_selected(a, axis, keepdims, onehot):
    return reduce_objects(np.asarray(a, dtype=object) * onehot, axis, keepdims,
                           lambda e: sympy.Add(*e))


def abs_distance(x):
    return np.abs(x)


def pow_hazard(a, b):
    # A non-integer or negative exponent is singular (or undefined) at a zero base.
    b = np.asarray(b)
    if b.ndim == 0 and float(b) == int(b) and float(b) >= 0:
        return None
    return np.abs(a)


def np_erf(x):
    from scipy.special import erf

    return erf(x)


def np_sigmoid(x):
    from scipy.special import expit

    return expit(x)


def np_logsumexp(x, axis, keepdims):
    # log Σ exp(x) = m + log Σ exp(x - m), m the largest (0 where it is ±inf, so that
    # an all -inf slice gives -inf and an inf gives inf); SciPy's own is several times
    # slower on large arrays
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def np_matmul(a, b):
    # NumPy's stacked matmul leaves BLAS for a slow loop when an operand is a strided
    # view (a transpose): about ten times slower on [16, 256, 64] @ [16, 64, 256]
    return np.matmul(np.ascontiguousarray(a), np.ascontiguousarray(b))


def torch_reduce(fname: str, need_dim: bool = False):
    def call(x, axis, keepdims):
        torch = _torch()
        fn = getattr(torch, fname)
        if axis == tuple(range(x.dim())) and not keepdims and not need_dim:
            return fn(x)
        if fname == "prod":
            # torch.prod reduces one dim at a time; reduce the highest axis first.
            for d in sorted(axis, reverse=True):
                x = fn(x, dim=d, keepdim=keepdims)
            return x
        return fn(x, dim=axis, keepdim=keepdims)

    call.__name__ = f"torch_{fname}"
    return call


def np_reduce(fn):
    """A reduction's ``numpy`` column from a ufunc's ``reduce`` (``np.add.reduce``: what
    ``np.sum`` calls, without its Python wrapper's 2 µs a call) or ``np.mean``."""
    return lambda x, axis, keepdims: fn(np.asarray(x, dtype=float), axis=axis,
                                        keepdims=keepdims)


def sym_mean(elems):
    return sympy.Add(*elems) / len(elems)


def sym_logsumexp(elems):
    return sympy.log(sympy.Add(*[sympy.exp(e) for e in elems]))


def sym_where(c, a, b):
    return sympy.Piecewise((a, c), (b, True))


def sym_relu(x):
    return sympy.Piecewise((x, x > 0), (0, True))


def torch_softplus(x):
    # Above ``threshold`` PyTorch returns x itself, off by log1p(exp(-x)) ≈ e^-x: at its
    # default 20 that is 2e-9, below float32's rounding but not float64's; at 37, e^-37
    # = 8.5e-17 is below float64's unit roundoff and exp(37) far from overflow.
    torch = _torch()
    return torch.nn.functional.softplus(x, threshold=37.0 if x.dtype == torch.float64
                                        else 20.0)


def obj_matmul(a, b):
    out = np.matmul(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    return np.asarray(out, dtype=object)


def obj_dot(a, b):
    return np.asarray(sympy.Add(*[x * y for x, y in zip(a, b)]), dtype=object)



def sympy_scalar_constant(text: str) -> sympy.Expr:
    """The exact SymPy number a constant's text stands for: a decimal literal (``0.1``
    becomes ``1/10``), ``pi`` or ``E``, possibly negated (``-pi``)."""
    from fractions import Fraction

    if text.startswith("-"):
        return -sympy_scalar_constant(text[1:])
    if text in ("pi", "E"):
        return getattr(sympy, text)
    f = Fraction(text)
    return sympy.Integer(f.numerator) if f.denominator == 1 else sympy.Rational(
        f.numerator, f.denominator)


def dot_shape(a, b):
    if len(a) != 1 or len(b) != 1 or a != b:
        raise ShapeError(f"dot needs two vectors of one length, got shapes {list(a)} "
                         f"and {list(b)}")
    return ()


# clamp(x, min=None, max=None) is min(max(x, lo), hi), in that order, as torch.clamp
# computes it (so lo > hi gives hi everywhere). lo and hi are the formula's constants,
# floats: their SymPy meaning is the float's exact binary value, as float64 torch uses.

def sym_clamp(x, lo, hi):
    # Max and Min, as the maximum and minimum rows: SymPy differentiates them into steps
    # (Heaviside) that lambdify prints; a Piecewise here would put x in its conditions,
    # and a Piecewise inside x (relu, where) would send SymPy through simplify()
    if lo is not None:
        x = sympy.Max(x, sympy.Rational(lo))
    return x if hi is None else sympy.Min(x, sympy.Rational(hi))


def np_clamp(x, lo, hi):
    if lo is not None:
        x = np.maximum(x, lo)
    return x if hi is None else np.minimum(x, hi)


def torch_clamp(x, lo, hi):
    return _torch().clamp(x, min=lo, max=hi)


def clamp_hazard(x, lo, hi):
    x = np.asarray(x, dtype=float)
    return np.minimum(np.inf if lo is None else np.abs(x - lo),
                      np.inf if hi is None else np.abs(x - hi))


def clamp_shape(x, lo, hi):
    if lo is None and hi is None:
        raise ShapeError("clamp() needs min= or max=")
    return x
