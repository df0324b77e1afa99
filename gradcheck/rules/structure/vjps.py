"""The structural rows' engine column: each VJP is the transpose Lᵀ of the row's linear
map L in NumPy (PyTorch's backward formulas: a reshape back, the inverse permutation,
a sum over expanded axes, zeros with ḡ written where the elements came from), and the
choosers of PyTorch's grad_fn names."""

from __future__ import annotations

import numpy as np

from ...base.arrays import unbroadcast
from .. import keys
from .columns import axis_of, np_roll, permutation, pieces, widths


def _like(g, x):
    return np.reshape(g, np.shape(x))


def reshape_vjp(g, ans, x, *params):
    """reshape, flatten, squeeze, unsqueeze: the same elements in another shape."""
    return _like(g, x)


def permute_vjp(g, ans, x, axes):
    return np.transpose(g, np.argsort(permutation(axes, np.ndim(x))))


def transpose_vjp(g, ans, x, dim0=-2, dim1=-1):
    return np.swapaxes(g, dim0, dim1)     # a swap is its own inverse


def expand_vjp(g, ans, x, shape):
    return unbroadcast(g, np.shape(x))    # expanded copies sum back


def flip_vjp(g, ans, x, axis):
    return np.flip(g, axis)


def roll_vjp(g, ans, x, shift, axis):
    back = tuple(-s for s in shift) if isinstance(shift, tuple) else -shift
    return np_roll(g, back, axis)


def pad_vjp(g, ans, x, pad, value):
    return np.asarray(g)[tuple(slice(a, a + n) for n, (a, _) in
                               zip(np.shape(x), widths(np.shape(x), pad)))]


def tril_vjp(g, ans, x, k):
    return np.tril(g, k)                  # a mask: its own transpose


def triu_vjp(g, ans, x, k):
    return np.triu(g, k)


def index_vjp(g, ans, x, key):
    """Zeros with ḡ where x[key] took its elements (basic indexing takes each once)."""
    out = np.zeros(np.shape(x), dtype=np.result_type(g, np.float32))
    out[keys.numpy_key(key)] = g
    return out


def concat_vjp(k, g, ans, *args):
    *arrays, axis = args
    d = axis_of(axis, np.ndim(arrays[0]))
    start = sum(np.shape(a)[d] for a in arrays[:k])
    return np.asarray(g)[(slice(None),) * d + (slice(start, start + np.shape(arrays[k])[d]),)]


def stack_vjp(k, g, ans, *args):
    *arrays, axis = args
    return np.take(g, k, axis=axis_of(axis, np.ndim(arrays[0]) + 1))


def split_vjp(g, ans, x, sizes, axis, piece):
    d, start, stop = pieces(np.shape(x), sizes, axis, piece)
    out = np.zeros(np.shape(x), dtype=np.result_type(g, np.float32))
    out[(slice(None),) * d + (slice(start, stop),)] = g
    return out


def squeeze_name(x, axis):
    # torch.squeeze(x) is SqueezeBackward0, torch.squeeze(x, dim) SqueezeBackward1
    return "SqueezeBackward0" if axis is None else "SqueezeBackward1"

