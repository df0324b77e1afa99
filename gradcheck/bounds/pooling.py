"""The rounding model's family of pooling rows (:data:`gradcheck.rules.row.POOLING`:
avg_pool2d and max_pool2d): avg_pool2d is linear with coefficients 1/n ≥ 0, max_pool2d a
selection, so both pass errors through their own forward and VJP, as a sum of n terms
does."""

from __future__ import annotations

import numpy as np

from ..rules.conv.columns import pool_terms
from .summation import accumulation


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def value(b, node, rule, args, errs) -> tuple[np.ndarray, np.ndarray]:
    """The value and error bound of a pooling of ``x`` (errors ``ex``) for the model
    ``b``: the errors pass as their own average (avg_pool2d: the window's n terms
    summed and divided add γ(n)·u_acc·avg|x| + u·|t|), or as the picked element's, at
    most the window's largest (max_pool2d: no rounding of its own)."""
    x, ex = _arr(args[0]), errs[0]
    t = _arr(node.call("numpy", [x]))
    n = pool_terms(node.op, *(v for _, v in node.params), None)
    own = accumulation(n) * b.u_acc * _arr(node.call("numpy", [np.abs(x)]))
    if rule.rounding:
        own = own + rule.rounding * b.u * np.abs(t) + b.eta
    return t, _arr(node.call("numpy", [ex])) + own


def cotangent(b, node, rule, k: int, g, ge) -> tuple[np.ndarray, np.ndarray]:
    """A pooling's cotangent and its error bound: linear in ḡ with coefficients ≥ 0 (1/n,
    or 1 at the pick, which the forward's errors do not move: sampling keeps away from
    ties), so ḡ's error passes through the VJP itself; the sums over overlapping
    windows (and avg_pool2d's division) add their own, at the unit roundoff of the dtype
    itself: torch's pooling backward kernels add into the gradient in its own dtype
    (``grad_input[i] += ...``, bfloat16 in bfloat16)."""
    t, args, _ = b.operands(node, rule)
    c = b.call(node, rule, k, g, t, args)
    through_g = np.abs(b.call(node, rule, k, ge, t, args))
    full = np.abs(b.call(node, rule, k, np.abs(g), t, args))
    own = accumulation(pool_terms(node.op, *(v for _, v in node.params), k)) * b.u * full
    if rule.rounding:
        own = own + rule.rounding * b.u * full + b.eta
    return c, through_g + own


def many(b, node, rule, k: int, g, t, args):
    """The VJP at many cotangents (``b.lead``): one at a time (the window's parameters
    name axes from the left)."""
    return b.each(node, rule, k, g, t, args)
