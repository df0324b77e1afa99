"""The tensor column of the composite rows: their exact adjoints at tensor level, written
over the builder of tensor expressions (:class:`gradcheck.reference.texpr.Builder`), as
:mod:`.tensor` writes the reductions' and matmul's. Each is checked against SymPy's
element-by-element derivative (tests/test_tensor_reference.py), the linear ones (cumsum,
sort, topk, einsum) also by the adjoint identity.

- softmax: ȳ ↦ y ⊙ (ȳ − Σ y ⊙ ȳ); log_softmax: ȳ ↦ ȳ − softmax ⊙ Σ ȳ;
- var: ȳ ↦ 2 (x − mean x) ȳ / (n − correction); std: var's over 2 std;
- norm: ȳ x / ‖x‖ (ord 2), ȳ sign(x) (ord 1), the largest |x|'s sign (inf), and
  ȳ sign(x) |x|^(p−1) / ‖x‖^(p−1) for a p-norm;
- cumsum: the reversed cumulative sum; cumprod: Σ_{i≥j} ȳ_i Π_{k≤i, k≠j} x_k;
- sort, topk: each value's cotangent back where it came from;
- einsum: the einsum of ȳ with the other operands, over the operand's labels.

Double backward (:mod:`gradcheck.reference.second`) differentiates these adjoints once
more. Those written with other rows (softmax's sums and products, cumsum's flips and
cumsum, einsum) need nothing more: each row has its own adjoint. A NumPy function applied
with ``b.apply`` carries its own, as the convolutions' do
(:mod:`.conv_tensor`): ``adjoint(b, G, *args, shape=, **params)`` yields (argument, its
cotangent) from the cotangent G of the function's result, and ``linear_in`` names the
arguments whose magnitudes bound its terms (the others only pick):

- :func:`unsort` is linear in ȳ, x only orders it: its adjoint is the sort of G by x's
  order (:func:`resort`), and x gets nothing (a selection is constant where it picks);
- :func:`cumprod_adjoint` is linear in ȳ (adjoint: cumprod's Jacobian-vector product,
  :func:`cumprod_jvp`) and a polynomial in x (adjoint: :func:`cumprod_second`, the second
  derivatives Σ ȳ_i G_j ∂²y_i/∂x_j∂x_m), each one running recursion along the axis: no
  division, exact at zeros, linear in the length.
"""

from __future__ import annotations

import math

import numpy as np

from . import einsum as eq
from .columns import order_along
from ..row import TensorRule
from ..tensor import _kept
from ..vjps import others_product


def _along(b, g, s, shape):
    # g − broadcast(s): s summed with its axis kept
    return b.add([g, b.scale(b.broadcast(s, shape), -1.0)])


def softmax_tensor(b, g, ans, x, axis):
    s = b.row("sum", b.mul(ans, g), axis=axis, keepdims=True)
    return b.mul(ans, _along(b, g, s, x.shape))


def log_softmax_tensor(b, g, ans, x, axis):
    s = b.row("sum", g, axis=axis, keepdims=True)
    return _along(b, g, b.mul(b.row("exp", ans), b.broadcast(s, x.shape)), x.shape)


def _centred(b, x, axis):
    return b.row("sub", x, b.row("mean", x, axis=axis, keepdims=True))


def _divisor(x, axis, correction):
    return math.prod(x.shape[d] for d in axis) - correction


def var_tensor(b, g, ans, x, axis, correction, keepdims):
    gk = _kept(b, g, x.shape, axis, keepdims)
    return b.scale(b.mul(gk, _centred(b, x, axis)), 2.0 / _divisor(x, axis, correction))


def std_tensor(b, g, ans, x, axis, correction, keepdims):
    gk = _kept(b, g, x.shape, axis, keepdims)
    t = _kept(b, ans, x.shape, axis, keepdims)
    return b.scale(b.row("div", b.mul(gk, _centred(b, x, axis)), t),
                   1.0 / _divisor(x, axis, correction))


def norm_tensor(b, g, ans, x, order, axis, keepdims):
    gk = _kept(b, g, x.shape, axis, keepdims)
    if order == 2:
        return b.row("div", b.mul(gk, x), _kept(b, ans, x.shape, axis, keepdims))
    sign = b.row("sign", x)
    if order == 1:
        return b.mul(gk, sign)
    if math.isinf(order):
        picked = b.select("norm", x, ord=order, axis=axis, keepdims=keepdims)
        return b.mul(b.mul(gk, sign), picked)
    t = _kept(b, ans, x.shape, axis, keepdims)
    ratio = b.row("div", b.row("abs", x), t)
    return b.mul(b.mul(gk, sign), b.row("pow", ratio, b.const(order - 1)))


def cumsum_tensor(b, g, ans, x, axis):
    # the reversed cumulative sum: rows, so that double backward takes each row's own
    # adjoint (flip's is flip, cumsum's this)
    d = axis[0]
    flipped = b.row("flip", g, axis=d)
    return b.row("flip", b.row("cumsum", flipped, axis=d), axis=d)


def cumprod_adjoint(g, x, shape, axis):
    """Σ_{i≥j} ḡ_i Π_{k≤i, k≠j} x_k along ``axis``: for each prefix, ḡ_i times the
    product of its other elements (exact where elements are 0)."""
    gm, xm = np.moveaxis(g, axis, -1), np.moveaxis(np.broadcast_to(x, shape), axis, -1)
    out = np.zeros(xm.shape)
    for i in range(xm.shape[-1]):
        out[..., :i + 1] += gm[..., i:i + 1] * others_product(xm[..., :i + 1], (xm.ndim - 1,))
    return np.moveaxis(out, -1, axis)


def cumprod_tensor(b, g, ans, x, axis):
    return b.apply(cumprod_adjoint, g, x, shape=x.shape, axis=axis[0])


def _along_last(a, shape, axis):
    """``a`` broadcast to ``shape`` as float64 with ``axis`` moved last."""
    return np.moveaxis(np.broadcast_to(np.asarray(a, dtype=float), shape), axis, -1)


def _prefix_products(xm):
    """L_k = Π_{j<k} x_j along the last axis (an empty product is 1)."""
    ones = np.ones(xm.shape[:-1] + (1,))
    return np.cumprod(np.concatenate([ones, xm[..., :-1]], axis=-1), axis=-1)


def cumprod_jvp(G, x, shape, axis):
    """cumprod's Jacobian along G, F_i = Σ_{j≤i} G_j Π_{k≤i, k≠j} x_k (the adjoint of
    :func:`cumprod_adjoint` in its cotangent): F_i = F_{i-1} x_i + G_i L_i, with L_i the
    product of the x before i."""
    gm, xm = _along_last(G, shape, axis), _along_last(x, shape, axis)
    left = _prefix_products(xm)
    out = np.zeros(xm.shape)
    out[..., 0] = gm[..., 0]
    for i in range(1, xm.shape[-1]):
        out[..., i] = out[..., i - 1] * xm[..., i] + gm[..., i] * left[..., i]
    return np.moveaxis(out, -1, axis)


def cumprod_second(g, G, x, shape, axis):
    """Σ_i g_i Σ_j G_j ∂²y_i/∂x_j∂x_m of y = cumprod(x), for each m (the adjoint of
    :func:`cumprod_adjoint` in x): Σ_{i≥m} g_i Σ_{j≤i, j≠m} G_j Π_{k≤i, k∉{j,m}} x_k.
    Split at j < m and j > m it is A_m C_m + L_m E_m, each one running sum along the axis:
    L_m = Π_{k<m} x_k; A_m = Σ_{j<m} G_j Π_{k<m, k≠j} x_k (A_{m+1} = A_m x_m + G_m L_m);
    C_m = Σ_{i≥m} g_i Π_{m<k≤i} x_k (C_m = g_m + x_{m+1} C_{m+1}); E_m = Σ_{j>m} G_j
    Π_{m<k<j} x_k C_j (E_m = G_{m+1} C_{m+1} + x_{m+1} E_{m+1}). No division: exact at
    zeros."""
    gm, Gm, xm = (_along_last(a, shape, axis) for a in (g, G, x))
    n = xm.shape[-1]
    left = _prefix_products(xm)
    a, c, e = np.zeros(xm.shape), np.zeros(xm.shape), np.zeros(xm.shape)
    for m in range(1, n):
        a[..., m] = a[..., m - 1] * xm[..., m - 1] + Gm[..., m - 1] * left[..., m - 1]
    c[..., n - 1] = gm[..., n - 1]
    for m in range(n - 2, -1, -1):
        c[..., m] = gm[..., m] + xm[..., m + 1] * c[..., m + 1]
        e[..., m] = Gm[..., m + 1] * c[..., m + 1] + xm[..., m + 1] * e[..., m + 1]
    return np.moveaxis(a * c + left * e, -1, axis)


def _cumprod_adjoint_adjoint(b, G, g, x, shape, axis):
    yield g, b.apply(cumprod_jvp, G, x, shape=g.shape, axis=axis)
    yield x, b.apply(cumprod_second, g, G, x, shape=x.shape, axis=axis)


def unsort(g, x, shape, axis, descending, k):
    """``g`` (the first ``k`` sorted values' cotangents) written back at the positions
    of ``x`` the sort took them from; zeros elsewhere."""
    order = np.take(order_along(x, axis, descending), range(k), axis=axis)
    out = np.zeros(shape)
    np.put_along_axis(out, order, g, axis=axis)
    return out


def resort(G, x, shape, axis, descending, k):
    """``G`` (of ``x``'s shape) taken in the order the sort of ``x`` takes its first
    ``k`` values: the adjoint of :func:`unsort` in its cotangent (the sort's own forward,
    with x's permutation)."""
    order = np.take(order_along(x, axis, descending), range(k), axis=axis)
    return np.take_along_axis(np.broadcast_to(np.asarray(G, dtype=float), np.shape(x)),
                              order, axis=axis)


def _unsort_adjoint(b, G, g, x, shape, **p):
    # linear in g; x only orders it (constant where the order is)
    yield g, b.apply(resort, G, x, shape=g.shape, **p)


def _resort_adjoint(b, G, g, x, shape, **p):
    yield g, b.apply(unsort, G, x, shape=x.shape, **p)


# the adjoints double backward takes (see the module docstring), and the arguments each
# function is linear in
for _fn, _adjoint, _linear in ((cumprod_adjoint, _cumprod_adjoint_adjoint, (0, 1)),
                               (cumprod_jvp, None, (0, 1)),
                               (cumprod_second, None, (0, 1, 2)),
                               (unsort, _unsort_adjoint, (0,)),
                               (resort, _resort_adjoint, (0,))):
    _fn.adjoint, _fn.linear_in = _adjoint, _linear
del _fn, _adjoint, _linear


def sort_tensor(b, g, ans, x, axis, descending):
    d = axis[0]
    return b.apply(unsort, g, x, shape=x.shape, axis=d, descending=descending,
                   k=x.shape[d])


def topk_tensor(b, g, ans, x, k, axis):
    return b.apply(unsort, g, x, shape=x.shape, axis=axis[0], descending=True, k=k)


def einsum_tensor(k: int, b, g, ans, *args):
    """Operand ``k``'s adjoint (``k`` first, as a variadic row's are):
    einsum(ḡ, other operands) over its labels, broadcast along the labels only it has."""
    *operands, subscripts = args
    shapes = [a.shape for a in operands]
    equation, others, missing = eq.adjoint(subscripts, shapes, k)
    out = b.row("einsum", g, *[operands[j] for j in others], subscripts=equation)
    if missing:
        kept = list(out.shape)
        for d in missing:
            kept.insert(d, 1)
        out = b.broadcast(b.reshape(out, tuple(kept)), shapes[k])
    return out


def tensor_rule(*vjps) -> TensorRule:
    return TensorRule(vjps)
