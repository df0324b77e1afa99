"""How far a sum of n terms, as a correct computation adds it, can err (γ(n)), for the
rounding model (:mod:`gradcheck.bounds`): every family's sums are bounded by it."""

from __future__ import annotations

import math

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
