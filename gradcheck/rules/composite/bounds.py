"""The rounding model's bounds for the composite rows (:mod:`gradcheck.bounds.model`): a row
that mixes elements in a way the generic model cannot see through gets its own first-order
bound, per element, of its forward and of each VJP. A row's ``rounding`` column holds it
(a :class:`Bound` instead of a number ρ).

Why: the generic model propagates an argument's error E(x) through |∂f/∂x| read off the
VJP with ḡ = 1 (right for an elementwise row, and for a reduction, where each element
feeds one output), and bounds a VJP's sensitivity by probing its inputs in one signed
direction. Neither holds for softmax (its VJP with ḡ = 1 is 0; Σ y ⊙ ḡ cancels under a
probe), for cumsum (x_j feeds every y_i, i ≥ j) or sort (a permutation). So each row
here states |J|·E(x) (the forward's propagation), |Jᵀ|·E(ḡ) and |∂c/∂(x, y)|·E (the
VJP's), and its own rounding, from its formula:

- u is the dtype's unit roundoff, ua the accumulator's (float32's at most: PyTorch's CPU
  kernels reduce half precision in float32); sums and contractions of n terms err by
  γ(n)·ua·Σ|terms| (:func:`gradcheck.bounds.summation.accumulation`, blocked pairwise), a
  sequential scan (cumsum, cumprod) by i·ua at its i-th element; elementwise steps of a
  backward formula by u each (autograd rounds every step to the dtype).
- softmax y = exp(d)/Σexp(d), d = x − max x: |J|e ≤ y ⊙ (e + Σ y e) (|J_ij| =
  y_i|δ_ij − y_j|); exp(d) errs by (|d| + 2)·ua relative, the sum adds γ(n).
- var: |J|e = Σ 2|d|e/(n − c) exactly (Σ d = 0); its own rounding γ(n)·ua·(var +
  2‖x‖‖d‖/(n − c)), the second term Welford's (Chan, Golub, LeVeque) for a mean far
  from 0. std = sqrt(var) halves var's relative error.
- einsum: multilinear, so |J|e is the einsum with one operand's error and the others'
  magnitudes; its own rounding 2·γ(K)·ua·einsum(|a|, |b|), K the terms summed (PyTorch
  sums labels one operand has alone first, then contracts: γ(K₁) + γ(K₂) ≤ 2γ(K₁K₂)).
  Three or more operands are contracted pairwise, in torch's order (``einsum.pairs``:
  opt_einsum's path where torch takes one, else left to right): each step's rounding,
  carried through the later steps' |operands|, is at most 2·γ(Kₛ)·ua·einsum(|a|, |b|,
  ...) plus u for rounding its result, Kₛ the terms that step sums (``einsum.steps``).
  A VJP goes back through the chain's contractions (``einsum.back_steps``), each
  bounded so, and reads the forward's intermediates, whose own bounds it adds.
- cumprod's VJP: |Jᵀ| applied to |ḡ| is the VJP itself at |x| (a polynomial with
  non-negative coefficients), whose growth along E(x) a probe measures soundly.

The model adds the underflow term η to each bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import einsum as eq
from .columns import order_along
from .vjps import cumprod_vjp, einsum_vjp, sort_vjp, topk_vjp
from ..spectral import bounds as spectral
from ..vjps import keep


@dataclass(frozen=True)
class Bound:
    """A composite row's rounding bounds. ``forward(t, args, errs, units, *params)`` is
    E(t) of its result ``t`` from its arguments' values and bounds; ``backward(k, g, ge,
    c, t, et, args, errs, units, *params)`` is E(c) of the VJP ``c`` into argument ``k``
    given the cotangent ``g`` and its bound ``ge``. ``units`` is (u, ua, γ)."""

    forward: Callable
    backward: Callable


def _sum(a, axis):
    return np.sum(a, axis=axis, keepdims=True)


def _safe(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den == 0, 0.0, num / np.where(den == 0, 1.0, den))


def _n(shape, axis) -> int:
    return math.prod(shape[d] for d in axis)


def _position(shape, d: int, reverse: bool = False) -> np.ndarray:
    """Each element's index along axis ``d`` (from the end: ``reverse``)."""
    i = np.arange(shape[d], dtype=float)
    i = i[::-1] if reverse else i
    return i.reshape((-1,) + (1,) * (len(shape) - d - 1))


# --------------------------------------------------------------------------- softmax

def _times(t, a):
    """t · a, exactly 0 where t is (a masked element, x = -inf: its exp is 0 exactly
    whatever a's inf or NaN there)."""
    with np.errstate(invalid="ignore"):
        return np.where(t == 0, 0.0, t * a)


def softmax_forward(t, args, errs, units, axis):
    (x,), (e,), (u, ua, acc) = args, errs, units
    d = np.abs(x - np.max(x, axis=axis, keepdims=True))
    rel = u * (d + _sum(_times(t, d), axis) + 7) + ua * acc(_n(x.shape, axis))
    return _times(t, e + _sum(_times(t, e), axis)) + _times(t, rel)


def softmax_backward(k, g, ge, c, t, et, args, errs, units, axis):
    u, ua, acc = units
    s = _sum(t * g, axis)
    through_g = t * (ge + _sum(t * ge, axis))
    through_y = et * np.abs(g - s) + t * _sum(np.abs(g) * et, axis)
    n = _n(np.shape(t), axis)
    own = t * ((acc(n) + 1) * ua * _sum(np.abs(t * g), axis) + u * np.abs(g - s))
    return through_g + through_y + own + 3 * u * np.abs(c)


def log_softmax_forward(t, args, errs, units, axis):
    (x,), (e,), (u, ua, acc) = args, errs, units
    d = np.abs(x - np.max(x, axis=axis, keepdims=True))
    y = np.exp(t)
    lse = np.abs(np.log(_sum(np.exp(-d), axis)))
    total = u * (_sum(y * d, axis) + 3) + ua * acc(_n(x.shape, axis))
    return e + _sum(y * e, axis) + u * (2 * np.abs(t) + d + 3 * lse) + total


def log_softmax_backward(k, g, ge, c, t, et, args, errs, units, axis):
    u, ua, acc = units
    y, s = np.exp(t), _sum(g, axis)
    n = _n(np.shape(t), axis)
    own = y * (acc(n) * ua * _sum(np.abs(g), axis) + 4 * u * np.abs(s)) + 2 * u * np.abs(c)
    return ge + y * _sum(ge, axis) + y * np.abs(s) * et + own


# --------------------------------------------------------------------------- var, std

def _moments(x, axis, correction):
    n = _n(x.shape, axis)
    d = x - np.mean(x, axis=axis, keepdims=True)
    return n, n - correction, d


def _var_own(x, d, n, div, v, units, axis, keepdims):
    u, ua, acc = units
    norms = np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims) *
                    np.sum(d * d, axis=axis, keepdims=keepdims))
    return u * v + ua * ((acc(n) + 3) * v + 2 * acc(n) * norms / div)


def var_forward(t, args, errs, units, axis, correction, keepdims):
    (x,), (e,) = args, errs
    n, div, d = _moments(x, axis, correction)
    spread = np.sum(2 * np.abs(d) * e, axis=axis, keepdims=keepdims) / div
    return spread + _var_own(x, d, n, div, np.abs(t), units, axis, keepdims)


def std_forward(t, args, errs, units, axis, correction, keepdims):
    (x,), (e,), (u, ua, _) = args, errs, units
    n, div, d = _moments(x, axis, correction)
    spread = _safe(np.sum(np.abs(d) * e, axis=axis, keepdims=keepdims), div * t)
    own = _var_own(x, d, n, div, t * t, units, axis, keepdims)
    return spread + _safe(own, 2 * t) + (u + ua) * t


def _var_backward(g, ge, c, x, e, units, axis, correction, scale):
    """The bound of (2/(n − c))·g·(x − mean x), g already kept, times ``scale``."""
    u, ua, acc = units
    n, div, d = _moments(x, axis, correction)
    factor = 2.0 / div * scale
    # the mean is summed (γ(n)) and stored in the dtype (u·|mean|), then subtracted
    mean = np.abs(np.mean(x, axis=axis, keepdims=True))
    own = factor * np.abs(g) * (acc(n) * ua * np.mean(np.abs(x), axis=axis, keepdims=True)
                                + u * (mean + np.abs(d)))
    sens = factor * np.abs(g) * (e + np.mean(e, axis=axis, keepdims=True))
    return factor * ge * np.abs(d) + sens + own + 3 * u * np.abs(c)


def var_backward(k, g, ge, c, t, et, args, errs, units, axis, correction, keepdims):
    return _var_backward(keep(g, axis, keepdims), keep(ge, axis, keepdims), c, args[0],
                         errs[0], units, axis, correction, 1.0)


def std_backward(k, g, ge, c, t, et, args, errs, units, axis, correction, keepdims):
    tk, etk = keep(t, axis, keepdims), keep(et, axis, keepdims)
    scale = _safe(1.0, 2 * tk)
    out = _var_backward(keep(g, axis, keepdims), keep(ge, axis, keepdims), c, args[0],
                        errs[0], units, axis, correction, scale)
    return out + np.abs(c) * (_safe(etk, tk) + 2 * units[0])


# --------------------------------------------------------------------------- norm

def norm_forward(t, args, errs, units, order, axis, keepdims):
    (x,), (e,), (u, ua, acc) = args, errs, units
    a, n = np.abs(x), _n(x.shape, axis)

    def total(v):
        return np.sum(v, axis=axis, keepdims=keepdims)

    if math.isinf(order):
        hit = a == np.max(a, axis=axis, keepdims=True)
        return np.max(np.where(hit, e, 0.0), axis=axis, keepdims=keepdims)
    if order == 1:
        return total(e) + (u + acc(n) * ua) * t
    if order == 2:
        return _safe(total(a * e), t) + (u + (acc(n) + 3) * ua) * t
    spread = _safe(total(a ** (order - 1) * e), t ** (order - 1))
    return spread + (u + ua * ((acc(n) + 2) / order + 2)) * t


def norm_backward(k, g, ge, c, t, et, args, errs, units, order, axis, keepdims):
    (x,), (e,), u = args, errs, units[0]
    a = np.abs(x)
    gk, gek = keep(g, axis, keepdims), keep(ge, axis, keepdims)
    tk, etk = keep(t, axis, keepdims), keep(et, axis, keepdims)
    if order == 1:
        return np.abs(np.sign(x)) * gek
    if math.isinf(order):
        hit = a == tk
        return hit * gek / np.sum(hit, axis=axis, keepdims=True) + u * np.abs(c)
    if order == 2:
        return _safe(a * gek + np.abs(gk) * e + np.abs(c) * etk, tk) + 3 * u * np.abs(c)
    p = order - 1
    sens = p * np.abs(c) * (_safe(e, a) + _safe(etk, tk))
    return _safe(a, tk) ** p * gek + sens + 8 * u * np.abs(c)


# --------------------------------------------------------------------------- scans

def cumsum_forward(t, args, errs, units, axis):
    (x,), (e,), (u, ua, _) = args, errs, units
    d = axis[0]
    steps = _position(x.shape, d)
    return np.cumsum(e, axis=d) + u * np.abs(t) + steps * ua * np.cumsum(np.abs(x), axis=d)


def cumsum_backward(k, g, ge, c, t, et, args, errs, units, axis):
    u, ua, _ = units
    d = axis[0]

    def back(v):
        return np.flip(np.cumsum(np.flip(v, d), axis=d), d)

    steps = _position(np.shape(g), d, reverse=True)
    return back(ge) + steps * ua * back(np.abs(g)) + u * np.abs(c)


def cumprod_forward(t, args, errs, units, axis):
    # |J|e: s_0 = e_0, s_i = s_{i-1}|x_i| + |y_{i-1}| e_i (the tangent at |x|, |y|)
    (x,), (e,), (u, ua, _) = args, errs, units
    d = axis[0]
    xm, em = np.moveaxis(np.abs(x), d, -1), np.moveaxis(np.broadcast_to(e, x.shape), d, -1)
    ym = np.moveaxis(np.abs(t), d, -1)
    s = np.empty(xm.shape)
    s[..., 0] = em[..., 0]
    for i in range(1, xm.shape[-1]):
        s[..., i] = s[..., i - 1] * xm[..., i] + ym[..., i - 1] * em[..., i]
    steps = _position(x.shape, d)
    return np.moveaxis(s, -1, d) + (u + steps * ua) * np.abs(t)


def cumprod_backward(k, g, ge, c, t, et, args, errs, units, axis):
    (x,), (e,), u = args, errs, units[0]
    a = np.abs(x)
    size = cumprod_vjp(np.abs(g), t, a, axis)          # |Jᵀ| |g|
    e = np.broadcast_to(e, a.shape)
    ratio = float(np.max(_safe(e, np.maximum(a, e)), initial=0.0))
    sens = 0.0
    if ratio > 0:   # the growth of |Jᵀ||g| along E(x): monotone, so a probe is sound
        s = 2.0 ** -20 / ratio
        sens = (cumprod_vjp(np.abs(g), t, a + s * e, axis) - size) / s
    # PyTorch's formula, Σ_{i≥j} ḡ_i y_i / x_j (nonzero x), reads y: its errors too
    d, n = axis[0], np.shape(x)[axis[0]]
    through_y = _safe(np.flip(np.cumsum(np.flip(np.abs(g) * et, d), axis=d), d), a)
    return cumprod_vjp(ge, t, a, axis) + sens + through_y + (2 * n + 4) * u * size


# --------------------------------------------------------------------------- sorts

def sort_forward(t, args, errs, units, axis, descending):
    d = axis[0]
    return np.take_along_axis(np.broadcast_to(errs[0], args[0].shape),
                              order_along(args[0], d, descending), axis=d)


def sort_backward(k, g, ge, c, t, et, args, errs, units, axis, descending):
    return sort_vjp(ge, t, args[0], axis, descending)      # a permutation: exact


def topk_forward(t, args, errs, units, k, axis):
    d = axis[0]
    order = np.take(order_along(args[0], d, True), range(k), axis=d)
    return np.take_along_axis(np.broadcast_to(errs[0], args[0].shape), order, axis=d)


def topk_backward(k_, g, ge, c, t, et, args, errs, units, k, axis):
    return topk_vjp(ge, t, args[0], k, axis)


# --------------------------------------------------------------------------- einsum

def einsum_forward(t, args, errs, units, subscripts):
    u, ua, acc = units
    ops, shapes = list(args), [a.shape for a in args]
    absolute = [np.abs(a) for a in ops]
    spread = sum(np.einsum(subscripts, *[errs[j] if j == i else absolute[j]
                                         for j in range(len(ops))])
                 for i in range(len(ops)))
    size = np.einsum(subscripts, *absolute)
    stages = eq.steps(subscripts, shapes)
    own = 2 * sum(acc(n) for n in stages) * ua + (len(stages) - 1) * u
    return spread + own * size + u * np.abs(t)


def einsum_backward(k, g, ge, c, t, et, args, errs, units, subscripts):
    u, ua, acc = units
    def vjp(*a):
        return einsum_vjp(k, *a)

    absolute = [np.abs(a) for a in args]
    out = vjp(ge, t, *absolute, subscripts)
    for j in range(len(args)):
        if j != k:
            out = out + vjp(np.abs(g), t, *[errs[i] if i == j else absolute[i]
                                            for i in range(len(args))], subscripts)
    shapes = [a.shape for a in args]
    size = vjp(np.abs(g), t, *absolute, subscripts)
    if len(args) <= 2:
        own = 2 * acc(eq.contracted(subscripts, shapes, k)) * ua
    else:
        # back through the chain's contractions, reading the forward's intermediates
        # (an operand's sum over labels it alone has, the first steps' result): their
        # own errors, every step's counted
        back = eq.back_steps(subscripts, shapes, k)
        forward = eq.steps(subscripts, shapes)
        own = (2 * sum(acc(n) for n in back + forward) * ua
               + (len(back) + len(forward)) * u)
    return out + own * size + u * np.abs(c)


def exact_forward(t, args, errs, units, *params):
    return np.zeros(np.shape(t))      # one_hot: labels read exactly, no rounding


def no_backward(k, g, ge, c, t, et, args, errs, units, *params):
    raise AssertionError("a row without a VJP has no cotangent to bound")


BOUNDS = {
    "softmax": Bound(softmax_forward, softmax_backward),
    "log_softmax": Bound(log_softmax_forward, log_softmax_backward),
    "var": Bound(var_forward, var_backward),
    "std": Bound(std_forward, std_backward),
    "norm": Bound(norm_forward, norm_backward),
    "cumsum": Bound(cumsum_forward, cumsum_backward),
    "cumprod": Bound(cumprod_forward, cumprod_backward),
    "sort": Bound(sort_forward, sort_backward),
    "topk": Bound(topk_forward, topk_backward),
    "einsum": Bound(einsum_forward, einsum_backward),
    "one_hot": Bound(exact_forward, no_backward),
    # the discrete Fourier transforms (rules/spectral/): their bounds are stated there
    **{name: Bound(spectral.forward_bound(name), spectral.backward_bound(name))
       for name in ("fft", "ifft", "rfft", "irfft")},
}
