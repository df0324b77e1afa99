"""matmul's engine column: PyTorch's backward formulas as NumPy VJPs, and the node names
PyTorch records for each rank pair."""

from __future__ import annotations

import numpy as np

from ..vjps import ndim


def matmul_name(a, b):
    # gradcheck.engine.matmul reduces every rank pair as PyTorch's _matmul_impl does
    # (unsqueeze, fold, squeeze, expand and view nodes around one product), so this
    # row's node sees vector·vector, matrix·vector, matrix·matrix or a batch of
    # matrices (3-D, one batch axis) times another.
    return {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (2, 2): "MmBackward0"}.get(
        (ndim(a), ndim(b)), "BmmBackward0")


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
