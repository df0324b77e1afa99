"""The structural rows' tensor column: the exact adjoint Lᵀ of each linear map, written
over the tensor-expression builder ``b`` (:class:`gradcheck.reference.texpr.Builder`)
with other rows and the builder's own steps: a reshape back, the inverse permutation,
the sum over expanded axes (``sum_to``), the slice that undoes a pad or a concat, and
``embed`` (ḡ written into zeros where ``x[key]`` took its elements). Each passes the
adjoint identity ⟨L x, y⟩ = ⟨x, Lᵀ y⟩ in the tests."""

from __future__ import annotations

import numpy as np

from ..keys import Slice
from .columns import axis_of, permutation, pieces, widths


def reshape_vjp(b, g, ans, x, *params):
    return b.reshape(g, x.shape)


def permute_vjp(b, g, ans, x, axes):
    inverse = tuple(int(d) for d in np.argsort(permutation(axes, len(x.shape))))
    return b.row("permute", g, axes=inverse)


def transpose_vjp(b, g, ans, x, dim0=-2, dim1=-1):
    return b.row("transpose", g, dim0=dim0, dim1=dim1)


def expand_vjp(b, g, ans, x, shape):
    return b.sum_to(g, x.shape)


def flip_vjp(b, g, ans, x, axis):
    return b.row("flip", g, axis=axis)


def roll_vjp(b, g, ans, x, shift, axis):
    back = tuple(-s for s in shift) if isinstance(shift, tuple) else -shift
    return b.row("roll", g, shift=back, axis=axis)


def pad_vjp(b, g, ans, x, pad, value):
    key = tuple(Slice(a, a + n) for n, (a, _) in zip(x.shape, widths(x.shape, pad)))
    return b.row("index", g, key=key)


def tril_vjp(b, g, ans, x, k):
    return b.row("tril", g, k=k)


def triu_vjp(b, g, ans, x, k):
    return b.row("triu", g, k=k)


def index_vjp(b, g, ans, x, key):
    return b.embed(g, x.shape, key)


def concat_vjp(k, b, g, ans, *args):
    *xs, axis = args
    d = axis_of(axis, len(xs[0].shape))
    start = sum(t.shape[d] for t in xs[:k])
    key = (Slice(),) * d + (Slice(start, start + xs[k].shape[d]),)
    return b.row("index", g, key=key)


def stack_vjp(k, b, g, ans, *args):
    *xs, axis = args
    return b.row("index", g, key=(Slice(),) * axis_of(axis, len(xs[0].shape) + 1) + (k,))


def split_vjp(b, g, ans, x, sizes, axis, piece):
    d, start, stop = pieces(x.shape, sizes, axis, piece)
    pad = tuple((start, x.shape[d] - stop) if i == d else (0, 0)
                for i in range(len(x.shape)))
    return b.row("pad", g, widths=pad, value=0.0)
