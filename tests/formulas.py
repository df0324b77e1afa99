"""A Hypothesis strategy for random formulas over the rule table, with their inputs.

Arguments of functions with a restricted domain are mapped into it (``log(1 + a**2)``,
``asin(0.9*tanh(a))``...) so that every drawn formula is defined at every real point;
kinks (abs, relu, max, where...) are left in: sampling keeps points away from them.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

INPUTS = {"x": (3,), "y": (2, 3), "s": ()}

_UNARY = ["sin({})", "cos({})", "tanh({})", "sigmoid({})", "atan({})", "erf({})",
          "asinh({})", "softplus({})", "relu({})", "abs({})", "-({})", "sign({}) * {}",
          "exp(tanh({}))", "log(1 + ({})**2)", "sqrt(1 + ({})**2)", "log1p(({})**2)",
          "expm1(tanh({}))", "asin(0.9 * tanh({}))", "acos(0.9 * tanh({}))",
          "acosh(1.5 + ({})**2)", "atanh(0.9 * tanh({}))", "tan(0.5 * tanh({}))",
          "sinh(tanh({}))", "cosh(tanh({}))", "({})**2", "({})**3",
          "(1 + ({})**2)**0.5"]
_BINARY = ["({}) + ({})", "({}) - ({})", "({}) * ({})", "({}) / (1 + ({})**2)",
           "maximum({}, {})", "minimum({}, {})", "where(({}) > ({}), x, y)",
           "(1.5 + sigmoid({})) ** ({})"]
_REDUCE = ["sum({}, axis=-1)", "mean({}, axis=-1)", "max({}, axis=-1)",
           "min({}, axis=-1, keepdims=True)", "logsumexp({}, axis=-1)", "prod({}, axis=-1)",
           "sum({})"]


def _broadcast(*shapes):
    import numpy as np

    return tuple(np.broadcast_shapes(*shapes))


@st.composite
def expressions(draw, depth: int = 3):
    """(text, shape) of a random formula over the inputs x [3], y [2,3] and s []."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(sorted(INPUTS) + ["0.5", "2"]))
        return name, INPUTS.get(name, ())
    kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "reduce", "matmul"]))
    if kind == "unary":
        text, shape = draw(expressions(depth - 1))
        template = draw(st.sampled_from(_UNARY))
        return template.format(text, text), shape
    if kind == "binary":
        a, sa = draw(expressions(depth - 1))
        b, sb = draw(expressions(depth - 1))
        template = draw(st.sampled_from(_BINARY))
        extra = [(2, 3)] if template.startswith("where") else []
        if extra and not any(re.search(rf"\b{n}\b", a + b) for n in INPUTS):
            a, sa = "x", (3,)  # a condition between two constants never switches
        try:
            shape = _broadcast(sa, sb, *extra)
        except ValueError:  # shapes that do not broadcast: reduce both operands
            a, b = f"sum({a})", f"sum({b})"
            shape = _broadcast((), *extra)
        return template.format(a, b), shape
    text, shape = draw(expressions(depth - 1))
    if kind == "reduce" and shape:
        template = draw(st.sampled_from(_REDUCE))
        out = template.format(text)
        if template == "sum({})":
            return out, ()
        if "keepdims" in template:
            return out, shape[:-1] + (1,)
        return out, shape[:-1]
    if kind == "matmul" and shape == (2, 3):
        if draw(st.booleans()):
            return f"({text}) @ x", (2,)
        return f"({text}) @ transpose(y)", (2, 2)
    if kind == "matmul" and shape == (3,):
        return f"dot({text}, x)", ()
    return f"tanh({text})", shape


@st.composite
def formulas(draw, depth: int = 3):
    """A case table: a random formula over x, y, s with a random gradient."""
    text, shape = draw(expressions(depth))
    used = {n: list(s) for n, s in INPUTS.items() if re.search(rf"\b{n}\b", text)}
    if not used:
        text, used = f"({text}) * x", {"x": [3]}
    return {"expr": text, "inputs": used, "points": 1,
            "seed": draw(st.integers(0, 2**32 - 1))}
