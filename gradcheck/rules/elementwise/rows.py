"""The elementwise family's rows: arithmetic (the operators), exponentials and logarithms,
trigonometry, the non-smooth functions and where(); and the comparisons and logical
operators that are where()'s conditions (family ``comparison``). Their columns are in
:mod:`.columns` and :mod:`.vjps`; the activations, elementwise too, in
:mod:`gradcheck.rules.activation`. The rows are appended to the table by
:mod:`gradcheck.rules.table` (``ROWS``, in table order).
"""

from __future__ import annotations

import operator

import numpy as np

from . import columns as ec, vjps as ev
from ..columns import cfunction, sympy_fn, torch_fn
from ..row import COMPARISON, ELEMENTWISE, NUMBER, Param, Rule
from ..vjps import engine_rule


def elementwise_unary(**row) -> Rule:
    """An elementwise row of one operand."""
    return Rule(family=ELEMENTWISE, arity=1, **row)


def elementwise_binary(**row) -> Rule:
    """An elementwise row of two operands (broadcast against each other)."""
    return Rule(family=ELEMENTWISE, arity=2, **row)


def comparison_row(*, name: str, sympy, op, symbol: str, example: str | None = None) -> Rule:
    """A comparison (a condition of where()): ``op`` on arrays in NumPy and on tensors in
    torch; not differentiable, points kept off the boundary |a - b| = 0."""
    return Rule(name=name, family=COMPARISON, arity=2, sympy=sympy,
                numpy=lambda a, b: op(np.asarray(a), np.asarray(b)), torch=op,
                hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b)),
                doc="condition of where()", symbol=symbol, numbers=True,
                example=example or f"where(x {symbol} y, x, y)",
                engine=engine_rule(None))   # not differentiable


def logical_row(*, name: str, sympy, numpy, torch, symbol: str) -> Rule:
    """A logical operator combining conditions (``~`` takes one, ``&`` and ``|`` two)."""
    arity = 1 if symbol == "~" else 2
    example = ("where(~(x > 0), x, y)" if arity == 1 else
               f"where((x > 0) {symbol} (y < 1), x, y)")
    return Rule(
        name=name, family=COMPARISON, arity=arity, sympy=sympy, numpy=numpy, torch=torch,
        doc="combines conditions of where()", symbol=symbol, example=example, rounding=0,
        engine=engine_rule(None))


def _gap(a, b):
    return np.abs(np.asarray(a) - np.asarray(b))


ROWS: list[Rule] = [
    # arithmetic (operators of the expression language)
    elementwise_binary(
        name="add", sympy=lambda a, b: a + b, numpy=np.add, torch=lambda a, b: a + b, doc="a + b",
        symbol="+", numbers=True, rounding=1,
        engine=engine_rule("AddBackward0", ev.identity_vjp, ev.identity_vjp, saves=False)),
    elementwise_binary(
        name="sub", sympy=lambda a, b: a - b, numpy=np.subtract, torch=lambda a, b: a - b,
        doc="a - b", symbol="-", numbers=True, rounding=1,
        engine=engine_rule(ev.sub_name, ev.identity_vjp, lambda g, ans, a, b: -g, saves=False)),
    elementwise_binary(
        name="mul", sympy=lambda a, b: a * b, numpy=np.multiply, torch=lambda a, b: a * b,
        doc="a * b", symbol="*", numbers=True, rounding=1,
        engine=engine_rule("MulBackward0", lambda g, ans, a, b: g * b,
                           lambda g, ans, a, b: g * a)),
    elementwise_binary(
        name="div", sympy=lambda a, b: a / b, numpy=np.divide, torch=lambda a, b: a / b,
        hazard=lambda a, b: np.abs(b), doc="a / b", symbol="/", numbers=True,
        domain=("real", "nonzero"), rounding=1,
        engine=engine_rule("DivBackward0", lambda g, ans, a, b: g / b,
                           lambda g, ans, a, b: -g * a / (b * b))),
    elementwise_binary(
        name="pow", sympy=lambda a, b: a ** b, numpy=np.power, torch=lambda a, b: a ** b,
        hazard=ec.pow_hazard, doc="a ** b (tensor or constant exponent)", symbol="**",
        numbers=True, domain=("positive", "real"),
        engine=engine_rule(ev.pow_name, ev.pow_base, ev.pow_exponent)),
    elementwise_unary(
        name="neg", sympy=lambda x: -x, numpy=np.negative, torch=lambda x: -x, doc="-x",
        symbol="-", numbers=True, rounding=0,
        engine=engine_rule("NegBackward0", lambda g, ans, x: -g, saves=False)),
    # exponentials and logarithms
    elementwise_unary(
        name="exp", sympy=sympy_fn("exp"), numpy=np.exp, torch=torch_fn("exp"), grows=True,
        exponential=True, engine=engine_rule("ExpBackward0", lambda g, ans, x: g * ans)),
    elementwise_unary(
        name="log", sympy=sympy_fn("log"), numpy=np.log, torch=torch_fn("log"),
        hazard=ec.abs_distance, domain=("positive",),
        engine=engine_rule("LogBackward0", lambda g, ans, x: g / x)),
    elementwise_unary(
        name="log1p", sympy=lambda x: cfunction("log1p")(x), numpy=np.log1p,
        torch=torch_fn("log1p"), hazard=lambda x: np.abs(1 + np.asarray(x)),
        domain=((-1.0, np.inf),),
        engine=engine_rule("Log1PBackward0", lambda g, ans, x: g / (x + 1))),
    elementwise_unary(
        name="expm1", sympy=lambda x: cfunction("expm1")(x), numpy=np.expm1,
        torch=torch_fn("expm1"), grows=True, exponential=True,
        engine=engine_rule("Expm1Backward0", lambda g, ans, x: g * (ans + 1))),
    elementwise_unary(
        name="sqrt", sympy=sympy_fn("sqrt"), numpy=np.sqrt, torch=torch_fn("sqrt"),
        hazard=ec.abs_distance, domain=("positive",), rounding=1,
        engine=engine_rule("SqrtBackward0", lambda g, ans, x: g / (2 * ans))),
    # trigonometric and hyperbolic
    elementwise_unary(
        name="sin", sympy=sympy_fn("sin"), numpy=np.sin, torch=torch_fn("sin"), periodic=True,
        engine=engine_rule("SinBackward0", lambda g, ans, x: g * np.cos(x))),
    elementwise_unary(
        name="cos", sympy=sympy_fn("cos"), numpy=np.cos, torch=torch_fn("cos"), periodic=True,
        engine=engine_rule("CosBackward0", lambda g, ans, x: g * -np.sin(x))),
    # (tan's domain is its principal branch: generators keep to one branch)
    elementwise_unary(
        name="tan", sympy=sympy_fn("tan"), numpy=np.tan, torch=torch_fn("tan"),
        hazard=lambda x: np.abs(np.cos(x)), domain=((-np.pi / 2, np.pi / 2),), grows=True,
        periodic=True, engine=engine_rule("TanBackward0", lambda g, ans, x: g * (1 + ans * ans))),
    elementwise_unary(
        name="asin", sympy=sympy_fn("asin"), numpy=np.arcsin, torch=torch_fn("asin"),
        hazard=lambda x: 1 - np.abs(x), domain=("unit",),
        engine=engine_rule("AsinBackward0", lambda g, ans, x: g / np.sqrt(1 - x * x))),
    elementwise_unary(
        name="acos", sympy=sympy_fn("acos"), numpy=np.arccos, torch=torch_fn("acos"),
        hazard=lambda x: 1 - np.abs(x), domain=("unit",),
        engine=engine_rule("AcosBackward0", lambda g, ans, x: -g / np.sqrt(1 - x * x))),
    elementwise_unary(
        name="atan", sympy=sympy_fn("atan"), numpy=np.arctan, torch=torch_fn("atan"),
        engine=engine_rule("AtanBackward0", lambda g, ans, x: g / (x * x + 1))),
    # atan2(y, x): singular at the origin, and jumps by 2π across y = 0 where x < 0;
    # its domain here is the half-plane x > 0, where it is smooth (generators map x
    # into it; a case's own inputs may lie anywhere, kept off the hazard)
    elementwise_binary(
        name="atan2", sympy=sympy_fn("atan2"), numpy=np.arctan2, torch=torch_fn("atan2"),
        domain=("real", "positive"),
        hazard=lambda y, x: np.where(np.asarray(x) < 0,
                                     np.minimum(np.abs(y), np.hypot(y, x)), np.hypot(y, x)),
        doc="atan2(y, x): the angle of the point (x, y)", example="atan2(x, y)",
        engine=engine_rule("Atan2Backward0", lambda g, ans, y, x: g * x * ev.atan2_recip(y, x),
                           lambda g, ans, y, x: g * -y * ev.atan2_recip(y, x))),
    elementwise_unary(
        name="sinh", sympy=sympy_fn("sinh"), numpy=np.sinh, torch=torch_fn("sinh"), grows=True,
        exponential=True, engine=engine_rule("SinhBackward0", lambda g, ans, x: g * np.cosh(x))),
    elementwise_unary(
        name="cosh", sympy=sympy_fn("cosh"), numpy=np.cosh, torch=torch_fn("cosh"), grows=True,
        exponential=True, engine=engine_rule("CoshBackward0", lambda g, ans, x: g * np.sinh(x))),
    elementwise_unary(
        name="tanh", sympy=sympy_fn("tanh"), numpy=np.tanh, torch=torch_fn("tanh"),
        engine=engine_rule("TanhBackward0", lambda g, ans, x: g * (1 - ans * ans))),
    elementwise_unary(
        name="asinh", sympy=sympy_fn("asinh"), numpy=np.arcsinh, torch=torch_fn("asinh"),
        engine=engine_rule("AsinhBackward0", lambda g, ans, x: g / np.sqrt(x * x + 1))),
    elementwise_unary(
        name="acosh", sympy=sympy_fn("acosh"), numpy=np.arccosh, torch=torch_fn("acosh"),
        hazard=lambda x: np.asarray(x) - 1, domain=((1.0, np.inf),),
        engine=engine_rule("AcoshBackward0", lambda g, ans, x: g / np.sqrt(x * x - 1))),
    elementwise_unary(
        name="atanh", sympy=sympy_fn("atanh"), numpy=np.arctanh, torch=torch_fn("atanh"),
        hazard=lambda x: 1 - np.abs(x), domain=("unit",),
        engine=engine_rule("AtanhBackward0", lambda g, ans, x: g / (1 - x * x))),
    # non-smooth and special
    elementwise_unary(
        name="abs", sympy=sympy_fn("Abs"), numpy=np.abs, torch=torch_fn("abs"),
        hazard=ec.abs_distance, rounding=0,
        engine=engine_rule("AbsBackward0", lambda g, ans, x: g * np.sign(x))),
    elementwise_unary(
        name="sign", sympy=sympy_fn("sign"), numpy=np.sign, torch=torch_fn("sign"),
        hazard=ec.abs_distance, rounding=0,
        engine=engine_rule("SignBackward0", lambda g, ans, x: np.zeros_like(g), saves=False)),
    elementwise_unary(
        name="erf", sympy=sympy_fn("erf"), numpy=ec.np_erf, torch=torch_fn("erf"),
        engine=engine_rule("ErfBackward0",
                           lambda g, ans, x: g * (2 / ev.SQRT_PI) * np.exp(-x * x))),
    elementwise_unary(
        name="sigmoid", sympy=ec.sym_sigmoid, numpy=ec.np_sigmoid, torch=torch_fn("sigmoid"),
        doc="1 / (1 + exp(-x))", exponential=True,
        shown=("sigmoid(x) * (1 - sigmoid(x))",),
        engine=engine_rule("SigmoidBackward0", lambda g, ans, x: g * (1 - ans) * ans)),
    elementwise_unary(
        name="softplus", sympy=ec.sym_softplus, numpy=lambda x: np.logaddexp(0.0, x),
        torch=ec.torch_softplus, doc="log(1 + exp(x))", exponential=True,
        shown=("sigmoid(x)",),
        engine=engine_rule("SoftplusBackward0", lambda g, ans, x: g * ec.np_sigmoid(x))),
    elementwise_unary(
        name="relu", sympy=ec.sym_relu, numpy=lambda x: np.maximum(x, 0.0), torch=torch_fn("relu"),
        hazard=ec.abs_distance, doc="max(x, 0)", rounding=0,
        engine=engine_rule("ReluBackward0", lambda g, ans, x: np.where(ans > 0, g, 0.0))),
    elementwise_unary(
        name="clamp", sympy=ec.sym_clamp, numpy=ec.np_clamp, torch=ec.torch_clamp,
        hazard=ec.clamp_hazard, params=(Param("min", NUMBER), Param("max", NUMBER)),
        shape=ec.clamp_shape, doc="clamp(x, min=None, max=None): x limited to [min, max]",
        example="clamp(x, min=-1, max=1)", rounding=1,
        engine=engine_rule("ClampBackward1", ev.clamp_vjp)),
    elementwise_binary(
        name="maximum", sympy=sympy_fn("Max"), numpy=np.maximum, torch=torch_fn("maximum"),
        hazard=_gap, rounding=0,
        engine=engine_rule("MaximumBackward0", lambda g, ans, a, b: g * ev.share(a, b),
                           lambda g, ans, a, b: g * ev.share(b, a))),
    elementwise_binary(
        name="minimum", sympy=sympy_fn("Min"), numpy=np.minimum, torch=torch_fn("minimum"),
        hazard=_gap, rounding=0,
        engine=engine_rule("MinimumBackward0", lambda g, ans, a, b: g * ev.share(b, a),
                           lambda g, ans, a, b: g * ev.share(a, b))),
    # stop-gradient: PyTorch's x.detach() records no node (grad_fn None, requires_grad
    # False), so no gradient flows through it
    elementwise_unary(
        name="detach", sympy=ec.sym_detach, numpy=np.copy, torch=ec.torch_detach,
        rounding=0, engine=engine_rule(None, None, saves=False), stops_gradient=True,
        doc="x's value, derivative zero (stop-gradient: x.detach())",
        example="x + detach(round(x * 4) / 4 - x)"),
    Rule(
        name="where", family=ELEMENTWISE, arity=3, sympy=ec.sym_where, numpy=np.where,
        torch=torch_fn("where"), doc="where(cond, a, b): a where cond holds, else b",
        example="where(x > 0, x, y)", rounding=0,
        engine=engine_rule("WhereBackward0", None, lambda g, ans, c, a, b: np.where(c, g, 0.0),
                           lambda g, ans, c, a, b: np.where(c, 0.0, g))),
    Rule(
        name="masked_fill", family=ELEMENTWISE, arity=2, sympy=ec.sym_masked_fill,
        numpy=ec.np_masked_fill, torch=ec.torch_masked_fill, params=(Param("value", NUMBER),),
        shape=ec.masked_fill_shape, example="masked_fill(x, x > 0, 0.5)", rounding=1,
        doc="masked_fill(x, mask, value): value where the mask holds, else x",
        engine=engine_rule("MaskedFillBackward0",
                           lambda g, ans, x, mask, value: np.where(mask, 0.0, g), None)),
    # conditions of where() and masked_fill()
    comparison_row(
        name="lt", sympy=sympy_fn("StrictLessThan"), op=operator.lt, symbol="<"),
    comparison_row(
        name="le", sympy=sympy_fn("LessThan"), op=operator.le, symbol="<="),
    comparison_row(
        name="gt", sympy=sympy_fn("StrictGreaterThan"), op=operator.gt, symbol=">"),
    comparison_row(
        name="ge", sympy=sympy_fn("GreaterThan"), op=operator.ge, symbol=">="),
    # Equality of floats holds on a set of measure zero: where(x == 1, ...) at drawn
    # points is the else branch, and points keep |x - 1| >= MARGIN, like any condition's.
    # Equality is checked where it can hold: between exact values (integer and boolean
    # inputs, constants) and between the results of steps (round(x) == 0, sign(x) ==
    # sign(y)), which are constant on whole regions; sampling waives the hazard of such a
    # comparison (gradcheck.formula.forward.steady_nodes), the steps' own keep points off jumps.
    comparison_row(
        name="eq", sympy=sympy_fn("Eq"), op=operator.eq, symbol="==",
        example="where(round(x) == 0, x, y)"),
    comparison_row(
        name="ne", sympy=sympy_fn("Ne"), op=operator.ne, symbol="!=",
        example="where(sign(x) != sign(y), x, y)"),
    # conditions combined, as torch combines bool tensors (& | ~); their operands are
    # conditions, whose own hazards the sampler keeps away from
    logical_row(
        name="logical_and", sympy=sympy_fn("And"), numpy=np.logical_and, torch=operator.and_,
        symbol="&"),
    logical_row(
        name="logical_or", sympy=sympy_fn("Or"), numpy=np.logical_or, torch=operator.or_,
        symbol="|"),
    logical_row(
        name="logical_not", sympy=sympy_fn("Not"), numpy=np.logical_not, torch=operator.invert,
        symbol="~"),
]
