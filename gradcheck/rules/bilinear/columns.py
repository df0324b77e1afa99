"""matmul's and dot's columns: NumPy forwards, SymPy meanings over object arrays, dot's
shape rule."""

from __future__ import annotations

import numpy as np

from ...base.shapes import ShapeError
from ..columns import sympy


def np_matmul(a, b):
    # NumPy's stacked matmul leaves BLAS for a slow loop when an operand is a strided
    # view (a transpose): about ten times slower on [16, 256, 64] @ [16, 64, 256]
    return np.matmul(np.ascontiguousarray(a), np.ascontiguousarray(b))


def obj_matmul(a, b):
    out = np.matmul(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    return np.asarray(out, dtype=object)


def obj_dot(a, b):
    return np.asarray(sympy.Add(*[x * y for x, y in zip(a, b)]), dtype=object)


def dot_shape(a, b):
    if len(a) != 1 or len(b) != 1 or a != b:
        raise ShapeError(f"dot needs two vectors of one length, got shapes {list(a)} "
                         f"and {list(b)}")
    return ()
