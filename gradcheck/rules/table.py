"""The primitive table: one row per primitive, the single place a primitive is defined.

Each row (:class:`gradcheck.rules.row.Rule`) holds a primitive's columns (SymPy, NumPy,
torch, the engine's VJPs), its parameters, spelling, domain and shape rule; the columns'
functions live in :mod:`.columns` and :mod:`.vjps`, this module lists the rows. Axes
reaching the array-valued columns are already normalised to a tuple of non-negative
ints (``None`` never reaches them).
"""

from __future__ import annotations

import operator

import numpy as np

from ..base.shapes import matmul_shape
from .columns import (abs_distance, cfunction, clamp_hazard, clamp_shape, dot_shape, np_clamp,
                      np_erf, np_logsumexp, np_matmul, np_reduce, np_sigmoid, obj_dot, obj_matmul,
                      one_hot, pow_hazard, runner_down_gaps, runner_up_gaps, sym_clamp,
                      sym_logsumexp, sym_mean, sym_reduction, sym_relu, sym_selected, sym_sigmoid,
                      sym_softplus, sym_where, sympy, sympy_fn as s, torch_clamp, torch_fn as t,
                      torch_reduce, torch_softplus)
from .row import AXIS, BOOL, COMPARISON, ELEMENTWISE, INT, LINALG, NUMBER, REDUCTION, Param, Rule
from . import tensor as tv
from .activation.rows import ROWS as ACTIVATION_ROWS
from .composite.rows import ROWS as COMPOSITE_ROWS
from .conv.rows import ROWS as CONV_ROWS
from .structure.rows import ROWS as STRUCTURE_ROWS, structural
from .structure import columns as sc, tensor as st, vjps as sv
from .vjps import (SQRT_PI, atan2_recip, clamp_vjp, count, engine_rule as e, identity_vjp, keep,
                   matmul_a, matmul_b, matmul_name, others_product, pow_base, pow_exponent,
                   pow_name, reduction_name, share, sub_name, ties)

# Reductions take axis= (None: every axis) and keepdims=, as NumPy's do.
REDUCE_PARAMS = (Param("axis", AXIS, None), Param("keepdims", BOOL, False))


def unary(name, sym, np_fn, torch_fn, hazard=None, **row):
    return Rule(name, ELEMENTWISE, 1, sym, np_fn, torch_fn, hazard, **row)


def binary(name, sym, np_fn, torch_fn, hazard=None, **row):
    return Rule(name, ELEMENTWISE, 2, sym, np_fn, torch_fn, hazard, **row)


def reduction(name, combine, np_fn, torch_fn, hazard=None, **row):
    row.setdefault("example", f"{name}(x, axis=1)")
    return Rule(name, REDUCTION, 1, sym_reduction(combine), np_fn, torch_fn, hazard,
                params=REDUCE_PARAMS, **row)


def comparison(name, sym, op, symbol, example=None):
    return Rule(name, COMPARISON, 2, sym, lambda a, b: op(np.asarray(a), np.asarray(b)), op,
                hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b)),
                doc="condition of where()", symbol=symbol, numbers=True,
                example=example or f"where(x {symbol} y, x, y)",
                engine=e(None))   # not differentiable


def logical(name, sym, np_fn, op, symbol):
    arity = 1 if symbol == "~" else 2
    example = ("where(~(x > 0), x, y)" if arity == 1 else
               f"where((x > 0) {symbol} (y < 1), x, y)")
    return Rule(name, COMPARISON, arity, sym, np_fn, op, doc="combines conditions of where()",
                symbol=symbol, example=example, rounding=0, engine=e(None))


def _gap(a, b):
    return np.abs(np.asarray(a) - np.asarray(b))


_ROWS: list[Rule] = [
    # arithmetic (operators of the expression language)
    binary("add", lambda a, b: a + b, np.add, lambda a, b: a + b, doc="a + b",
           symbol="+", numbers=True, rounding=1,
           engine=e("AddBackward0", identity_vjp, identity_vjp, saves=False)),
    binary("sub", lambda a, b: a - b, np.subtract, lambda a, b: a - b, doc="a - b",
           symbol="-", numbers=True, rounding=1,
           engine=e(sub_name, identity_vjp, lambda g, ans, a, b: -g, saves=False)),
    binary("mul", lambda a, b: a * b, np.multiply, lambda a, b: a * b, doc="a * b",
           symbol="*", numbers=True, rounding=1,
           engine=e("MulBackward0", lambda g, ans, a, b: g * b,
                    lambda g, ans, a, b: g * a)),
    binary("div", lambda a, b: a / b, np.divide, lambda a, b: a / b,
           hazard=lambda a, b: np.abs(b), doc="a / b", symbol="/", numbers=True,
           domain=("real", "nonzero"), rounding=1,
           engine=e("DivBackward0", lambda g, ans, a, b: g / b,
                    lambda g, ans, a, b: -g * a / (b * b))),
    binary("pow", lambda a, b: a ** b, np.power, lambda a, b: a ** b,
           hazard=pow_hazard, doc="a ** b (tensor or constant exponent)", symbol="**",
           numbers=True, domain=("positive", "real"),
           engine=e(pow_name, pow_base, pow_exponent)),
    unary("neg", lambda x: -x, np.negative, lambda x: -x, doc="-x", symbol="-",
          numbers=True, rounding=0,
          engine=e("NegBackward0", lambda g, ans, x: -g, saves=False)),
    # exponentials and logarithms
    unary("exp", s("exp"), np.exp, t("exp"), grows=True, exponential=True,
          engine=e("ExpBackward0", lambda g, ans, x: g * ans)),
    unary("log", s("log"), np.log, t("log"), hazard=abs_distance, domain=("positive",),
          engine=e("LogBackward0", lambda g, ans, x: g / x)),
    unary("log1p", lambda x: cfunction("log1p")(x), np.log1p, t("log1p"),
          hazard=lambda x: np.abs(1 + np.asarray(x)), domain=((-1.0, np.inf),),
          engine=e("Log1PBackward0", lambda g, ans, x: g / (x + 1))),
    unary("expm1", lambda x: cfunction("expm1")(x), np.expm1, t("expm1"), grows=True, exponential=True,
          engine=e("Expm1Backward0", lambda g, ans, x: g * (ans + 1))),
    unary("sqrt", s("sqrt"), np.sqrt, t("sqrt"), hazard=abs_distance, domain=("positive",),
          rounding=1,
          engine=e("SqrtBackward0", lambda g, ans, x: g / (2 * ans))),
    # trigonometric and hyperbolic
    unary("sin", s("sin"), np.sin, t("sin"), periodic=True,
          engine=e("SinBackward0", lambda g, ans, x: g * np.cos(x))),
    unary("cos", s("cos"), np.cos, t("cos"), periodic=True,
          engine=e("CosBackward0", lambda g, ans, x: g * -np.sin(x))),
    # (tan's domain is its principal branch: generators keep to one branch)
    unary("tan", s("tan"), np.tan, t("tan"), hazard=lambda x: np.abs(np.cos(x)),
          domain=((-np.pi / 2, np.pi / 2),), grows=True, periodic=True,
          engine=e("TanBackward0", lambda g, ans, x: g * (1 + ans * ans))),
    unary("asin", s("asin"), np.arcsin, t("asin"), hazard=lambda x: 1 - np.abs(x),
          domain=("unit",),
          engine=e("AsinBackward0", lambda g, ans, x: g / np.sqrt(1 - x * x))),
    unary("acos", s("acos"), np.arccos, t("acos"), hazard=lambda x: 1 - np.abs(x),
          domain=("unit",),
          engine=e("AcosBackward0", lambda g, ans, x: -g / np.sqrt(1 - x * x))),
    unary("atan", s("atan"), np.arctan, t("atan"),
          engine=e("AtanBackward0", lambda g, ans, x: g / (x * x + 1))),
    # atan2(y, x): singular at the origin, and jumps by 2π across y = 0 where x < 0;
    # its domain here is the half-plane x > 0, where it is smooth (generators map x
    # into it; a case's own inputs may lie anywhere, kept off the hazard)
    binary("atan2", s("atan2"), np.arctan2, t("atan2"), domain=("real", "positive"),
           hazard=lambda y, x: np.where(np.asarray(x) < 0, np.minimum(np.abs(y), np.hypot(
               y, x)), np.hypot(y, x)), doc="atan2(y, x): the angle of the point (x, y)", example="atan2(x, y)",
           engine=e("Atan2Backward0", lambda g, ans, y, x: g * x * atan2_recip(y, x),
                    lambda g, ans, y, x: g * -y * atan2_recip(y, x))),
    unary("sinh", s("sinh"), np.sinh, t("sinh"), grows=True, exponential=True,
          engine=e("SinhBackward0", lambda g, ans, x: g * np.cosh(x))),
    unary("cosh", s("cosh"), np.cosh, t("cosh"), grows=True, exponential=True,
          engine=e("CoshBackward0", lambda g, ans, x: g * np.sinh(x))),
    unary("tanh", s("tanh"), np.tanh, t("tanh"),
          engine=e("TanhBackward0", lambda g, ans, x: g * (1 - ans * ans))),
    unary("asinh", s("asinh"), np.arcsinh, t("asinh"),
          engine=e("AsinhBackward0", lambda g, ans, x: g / np.sqrt(x * x + 1))),
    unary("acosh", s("acosh"), np.arccosh, t("acosh"),
          hazard=lambda x: np.asarray(x) - 1, domain=((1.0, np.inf),),
          engine=e("AcoshBackward0", lambda g, ans, x: g / np.sqrt(x * x - 1))),
    unary("atanh", s("atanh"), np.arctanh, t("atanh"), hazard=lambda x: 1 - np.abs(x),
          domain=("unit",),
          engine=e("AtanhBackward0", lambda g, ans, x: g / (1 - x * x))),
    # non-smooth and special
    unary("abs", s("Abs"), np.abs, t("abs"), hazard=abs_distance, rounding=0,
          engine=e("AbsBackward0", lambda g, ans, x: g * np.sign(x))),
    unary("sign", s("sign"), np.sign, t("sign"), hazard=abs_distance, rounding=0,
          engine=e("SignBackward0", lambda g, ans, x: np.zeros_like(g), saves=False)),
    unary("erf", s("erf"), np_erf, t("erf"),
          engine=e("ErfBackward0", lambda g, ans, x: g * (2 / SQRT_PI) * np.exp(-x * x))),
    unary("sigmoid", sym_sigmoid, np_sigmoid, t("sigmoid"), doc="1 / (1 + exp(-x))",
          exponential=True,
          engine=e("SigmoidBackward0", lambda g, ans, x: g * (1 - ans) * ans)),
    unary("softplus", sym_softplus, lambda x: np.logaddexp(0.0, x), torch_softplus,
          doc="log(1 + exp(x))", exponential=True,
          engine=e("SoftplusBackward0", lambda g, ans, x: g * np_sigmoid(x))),
    unary("relu", sym_relu, lambda x: np.maximum(x, 0.0), t("relu"), hazard=abs_distance,
          doc="max(x, 0)", rounding=0,
          engine=e("ReluBackward0", lambda g, ans, x: np.where(ans > 0, g, 0.0))),
    unary("clamp", sym_clamp, np_clamp, torch_clamp, hazard=clamp_hazard,
          params=(Param("min", NUMBER), Param("max", NUMBER)), shape=clamp_shape,
          doc="clamp(x, min=None, max=None): x limited to [min, max]",
          example="clamp(x, min=-1, max=1)", rounding=1,
          engine=e("ClampBackward1", clamp_vjp)),
    binary("maximum", s("Max"), np.maximum, t("maximum"), hazard=_gap, rounding=0,
           engine=e("MaximumBackward0", lambda g, ans, a, b: g * share(a, b),
                    lambda g, ans, a, b: g * share(b, a))),
    binary("minimum", s("Min"), np.minimum, t("minimum"), hazard=_gap, rounding=0,
           engine=e("MinimumBackward0", lambda g, ans, a, b: g * share(b, a),
                    lambda g, ans, a, b: g * share(a, b))),
    Rule("where", ELEMENTWISE, 3, sym_where, np.where, t("where"),
         doc="where(cond, a, b): a where cond holds, else b",
         example="where(x > 0, x, y)", rounding=0,
         engine=e("WhereBackward0", None, lambda g, ans, c, a, b: np.where(c, g, 0.0),
                  lambda g, ans, c, a, b: np.where(c, 0.0, g))),
    # conditions of where()
    comparison("lt", s("StrictLessThan"), operator.lt, "<"),
    comparison("le", s("LessThan"), operator.le, "<="),
    comparison("gt", s("StrictGreaterThan"), operator.gt, ">"),
    comparison("ge", s("GreaterThan"), operator.ge, ">="),
    # Equality of floats holds on a set of measure zero: where(x == 1, ...) at drawn
    # points is the else branch, and points keep |x - 1| >= MARGIN, like any condition's.
    # Equality is checked where it can hold: between exact values (integer and boolean
    # inputs, constants) and between the results of steps (round(x) == 0, sign(x) ==
    # sign(y)), which are constant on whole regions; sampling waives the hazard of such a
    # comparison (gradcheck.formula.forward.steady_nodes), the steps' own keep points off jumps.
    comparison("eq", s("Eq"), operator.eq, "==", "where(round(x) == 0, x, y)"),
    comparison("ne", s("Ne"), operator.ne, "!=", "where(sign(x) != sign(y), x, y)"),
    # conditions combined, as torch combines bool tensors (& | ~); their operands are
    # conditions, whose own hazards the sampler keeps away from
    logical("logical_and", s("And"), np.logical_and, operator.and_, "&"),
    logical("logical_or", s("Or"), np.logical_or, operator.or_, "|"),
    logical("logical_not", s("Not"), np.logical_not, operator.invert, "~"),
    # reductions, with axis= and keepdims=
    reduction("sum", lambda el: sympy.Add(*el), np_reduce(np.add.reduce),
              torch_reduce("sum"),
              engine=e(reduction_name("Sum"), lambda g, ans, x, axis, keepdims:
                       np.broadcast_to(keep(g, axis, keepdims), np.shape(x)),
                       saves=False), tensor=tv.tensor_rule(tv.sum_vjp)),
    reduction("mean", sym_mean, np_reduce(np.mean), torch_reduce("mean"),
              engine=e(reduction_name("Mean"), lambda g, ans, x, axis, keepdims:
                       np.broadcast_to(keep(g, axis, keepdims) / count(x, axis),
                                       np.shape(x)), saves=False),
              tensor=tv.tensor_rule(tv.mean_vjp)),
    reduction("prod", lambda el: sympy.Mul(*el), np_reduce(np.multiply.reduce),
              torch_reduce("prod"),
              engine=e(reduction_name("Prod"), lambda g, ans, x, axis, keepdims:
                       keep(g, axis, keepdims) * others_product(x, axis)),
              tensor=tv.tensor_rule(tv.prod_vjp)),
    Rule("max", REDUCTION, 1, sym_selected, np_reduce(np.maximum.reduce),
         torch_reduce("amax"),
         hazard=runner_up_gaps, selector=one_hot(np.argmax), rounding=0,
         params=REDUCE_PARAMS, tensor=tv.tensor_rule(tv.selected_vjp("max")),
         example="max(x, axis=1)",
         engine=e("AmaxBackward0", lambda g, ans, x, axis, keepdims:
                  keep(g, axis, keepdims) * ties(x, ans, axis, keepdims))),
    Rule("min", REDUCTION, 1, sym_selected, np_reduce(np.minimum.reduce),
         torch_reduce("amin"),
         hazard=runner_down_gaps, selector=one_hot(np.argmin), rounding=0,
         params=REDUCE_PARAMS, tensor=tv.tensor_rule(tv.selected_vjp("min")),
         example="min(x, axis=1)",
         engine=e("AminBackward0", lambda g, ans, x, axis, keepdims:
                  keep(g, axis, keepdims) * ties(x, ans, axis, keepdims))),
    reduction("logsumexp", sym_logsumexp, np_logsumexp,
              torch_reduce("logsumexp", need_dim=True), exponential=True,
              engine=e("LogsumexpBackward0", lambda g, ans, x, axis, keepdims:
                       keep(g, axis, keepdims) * np.exp(x - keep(ans, axis, keepdims))),
              tensor=tv.tensor_rule(tv.logsumexp_vjp)),
    # linear algebra
    Rule("matmul", LINALG, 2, obj_matmul, np_matmul, lambda a, b: a @ b, doc="a @ b", example="x @ W",
         symbol="@", shape=matmul_shape,
         engine=e(matmul_name, matmul_a, matmul_b),
         tensor=tv.tensor_rule(tv.matmul_a, tv.matmul_b)),
    Rule("dot", LINALG, 2, obj_dot, np.dot, t("dot"), doc="inner product of two vectors", example="dot(v, u)",
         shape=dot_shape,
         engine=e("DotBackward0", lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a),
         tensor=tv.tensor_rule(tv.dot_a, tv.dot_b)),
    # (a structural row, older than its family's module: see .structure)
    structural("transpose", 1, sc.np_transpose, sc.torch_transpose, sc.transpose_shape,
               (Param("dim0", INT, -2), Param("dim1", INT, -1)), "TransposeBackward0",
               sv.transpose_vjp, st.transpose_vjp, doc="swap two axes (the last two by default)",
               example="transpose(x)"),
]

# Rows of the families kept in their own modules (each module's ROWS, in table order).
_ROWS += ACTIVATION_ROWS + STRUCTURE_ROWS + COMPOSITE_ROWS + CONV_ROWS

RULES: dict[str, Rule] = {rule.name: rule for rule in _ROWS}

#: Names callable as functions in an expression (operators have their own syntax).
FUNCTIONS: frozenset[str] = frozenset(name for name, rule in RULES.items()
                                      if rule.symbol is None)

#: The row each operator spells, by (symbol, number of operands).
OPERATORS: dict[tuple[str, int], str] = {(rule.symbol, rule.arity): name
                                         for name, rule in RULES.items() if rule.symbol}
