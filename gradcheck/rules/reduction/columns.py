"""The reductions' columns: SymPy meanings over object arrays, NumPy forwards, torch
calls, and max's and min's hazards and selectors."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..columns import _torch, reduce_objects, sympy


def sym_reduction(combine: Callable[[list], Any]) -> Callable[..., np.ndarray]:
    return lambda a, axis, keepdims: reduce_objects(a, axis, keepdims, combine)


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
