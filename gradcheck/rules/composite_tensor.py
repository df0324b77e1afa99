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
"""

from __future__ import annotations

import math

import numpy as np

from . import einsum as eq
from .composite_columns import order_along
from .row import TensorRule
from .tensor import _kept
from .vjps import others_product


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


def flip(a, shape, axis):
    """``a`` reversed along ``axis`` (one axis)."""
    return np.flip(a, axis)


def cumsum_tensor(b, g, ans, x, axis):
    d = axis[0]
    flipped = b.apply(flip, g, shape=g.shape, axis=d)
    return b.apply(flip, b.row("cumsum", flipped, axis=d), shape=g.shape, axis=d)


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


def unsort(g, x, shape, axis, descending, k):
    """``g`` (the first ``k`` sorted values' cotangents) written back at the positions
    of ``x`` the sort took them from; zeros elsewhere."""
    order = np.take(order_along(x, axis, descending), range(k), axis=axis)
    out = np.zeros(shape)
    np.put_along_axis(out, order, g, axis=axis)
    return out


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
