"""The rounding model's family of composite rows (:data:`gradcheck.rules.row.COMPOSITE`:
softmax, var, norm, cumsum, sort, topk, einsum...): each row states its own first-order
bounds (its ``rounding`` column, a :class:`gradcheck.rules.composite.bounds.Bound`: why
the generic
model does not hold for them is said there); this module hands them the values, the
bounds and the units, and adds the underflow term η."""

from __future__ import annotations

import numpy as np

from .summation import accumulation


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _values(params) -> tuple:
    return tuple(v for _, v in params)


def value(b, node, rule, args, errs) -> tuple[np.ndarray, np.ndarray]:
    """The value of a composite node and its error bound, for the model ``b``."""
    args = [_arr(a) for a in args]
    t = _arr(node.call("numpy", args))
    errs = [np.broadcast_to(_arr(e), np.shape(a)) for e, a in zip(errs, args)]
    units = (b.u, b.u_acc, accumulation)
    e = rule.rounding.forward(t, args, errs, units, *_values(node.params))
    return t, _arr(e) + b.eta


def cotangent(b, node, rule, k: int, g, ge) -> tuple[np.ndarray, np.ndarray]:
    """The VJP c into argument ``k`` of a composite node and its error bound, given the
    cotangent ``g`` and its bound ``ge``; with many cotangents at once (``b.lead``) the
    model's own rearrangement (:meth:`gradcheck.bounds.model.RoundingModel.batched`)
    is applied alike to the values and to their bounds."""
    c = b.call(node, rule, k, g, *b.operands(node, rule)[:2])
    t, et = _arr(b.val[id(node)]), _arr(b.err[id(node)])
    args = [_arr(b.arg(node, j)) for j in range(len(node.args))]
    errs = [np.broadcast_to(_arr(b.err[id(a)]), np.shape(a_))
            for a, a_ in zip(node.args, args)]
    params = node.params
    if b.lead:
        g, t, args, params = b.batched(node, rule, g, t, args)
        ge, et, errs, _ = b.batched(node, rule, ge, et, errs)
    units = (b.u, b.u_acc, accumulation)
    out = rule.rounding.backward(k, _arr(g), _arr(ge), c, t, et, args, errs, units,
                                 *_values(params))
    return c, np.array(np.broadcast_to(out, np.shape(c)), dtype=float) + b.eta
