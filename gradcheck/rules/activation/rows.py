"""Elementwise functions of activations and rounding (gelu, silu, elu, floor...): rows of
the rule table.

Rows of the elementwise family. They are appended to the table by
:mod:`gradcheck.rules.table` (``ROWS``, in table order); their columns' functions are in
:mod:`.columns`.
"""

from __future__ import annotations

import numpy as np

from . import columns as ac
from ..columns import torch_fn
from ..elementwise.columns import clamp_hazard, np_clamp
from ..elementwise.rows import elementwise_binary, elementwise_unary
from ..row import CHOICE, NUMBER, Param, Rule
from ..terms import Terms
from ..vjps import engine_rule

#: Rows whose value is constant between jumps (derivative zero wherever it exists):
#: a comparison of their results holds on whole regions, equality included (sampling
#: reads this: :func:`gradcheck.formula.forward.steady_nodes`).
STEPS = frozenset({"sign", "floor", "ceil", "round", "trunc"})


def step_row(*, name: str, numpy, hazard, doc: str) -> Rule:
    """A step (floor, ceil...): constant between jumps, its gradient zero."""
    # periodic: the jumps recur at every magnitude while finite differences' steps grow
    # with |x| (1e-3·|x|), so extreme points keep the argument within sampling's reach
    return elementwise_unary(
        name=name, sympy=ac.sym_step(name), numpy=numpy, torch=torch_fn(name), hazard=hazard,
        rounding=0, doc=doc, periodic=True, example=f"{name}(x * 3) + x",
        engine=engine_rule(f"{name.capitalize()}Backward0", ac.zero_vjp, saves=False))


ROWS: list[Rule] = [
    # two operands
    elementwise_binary(
        name="hypot", sympy=ac.sym_hypot, numpy=np.hypot, torch=torch_fn("hypot"), hazard=np.hypot,
        doc="sqrt(a**2 + b**2), without overflow", example="hypot(x, y)",
        engine=engine_rule("HypotBackward0", lambda g, ans, a, b: g * a / ans,
                           lambda g, ans, a, b: g * b / ans)),
    elementwise_binary(
        name="logaddexp", sympy=ac.sym_logaddexp, numpy=np.logaddexp,
        torch=torch_fn("logaddexp"), doc="log(exp(a) + exp(b))", example="logaddexp(x, y)",
        shown=("sigmoid(a - b)", "sigmoid(b - a)"),
        # m + log1p(exp(-|a - b|)): the log1p term (at most ln 2) can cancel against m
        rounding=Terms(2, lambda t, a, b: np.abs(t) + 1),
        engine=engine_rule("LogaddexpBackward0", ac.logaddexp_vjp,
                           lambda g, ans, a, b: ac.logaddexp_vjp(g, ans, b, a))),
    # (y = 0 is log's singularity; at x == 0 the value is 0 whatever y, as torch's,
    # and the x-gradient log(y), 0 where y <= 0)
    elementwise_binary(
        name="xlogy", sympy=ac.sym_xlogy, numpy=ac.np_xlogy, torch=torch_fn("xlogy"),
        hazard=lambda x, y: np.abs(y), domain=("real", "positive"),
        doc="x * log(y), 0 where x == 0", example="xlogy(x, exp(y))",
        engine=engine_rule("XlogyBackward0", ac.xlogy_x, lambda g, ans, x, y: g * x / y)),
    # powers
    elementwise_unary(
        name="square", sympy=lambda x: x ** 2, numpy=np.square, torch=torch_fn("square"),
        rounding=1, doc="x ** 2 (torch records PowBackward0)",
        engine=engine_rule("PowBackward0", lambda g, ans, x: g * (2 * x))),
    elementwise_unary(
        name="rsqrt", sympy=ac.sym_rsqrt, numpy=lambda x: 1 / np.sqrt(x), torch=torch_fn("rsqrt"),
        hazard=np.abs, domain=("positive",), doc="1 / sqrt(x)",
        engine=engine_rule("RsqrtBackward0", lambda g, ans, x: -0.5 * g * ans ** 3)),
    elementwise_unary(
        name="reciprocal", sympy=lambda x: 1 / x, numpy=lambda x: np.divide(1.0, x),
        torch=torch_fn("reciprocal"), hazard=np.abs, domain=("nonzero",), doc="1 / x", rounding=1,
        engine=engine_rule("ReciprocalBackward0", lambda g, ans, x: -g * (ans * ans))),
    # steps: zero gradient between the jumps, points kept away from them
    step_row(
        name="floor", numpy=np.floor, hazard=ac.integer_distance, doc="largest integer <= x"),
    step_row(
        name="ceil", numpy=np.ceil, hazard=ac.integer_distance, doc="smallest integer >= x"),
    step_row(
        name="round", numpy=np.rint, hazard=ac.half_distance,
        doc="nearest integer, half to even (as torch)"),
    step_row(
        name="trunc", numpy=np.trunc, hazard=ac.trunc_distance, doc="x rounded toward 0"),
    # activations (torch.nn.functional)
    elementwise_unary(
        name="gelu", sympy=ac.sym_gelu, numpy=ac.np_gelu, torch=ac.torch_gelu,
        params=(Param("approximate", CHOICE, "none", choices=("none", "tanh")),),
        shape=ac.same_shape, doc='x * Phi(x); approximate="tanh": its tanh form',
        example='gelu(x, approximate="tanh")', shown=ac.gelu_shown,
        rounding=Terms(3, ac.gelu_terms, (ac.gelu_vjp_terms,)),
        engine=engine_rule("GeluBackward0", ac.gelu_vjp)),
    elementwise_unary(
        name="silu", sympy=ac.sym_silu, numpy=lambda x: x * ac._expit(x),
        torch=ac.torch_activation("silu"), doc="x * sigmoid(x)", exponential=True,
        shown=("sigmoid(x) * (1 + x * (1 - sigmoid(x)))",),
        rounding=Terms(4, None, (ac.silu_vjp_terms,)),
        engine=engine_rule("SiluBackward0", ac.silu_vjp)),
    elementwise_unary(
        name="mish", sympy=ac.sym_mish, numpy=ac.np_mish, torch=ac.torch_activation("mish"),
        doc="x * tanh(softplus(x))", exponential=True,
        shown=("tanh(softplus(x)) + x * sigmoid(x) * (1 - tanh(softplus(x)) ** 2)",),
        rounding=Terms(5, None, (ac.mish_vjp_terms,)),
        engine=engine_rule("MishBackward0", ac.mish_vjp)),
    elementwise_unary(
        name="elu", sympy=ac.sym_elu, numpy=ac.np_elu, torch=ac.torch_activation("elu", "alpha"),
        hazard=ac.zero_distance, params=(Param("alpha", NUMBER, 1.0),), exponential=True,
        shape=ac.same_shape, doc="x where x > 0, else alpha * (exp(x) - 1)",
        example="elu(x, alpha=0.5)", engine=engine_rule("EluBackward0", ac.elu_vjp)),
    elementwise_unary(
        name="leaky_relu", sympy=ac.sym_leaky_relu, numpy=ac.np_leaky_relu,
        torch=ac.torch_activation("leaky_relu", "negative_slope"), hazard=ac.zero_distance,
        params=(Param("slope", NUMBER, 0.01),), rounding=1, shape=ac.same_shape,
        doc="x where x > 0, else slope * x (torch: negative_slope)",
        example="leaky_relu(x, slope=0.1)",
        engine=engine_rule("LeakyReluBackward0", ac.leaky_relu_vjp)),
    elementwise_unary(
        name="hardtanh", sympy=ac.sym_hardtanh, numpy=np_clamp,
        torch=ac.torch_activation("hardtanh", "min_val", "max_val"), hazard=clamp_hazard,
        params=(Param("lo", NUMBER, -1.0), Param("hi", NUMBER, 1.0)), rounding=1,
        shape=ac.hardtanh_shape,
        doc="x limited to [lo, hi], gradient 0 at the bounds (torch: min_val, max_val)",
        example="hardtanh(x, lo=-0.5, hi=2)",
        engine=engine_rule("HardtanhBackward0", ac.hardtanh_vjp)),
]
