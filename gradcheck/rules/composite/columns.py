"""The columns of the composite rows (softmax, var, norm, cumsum, sort, topk, einsum...):
their SymPy meanings over object arrays of SymPy scalars, NumPy forwards, torch calls
as a user writes them, shape rules, hazards and selectors.

Axes arrive normalised (a tuple of non-negative ints, see :class:`.row.Param`); the rows
that work along one axis (softmax, cumsum, sort...) take a tuple of one.
"""

from __future__ import annotations

import math

import numpy as np

from ...base.shapes import ShapeError, reduced
from ..columns import _torch, reduce_objects, sympy, top_two_gap
from . import einsum as eq


def one_axis(axis, name: str) -> int:
    if len(axis) != 1:
        raise ShapeError(f"works along one axis, got axis={list(axis)}")
    return axis[0]


def _slices(a: np.ndarray, d: int, fn) -> np.ndarray:
    """``fn(elements)`` (a list along axis ``d``, giving a list of the same length)
    applied to every slice of the object array ``a`` along ``d``."""
    a = np.moveaxis(np.asarray(a, dtype=object), d, -1)
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(*a.shape[:-1]):
        out[idx] = fn(list(a[idx]))
    return np.moveaxis(out, -1, d)


def _count(shape, axis) -> int:
    return math.prod(shape[d] for d in axis)


# --------------------------------------------------------------------------- shapes

def along_shape(name: str):
    """The shape rule of a row that keeps its operand's shape along one axis."""
    def rule(x, axis, *rest):
        one_axis(axis, name)
        return tuple(x)

    return rule


def var_shape(x, axis, correction, keepdims):
    n = _count(x, axis)
    if n - correction <= 0:
        raise ShapeError(f"over {n} element{'s' if n != 1 else ''} with "
                         f"correction={correction}: divides by {n - correction}")
    return reduced(x, axis, keepdims)


def norm_shape(x, order, axis, keepdims):
    if not order >= 1:
        raise ShapeError(f"takes ord >= 1 (1, 2, inf or a p-norm), got {order}")
    return reduced(x, axis, keepdims)


def topk_shape(x, k, axis):
    d = one_axis(axis, "topk")
    if not 1 <= k <= x[d]:
        raise ShapeError(f"takes 1 <= k <= {x[d]} along axis {d}, got k={k}")
    return tuple(x[:d]) + (k,) + tuple(x[d + 1:])


# --------------------------------------------------------------------------- NumPy

def np_softmax(x, axis):
    x = np.asarray(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    x = np.asarray(x)
    d = x - np.max(x, axis=axis, keepdims=True)
    return d - np.log(np.sum(np.exp(d), axis=axis, keepdims=True))


def np_var(x, axis, correction, keepdims):
    return np.var(x, axis=axis, ddof=correction, keepdims=keepdims)


def np_std(x, axis, correction, keepdims):
    return np.std(x, axis=axis, ddof=correction, keepdims=keepdims)


def np_norm(x, order, axis, keepdims):
    return np.linalg.vector_norm(x, ord=order, axis=axis, keepdims=keepdims)


def np_cumsum(x, axis):
    return np.cumsum(x, axis=axis[0])


def np_cumprod(x, axis):
    return np.cumprod(x, axis=axis[0])


def np_sort(x, axis, descending):
    out = np.sort(x, axis=axis[0])
    return np.flip(out, axis[0]) if descending else out


def np_topk(x, k, axis):
    return np.take(np_sort(x, axis, True), range(k), axis=axis[0])


def np_einsum(*args):
    *operands, subscripts = args
    return np.einsum(subscripts, *operands)


# --------------------------------------------------------------------------- torch

def torch_softmax(x, axis):
    return _torch().softmax(x, axis[0])


def torch_log_softmax(x, axis):
    return _torch().log_softmax(x, axis[0])


def torch_var(x, axis, correction, keepdims):
    return _torch().var(x, dim=axis, correction=correction, keepdim=keepdims)


def torch_std(x, axis, correction, keepdims):
    return _torch().std(x, dim=axis, correction=correction, keepdim=keepdims)


def torch_norm(x, order, axis, keepdims):
    return _torch().linalg.vector_norm(x, ord=order, dim=axis, keepdim=keepdims)


def torch_cumsum(x, axis):
    return _torch().cumsum(x, axis[0])


def torch_cumprod(x, axis):
    return _torch().cumprod(x, axis[0])


def torch_sort(x, axis, descending):
    return _torch().sort(x, dim=axis[0], descending=descending).values


def torch_topk(x, k, axis):
    return _torch().topk(x, k, dim=axis[0]).values


def torch_einsum(*args):
    *operands, subscripts = args
    return _torch().einsum(subscripts, *operands)


# --------------------------------------------------------------------------- SymPy
# Over object arrays of SymPy scalars, so that the element-expanded reference
# differentiates them. softmax and log_softmax are shifted by the slice's first element
# (the same function: the shift cancels) so that the float64 reference neither
# overflows nor loses x's magnitude in x - log Σ exp(x).

def _shift(e: list):
    """What softmax's exponents are shifted by (any finite value cancels; one of the
    elements keeps exp from overflowing): the first element, or where it may be -inf
    (masked_fill's Piecewise((-oo, mask), (x, True))) its finite branch."""
    first = e[0]
    if isinstance(first, sympy.Piecewise):
        finite = [v for v, _ in first.args if not v.has(sympy.oo, -sympy.oo, sympy.zoo)]
        return finite[-1] if finite else sympy.S.Zero
    return first if not first.has(sympy.oo, -sympy.oo, sympy.zoo) else sympy.S.Zero


def _shifted(e: list) -> list:
    shift = _shift(e)
    return [sympy.exp(v - shift) for v in e]


def sym_softmax(x, axis):
    def fn(e):
        w = _shifted(e)
        total = sympy.Add(*w)
        return [v / total for v in w]

    return _slices(x, axis[0], fn)


def sym_log_softmax(x, axis):
    def fn(e):
        lse = sympy.log(sympy.Add(*_shifted(e)))
        return [v - _shift(e) - lse for v in e]

    return _slices(x, axis[0], fn)


def sym_var(x, axis, correction, keepdims):
    def fn(e):
        m = sympy.Add(*e) / len(e)
        return sympy.Add(*[(v - m) ** 2 for v in e]) / (len(e) - correction)

    return reduce_objects(x, axis, keepdims, fn)


def sym_std(x, axis, correction, keepdims):
    return np.vectorize(sympy.sqrt, otypes=[object])(sym_var(x, axis, correction, keepdims))


def sym_norm(x, order, axis, keepdims, onehot):
    if math.isinf(order):      # the selected |x|, as max does (see Rule.selector)
        picked = np.asarray(x, dtype=object) * onehot
        return reduce_objects(np.vectorize(sympy.Abs, otypes=[object])(picked), axis,
                              keepdims, lambda e: sympy.Add(*e))
    if order == 2:
        return reduce_objects(x, axis, keepdims,
                              lambda e: sympy.sqrt(sympy.Add(*[v * v for v in e])))
    if order == 1:
        return reduce_objects(x, axis, keepdims, lambda e: sympy.Add(*map(sympy.Abs, e)))
    p = sympy.Rational(order)
    return reduce_objects(x, axis, keepdims, lambda e: sympy.Add(
        *[sympy.Abs(v) ** p for v in e]) ** (1 / p))


def sym_cumsum(x, axis):
    return _slices(x, axis[0], lambda e: [sympy.Add(*e[:i + 1]) for i in range(len(e))])


def sym_cumprod(x, axis):
    return _slices(x, axis[0], lambda e: [sympy.Mul(*e[:i + 1]) for i in range(len(e))])


def _permuted(x, axis, perm):
    # out[.., i, ..] = Σ_j P[.., i, j, ..] x[.., j, ..]: P has the output's positions at
    # ``axis`` and the input's right after
    d = axis[0]
    terms = perm * np.expand_dims(np.asarray(x, dtype=object), d)
    return reduce_objects(terms, (d + 1,), False, lambda e: sympy.Add(*e))


def sym_sort(x, axis, descending, perm):
    return _permuted(x, axis, perm)


def sym_topk(x, k, axis, perm):
    return _permuted(x, axis, perm)


def sym_einsum(*args):
    *operands, subscripts = args
    return np.asarray(np.einsum(subscripts, *[np.asarray(a, dtype=object)
                                              for a in operands]), dtype=object)


# --------------------------------------------------------------------------- selectors

def order_along(x, d: int, descending: bool) -> np.ndarray:
    """The sorting permutation along axis ``d``: ties in their original order, as
    PyTorch's sort orders them."""
    x = np.asarray(x, dtype=float)
    return np.argsort(-x if descending else x, axis=d, kind="stable")


def permutation(order: np.ndarray, d: int, n: int) -> np.ndarray:
    """The 0/1 matrix of ``order`` (positions along axis ``d``): P[.., i, j, ..] = 1
    where output position i takes input position j (j at axis ``d + 1``)."""
    ar = np.arange(n).reshape((n,) + (1,) * (order.ndim - d - 1))
    return (np.expand_dims(order, d + 1) == ar).astype(float)


def sort_selector(x, axis, descending):
    d = axis[0]
    return permutation(order_along(x, d, descending), d, np.shape(x)[d])


def topk_selector(x, k, axis):
    d = axis[0]
    order = np.take(order_along(x, d, True), range(k), axis=d)
    return permutation(order, d, np.shape(x)[d])


def norm_selector(x, order, axis, keepdims):
    """ord=inf: the one-hot of the largest |x| over ``axis`` (other orders select
    nothing: zeros)."""
    x = np.abs(np.asarray(x, dtype=float))
    if not math.isinf(order):
        return np.zeros_like(x)
    keep = [d for d in range(x.ndim) if d not in axis]
    moved = np.transpose(x, keep + list(axis))
    flat = moved.reshape(moved.shape[: len(keep)] + (-1,))
    hot = np.zeros_like(flat)
    np.put_along_axis(hot, np.argmax(flat, axis=-1)[..., None], 1.0, axis=-1)
    return np.transpose(hot.reshape(moved.shape), np.argsort(keep + list(axis)))


# --------------------------------------------------------------------------- hazards

def _gaps(x, d: int, first: int | None = None):
    """Shaped like ``x``: each element's distance below the next larger one along ``d``
    (the largest: none, inf), counting only the ``first`` largest as neighbours (an
    element below them: its distance below the ``first``-th). The smallest is the
    smallest gap between neighbours among the ``first`` + 1 largest; shaped so that
    sampling redraws the element below a near tie and keeps the one above (None where
    there are no two elements)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[d]
    if n < 2:
        return None
    order = np.argsort(-x, axis=d, kind="stable")
    s = np.take_along_axis(x, order, axis=d)            # largest first
    rank = np.arange(n)
    above = np.take(s, np.maximum(np.minimum(rank, first or n) - 1, 0), axis=d)
    gaps = np.where(np.expand_dims(rank, tuple(a for a in range(x.ndim) if a != d)) == 0,
                    np.inf, above - s)
    out = np.empty_like(x)
    np.put_along_axis(out, order, gaps, axis=d)
    return out


def sort_hazard(x, axis, descending):
    """Ties: where two elements swap places the sorted values' gradient jumps."""
    return _gaps(x, axis[0])


def topk_hazard(x, k, axis):
    """Ties among the k largest and the next one (where the top k changes)."""
    return _gaps(x, axis[0], k)


def std_hazard(x, axis, correction, keepdims):
    """std is sqrt(var): singular where every element of a slice is equal."""
    return np_std(x, axis, correction, keepdims)


def norm_hazard(x, order, axis, keepdims):
    """The 2-norm (and a p-norm) is singular at 0; the 1-norm has kinks where an
    element is 0; the inf-norm where the largest two |x| tie, or at 0."""
    a = np.abs(np.asarray(x, dtype=float))
    if order == 1:
        return np.min(a, axis=axis, keepdims=keepdims)
    if not math.isinf(order):
        return np_norm(x, order, axis, keepdims)
    top = np.max(a, axis=axis, keepdims=keepdims)
    gap = top_two_gap(a, axis, keepdims)
    return top if gap is None else np.minimum(gap, top)


def einsum_shape(*args):
    return eq.shape(*args)


# --------------------------------------------------------------------------- one_hot
# one_hot(idx, n): an integer input's labels as rows of the identity, an exact constant
# of the formula (torch.nn.functional.one_hot gives int64, which float arithmetic
# promotes); the parser takes only an integer input or let as its operand (its domain
# "integer"). The labels must lie in [0, n), as PyTorch requires.

def one_hot_shape(idx, n):
    if n is None or n < 1:
        raise ShapeError(f"takes the number of classes n >= 1: one_hot(idx, n), got {n}")
    return tuple(idx) + (n,)


def np_one_hot(idx, n):
    # (a label outside [0, n), which PyTorch refuses, gives a row of zeros: sampling
    # evaluates the formula before it redraws labels outside their domain)
    idx = np.asarray(idx)
    labels = idx.astype(np.int64)
    if not np.all(labels == idx):
        raise ValueError(f"one_hot(idx, {n}) takes integer labels; declare idx with "
                         f'dtype = "int64" and domain = [0, {n}]')
    return (labels[..., None] == np.arange(n)).astype(np.int64)


def torch_one_hot(idx, n):
    return _torch().nn.functional.one_hot(idx.long(), n)


def sym_one_hot(idx, n):
    one, zero = sympy.Integer(1), sympy.Integer(0)
    idx = np.asarray(idx, dtype=object)
    out = np.empty(idx.shape + (n,), dtype=object)
    for at in np.ndindex(*idx.shape):
        for c in range(n):
            out[at + (c,)] = sympy.Piecewise((one, sympy.Eq(idx[at], c)), (zero, True))
    return out
