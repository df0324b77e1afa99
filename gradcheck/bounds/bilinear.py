"""The rounding model's family of bilinear rows (:data:`gradcheck.rules.row.BILINEAR`:
matmul, dot, the convolutions): maps whose sums round. Its value and each cotangent is
bilinear in two operands, c = a ∘ b, so

    E(a ∘ b) = |a| ∘ E(b) + E(a) ∘ |b| + γ(n)·u_acc·(|a| ∘ |b|) + (rounding into the
    dtype) + η,

n the terms of the sums (:func:`terms`); a cotangent's own
error E(ḡ) goes through the same map, |ḡ|'s place taken by E(ḡ).

The rounding into the dtype, of a convolution's cotangent: where torch forms a
cotangent's sums in float32 and rounds once (oneDNN, cuDNN) that rounding is u·|c|.
Where it adds rounded parts in the dtype itself (aten's ``Slow2d``/``SlowDilated2d``:
torch's float16 convolution on a CPU without avx512_fp16, such as AMD's EPYC; any
low-precision dtype with oneDNN off), each of m parts p_j is rounded once and each of
the m − 1 additions rounds a partial sum of at most Σ|p_j|: m·u·Σ|p_j| in all. The parts
are x̄'s per kernel offset (col2im adds them; m the offsets that reach the
element) and w̄'s per batch sample (m = N), :func:`gradcheck.rules.conv.vjps.
conv_input_parts` and ``conv_weight_parts``. An emulation of exactly that is torch's
float16 result bit for bit at 99.96% of a 64-channel layer's x̄ and w̄ (one float16
step off at the rest: float32 sums in another order), where one rounding of exact sums
is at 42% and 74% (tests/test_conv_half.py). Which kernel runs is torch's own choice,
asked of torch (:func:`gradcheck.rules.conv.columns.torch_adds_in_dtype`): a CPU whose
oneDNN runs float16 keeps the one-rounding bound. float32 and float64 keep u·|c|
(their u is the accumulator's own, and γ(n)·u·Σ|terms| holds the few parts: with oneDNN
on, aten runs float32 for 1×1 kernels alone, one part).
"""

from __future__ import annotations

import numpy as np

from ..rules.conv.columns import conv_terms, torch_adds_in_dtype
from ..rules.conv.rows import CONVOLUTIONS
from ..rules.conv.vjps import conv_input_parts, conv_weight_parts
from .blocks import any_error, plus
from .summation import accumulation


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def value(b, node, rule, args, errs):
    """The value t = a ∘ b and its bound, for the model ``b``."""
    x, y = _arr(args[0]), _arr(args[1])

    def f(p, q):
        return _arr(node.call("numpy", [p, q]))

    t = f(x, y)
    abs_x, abs_y = np.abs(x), np.abs(y)
    # |x| ∘ E(y) + γ·u_acc·(|x| ∘ |y|) = |x| ∘ (E(y) + γ·u_acc·|y|): the map is linear in
    # its second operand, so the two terms are one product (a matmul fewer; the sum
    # rounds in float64 at a relative 1e-16·n of a bound of the dtype's u·n). A term of
    # an exact operand, an input's, is 0 and left out (_nothing).
    gamma = accumulation(terms(node, None)) * b.u_acc
    second = abs_y * gamma if _nothing(errs[1], abs_x) else plus(abs_y * gamma, errs[1])
    bound = f(abs_x, second)
    del second
    bound = _sum(bound, None if _nothing(errs[0], abs_y) else f(errs[0], abs_y))
    del abs_x, abs_y
    bound = plus(bound, b.u * np.abs(t))
    return t, plus(bound, b.eta)


def cotangent(b, node, rule, k: int, g, ge):
    """The VJP c into argument ``k`` and its bound: c is linear in ḡ and in the *other*
    operand, |vjp|(E(ḡ)) + |vjp|(|ḡ|, E(other)) + γ(n)·u_acc·|vjp|(|ḡ|, |other|) +
    the rounding into the dtype + η."""
    t, args, errs = b.operands(node, rule)
    c = b.call(node, rule, k, g, t, args)
    absargs = [np.abs(_arr(a)) for a in args]
    abs_t = np.abs(t)
    # (a term whose bound operand is 0 everywhere, the root's ḡ or an input's, is 0 and
    # left out: _nothing)
    g_exact, other_exact = _nothing(ge, *absargs), _nothing(errs[1 - k], *absargs)
    gamma = accumulation(terms(node, k)) * b.u_acc
    abs_g = np.abs(g)
    # The map is linear in each operand, so terms that share one are one product (a
    # matmul fewer each; nonnegative operands, so no |·| is lost): with the other
    # operand exact (an input's: a layer's x @ W, into x, and into W where x is an
    # input), |vjp|(E(ḡ)) + γ·u_acc·|vjp|(|ḡ|, |other|) = |vjp|(E(ḡ) + γ·u_acc·|ḡ|,
    # |other|); else |vjp|(|ḡ|, E(other)) + γ·u_acc·|vjp|(|ḡ|, |other|) = |vjp|(|ḡ|,
    # E(other) + γ·u_acc·|other|). The terms are summed as they come, in place (plus),
    # each dropped once added: at a layer's size (attention's [16, 256, 256]
    # cotangent) five arrays of c's size fewer at once.
    if _through_g(ge, errs[1 - k]):
        scaled = abs_g * gamma
        own = np.abs(b.call(node, rule, k, plus(scaled, ge), abs_t, absargs))
        del scaled
        if not other_exact:
            own = plus(own, np.abs(b.call(node, rule, k, abs_g, abs_t,
                                          [np.broadcast_to(errs[1 - k], np.shape(a))
                                           if i == 1 - k else a
                                           for i, a in enumerate(absargs)])))
        del abs_g
    else:
        through_g = None if g_exact else np.abs(b.call(node, rule, k, ge, abs_t, absargs))
        other = list(absargs)
        other[1 - k] = absargs[1 - k] * gamma
        if not other_exact:
            other[1 - k] = plus(other[1 - k], errs[1 - k])
        own = np.abs(b.call(node, rule, k, abs_g, abs_t, other))
        del other, abs_g
        own = _sum(through_g, own)
        del through_g
    del abs_t, absargs
    # rounding into the dtype: once (u·|c|), or where torch adds parts in it
    own = plus(own, conv_rounding(b, node, k, g, args, c) if node.op in CONVOLUTIONS
               else b.u * np.abs(c))
    return c, plus(own, b.eta)


def _through_g(ge, e_other) -> bool:
    """Whether a cotangent's bound takes γ·u_acc·|ḡ| with E(ḡ) (ḡ has an error, the
    other operand none) rather than with the other operand's error. Chosen by where the
    errors are, not by :func:`_nothing`, which also asks that the sizes be finite: the
    term that form leaves out is then |vjp|(|ḡ|, 0), +0, or NaN where |ḡ| holds an inf
    (kept), and the bound is the same to the bit with every term computed."""
    return any_error(ge) and not any_error(e_other)


def _nothing(e, *sizes) -> bool:
    """Whether the bilinear map of the bound ``e`` and the magnitudes ``sizes`` is 0 at
    every element, so that it need not be computed: ``e`` is 0 everywhere and every
    magnitude finite. Each of the map's terms is then a product of a finite number ≥ 0
    and +0, which is +0, and their sums are +0; and +0 + a is a, to the bit, so the
    bound that leaves the term out is the same bound. (An inf or NaN among the sizes
    would make 0·inf = NaN, which the map keeps: computed then.)"""
    return e is not None and not any_error(e) and \
        all(np.isfinite(s).all() for s in sizes)


def _sum(a, b):
    """a + b in place (:func:`plus`) where both are there; the one there otherwise
    (None: a term that is 0 everywhere, :func:`_nothing`)."""
    if a is None or b is None:
        return b if a is None else a
    return plus(a, b)


def many(b, node, rule, k: int, g, t, args):
    """The VJP at many cotangents along ``g``'s axis 0 (``b.lead``): a convolution's
    one at a time (its parameters name axes from the left); matmul's as they are (it
    works on the last two axes); dot's 0-d result's cotangents get a trailing axis to
    line up with the vectors it multiplies them by."""
    if node.op in CONVOLUTIONS:
        return b.each(node, rule, k, g, t, args)
    if node.op == "dot":
        g = g[..., None]
    return rule.vjp(k, g, t, args, node.params)


def conv_rounding(b, node, k: int, g, args, c) -> np.ndarray:
    """The rounding into the dtype of the convolution's cotangent ``c`` into argument
    ``k`` (ḡ ``g``, with the leading axis of many cotangents where the model ``b``
    carries them): u·|c|, or m·u·Σ|parts| where torch adds parts in the dtype."""
    if b.u <= b.u_acc or not torch_adds_in_dtype(node.args[0].shape, node.args[1].shape,
                                                  node.params, b.dtype, b.device):
        return b.u * np.abs(c)
    x, w = args
    params = [v for _, v in node.params]
    if k == 0:
        def parts(gi):
            return conv_input_parts(gi, w, np.shape(x), *params)
    else:
        def parts(gi):
            return conv_weight_parts(gi, x, np.shape(w), *params)
    bounds = [b.u * m * total for total, m in map(parts, g if b.lead else [g])]
    return np.stack(bounds) if b.lead else bounds[0]


def terms(node, k: int | None) -> int:
    """The terms of the sums a bilinear row (matmul, dot, a convolution) adds in its
    forward (``k`` None) or in its cotangent into argument ``k``: matmul's and dot's
    along the contracted axis; a convolution's over its input channels and kernel
    (:func:`gradcheck.rules.conv.columns.conv_terms`)."""
    shapes = [a.shape for a in node.args]
    if node.op in CONVOLUTIONS:
        return conv_terms(shapes[0], shapes[1], node.shape, k)
    if k is None:
        return shapes[0][-1] if shapes[0] else 1
    return int(_contraction(shapes[1 - k], k))


def _contraction(other: tuple[int, ...], k: int) -> int:
    """The length of the sum in matmul's cotangent into argument ``k``, from the other
    operand's shape: Ā = Ḡ Bᵀ sums over B's last axis, B̄ = Aᵀ Ḡ over A's rows (axis
    -2, after any batch axes). A vector's own length is kept: an over-count."""
    if not other:
        return 1
    return other[-1] if k == 0 else other[-2 if len(other) > 1 else 0]
