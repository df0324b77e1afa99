"""The engine column's functions: PyTorch's backward formulas as NumPy VJPs, and the
choosers of PyTorch's grad_fn names where one row records several node classes."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .row import EngineRule


def engine_rule(grad_fn, *vjps, saves=True) -> EngineRule:
    return EngineRule(grad_fn, vjps, saves)


def is_number(v) -> bool:
    """A Python number: PyTorch keeps it out of the graph (``x ** 2``, ``2 - x``)."""
    return isinstance(v, numbers.Number)


def ndim(v) -> int:
    return np.ndim(getattr(v, "data", v))


def sub_name(a, b):
    return "RsubBackward1" if is_number(a) else "SubBackward0"


def pow_name(a, b):
    # x ** 2, 2 ** x, x ** y: three overloads, three nodes in PyTorch.
    return ("PowBackward0" if is_number(b) else "PowBackward2" if is_number(a)
            else "PowBackward1")


def reduction_name(stem: str):
    # torch.sum(x) is SumBackward0; torch.sum(x, dim=...) is SumBackward1 (the torch
    # column uses the first form for a whole reduction without keepdims).
    return lambda x, axis, keepdims: (f"{stem}Backward0" if len(axis) == ndim(x)
                                      and not keepdims else f"{stem}Backward1")


def matmul_name(a, b):
    # gradcheck.engine.matmul reduces every rank pair as PyTorch's _matmul_impl does
    # (unsqueeze, fold, squeeze, expand and view nodes around one product), so this
    # row's node sees vector·vector, matrix·vector, matrix·matrix or a batch of
    # matrices (3-D, one batch axis) times another.
    return {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (2, 2): "MmBackward0"}.get(
        (ndim(a), ndim(b)), "BmmBackward0")


def pow_base(g, ans, a, b):
    # b * a**(b-1), and 0 where b == 0 (PyTorch's convention; a**-1 is inf at a == 0).
    return g * np.where(b == 0, 0.0, b * a ** (b - 1))


def pow_exponent(g, ans, a, b):
    # a**b * log(a), and 0 where a == 0 and b >= 0 (PyTorch's convention).
    return g * np.where((a == 0) & (b >= 0), 0.0, ans * np.log(a))


def share(a, b):
    """a's share of maximum(a, b)'s cotangent: 1 where a wins, 1/2 on a tie (PyTorch)."""
    return (a > b) + (a == b) / 2


def keep(g, axis, keepdims):
    """A reduction's cotangent with the reduced axes put back (size 1) to broadcast."""
    return g if keepdims else np.expand_dims(g, axis)


def count(x, axis) -> int:
    return math.prod(np.shape(x)[d] for d in axis)


def ties(x, ans, axis, keepdims):
    """Where x attains its max/min; ties share the cotangent evenly, as in PyTorch."""
    hit = x == keep(ans, axis, keepdims)
    return hit / hit.sum(axis=axis, keepdims=True)


def others_product(x, axis):
    """Product of the other elements along ``axis`` for each element (exact at zeros)."""
    axis = tuple(axis)
    rest = [d for d in range(np.ndim(x)) if d not in axis]
    moved = np.transpose(x, rest + list(axis))
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    ones = np.ones_like(flat[..., :1])
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)
    return np.transpose((left * right[..., ::-1]).reshape(moved.shape),
                        np.argsort(rest + list(axis)))


def matrices(g, a, b):
    """g, a, b with the axes NumPy's matmul drops for 1-D operands put back."""
    if np.ndim(b) == 1:
        g, b = g[..., None], b[:, None]
    if np.ndim(a) == 1:
        g, a = g[..., None, :], a[None, :]
    return g, a, b


def matmul_a(g, ans, a, b):
    gm, am, bm = matrices(g, a, b)
    d = np.matmul(gm, np.ascontiguousarray(np.swapaxes(bm, -1, -2)))   # BLAS: see np_matmul
    return d[..., 0, :] if np.ndim(a) == 1 else d


def matmul_b(g, ans, a, b):
    gm, am, bm = matrices(g, a, b)
    d = np.matmul(np.ascontiguousarray(np.swapaxes(am, -1, -2)), gm)
    return d[..., 0] if np.ndim(b) == 1 else d


def identity_vjp(g, ans, a, b):
    return g


SQRT_PI = math.sqrt(math.pi)


def clamp_vjp(g, ans, x, lo, hi):
    # PyTorch's: g where lo <= x <= hi (the bounds themselves pass the gradient)
    inside = np.ones(np.shape(x), dtype=bool)
    if lo is not None:
        inside &= x >= lo
    if hi is not None:
        inside &= x <= hi
    return np.where(inside, g, 0.0)


def atan2_recip(y, x):
    # PyTorch's atan2 backward: 1 / (y² + x²), taken as 0 where that is 0 (so the
    # gradient at the origin, or where the squares underflow, is a signed zero)
    d = y * y + x * x
    with np.errstate(divide="ignore"):
        return np.where(d == 0, 0, 1 / d)
