"""The tensor column's functions: exact tensor-level adjoints of the structural rows,
the matrix-calculus identities, written over a builder ``b`` of tensor expressions
(:class:`gradcheck.reference.texpr.Builder`) so that the reference can evaluate them in
float64 at the cost of the forward and print them as formulas.

Every function has the signature of :class:`gradcheck.rules.row.TensorRule`'s
``vjps``: ``(b, g, ans, *args, *params)``, each argument a tensor expression with a
``shape``. Nothing here imports the reference: the builder is passed in.
"""

from __future__ import annotations

import math

from ..base.shapes import matmul_shape
from .row import TensorRule


def _kept(b, g, shape, axis, keepdims):
    """A reduction's cotangent with its reduced axes back as size 1, broadcast to the
    argument's ``shape``: the adjoint of a sum is a broadcast."""
    if not keepdims:
        g = b.reshape(g, tuple(1 if d in axis else n for d, n in enumerate(shape)))
    return b.broadcast(g, shape)


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


def _as_matrices(b, g, x, y):
    """g, x, y with the axes matmul drops for 1-D operands put back (as NumPy's matmul
    promotes them: x [j] is a row [1, j], y [j] a column [j, 1])."""
    x2 = b.reshape(x, (1,) + x.shape) if len(x.shape) == 1 else x
    y2 = b.reshape(y, y.shape + (1,)) if len(y.shape) == 1 else y
    return b.reshape(g, matmul_shape(x2.shape, y2.shape)), x2, y2


def matmul_a(b, g, ans, x, y):
    # C = A B: Ā = C̄ Bᵀ (summed over broadcast batch axes by the reference)
    g2, x2, y2 = _as_matrices(b, g, x, y)
    grad = b.sum_to(b.row("matmul", g2, b.row("transpose", y2)), x2.shape)
    return b.reshape(grad, x.shape)


def matmul_b(b, g, ans, x, y):
    # C = A B: B̄ = Aᵀ C̄
    g2, x2, y2 = _as_matrices(b, g, x, y)
    grad = b.sum_to(b.row("matmul", b.row("transpose", x2), g2), y2.shape)
    return b.reshape(grad, y.shape)


def dot_a(b, g, ans, x, y):
    return b.mul(b.broadcast(g, y.shape), y)


def dot_b(b, g, ans, x, y):
    return b.mul(b.broadcast(g, x.shape), x)


def tensor_rule(*vjps) -> TensorRule:
    return TensorRule(vjps)
