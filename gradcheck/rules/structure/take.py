"""Indexing by an integer input: ``x[idx]`` (the ``take`` row, NumPy's ``take`` along one
axis), ``gather(x, idx, axis)`` (PyTorch's) and ``take_along_axis(x, idx, axis)``
(NumPy's, which broadcasts): their shapes, forwards, SymPy meanings, torch calls,
engine VJPs and tensor adjoints.

Each is linear in ``x`` with 0/1 coefficients; the indices are an exact constant of the
formula, read at the point. Their SymPy meaning is the selection written out,
out[p] = Σᵢ [idx[p] = i]·x[..., i, ...], the bracket a Piecewise of the index symbol, so
the element-expanded reference differentiates it as it does the rest; the adjoint adds
the cotangent back where each element was taken (an index taken twice receives both).
"""

from __future__ import annotations

import numpy as np

from ...base.shapes import ShapeError
from ..columns import _torch, reduce_objects, sympy
from .columns import axis_of


def _ints(idx) -> np.ndarray:
    return np.asarray(idx).astype(np.int64)


def _checked(idx, n: int, negative: bool) -> np.ndarray:
    """The indices, each in range for an axis of size ``n`` (x[idx] counts a negative
    one from the end, as Python; gather and take_along_axis take [0, n), as PyTorch)."""
    idx = _ints(idx)
    lo = -n if negative else 0
    if idx.size and (idx.min() < lo or idx.max() >= n):
        bad = idx.min() if idx.min() < lo else idx.max()
        raise IndexError(f"index {bad} is out of range for an axis of size {n}: declare "
                         f"the indices' input with domain = [{lo}, {n}]")
    return idx


# ------------------------------------------------------------------ shapes
def take_shape(x, idx, axis):
    d = axis_of(axis, len(x))
    return x[:d] + tuple(idx) + x[d + 1:]


def gather_shape(x, idx, axis):
    d = axis_of(axis, len(x))
    if len(idx) != len(x) or any(m > n for k, (m, n) in enumerate(zip(idx, x)) if k != d):
        raise ShapeError(f"indices of shape {list(idx)} for a tensor of shape {list(x)}: "
                         "as many dimensions, none larger but along axis")
    return tuple(idx)


def _broadcast(x, idx, d):
    """take_along_axis's shapes: x's and idx's, each with the other's sizes broadcast in
    every axis but ``d`` (NumPy's rule; the same number of dimensions)."""
    if len(idx) != len(x):
        raise ShapeError(f"indices of shape {list(idx)} for a tensor of shape {list(x)}: "
                         "as many dimensions")
    out = []
    for k, (m, n) in enumerate(zip(x, idx)):
        if k != d and 1 not in (m, n) and m != n:
            raise ShapeError(f"shapes {list(x)} and {list(idx)} do not broadcast along "
                             f"axis {k}")
        out.append(max(m, n) if k != d else None)
    return (tuple(m if v is None else v for m, v in zip(x, out)),
            tuple(n if v is None else v for n, v in zip(idx, out)))


def take_along_shape(x, idx, axis):
    return _broadcast(x, idx, axis_of(axis, len(x)))[1]


# ------------------------------------------------------------------ forwards
def np_take(x, idx, axis):
    return np.take(x, _checked(idx, np.shape(x)[axis], True), axis=axis)


def np_gather(x, idx, axis):
    x, d = np.asarray(x), axis_of(axis, np.ndim(x))
    cut = tuple(slice(None) if k == d else slice(0, n) for k, n in enumerate(np.shape(idx)))
    return np.take_along_axis(x[cut], _checked(idx, x.shape[d], False), axis=d)


def np_take_along(x, idx, axis):
    x = np.asarray(x)
    return np.take_along_axis(x, _checked(idx, x.shape[axis], False), axis=axis)


def torch_take(x, idx, axis):
    return x[(slice(None),) * axis_of(axis, x.dim()) + (idx.long(),)]


def torch_gather(x, idx, axis):
    return _torch().gather(x, axis, idx.long())


def torch_take_along(x, idx, axis):
    return _torch().take_along_dim(x, idx.long(), axis)


# ------------------------------------------------------------------ SymPy
def _hits(idx, n: int) -> np.ndarray:
    """[idx[p] = i] for every p and i < n, as Piecewise 0/1 of the index (symbols in the
    expanded reference, values at the point), shape idx.shape + (n,); a negative index
    counts from the end."""
    one, zero = sympy.Integer(1), sympy.Integer(0)
    idx = np.asarray(idx, dtype=object)
    out = np.empty(idx.shape + (n,), dtype=object)
    for p in np.ndindex(*idx.shape):
        for i in range(n):
            hit = sympy.Or(sympy.Eq(idx[p], i), sympy.Eq(idx[p], i - n))
            out[p + (i,)] = sympy.Piecewise((one, hit), (zero, True))
    return out


def _selected(terms: np.ndarray) -> np.ndarray:
    return reduce_objects(terms, (terms.ndim - 1,), False, lambda e: sympy.Add(*e))


def sym_take(x, idx, axis):
    x = np.asarray(x, dtype=object)
    d, p = axis_of(axis, x.ndim), np.ndim(idx)
    moved = np.moveaxis(x, d, -1)                       # A + B + (n,)
    lead, rest = moved.shape[:d], moved.shape[d:-1]
    xs = moved.reshape(lead + (1,) * p + rest + moved.shape[-1:])
    hits = _hits(idx, x.shape[d]).reshape((1,) * d + np.shape(idx) + (1,) * len(rest)
                                          + (x.shape[d],))
    return _selected(xs * hits)


def _sym_along(x, idx, d):
    """out[p] = Σᵢ [idx[p] = i]·x[p with axis d at i], x already of idx's shape but
    along d."""
    moved = np.expand_dims(np.moveaxis(x, d, -1), d)     # idx's shape, 1 at d, + (n,)
    return _selected(moved * _hits(idx, x.shape[d]))


def sym_gather(x, idx, axis):
    x, d = np.asarray(x, dtype=object), axis_of(axis, np.ndim(x))
    cut = tuple(slice(None) if k == d else slice(0, n) for k, n in enumerate(np.shape(idx)))
    return _sym_along(x[cut], idx, d)


def sym_take_along(x, idx, axis):
    x, d = np.asarray(x, dtype=object), axis_of(axis, np.ndim(x))
    xs, ids = _broadcast(x.shape, np.shape(idx), d)
    return _sym_along(np.broadcast_to(x, xs), np.broadcast_to(idx, ids), d)


# ------------------------------------------------------------------ adjoints
def scatter_take(g, idx, shape, axis):
    """The adjoint of take: each cotangent added back where its element was taken."""
    out = np.zeros(shape, dtype=np.result_type(g, np.float32))
    np.add.at(out, (slice(None),) * axis_of(axis, len(shape)) + (_ints(idx),), g)
    return out


def scatter_along(g, idx, shape, axis):
    """The adjoint of gather and of take_along_axis (on x broadcast to ``idx``'s shape
    but along axis): the cotangent added back where each element was taken, then
    summed over the axes x was broadcast along."""
    d, idx = axis_of(axis, len(shape)), _ints(idx)
    full = tuple(n if k == d else max(n, m) for k, (n, m) in enumerate(zip(shape, idx.shape)))
    out = np.zeros(full, dtype=np.result_type(g, np.float32))
    where = list(np.indices(idx.shape, sparse=True))
    where[d] = idx
    np.add.at(out, tuple(where), np.broadcast_to(g, idx.shape))
    for k, (n, m) in enumerate(zip(shape, full)):
        if n == 1 and m != 1:
            out = out.sum(axis=k, keepdims=True)
    return out


def gather_grad(g, idx, shape, axis):
    """gather's adjoint (:func:`scatter_along`), a function of its own for the tensor
    reference: its own adjoint in ḡ, for double backward, is gather again."""
    return scatter_along(g, idx, shape, axis)


def take_along_grad(g, idx, shape, axis):
    """take_along_axis's adjoint (:func:`scatter_along`; idx broadcast already)."""
    return scatter_along(g, idx, shape, axis)


def _adjoint(row: str):
    """The adjoint of a scatter in its cotangent: the row that took the elements."""
    def adjoint(b, g, cotangent, idx, shape, axis):
        yield cotangent, b.row(row, g, idx, axis=axis)

    return adjoint


# linear in the cotangent only: the indices are values, never magnitudes
for _fn, _row in ((scatter_take, "take"), (gather_grad, "gather"),
                  (take_along_grad, "take_along_axis")):
    _fn.adjoint, _fn.linear_in = _adjoint(_row), (0,)
del _fn, _row


def take_vjp(g, ans, x, idx, axis):
    return scatter_take(g, idx, np.shape(x), axis)


def gather_vjp(g, ans, x, idx, axis):
    return scatter_along(g, idx, np.shape(x), axis)


def take_along_vjp(g, ans, x, idx, axis):
    d = axis_of(axis, np.ndim(x))
    return scatter_along(g, np.broadcast_to(idx, _broadcast(np.shape(x), np.shape(idx), d)[1]),
                         np.shape(x), axis)


def take_tensor(b, g, ans, x, idx, axis):
    return b.apply(scatter_take, g, idx, shape=x.shape, axis=axis)


def gather_tensor(b, g, ans, x, idx, axis):
    return b.apply(gather_grad, g, idx, shape=x.shape, axis=axis)


def take_along_tensor(b, g, ans, x, idx, axis):
    ids = _broadcast(x.shape, idx.shape, axis_of(axis, len(x.shape)))[1]
    return b.apply(take_along_grad, g, b.broadcast(idx, ids), shape=x.shape, axis=axis)


# ------------------------------------------------------------------ adding at indices
# scatter_add(x, idx, src, axis) (PyTorch's x.scatter_add(axis, idx, src)): x, with each
# src[p] added at p with axis d replaced by idx[p]; idx of src's shape (PyTorch's
# backward needs it), no larger than x but along axis. index_add(x, idx, src, axis)
# (torch.index_add(x, axis, idx, src)): x, with src's slice j along axis added at
# idx[j]. Linear in x and src: x's cotangent is ḡ, src's ḡ taken where it was added
# (gather, take): where several src elements land on one, the sum rounds (the family's
# bound counts its terms).

def scatter_add_shape(x, idx, src, axis):
    d = axis_of(axis, len(x))
    if tuple(idx) != tuple(src) or len(idx) != len(x) or any(
            m > n for k, (m, n) in enumerate(zip(idx, x)) if k != d):
        raise ShapeError(f"indices of shape {list(idx)} and src of shape {list(src)} for "
                         f"a tensor of shape {list(x)}: the same shape, as many "
                         "dimensions as x, none larger but along axis")
    return tuple(x)


def index_add_shape(x, idx, src, axis):
    d = axis_of(axis, len(x))
    want = tuple(x[:d]) + tuple(idx[:1]) + tuple(x[d + 1:])
    if len(idx) != 1 or tuple(src) != want:
        raise ShapeError(f"indices of shape {list(idx)} and src of shape {list(src)} for "
                         f"a tensor of shape {list(x)} along axis {d}: one index per "
                         f"slice of src, src of shape {list(want)}")
    return tuple(x)


def _added_at(x, src, where):
    out = np.array(x, dtype=np.result_type(x, src), copy=True)
    np.add.at(out, where, src)
    return out


def np_scatter_add(x, idx, src, axis):
    d, idx = axis_of(axis, np.ndim(x)), _checked(idx, np.shape(x)[axis], False)
    where = list(np.indices(idx.shape, sparse=True))
    where[d] = idx
    return _added_at(x, src, tuple(where))


def np_index_add(x, idx, src, axis):
    d = axis_of(axis, np.ndim(x))
    return _added_at(x, src, (slice(None),) * d + (_checked(idx, np.shape(x)[d], False),))


def _promoted(x, src):
    """x and src in one dtype (PyTorch's scatter_add and index_add take no mixed ones,
    as x * src would: an integer input as x or src); no node where they agree."""
    to = _torch().promote_types(x.dtype, src.dtype)
    return x.to(to), src.to(to)


def torch_scatter_add(x, idx, src, axis):
    x, src = _promoted(x, src)
    return x.scatter_add(axis, idx.long(), src)


def torch_index_add(x, idx, src, axis):
    x, src = _promoted(x, src)
    return _torch().index_add(x, axis, idx.long(), src)


def _sym_added(x, moved, hits, d):
    """x plus Σⱼ moved[..., j]·hits[..., j, i], the sum's axis i put at ``d``, written
    into zeros of x's shape where the other axes of ``moved`` are smaller."""
    terms = np.expand_dims(moved, -1) * hits                 # ... (m, n)
    added = np.moveaxis(reduce_objects(terms, (terms.ndim - 2,), False,
                                       lambda e: sympy.Add(*e)), -1, d)
    out = np.array(x, dtype=object, copy=True)
    out[tuple(slice(0, n) for n in added.shape)] += added
    return out


def sym_scatter_add(x, idx, src, axis):
    d = axis_of(axis, np.ndim(x))
    hits = np.moveaxis(_hits(idx, np.shape(x)[d]), d, -2)   # others + (m, n)
    return _sym_added(x, np.moveaxis(np.asarray(src, dtype=object), d, -1), hits, d)


def sym_index_add(x, idx, src, axis):
    d = axis_of(axis, np.ndim(x))
    hits = _hits(idx, np.shape(x)[d])                        # (m, n)
    return _sym_added(x, np.moveaxis(np.asarray(src, dtype=object), d, -1), hits, d)


def added_x_vjp(g, ans, x, idx, src, axis):
    return g


def scatter_add_vjp(g, ans, x, idx, src, axis):
    return np_gather(g, idx, axis)


def index_add_vjp(g, ans, x, idx, src, axis):
    return np.take(g, _ints(idx), axis=axis_of(axis, np.ndim(g)))


def added_x_tensor(b, g, ans, x, idx, src, axis):
    return g


def scatter_add_tensor(b, g, ans, x, idx, src, axis):
    return b.row("gather", g, idx, axis=axis)


def index_add_tensor(b, g, ans, x, idx, src, axis):
    return b.row("take", g, idx, axis=axis)
