"""The views, expands and copies PyTorch records without arithmetic, on engine tensors:
one place for the layout facts they depend on (torch's strides, contiguity and
computeStride), used by matmul's reshapes and by the structural rows' ops.
"""

from __future__ import annotations

import math

import numpy as np

from ..base.arrays import unbroadcast
from .graph import grad_mode, record
from .tensor import Tensor


def _derive(x, data, name: str, vjp):
    """``data``, computed from ``x`` without arithmetic (a view, an expand or a copy),
    recorded as PyTorch's node ``name`` with the one VJP ``vjp(g, ans, x)``. Views and
    copies save no tensors, so a second backward through them needs no retain_graph."""
    if not isinstance(x, Tensor):
        return data
    out = Tensor(data)
    if x._requires_grad and grad_mode.enabled:
        record(out, name, (x,), (x.data,), (vjp,), saves=False)
    return out


def _data(x) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)


def _strides(a: np.ndarray) -> tuple[int, ...]:
    """Strides in elements, as torch counts them."""
    return tuple(s // a.itemsize for s in a.strides)


def _reshape_grad(g, ans, a):
    return np.reshape(g, np.shape(a))


def _view(x, shape, name: str, vjp=_reshape_grad):
    """A reshape of contiguous data recorded as the view node ``name`` (it moves no
    values): torch's unsqueeze, squeeze and _unsafe_view."""
    return _derive(x, np.reshape(_data(x), shape), name, vjp)


def _view_strides(shape, strides, new) -> tuple[int, ...] | None:
    """The strides of a view of ``shape``/``strides`` as ``new``, or None where no view
    exists and reshape must copy: torch's computeStride (aten/src/ATen/TensorUtils.cpp).
    Walking the old dimensions from the last, a "chunk" is a run whose strides nest
    (stride[d-1] == size[d] * stride[d]; dimensions of size 1 never break a run); a
    view exists iff the new dimensions split into consecutive groups, each of exactly
    one chunk's element count."""
    if not shape:
        return (1,) * len(new)
    if math.prod(shape) == 0:   # any strides will do; torch's are those of a fresh tensor
        return _contiguous_strides(new)
    out = [0] * len(new)
    view_d = len(new) - 1
    base, tensor_numel, view_numel = strides[-1], 1, 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None


def _contiguous_strides(shape) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n if n else 1   # (the reduction max shadows the builtin here)
    return tuple(reversed(out))


def _is_contiguous(a: np.ndarray) -> bool:
    """torch's is_contiguous: row-major strides, ignoring dimensions of size 1."""
    if a.size == 0:
        return True
    expected = _contiguous_strides(a.shape)
    return all(n == 1 or s == e for n, s, e in zip(a.shape, _strides(a), expected))


def _clone(x):
    """torch's clone(memory_format=contiguous): a row-major copy (CloneBackward0)."""
    return _derive(x, np.array(_data(x), order="C"), "CloneBackward0", _grad_through)


def _grad_through(g, ans, a):
    return g


def _contiguous(x):
    """torch's Tensor.contiguous(): the tensor itself when contiguous, else a clone."""
    return x if _is_contiguous(_data(x)) else _clone(x)


def _reshape(x, shape, vjp=_reshape_grad):
    """torch's reshape (reshape_symint in aten/src/ATen/native/TensorShape.cpp): a view
    of a contiguous tensor (ViewBackward0); else an alias with the strides computeStride
    finds (ReshapeAliasBackward0); else a contiguous clone viewed as ``shape``
    (CloneBackward0, then UnsafeViewBackward0). ``vjp``: the view's (the reshape row's
    own, where the row is what the user wrote)."""
    a = _data(x)
    if _is_contiguous(a):
        return _view(x, shape, "ViewBackward0", vjp)
    strides = _view_strides(a.shape, _strides(a), tuple(shape))
    if strides is None:
        return _view(_clone(x), shape, "UnsafeViewBackward0", vjp)
    view = np.lib.stride_tricks.as_strided(a, shape, [s * a.itemsize for s in strides])
    return _derive(x, view, "ReshapeAliasBackward0", vjp)


def _expand(x, shape):
    """torch's expand (ExpandBackward0, recorded even when nothing is expanded): the
    expanded axes get stride 0; the gradient is summed back over them."""
    return _derive(x, np.broadcast_to(_data(x), shape), "ExpandBackward0",
                   lambda g, ans, a: unbroadcast(g, np.shape(a)))


def _squeeze(x, dim: int):
    """torch's squeeze(dim) (SqueezeBackward1)."""
    return _derive(x, np.squeeze(_data(x), dim), "SqueezeBackward1", _reshape_grad)
