"""The tensor column of the convolution and pooling rows: their exact adjoints, as named
NumPy functions of tensors the tensor-level reference evaluates in float64 (through the
builder's ``apply``) and prints by name (``x.grad = conv_input_grad(ḡ, w, padding=1)``).

Each adjoint is the transpose of the forward's own structure: a forward reads the
padded input through its windows (:func:`.conv_columns.windows`), so its adjoint puts
each window's cotangent back where the window read it (:func:`.conv_columns.
scatter_windows`) and drops the padding. The adjoint identity ⟨L x, y⟩ = ⟨x, Lᵀ y⟩ and
the element-expanded SymPy reference check every one of them in the tests.
"""

from __future__ import annotations

import numpy as np

from .columns import (batched, conv_geometry, crop, letters, max_pool2d_pick, pad, pool_windows,
                      scatter_windows, unbatched, windows)
from .vjps import avg_pool2d_vjp, max_pool2d_vjp
from ..row import TensorRule


def conv_input_grad(g, w, shape=(), stride=1, padding=0, dilation=1, groups=1):
    """The adjoint of a convolution in its input (of ``shape``): x̄[n, c, j] = Σ ḡ[n, o, i]
    · w[o, c, k] over the (o, i, k) with i·stride + k·dilation − padding = j: each
    window's share ḡ·w scattered back, the padding dropped."""
    kernel, stride, padding, dilation = conv_geometry(np.shape(w), stride, padding, dilation)
    d = len(kernel)
    gb, had = batched(g, d)
    n, c_out, outs = gb.shape[0], gb.shape[1], gb.shape[2:]
    c = shape[-d - 1]
    o, k = letters(d)
    shares = np.einsum(f"ngp{o},gpc{k}->ngc{o}{k}",
                       gb.reshape((n, groups, c_out // groups) + outs),
                       np.reshape(w, (groups, c_out // groups, c // groups) + kernel),
                       optimize=True).reshape((n, c) + outs + kernel)
    padded = (n, c) + tuple(m + 2 * p for m, p in zip(shape[-d:], padding))
    return unbatched(crop(scatter_windows(shares, padded, kernel, stride, dilation), padding),
                     had)


def conv_weight_grad(g, x, shape=(), stride=1, padding=0, dilation=1, groups=1):
    """The adjoint of a convolution in its weight (of ``shape``): w̄[o, c, k] =
    Σ_{n, i} ḡ[n, o, i] · x_pad[n, g·C_g + c, i·stride + k·dilation], the cotangent
    contracted with the input's windows."""
    kernel, stride, padding, dilation = conv_geometry(shape, stride, padding, dilation)
    d = len(kernel)
    gb, xb = batched(g, d)[0], batched(x, d)[0]
    n, c_out, outs = gb.shape[0], gb.shape[1], gb.shape[2:]
    c = xb.shape[1]
    win = windows(pad(xb, padding), kernel, stride, dilation)
    o, k = letters(d)
    grad = np.einsum(f"ngp{o},ngc{o}{k}->gpc{k}",
                     gb.reshape((n, groups, c_out // groups) + outs),
                     win.reshape((n, groups, c // groups) + outs + kernel), optimize=True)
    return grad.reshape(shape)


def avg_pool2d_grad(g, shape=(), kernel_size=None, stride=None):
    """The adjoint of avg_pool2d in its input (of ``shape``): each output's cotangent
    spread evenly over its window."""
    return avg_pool2d_vjp(g, None, np.broadcast_to(0.0, shape), kernel_size, stride)


def max_pool2d_grad(g, x, shape=(), kernel_size=None, stride=None):
    """max_pool2d's cotangent: each output's to its window's selected element (exact
    wherever the pick is locally constant, which sampling keeps to)."""
    return max_pool2d_vjp(g, None, x, kernel_size, stride)


def max_pool2d_gather(u, x, shape=(), kernel_size=None, stride=None):
    """Each window's element of ``u`` (x's shape) at the place max_pool2d picks in
    ``x``: the adjoint of :func:`max_pool2d_grad` in its cotangent."""
    win, had = pool_windows(u, kernel_size, stride)
    hot = batched(max_pool2d_pick(x, kernel_size, stride), 4)[0]
    return unbatched(np.sum(win * hot, axis=(-2, -1)), had)


# Double backward (gradcheck.reference.second) differentiates the gradients' own
# program: each function above has an ``adjoint(b, G, *args, shape=, **params)`` that
# yields (argument, its cotangent) from the cotangent G of its result, and
# ``linear_in``: the arguments it is linear in, whose magnitudes bound its terms' (the
# others, max pooling's x, are taken by value: they only pick).

def _conv_row(w_shape) -> str:
    return f"conv{len(w_shape) - 2}d"


def _input_grad_adjoint(b, G, g, w, shape, **p):
    # x̄ = L(ḡ, w) is bilinear: ⟨G, L(ḡ, w)⟩ = ⟨conv(G, w), ḡ⟩ = ⟨conv_weight_grad(ḡ, G), w⟩
    yield g, b.row(_conv_row(w.shape), G, w, **p)
    yield w, b.apply(conv_weight_grad, g, G, shape=w.shape, **p)


def _weight_grad_adjoint(b, G, g, x, shape, **p):
    # w̄ = M(ḡ, x): ⟨G, M(ḡ, x)⟩ = ⟨conv(x, G), ḡ⟩ = ⟨conv_input_grad(ḡ, G), x⟩
    yield g, b.row(_conv_row(shape), x, G, **p)
    yield x, b.apply(conv_input_grad, g, G, shape=x.shape, **p)


def _avg_grad_adjoint(b, G, g, shape, **p):
    yield g, b.row("avg_pool2d", G, **p)          # the adjoint's adjoint: the forward


def _max_grad_adjoint(b, G, g, x, shape, **p):
    # linear in ḡ; x only picks (constant where the pick is)
    yield g, b.apply(max_pool2d_gather, G, x, shape=g.shape, **p)


for _fn, _adjoint, _linear in ((conv_input_grad, _input_grad_adjoint, (0, 1)),
                               (conv_weight_grad, _weight_grad_adjoint, (0, 1)),
                               (avg_pool2d_grad, _avg_grad_adjoint, (0,)),
                               (max_pool2d_grad, _max_grad_adjoint, (0,)),
                               (max_pool2d_gather, None, (0,))):
    _fn.adjoint, _fn.linear_in = _adjoint, _linear
del _fn, _adjoint, _linear


# The tensor column's vjps (see gradcheck.rules.row.TensorRule): ``b.apply(fn, *args,
# shape=s, **params)`` is the tensor fn(*args, shape=s, **params) of shape s.

def conv_x(b, g, ans, x, w, stride, padding, dilation, groups):
    return b.apply(conv_input_grad, g, w, shape=x.shape, stride=stride, padding=padding,
                   dilation=dilation, groups=groups)


def conv_w(b, g, ans, x, w, stride, padding, dilation, groups):
    return b.apply(conv_weight_grad, g, x, shape=w.shape, stride=stride, padding=padding,
                   dilation=dilation, groups=groups)


def avg_pool_x(b, g, ans, x, kernel_size, stride):
    return b.apply(avg_pool2d_grad, g, shape=x.shape, kernel_size=kernel_size,
                   stride=stride)


def max_pool_x(b, g, ans, x, kernel_size, stride):
    return b.apply(max_pool2d_grad, g, x, shape=x.shape, kernel_size=kernel_size,
                   stride=stride)


CONV = TensorRule((conv_x, conv_w))
AVG_POOL = TensorRule((avg_pool_x,))
MAX_POOL = TensorRule((max_pool_x,))
