"""The engine witness: the formula rebuilt on gradcheck's own reverse-mode engine through
the rule table (forward: ``numpy`` column; VJP and ``grad_fn`` name: ``engine`` column),
driven exactly as the torch witness drives PyTorch."""

from __future__ import annotations

import numpy as np

from ..engine import Tensor, ops
from ..base.dtypes import to_numpy
from ..base.evaluation import Evaluation
from ..formula.tree import float_operands
from .drive import drive


def applier(dtype: str):
    """``(node, args) -> Tensor``: the engine's op of the row's name, called as a user
    calls it (keywords by name); an integer or boolean tensor in float arithmetic is
    promoted to the run's float dtype first, as torch promotes it (NumPy alone would
    make int64 * float32 a float64)."""
    def apply(node, args):
        args = [Tensor(a.data.astype(dtype)) if promote and isinstance(a, Tensor)
                and a.dtype.kind in "biu" else a
                for a, promote in zip(args, float_operands(node))]
        if node.rule.variadic == "list":   # concat([a, b]): its operands as one list
            return getattr(ops, node.op)(list(args), **dict(node.params))
        return getattr(ops, node.op)(*args, **dict(node.params))

    return apply


def leaf(spec, value: np.ndarray, dtype: str) -> Tensor:
    """Input ``spec``'s leaf: the run's float dtype, or the input's own integer or
    boolean dtype (never requiring grad)."""
    return Tensor(np.asarray(value, dtype=spec.dtype or dtype),
                  requires_grad=spec.requires_grad)


def run(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str,
        reference=None, pins: dict | None = None) -> Evaluation:
    """``pins``: as the torch witness's (:func:`gradcheck.witnesses.torch.run`)."""
    leaves = {s.name: leaf(s, point[s.name], dtype) for s in case.inputs}
    return drive(case, leaves, applier(dtype), lambda a: Tensor(np.asarray(a, dtype=dtype)),
                 v, to_numpy, order=None if pins else order, pins=pins)


def order(node, x):
    """The positions the engine's sort (or topk) of ``x`` takes: stable, as the numpy
    column orders them."""
    from ..rules.composite.columns import order_along

    d = node.axis[0]
    if node.op == "topk":
        return np.take(order_along(x.data, d, True), range(node.param("k")), axis=d)
    return order_along(x.data, d, bool(node.param("descending")))
