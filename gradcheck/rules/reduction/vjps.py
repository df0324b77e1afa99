"""The reductions' engine column: PyTorch's backward formulas' pieces and node names."""

from __future__ import annotations

import math

import numpy as np

from ..vjps import keep, ndim


def reduction_name(stem: str):
    # torch.sum(x) is SumBackward0; torch.sum(x, dim=...) is SumBackward1 (the torch
    # column uses the first form for a whole reduction without keepdims).
    return lambda x, axis, keepdims: (f"{stem}Backward0" if len(axis) == ndim(x)
                                      and not keepdims else f"{stem}Backward1")


def count(x, axis) -> int:
    return math.prod(np.shape(x)[d] for d in axis)


def ties(x, ans, axis, keepdims):
    """Where x attains its max/min; ties share the cotangent evenly, as in PyTorch."""
    hit = x == keep(ans, axis, keepdims)
    return hit / hit.sum(axis=axis, keepdims=True)
