"""The engine column of the composite rows: PyTorch's backward formulas (tools/autograd/
derivatives.yaml and FunctionsManual.cpp: softmax_backward, var_backward,
linalg_vector_norm_backward, cumprod_backward...) as NumPy VJPs, with PyTorch's
conventions at the special points (a zero norm or std passes no gradient, ties of the
inf-norm share it, sort keeps tied elements in their order).

Each VJP may get a cotangent with one more leading axis (the rounding model carries many
cotangents at once): reductions and sorts then get their operands broadcast and their
axes shifted (``rounding._batched``), einsum's sees ``g`` with the extra axis itself.
"""

from __future__ import annotations

import math

import numpy as np

from . import einsum as eq
from .columns import order_along
from ..vjps import keep


def softmax_vjp(g, ans, x, axis):
    return ans * (g - np.sum(g * ans, axis=axis, keepdims=True))


def log_softmax_vjp(g, ans, x, axis):
    return g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True)


def _divisor(x, axis, correction) -> float:
    return math.prod(np.shape(x)[d] for d in axis) - correction


def var_vjp(g, ans, x, axis, correction, keepdims):
    # var_backward: (2 / (n - correction)) * grad * (x - mean(x))
    return (2.0 / _divisor(x, axis, correction)) * keep(g, axis, keepdims) * (
        x - np.mean(x, axis=axis, keepdims=True))


def std_vjp(g, ans, x, axis, correction, keepdims):
    # std_backward: var_backward of grad / (2 std), that masked to 0 where std == 0
    t = keep(ans, axis, keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(t == 0, 0.0, keep(g, axis, keepdims) / (2 * t))
    return var_vjp(scaled, ans, x, axis, correction, True)


def norm_vjp(g, ans, x, order, axis, keepdims):
    # linalg_vector_norm_backward: sign(x) g for ord 1; g x / norm for ord 2 (0 where the
    # norm is 0); for inf the largest |x| share g; else sign(x) |x|^(p-1) g / norm^(p-1)
    gk, t = keep(g, axis, keepdims), keep(ans, axis, keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        if order == 1:
            return np.sign(x) * gk
        if order == 2:
            return gk * np.where(t == 0, 0.0, x / t)
        if math.isinf(order):
            mask = np.abs(x) == t
            return np.sign(x) * (gk / np.sum(mask, axis=axis, keepdims=True)) * mask
        scale = np.where(t == 0, 0.0, gk / t ** (order - 1))
        return np.sign(x) * np.abs(x) ** (order - 1) * scale


def cumsum_vjp(g, ans, x, axis):
    # the reversed cumulative sum: x_j feeds every y_i with i >= j
    d = axis[0]
    return np.flip(np.cumsum(np.flip(g, d), axis=d), d)


def cumprod_vjp(g, ans, x, axis):
    # x̄_j = Σ_{i≥j} g_i Π_{k≤i, k≠j} x_k = L_j W_j: L the product of the elements
    # before j, W_j = g_j + x_{j+1} W_{j+1} (Horner, from the end). No division: exact
    # where elements are 0, as PyTorch's cumprod_backward is.
    d = axis[0]
    gm = np.moveaxis(np.asarray(g, dtype=np.result_type(g, x)), d, -1)
    xm = np.moveaxis(np.broadcast_to(x, np.shape(g)), d, -1)
    n = xm.shape[-1]
    w = np.empty_like(gm)
    w[..., n - 1] = gm[..., n - 1]
    for j in range(n - 2, -1, -1):
        w[..., j] = gm[..., j] + xm[..., j + 1] * w[..., j + 1]
    left = np.cumprod(np.concatenate([np.ones_like(xm[..., :1]), xm[..., :-1]], axis=-1),
                      axis=-1)
    return np.moveaxis(left * w, -1, d)


def _scatter(g, order, d: int, shape):
    out = np.zeros(shape, dtype=np.asarray(g).dtype)
    np.put_along_axis(out, order, g, axis=d)
    return out


def sort_vjp(g, ans, x, axis, descending):
    # SortBackward0: each sorted value's cotangent back to the element it came from
    d = axis[0]
    return _scatter(g, order_along(x, d, descending), d, np.shape(x))


def topk_vjp(g, ans, x, k, axis):
    d = axis[0]
    order = np.take(order_along(x, d, True), range(k), axis=d)
    return _scatter(g, order, d, np.shape(x))


def einsum_vjp(k: int, g, ans, *args):
    """Operand ``k``'s VJP (a variadic row's VJPs take the operand's position first):
    the einsum of the cotangent with the other operands, over operand ``k``'s labels,
    broadcast along those that appear nowhere else."""
    *operands, subscripts = args
    shapes = [np.shape(a) for a in operands]
    batched = np.ndim(g) > np.ndim(ans)
    equation, others, missing = eq.adjoint(subscripts, shapes, k, batched)
    out = np.einsum(equation, g, *[operands[j] for j in others])
    lead = np.shape(g)[:1] if batched else ()
    for d in missing:
        out = np.expand_dims(out, len(lead) + d)
    return np.broadcast_to(out, lead + shapes[k])
