"""The reductions' tensor column: the exact tensor-level adjoints (the adjoint of a sum
is a broadcast), written over a builder ``b`` of tensor expressions (signature of
:class:`gradcheck.rules.row.TensorRule`'s ``vjps``)."""

from __future__ import annotations

import math

from ..tensor import _kept


def sum_vjp(b, g, ans, x, axis, keepdims):
    return _kept(b, g, x.shape, axis, keepdims)


def mean_vjp(b, g, ans, x, axis, keepdims):
    # mean = sum / n over the reduced axes
    return b.scale(_kept(b, g, x.shape, axis, keepdims),
                   1 / math.prod(x.shape[d] for d in axis))


def prod_vjp(b, g, ans, x, axis, keepdims):
    # ∂(∏ x_j)/∂x_i = ∏_{j≠i} x_j, the product of the others (exact at zeros, unlike
    # ans / x)
    return b.mul(_kept(b, g, x.shape, axis, keepdims), b.others_product(x, axis))


def selected_vjp(name: str):
    """max/min: the cotangent goes to the selected element (the row's ``selector``
    column at the point; exact wherever the pick is locally constant, which sampling
    keeps to)."""

    def vjp(b, g, ans, x, axis, keepdims):
        return b.mul(_kept(b, g, x.shape, axis, keepdims),
                     b.select(name, x, axis=axis, keepdims=keepdims))

    vjp.__name__ = f"{name}_vjp"
    return vjp


def logsumexp_vjp(b, g, ans, x, axis, keepdims):
    # ∂ log Σ exp(x_j) / ∂x_i = exp(x_i - logsumexp(x)), the softmax
    softmax = b.row("exp", b.row("sub", x, _kept(b, ans, x.shape, axis, keepdims)))
    return b.mul(_kept(b, g, x.shape, axis, keepdims), softmax)
