"""The structural rows' columns: shape rules, NumPy forwards (which the SymPy meaning
reuses on object arrays of SymPy scalars) and torch calls, for reshape, permute, x[...],
concat and the others of :mod:`.structure`.

Every row is an exact linear map with 0/1 coefficients: its forward moves, copies or
drops elements (pad also writes its constant). Parameters reach these functions
normalised by their ``Param`` (an ``ints`` value is an int or a tuple), as written
otherwise: a negative axis is read here, against the operand's dimensions.
"""

from __future__ import annotations

import math

import numpy as np

from ...base.shapes import ShapeError
from .. import keys
from ..columns import _torch, sympy


def axis_of(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` (possibly negative) as an axis of ``ndim`` dimensions."""
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{what} {axis} is out of range for a tensor of {ndim} "
                         f"dimension{'s' if ndim != 1 else ''}")
    return axis % ndim


def _tuple(v) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def objects(fn, params: int):
    """The SymPy meaning of a row whose NumPy forward ``fn`` only moves elements: ``fn``
    on object arrays of SymPy scalars (its last ``params`` arguments are parameters)."""
    def meaning(*args):
        cut = len(args) - params
        return fn(*[np.asarray(a, dtype=object) for a in args[:cut]], *args[cut:])

    meaning.__name__ = f"objects_{fn.__name__}"
    return meaning


# ------------------------------------------------------------------ reshape and views
def reshape_shape(x, shape):
    if shape is None:
        raise ShapeError("needs the new shape, e.g. reshape(x, [2, -1])")
    shape, size = _tuple(shape), math.prod(x)
    if sum(n == -1 for n in shape) > 1 or any(n < -1 for n in shape):
        raise ShapeError(f"to {list(shape)}: at most one size -1, the others >= 0")
    known = math.prod(n for n in shape if n != -1)
    if -1 in shape:
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape {list(x)} ({size} elements) to {list(shape)}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size:
        raise ShapeError(f"cannot reshape {list(x)} ({size} elements) to {list(shape)}")
    return shape


def np_reshape(x, shape):
    return np.reshape(x, reshape_shape(np.shape(x), shape))


def flatten_shape(x, start, end):
    s, e = axis_of(start, max(len(x), 1), "start"), axis_of(end, max(len(x), 1), "end")
    if not x:                 # torch: a 0-d tensor flattens to [1]
        return (1,)
    if s > e:
        raise ShapeError(f"start {start} comes after end {end}")
    return x[:s] + (math.prod(x[s:e + 1]),) + x[e + 1:]


def np_flatten(x, start, end):
    return np.reshape(x, flatten_shape(np.shape(x), start, end))


def squeeze_shape(x, axis):
    if axis is None:
        return tuple(n for n in x if n != 1)
    d = axis_of(axis, max(len(x), 1))
    if x and x[d] != 1:
        raise ShapeError(f"axis {axis} has size {x[d]}, not 1")
    return x[:d] + x[d + 1:]


def np_squeeze(x, axis):
    return np.reshape(x, squeeze_shape(np.shape(x), axis))


def torch_squeeze(x, axis):
    return x.squeeze() if axis is None else x.squeeze(axis)


def unsqueeze_shape(x, axis):
    if axis is None:
        raise ShapeError("needs the axis of the new dimension, e.g. unsqueeze(x, 0)")
    d = axis_of(axis, len(x) + 1)
    return x[:d] + (1,) + x[d:]


def np_unsqueeze(x, axis):
    """``x`` with a new axis of size 1, a view with PyTorch's strides (its stride is
    that of the axis after it times that axis's size, 1 element at the end)."""
    x = np.asarray(x)
    d = axis_of(axis, x.ndim + 1)
    stride = x.strides[d] * x.shape[d] if d < x.ndim else x.itemsize
    return np.lib.stride_tricks.as_strided(
        x, x.shape[:d] + (1,) + x.shape[d:], x.strides[:d] + (stride,) + x.strides[d:],
        writeable=False)


def permutation(axes, ndim: int) -> tuple[int, ...]:
    if axes is None:
        raise ShapeError("needs the order of the axes, e.g. permute(x, [1, 0])")
    axes = _tuple(axes)
    out = tuple(a % ndim for a in axes if -ndim <= a < ndim)
    if len(axes) != ndim or sorted(out) != list(range(ndim)):
        raise ShapeError(f"{list(axes)} is not an order of the {ndim} axes")
    return out


def permute_shape(x, axes):
    return tuple(x[d] for d in permutation(axes, len(x)))


def np_permute(x, axes):
    return np.transpose(x, permutation(axes, np.ndim(x)))


def transpose_shape(x, dim0=-2, dim1=-1):
    if len(x) < 2 and (dim0, dim1) == (-2, -1):
        raise ShapeError(f"transpose needs at least two dimensions, got shape {list(x)}")
    a, b = axis_of(dim0, len(x)), axis_of(dim1, len(x))
    out = list(x)
    out[a], out[b] = x[b], x[a]
    return tuple(out)


def np_transpose(x, dim0=-2, dim1=-1):
    return np.swapaxes(x, dim0, dim1)


def torch_transpose(x, dim0=-2, dim1=-1):
    return _torch().transpose(x, dim0, dim1)


def expand_shape(x, shape):
    if shape is None:
        raise ShapeError("needs the new shape, e.g. expand(x, [4, -1])")
    shape = _tuple(shape)
    lead = len(shape) - len(x)
    if lead < 0 or any(n == -1 for n in shape[:lead]) or any(n < -1 for n in shape):
        raise ShapeError(f"cannot expand {list(x)} to {list(shape)}")
    out = shape[:lead] + tuple(m if n == -1 else n for m, n in zip(x, shape[lead:]))
    if any(m not in (1, n) for m, n in zip(x, out[lead:])):
        raise ShapeError(f"cannot expand {list(x)} to {list(shape)}: a size other "
                         "than 1 must stay")
    return out


def np_expand(x, shape):
    return np.broadcast_to(x, expand_shape(np.shape(x), shape))


def torch_expand(x, shape):
    return x.expand(*_tuple(shape))


# ------------------------------------------------------------------ copies
def flip_shape(x, axis):
    return x


def np_flip(x, axis):
    # a fresh array, as torch.flip's (NumPy's flip is a view of negative strides)
    return np.array(np.flip(x, axis), order="C") if axis else np.array(x)


def roll_shape(x, shift, axis):
    if shift is None:
        raise ShapeError("needs the shift, e.g. roll(x, 1, axis=0)")
    if axis is None:
        if isinstance(shift, tuple):
            raise ShapeError("roll over several shifts needs as many axes")
        return x
    if len(_tuple(shift)) != len(_tuple(axis)):
        raise ShapeError("as many shifts as axes")
    for a in _tuple(axis):
        axis_of(a, len(x))
    return x


def np_roll(x, shift, axis):
    return np.roll(x, shift, axis)


def torch_roll(x, shift, axis):
    torch = _torch()
    return torch.roll(x, shift) if axis is None else torch.roll(x, shift, axis)


def widths(x, pad) -> tuple[tuple[int, int], ...]:
    """pad's widths: one (before, after) pair of sizes >= 0 per axis (NumPy's)."""
    pairs = pad if isinstance(pad, tuple) else ()
    if pad is None or not x or len(pairs) != len(x) or not all(isinstance(p, tuple) and len(p) == 2 and
                                       min(p) >= 0 for p in pairs):
        raise ShapeError(f"widths are one [before, after] pair of sizes >= 0 per "
                         f"axis ({len(x)} here), e.g. [[0, 0], [1, 2]]")
    return pairs


def pad_shape(x, pad, value):
    return tuple(n + a + b for n, (a, b) in zip(x, widths(x, pad)))


def np_pad(x, pad, value):
    return np.pad(x, widths(np.shape(x), pad), constant_values=value)


def sym_pad(x, pad, value):
    x = np.asarray(x, dtype=object)
    return np.pad(x, widths(x.shape, pad), constant_values=sympy.Rational(value))


def torch_pad(x, pad, value):
    flat = [w for pair in reversed(pad) for w in pair]   # torch: the last axis first
    return _torch().nn.functional.pad(x, flat, value=value)


def triangle_shape(x, k):
    if len(x) < 2:
        raise ShapeError(f"needs at least two dimensions, got shape {list(x)}")
    return x


# ------------------------------------------------------------------ x[key]
def index_shape(x, key):
    return keys.shape(x, key)


def np_index(x, key):
    """``x[key]``: the views PyTorch records, in order (flips first where a step is
    negative), each with PyTorch's strides (:func:`.keys.plan`)."""
    x = np.asarray(x)
    axes, key = keys.positive(key, x.shape)
    if axes:
        x = np_flip(x, axes)
    for step in keys.plan(key, x.shape):
        if step[0] == "unsqueeze":
            x = np_unsqueeze(x, step[1])
        elif step[0] != "alias":
            _, d, e = step
            x = x[(slice(None),) * d + (keys.numpy_key(e),)]
    return x


def index_name(x, key) -> str:
    """PyTorch's name for the last view ``x[key]`` records (the result's grad_fn)."""
    x = np.shape(getattr(x, "data", x))
    axes, key = keys.positive(key, x)
    step = keys.plan(key, x)[-1][0]
    return {"select": "SelectBackward0", "slice": "SliceBackward0",
            "unsqueeze": "UnsqueezeBackward0", "alias": "AliasBackward0"}[step]


def torch_index(x, key):
    # a negative step as a user writes it in torch (which slices by positive steps only)
    axes, key = keys.positive(key, tuple(x.shape))
    return (_torch().flip(x, axes) if axes else x)[keys.numpy_key(key)]


# ------------------------------------------------------------------ combining
def _same(shapes, axis: int):
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(m != n for d, (m, n) in enumerate(zip(first, s))
                                       if d != axis):
            raise ShapeError("shapes " + ", ".join(str(list(t)) for t in shapes)
                             + " do not fit")


def concat_shape(*args):
    *shapes, axis = args
    if not shapes[0]:
        raise ShapeError("needs tensors of at least one dimension")
    d = axis_of(axis, len(shapes[0]))
    _same(shapes, d)
    return shapes[0][:d] + (sum(s[d] for s in shapes),) + shapes[0][d + 1:]


def np_concat(*args):
    *arrays, axis = args
    return np.concatenate(arrays, axis=axis)


def torch_concat(*args):
    *tensors, axis = args
    return _torch().cat(tensors, dim=axis)


def stack_shape(*args):
    *shapes, axis = args
    d = axis_of(axis, len(shapes[0]) + 1)
    _same(shapes, -1)
    return shapes[0][:d] + (len(shapes),) + shapes[0][d:]


def np_stack(*args):
    *arrays, axis = args
    return np.stack(arrays, axis=axis)


def torch_stack(*args):
    *tensors, axis = args
    return _torch().stack(tensors, dim=axis)


def pieces(x, sizes, axis, piece) -> tuple[int, int, int]:
    """split's (axis, start, stop) of the piece selected."""
    sizes, d = _tuple(sizes if sizes is not None else ()), axis_of(axis, max(len(x), 1))
    if not x or not sizes or min(sizes) < 0 or sum(sizes) != x[d]:
        raise ShapeError(f"sizes {list(sizes)} must add up to the size of axis "
                         f"{axis}" + (f", {x[d]}" if x else ""))
    (k,) = keys.entries(piece)
    if not isinstance(k, int) or not -len(sizes) <= k < len(sizes):
        raise ShapeError(f"{len(sizes)} pieces have no piece {k}")
    k %= len(sizes)
    start = sum(sizes[:k])
    return d, start, start + sizes[k]


def split_shape(x, sizes, axis, piece):
    d, start, stop = pieces(x, sizes, axis, piece)
    return x[:d] + (stop - start,) + x[d + 1:]


def np_split(x, sizes, axis, piece):
    d, start, stop = pieces(np.shape(x), sizes, axis, piece)
    return np.asarray(x)[(slice(None),) * d + (slice(start, stop),)]


def torch_split(x, sizes, axis, piece):
    (k,) = keys.entries(piece)
    return _torch().split(x, list(_tuple(sizes)), dim=axis)[k]

