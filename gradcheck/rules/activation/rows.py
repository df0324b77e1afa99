"""Elementwise functions of activations and rounding (gelu, silu, elu, floor...): rows of the rule table.

The rows are appended to the table by :mod:`.table` (``ROWS``, in table order); their
columns' functions are in :mod:`.activation_columns`.
"""

from __future__ import annotations

import numpy as np

from . import columns as ac
from ..columns import clamp_hazard, np_clamp, torch_fn as t
from ..row import CHOICE, ELEMENTWISE, NUMBER, Param, Rule
from ..terms import Terms
from ..vjps import engine_rule as e

#: Rows whose value is constant between jumps (derivative zero wherever it exists):
#: a comparison of their results holds on whole regions, equality included (sampling
#: reads this: :func:`gradcheck.formula.forward.steady_nodes`).
STEPS = frozenset({"sign", "floor", "ceil", "round", "trunc"})


def _unary(name, sym, np_fn, torch_fn, hazard=None, **row):
    return Rule(name, ELEMENTWISE, 1, sym, np_fn, torch_fn, hazard, **row)


def _binary(name, sym, np_fn, torch_fn, hazard=None, **row):
    return Rule(name, ELEMENTWISE, 2, sym, np_fn, torch_fn, hazard, **row)


def _step(name, np_fn, hazard, doc):
    # periodic: the jumps recur at every magnitude while finite differences' steps grow
    # with |x| (1e-3·|x|), so extreme points keep the argument within sampling's reach
    return _unary(name, ac.sym_step(name), np_fn, t(name), hazard, rounding=0, doc=doc,
                  periodic=True,
                  example=f"{name}(x * 3) + x",
                  engine=e(f"{name.capitalize()}Backward0", ac.zero_vjp, saves=False))


ROWS: list[Rule] = [
    # two operands
    _binary("hypot", ac.sym_hypot, np.hypot, t("hypot"), hazard=np.hypot,
            doc="sqrt(a**2 + b**2), without overflow", example="hypot(x, y)",
            engine=e("HypotBackward0", lambda g, ans, a, b: g * a / ans,
                     lambda g, ans, a, b: g * b / ans)),
    _binary("logaddexp", ac.sym_logaddexp, np.logaddexp, t("logaddexp"),
            doc="log(exp(a) + exp(b))", example="logaddexp(x, y)",
            # m + log1p(exp(-|a - b|)): the log1p term (at most ln 2) can cancel against m
            rounding=Terms(2, lambda t, a, b: np.abs(t) + 1),
            engine=e("LogaddexpBackward0", ac.logaddexp_vjp,
                     lambda g, ans, a, b: ac.logaddexp_vjp(g, ans, b, a))),
    # (y = 0 is log's singularity; at x == 0 the value is 0 whatever y, as torch's,
    # and the x-gradient log(y), 0 where y <= 0)
    _binary("xlogy", ac.sym_xlogy, ac.np_xlogy, t("xlogy"),
            hazard=lambda x, y: np.abs(y), domain=("real", "positive"),
            doc="x * log(y), 0 where x == 0", example="xlogy(x, exp(y))",
            engine=e("XlogyBackward0", ac.xlogy_x, lambda g, ans, x, y: g * x / y)),
    # powers
    _unary("square", lambda x: x ** 2, np.square, t("square"), rounding=1,
           doc="x ** 2 (torch records PowBackward0)",
           engine=e("PowBackward0", lambda g, ans, x: g * (2 * x))),
    _unary("rsqrt", ac.sym_rsqrt, lambda x: 1 / np.sqrt(x), t("rsqrt"),
           hazard=np.abs, domain=("positive",), doc="1 / sqrt(x)",
           engine=e("RsqrtBackward0", lambda g, ans, x: -0.5 * g * ans ** 3)),
    _unary("reciprocal", lambda x: 1 / x, lambda x: np.divide(1.0, x), t("reciprocal"),
           hazard=np.abs, domain=("nonzero",), doc="1 / x", rounding=1,
           engine=e("ReciprocalBackward0", lambda g, ans, x: -g * (ans * ans))),
    # steps: zero gradient between the jumps, points kept away from them
    _step("floor", np.floor, ac.integer_distance, "largest integer <= x"),
    _step("ceil", np.ceil, ac.integer_distance, "smallest integer >= x"),
    _step("round", np.rint, ac.half_distance, "nearest integer, half to even (as torch)"),
    _step("trunc", np.trunc, ac.trunc_distance, "x rounded toward 0"),
    # activations (torch.nn.functional)
    _unary("gelu", ac.sym_gelu, ac.np_gelu, ac.torch_gelu,
           params=(Param("approximate", CHOICE, "none", choices=("none", "tanh")),),
           shape=ac.same_shape,
           doc='x * Phi(x); approximate="tanh": its tanh form', example='gelu(x, approximate="tanh")',
           rounding=Terms(3, ac.gelu_terms, (ac.gelu_vjp_terms,)),
           engine=e("GeluBackward0", ac.gelu_vjp)),
    _unary("silu", ac.sym_silu, lambda x: x * ac._expit(x), ac.torch_activation("silu"),
           doc="x * sigmoid(x)", exponential=True, rounding=Terms(4, None, (ac.silu_vjp_terms,)),
           engine=e("SiluBackward0", ac.silu_vjp)),
    _unary("mish", ac.sym_mish, ac.np_mish, ac.torch_activation("mish"),
           doc="x * tanh(softplus(x))", exponential=True,
           rounding=Terms(5, None, (ac.mish_vjp_terms,)),
           engine=e("MishBackward0", ac.mish_vjp)),
    _unary("elu", ac.sym_elu, ac.np_elu, ac.torch_activation("elu", "alpha"),
           hazard=ac.zero_distance, params=(Param("alpha", NUMBER, 1.0),), exponential=True,
           shape=ac.same_shape,
           doc="x where x > 0, else alpha * (exp(x) - 1)", example="elu(x, alpha=0.5)",
           engine=e("EluBackward0", ac.elu_vjp)),
    _unary("leaky_relu", ac.sym_leaky_relu, ac.np_leaky_relu,
           ac.torch_activation("leaky_relu", "negative_slope"), hazard=ac.zero_distance,
           params=(Param("slope", NUMBER, 0.01),), rounding=1, shape=ac.same_shape,
           doc="x where x > 0, else slope * x (torch: negative_slope)",
           example="leaky_relu(x, slope=0.1)",
           engine=e("LeakyReluBackward0", ac.leaky_relu_vjp)),
    _unary("hardtanh", ac.sym_hardtanh, np_clamp,
           ac.torch_activation("hardtanh", "min_val", "max_val"), hazard=clamp_hazard,
           params=(Param("lo", NUMBER, -1.0), Param("hi", NUMBER, 1.0)), rounding=0,
           shape=ac.hardtanh_shape,
           doc="x limited to [lo, hi], gradient 0 at the bounds (torch: min_val, max_val)",
           example="hardtanh(x, lo=-0.5, hi=2)",
           engine=e("HardtanhBackward0", ac.hardtanh_vjp)),
]
