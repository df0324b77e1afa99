"""Array helpers the witnesses share: slabs that bound elementwise temporaries, the one
place broadcasting is undone, and a final reduction's cotangent pulled back."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


SLAB = 1 << 16  # elements per slab: bounds the temporaries of elementwise evaluations


def slabs(shape: tuple[int, ...], size: int = SLAB) -> list[tuple[int, slice, Any]]:
    """Cuts of ``shape`` along its largest axis into slabs of about ``size`` elements, as
    (axis, slice of that axis, index of the slab); one cut, the whole array (index
    ``...``), when it is small."""
    total = math.prod(shape)
    if total <= size or not shape:
        return [(0, slice(None), ...)]
    axis = int(np.argmax(shape))
    step = max(1, size * shape[axis] // total)
    return [(axis, slice(lo, lo + step), (slice(None),) * axis + (slice(lo, lo + step),))
            for lo in range(0, shape[axis], step)]


def cut(a, ndim: int, axis: int, part: slice):
    """The part of ``a`` (broadcast against an array of ``ndim`` dimensions, NumPy's
    right-aligned rule) that lines up with ``part`` of that array's ``axis``."""
    a = np.asarray(a)
    k = axis - (ndim - a.ndim)
    if k < 0 or a.ndim == 0 or a.shape[k] == 1:
        return a
    return a[(slice(None),) * k + (part,)]


def unbroadcast(array: np.ndarray, shape: tuple[int, ...], reduce=np.sum) -> np.ndarray:
    """Reduce ``array`` (of a shape ``shape`` broadcasts to) back to ``shape``.

    This is the one place broadcasting is undone: gradients are summed (``np.sum``),
    masks combined (``np.any``) over the broadcast axes.
    """
    array = np.asarray(array)
    lead = array.ndim - len(shape)
    if lead:
        array = reduce(array, axis=tuple(range(lead)))
    axes = tuple(d for d, n in enumerate(shape) if n == 1 and array.shape[d] != 1)
    if axes:
        array = reduce(array, axis=axes, keepdims=True)
    return np.broadcast_to(array, shape) if array.shape != shape else array


def body_cotangent(reduction, v: np.ndarray, body_shape: tuple[int, ...]) -> np.ndarray:
    """Pull the output cotangent ``v`` back through ``reduction``, the final sum/mean of
    an elementwise formula or None (see :func:`gradcheck.formula.tree.elementwise_split`):
    the cotangent of every body element."""
    v = np.asarray(v, dtype=float)
    if reduction is not None:
        if not reduction.keepdims:
            v = np.expand_dims(v, reduction.axis)
        if reduction.op == "mean":
            v = v / int(np.prod([body_shape[d] for d in reduction.axis], dtype=np.int64))
    return np.broadcast_to(v, body_shape)


def run_kernel(fn, args: list, shape: tuple[int, ...]) -> list[np.ndarray]:
    """The outputs of an elementwise kernel ``fn`` (a compiled function of arrays that
    broadcast to ``shape``), each broadcast to ``shape``; computed slab by slab when the
    shape is large, so that each of the kernel's intermediate arrays stays small (a
    million-element kernel would otherwise hold dozens of full-size temporaries).

    Every argument is given at least one dimension and the kernel's rank: NumPy then
    returns arrays (never bare scalars) everywhere, which np.select in Piecewise code
    requires."""
    padded = (1,) * (max(1, len(shape)) - len(shape)) + tuple(shape)
    args = [np.reshape(a, (1,) * (len(padded) - np.ndim(a)) + np.shape(a)) for a in args]
    pieces = slabs(padded)
    if len(pieces) == 1:
        return [np.broadcast_to(np.asarray(r, dtype=float), padded).reshape(shape)
                for r in fn(*args)]
    outs = None
    for axis, part, where in pieces:
        results = fn(*[cut(a, len(padded), axis, part) for a in args])
        if outs is None:
            outs = [np.empty(padded) for _ in results]
        for o, r in zip(outs, results):
            o[where] = r
    return [o.reshape(shape) for o in outs]
