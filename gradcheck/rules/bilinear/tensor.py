"""matmul's and dot's tensor column: the matrix-calculus identities (the adjoint of A @ B
is Ḡ Bᵀ and Aᵀ Ḡ) over a builder ``b`` of tensor expressions."""

from __future__ import annotations

from ...base.shapes import matmul_shape


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
