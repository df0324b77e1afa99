"""The rounding model's family of structural rows (:data:`gradcheck.rules.row.STRUCTURE`:
reshape, permute, x[...], pad, concat...), for the whole family at once.

Each is an exact linear map L with 0/1 coefficients, affine only where pad writes its
constant c: t = L(a) + c. Its result rounds nothing where each element is one term, so
E(t) = L(E(a)), the map applied to its operands' bounds (|L| = L: the coefficients are
≥ 0), computed as L(E) − L(0) so that the constant drops out; a constant the dtype
cannot hold carries u·|c|. Where L adds several terms into one element (scatter_add,
index_add: x plus the src elements sent there), each element's sum of n terms, in the
dtype, adds γ(n)·u·L(|a|), n read off L applied to ones. Its VJP Lᵀḡ is exact too where
each element of the operand receives one term. Where Lᵀ adds n > 1 (n read off Lᵀ
applied to ones, per element): expand's copies are summed back by a cascade sum in the
accumulator and rounded once to the dtype, γ(n)·u_acc·Lᵀ|ḡ| + u·|Lᵀḡ| (the last term
where the accumulator is wider than the dtype); a row that
``scatters`` (take, gather) adds repeated indices' cotangents one at a time in the
dtype, (n − 1)·u·Lᵀ|ḡ| (a sequential sum: no cascade to shorten it).
"""

from __future__ import annotations

import numpy as np

from ..base.dtypes import round_to
from .summation import accumulation


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _exact(a) -> bool:
    """An operand that is not a float (an integer input used as indices): exact, and
    passed to the map as it is."""
    return np.asarray(a).dtype.kind in "biu"


def value(b, node, rule, args, errs) -> tuple[np.ndarray, np.ndarray]:
    """The value of a structural node and its error bound, for the model ``b``."""
    t = _arr(node.call("numpy", args))
    moved = [a if _exact(a) else np.asarray(e, dtype=float) for a, e in zip(args, errs)]
    zeros = [a if _exact(a) else np.zeros(np.shape(a)) for a in args]
    constant = _arr(node.call("numpy", zeros))
    err = _arr(node.call("numpy", moved)) - constant
    if constant.any():
        err = err + np.where(round_to(constant, b.dtype) == constant, 0.0,
                             b.u * np.abs(constant))
    ones = [a if _exact(a) else np.ones(np.shape(a)) for a in args]
    counts = np.rint(_arr(node.call("numpy", ones)) - constant).astype(np.int64)
    if np.max(counts, initial=0) > 1:   # each element's own sum of n terms
        size = [a if _exact(a) else np.abs(_arr(a)) for a in args]
        gamma = np.vectorize(accumulation, otypes=[float])(counts)
        err = err + gamma * b.u * (_arr(node.call("numpy", size)) - constant)
    return t, err


def cotangent(b, node, rule, k: int, g, ge) -> tuple[np.ndarray, np.ndarray]:
    """A structural node's cotangent Lᵀḡ into argument ``k`` and its error bound:
    Lᵀ E(ḡ), plus the accumulation where Lᵀ sums terms."""
    t, args, _ = b.operands(node, rule)
    c = b.call(node, rule, k, g, t, args)
    through_g = _arr(b.call(node, rule, k, ge, t, args))
    counts = _arr(b.call(node, rule, k, np.ones(np.shape(g)), t, args))
    if np.max(counts, initial=0) <= 1:
        return c, through_g
    sums = _arr(b.call(node, rule, k, np.abs(g), t, args))
    many = counts > 1
    if rule.scatters:   # one addition at a time, each rounded in the dtype
        return c, through_g + np.where(many, (counts - 1) * b.u, 0.0) * sums
    gamma = np.vectorize(accumulation, otypes=[float])(counts)
    err = through_g + gamma * b.u_acc * sums
    if b.u_acc < b.u:   # a wider accumulator's sum is rounded once more, to the dtype
        err = err + np.where(many, b.u * np.abs(_arr(c)), 0.0)
    return c, err


def many(b, node, rule, k: int, g, t, args):
    """The VJP at many cotangents (``b.lead``): one at a time (a structural row's
    parameters name axes from the left)."""
    return b.each(node, rule, k, g, t, args)
