"""Shapes: broadcasting and axis normalisation, the rules every row's shape column uses.

Nothing here knows the rule table, so the table, the parser and the engine all import it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ShapeError(ValueError):
    """Operands whose shapes do not fit the operation."""


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError("shapes " + ", ".join(map(str, map(list, shapes)))
                         + " do not broadcast together") from None


def normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """``None``, an int or a tuple of ints -> sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"axis {a} is out of range for a tensor of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(f"axis {axis} repeats a dimension")
    return tuple(sorted(out))


def reduced(shape: tuple[int, ...], axis: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    """The shape of a reduction of ``shape`` over ``axis``."""
    if keepdims:
        return tuple(1 if d in axis else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axis)


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of ``a @ b`` by NumPy's (and PyTorch's) rules."""
    if not a or not b:
        raise ShapeError("@ needs tensors of at least one dimension")
    a2 = a if len(a) > 1 else (1,) + a
    b2 = b if len(b) > 1 else b + (1,)
    if a2[-1] != b2[-2]:
        raise ShapeError(f"@ of shapes {list(a)} and {list(b)}: inner sizes "
                         f"{a2[-1]} and {b2[-2]} differ")
    out = broadcast(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:  # drop the axes added above: a's row axis first, then b's column
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out
