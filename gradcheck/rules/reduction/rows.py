"""The reduction family's rows: sum, mean, prod, max, min and logsumexp, with ``axis=``
(None: every axis) and ``keepdims=``, as NumPy's. Each element feeds one output. Their
columns are in :mod:`.columns`, :mod:`.vjps` and :mod:`.tensor`. The rows are appended to
the table by :mod:`gradcheck.rules.table` (``ROWS``, in table order).
"""

from __future__ import annotations

import numpy as np

from . import columns as rc, tensor as rt, vjps as rv
from ..columns import sympy
from ..row import AXIS, BOOL, REDUCTION, Param, Rule
from ..tensor import tensor_rule
from ..vjps import engine_rule, keep, others_product

# Reductions take axis= (None: every axis) and keepdims=, as NumPy's do.
REDUCE_PARAMS = (Param("axis", AXIS, None), Param("keepdims", BOOL, False))


def reduction_row(*, name: str, combine, **row) -> Rule:
    """A reduction over ``axis=`` (``keepdims=``), as NumPy's: its SymPy meaning is
    ``combine`` of the reduced elements."""
    row.setdefault("example", f"{name}(x, axis=1)")
    return Rule(
        name=name, family=REDUCTION, arity=1, sympy=rc.sym_reduction(combine),
        params=REDUCE_PARAMS, **row)


ROWS: list[Rule] = [
    reduction_row(
        name="sum", combine=lambda el: sympy.Add(*el), numpy=rc.np_reduce(np.add.reduce),
        torch=rc.torch_reduce("sum"),
        engine=engine_rule(rv.reduction_name("Sum"), lambda g, ans, x, axis, keepdims:
                           np.broadcast_to(keep(g, axis, keepdims), np.shape(x)),
                           saves=False), tensor=tensor_rule(rt.sum_vjp)),
    reduction_row(
        name="mean", combine=rc.sym_mean, numpy=rc.np_reduce(np.mean),
        torch=rc.torch_reduce("mean"),
        engine=engine_rule(rv.reduction_name("Mean"), lambda g, ans, x, axis, keepdims:
                           np.broadcast_to(keep(g, axis, keepdims) / rv.count(x, axis),
                           np.shape(x)), saves=False), tensor=tensor_rule(rt.mean_vjp)),
    reduction_row(
        name="prod", combine=lambda el: sympy.Mul(*el), numpy=rc.np_reduce(np.multiply.reduce),
        torch=rc.torch_reduce("prod"),
        engine=engine_rule(rv.reduction_name("Prod"), lambda g, ans, x, axis, keepdims:
                           keep(g, axis, keepdims) * others_product(x, axis)),
        tensor=tensor_rule(rt.prod_vjp)),
    Rule(
        name="max", family=REDUCTION, arity=1, sympy=rc.sym_selected,
        numpy=rc.np_reduce(np.maximum.reduce), torch=rc.torch_reduce("amax"),
        hazard=rc.runner_up_gaps, selector=rc.one_hot(np.argmax), rounding=0, params=REDUCE_PARAMS,
        tensor=tensor_rule(rt.selected_vjp("max")), example="max(x, axis=1)",
        engine=engine_rule("AmaxBackward0", lambda g, ans, x, axis, keepdims:
                           keep(g, axis, keepdims) * rv.ties(x, ans, axis, keepdims))),
    Rule(
        name="min", family=REDUCTION, arity=1, sympy=rc.sym_selected,
        numpy=rc.np_reduce(np.minimum.reduce), torch=rc.torch_reduce("amin"),
        hazard=rc.runner_down_gaps, selector=rc.one_hot(np.argmin), rounding=0,
        params=REDUCE_PARAMS, tensor=tensor_rule(rt.selected_vjp("min")), example="min(x, axis=1)",
        engine=engine_rule("AminBackward0", lambda g, ans, x, axis, keepdims:
                           keep(g, axis, keepdims) * rv.ties(x, ans, axis, keepdims))),
    reduction_row(
        name="logsumexp", combine=rc.sym_logsumexp, numpy=rc.np_logsumexp,
        torch=rc.torch_reduce("logsumexp", need_dim=True), exponential=True,
        engine=engine_rule("LogsumexpBackward0", lambda g, ans, x, axis, keepdims:
                           keep(g, axis, keepdims) * np.exp(x - keep(ans, axis, keepdims))),
        tensor=tensor_rule(rt.logsumexp_vjp)),
]
