"""The sums a correct computation adds, for the rounding bound (:mod:`gradcheck.bounds.model`):
how far a sum of n terms can err (γ(n)), and how many terms each linear-algebra row's
sums have, in its forward and in each cotangent. Knows the rows by name only."""

from __future__ import annotations

import math

from ..rules.conv.rows import CONVOLUTIONS
from ..rules.conv.columns import conv_terms

BLOCK = 32                  # length of the sequential base case of blocked summation


def accumulation(n: int) -> float:
    """γ(n): units of u_acc·Σ|terms| a sum of ``n`` terms can err by. Blocked pairwise
    summation (NumPy, PyTorch's cascade sum, BLAS's blocked dot products) runs a
    sequential base case of at most :data:`BLOCK` terms, then ⌈log₂(n/BLOCK)⌉ levels of
    pairwise additions (Higham, §4.2)."""
    if n <= 1:
        return 0.0
    if n <= BLOCK:
        return float(n - 1)
    return float(BLOCK - 1 + math.ceil(math.log2(n / BLOCK)))


def terms(node, k: int | None) -> int:
    """The terms of the sums a bilinear row (matmul, dot, a convolution) adds in its
    forward (``k`` None) or in its cotangent into argument ``k``: matmul's and dot's
    along the contracted axis; a convolution's over its input channels and kernel
    (:func:`gradcheck.rules.conv.columns.conv_terms`)."""
    shapes = [a.shape for a in node.args]
    if node.op in CONVOLUTIONS:
        return conv_terms(shapes[0], shapes[1], node.shape, k)
    if k is None:
        return shapes[0][-1] if shapes[0] else 1
    return int(_contraction(shapes[1 - k], k))


def _contraction(other: tuple[int, ...], k: int) -> int:
    """The length of the sum in matmul's cotangent into argument ``k``, from the other
    operand's shape: Ā = Ḡ Bᵀ sums over B's last axis, B̄ = Aᵀ Ḡ over A's rows (axis
    -2, after any batch axes). A vector's own length is kept: an over-count."""
    if not other:
        return 1
    return other[-1] if k == 0 else other[-2 if len(other) > 1 else 0]
