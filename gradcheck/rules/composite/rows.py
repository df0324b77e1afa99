"""Composite reductions, scans and sorts (softmax, var, norm, cumsum, sort, topk, einsum...):
rows of the rule table.

Each row's columns are in :mod:`.composite_columns` (SymPy, NumPy, torch, shapes,
hazards, selectors), :mod:`.composite_vjps` (the engine's VJPs, PyTorch's backward
formulas), :mod:`.composite_tensor` (the exact tensor-level adjoints) and
:mod:`.composite_bounds` (their rounding bounds, in the ``rounding`` column). The rows
are appended to the table by :mod:`.table` (``ROWS``, in table order). einsum's engine
op is written by hand (:mod:`gradcheck.engine.einsum`): PyTorch records it as the
permutes, views, sums and one bmm or mul its C++ decomposes it into.
"""

from __future__ import annotations

import math

from . import columns as c
from . import tensor as ct
from . import vjps as cv
from .. import einsum as eq
from .bounds import BOUNDS
from ..row import AXIS, BOOL, INT, LINALG, NUMBER, REDUCTION, TEXT, EngineRule, Param, Rule

ALONG = (Param("axis", AXIS, -1),)
MOMENTS = (Param("axis", AXIS, None), Param("correction", INT, 1),
           Param("keepdims", BOOL, False))


def _row(name, sym, np_fn, torch_fn, grad_fn, vjp, tensor, *, params=ALONG, saves=True,
         **row):
    row.setdefault("shape", c.along_shape(name))
    return Rule(name, REDUCTION, 1, sym, np_fn, torch_fn, params=params,
                engine=EngineRule(grad_fn, (vjp,), saves), tensor=ct.tensor_rule(tensor),
                rounding=BOUNDS[name], **row)


ROWS: list[Rule] = [
    _row("softmax", c.sym_softmax, c.np_softmax, c.torch_softmax, "SoftmaxBackward0",
         cv.softmax_vjp, ct.softmax_tensor, exponential=True, example="softmax(x, axis=1)",
         doc="exp(x) / sum(exp(x)) along axis"),
    _row("log_softmax", c.sym_log_softmax, c.np_log_softmax, c.torch_log_softmax,
         "LogSoftmaxBackward0", cv.log_softmax_vjp, ct.log_softmax_tensor,
         exponential=True, example="log_softmax(x)",
         doc="x - logsumexp(x) along axis"),
    _row("var", c.sym_var, c.np_var, c.torch_var, "VarBackward0", cv.var_vjp,
         ct.var_tensor, params=MOMENTS, shape=c.var_shape, example="var(x, axis=1)",
         doc="sum((x - mean(x))**2) / (n - correction)"),
    _row("std", c.sym_std, c.np_std, c.torch_std, "StdBackward0", cv.std_vjp,
         ct.std_tensor, params=MOMENTS, shape=c.var_shape, hazard=c.std_hazard,
         example="std(x, axis=1, correction=0)", doc="sqrt(var(x, ...))"),
    _row("norm", c.sym_norm, c.np_norm, c.torch_norm, "LinalgVectorNormBackward0",
         cv.norm_vjp, ct.norm_tensor, shape=c.norm_shape, hazard=c.norm_hazard,
         selector=c.norm_selector, example="norm(x, ord=1, axis=1)",
         params=(Param("ord", NUMBER, 2.0, choices=(1.0, 2.0, math.inf)),
                 Param("axis", AXIS, None), Param("keepdims", BOOL, False)),
         doc="vector norm: ord 2, 1, inf or p >= 1 (torch.linalg.vector_norm)"),
    _row("cumsum", c.sym_cumsum, c.np_cumsum, c.torch_cumsum, "CumsumBackward0",
         cv.cumsum_vjp, ct.cumsum_tensor, saves=False, example="cumsum(x, 1)",
         doc="cumulative sum along axis"),
    _row("cumprod", c.sym_cumprod, c.np_cumprod, c.torch_cumprod, "CumprodBackward0",
         cv.cumprod_vjp, ct.cumprod_tensor, example="cumprod(x, axis=1)",
         doc="cumulative product along axis"),
    _row("sort", c.sym_sort, c.np_sort, c.torch_sort, "SortBackward0", cv.sort_vjp,
         ct.sort_tensor, params=(*ALONG, Param("descending", BOOL, False)),
         hazard=c.sort_hazard, selector=c.sort_selector,
         example="sort(x, descending=True)", doc="sorted values along axis"),
    _row("topk", c.sym_topk, c.np_topk, c.torch_topk, "TopkBackward0", cv.topk_vjp,
         ct.topk_tensor, params=(Param("k", INT, 1), *ALONG), shape=c.topk_shape,
         hazard=c.topk_hazard, selector=c.topk_selector, example="topk(x, 2)",
         doc="the k largest values along axis, largest first"),
    Rule("einsum", LINALG, 1, c.sym_einsum, c.np_einsum, c.torch_einsum,
         params=(Param("subscripts", TEXT, None),), variadic="star", shape=c.einsum_shape,
         engine=EngineRule(eq.final_node, (cv.einsum_vjp,)),
         tensor=ct.tensor_rule(ct.einsum_tensor),
         rounding=BOUNDS["einsum"], example='einsum("ij,jk->ik", x, W)',
         doc="Einstein summation of one or two operands"),
    Rule("one_hot", REDUCTION, 1, c.sym_one_hot, c.np_one_hot, c.torch_one_hot,
         params=(Param("n", INT, None),), shape=c.one_hot_shape, domain=("integer",),
         engine=EngineRule(None, (None,), saves=False), tensor=ct.tensor_rule(None),
         rounding=BOUNDS["one_hot"], example="one_hot(idx, 4) @ W",
         doc="integer labels as rows of the identity (n classes)"),
]
