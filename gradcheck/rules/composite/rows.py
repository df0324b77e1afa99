"""Composite reductions, scans and sorts (softmax, var, norm, cumsum, sort, topk, einsum...):
rows of the rule table.

Rows of the composite family: each states its own first-order rounding bound (its
``rounding`` column holds a :class:`.bounds.Bound`), as the generic model cannot see
through how it mixes elements. Each row's columns are in :mod:`.columns` (SymPy, NumPy,
torch, shapes, hazards, selectors), :mod:`.vjps` (the engine's VJPs, PyTorch's backward
formulas), :mod:`.tensor` (the exact tensor-level adjoints) and :mod:`.bounds` (their
rounding bounds); einsum's subscripts are parsed in :mod:`.einsum`. The rows are
appended to the table by :mod:`gradcheck.rules.table` (``ROWS``, in table order). einsum's engine
op is written by hand (:mod:`gradcheck.engine.einsum`): PyTorch records it as the
permutes, views, sums and one bmm or mul its C++ decomposes it into.
"""

from __future__ import annotations

import math

from . import columns as cc
from . import tensor as ct
from . import vjps as cv
from . import einsum as eq
from .bounds import BOUNDS
from ..row import AXIS, BOOL, COMPOSITE, INT, NUMBER, TEXT, EngineRule, Param, Rule

ALONG = (Param("axis", AXIS, -1),)
MOMENTS = (Param("axis", AXIS, None), Param("correction", INT, 1),
           Param("keepdims", BOOL, False))


def composite_row(*, name: str, grad_fn: str, vjp, tensor_vjp, params=ALONG, saves=True,
                  **row) -> Rule:
    """A composite row of one operand along ``axis=`` (by default; softmax, var, sort...),
    its rounding bound :data:`.bounds.BOUNDS` ``[name]``, its shape by default the
    operand's (:func:`.columns.along_shape`)."""
    row.setdefault("shape", cc.along_shape(name))
    return Rule(
        name=name, family=COMPOSITE, arity=1, params=params,
        engine=EngineRule(grad_fn, (vjp,), saves), tensor=ct.tensor_rule(tensor_vjp),
        rounding=BOUNDS[name], **row)


ROWS: list[Rule] = [
    composite_row(
        name="softmax", sympy=cc.sym_softmax, numpy=cc.np_softmax, torch=cc.torch_softmax,
        grad_fn="SoftmaxBackward0", vjp=cv.softmax_vjp, tensor_vjp=ct.softmax_tensor,
        exponential=True, example="softmax(x, axis=1)", doc="exp(x) / sum(exp(x)) along axis"),
    composite_row(
        name="log_softmax", sympy=cc.sym_log_softmax, numpy=cc.np_log_softmax,
        torch=cc.torch_log_softmax, grad_fn="LogSoftmaxBackward0", vjp=cv.log_softmax_vjp,
        tensor_vjp=ct.log_softmax_tensor, exponential=True, example="log_softmax(x)",
        doc="x - logsumexp(x) along axis"),
    composite_row(
        name="var", sympy=cc.sym_var, numpy=cc.np_var, torch=cc.torch_var, grad_fn="VarBackward0",
        vjp=cv.var_vjp, tensor_vjp=ct.var_tensor, params=MOMENTS, shape=cc.var_shape,
        example="var(x, axis=1)", doc="sum((x - mean(x))**2) / (n - correction)"),
    composite_row(
        name="std", sympy=cc.sym_std, numpy=cc.np_std, torch=cc.torch_std, grad_fn="StdBackward0",
        vjp=cv.std_vjp, tensor_vjp=ct.std_tensor, params=MOMENTS, shape=cc.var_shape,
        hazard=cc.std_hazard, example="std(x, axis=1, correction=0)", doc="sqrt(var(x, ...))"),
    composite_row(
        name="norm", sympy=cc.sym_norm, numpy=cc.np_norm, torch=cc.torch_norm,
        grad_fn="LinalgVectorNormBackward0", vjp=cv.norm_vjp, tensor_vjp=ct.norm_tensor,
        shape=cc.norm_shape, hazard=cc.norm_hazard, selector=cc.norm_selector,
        example="norm(x, ord=1, axis=1)",
        params=(Param("ord", NUMBER, 2.0, choices=(1.0, 2.0, math.inf)),
                Param("axis", AXIS, None), Param("keepdims", BOOL, False)),
        doc="vector norm: ord 2, 1, inf or p >= 1 (torch.linalg.vector_norm)"),
    composite_row(
        name="cumsum", sympy=cc.sym_cumsum, numpy=cc.np_cumsum, torch=cc.torch_cumsum,
        grad_fn="CumsumBackward0", vjp=cv.cumsum_vjp, tensor_vjp=ct.cumsum_tensor, saves=False,
        example="cumsum(x, 1)", doc="cumulative sum along axis"),
    composite_row(
        name="cumprod", sympy=cc.sym_cumprod, numpy=cc.np_cumprod, torch=cc.torch_cumprod,
        grad_fn="CumprodBackward0", vjp=cv.cumprod_vjp, tensor_vjp=ct.cumprod_tensor,
        example="cumprod(x, axis=1)", doc="cumulative product along axis"),
    composite_row(
        name="sort", sympy=cc.sym_sort, numpy=cc.np_sort, torch=cc.torch_sort,
        grad_fn="SortBackward0", vjp=cv.sort_vjp, tensor_vjp=ct.sort_tensor,
        params=(*ALONG, Param("descending", BOOL, False)), hazard=cc.sort_hazard,
        selector=cc.sort_selector, example="sort(x, descending=True)",
        doc="sorted values along axis"),
    composite_row(
        name="topk", sympy=cc.sym_topk, numpy=cc.np_topk, torch=cc.torch_topk,
        grad_fn="TopkBackward0", vjp=cv.topk_vjp, tensor_vjp=ct.topk_tensor,
        params=(Param("k", INT, 1), *ALONG), shape=cc.topk_shape, hazard=cc.topk_hazard,
        selector=cc.topk_selector, example="topk(x, 2)",
        doc="the k largest values along axis, largest first"),
    Rule(
        name="einsum", family=COMPOSITE, arity=1, sympy=cc.sym_einsum, numpy=cc.np_einsum,
        torch=cc.torch_einsum, params=(Param("subscripts", TEXT, None),), variadic="star",
        shape=cc.einsum_shape, engine=EngineRule(eq.final_node, (cv.einsum_vjp,)),
        tensor=ct.tensor_rule(ct.einsum_tensor), rounding=BOUNDS["einsum"],
        example='einsum("ij,jk->ik", x, W)', doc="Einstein summation of any number of operands"),
    # one_hot maps integer labels to exact 0/1 rows: no reduction (it adds an axis), not a
    # linear map of a float operand (structure), no derivative; it states its own bound
    # (exact forward, no backward), which is what the composite family is
    Rule(
        name="one_hot", family=COMPOSITE, arity=1, sympy=cc.sym_one_hot, numpy=cc.np_one_hot,
        torch=cc.torch_one_hot, params=(Param("n", INT, None),), shape=cc.one_hot_shape,
        domain=("integer",), engine=EngineRule(None, (None,), saves=False),
        tensor=ct.tensor_rule(None), rounding=BOUNDS["one_hot"], example="one_hot(idx, 4) @ W",
        doc="integer labels as rows of the identity (n classes)"),
]
