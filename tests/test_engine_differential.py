"""Differential tests: random programs run on gradcheck's engine and on PyTorch must be
indistinguishable: values, gradients (to float64 rounding), the grad_fn graph with its
AccumulateGrad leaves and None slots, which .grad are None, and, for the misuses, the
same exception type and message.

Programs draw ops from every row of the rule table (inputs of restricted functions are
mapped into their domain), on broadcasting shapes, with constants on either side,
``detach``, ``retain_grad``, repeated backward calls with and without
``retain_graph``, and the classic misuses.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gradcheck.engine as E
from gradcheck.rules import COMPARISON, ELEMENTWISE, RULES
from test_engine import Side, arr, outcome, structure

EXAMPLES = 500

SHAPES = [(), (3,), (2, 3), (2, 1), (1, 3)]
# Restricted functions get an argument mapped into their domain first.
INTO_DOMAIN = {
    "log": "unit01", "sqrt": "unit01", "log1p": "unit01", "asin": "unit01",
    "acos": "unit01", "atanh": "unit01", "acosh": "above1", "tan": "tanh",
}
UNARY = sorted(n for n, r in RULES.items()
               if r.kind == ELEMENTWISE and r.arity == 1 and n != "neg")
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
CONST_OPS = ["+", "-", "*", "/", "r-", "r/", "**", "r**"]
REDUCTIONS = ["sum", "mean", "prod", "max", "min", "logsumexp"]
COMPARISONS = sorted(n for n, r in RULES.items() if r.kind == COMPARISON)
MISUSES = ["none", "none", "implicit", "wrong_shape", "twice", "retain_graph",
           "no_grad_output"]


@st.composite
def programs(draw):
    n_inputs = draw(st.integers(1, 3))
    shapes = {f"x{i}": draw(st.sampled_from(SHAPES)) for i in range(n_inputs)}
    inputs = {n: np.array(draw(st.lists(st.floats(-1.5, 1.5, allow_subnormal=False),
                                        min_size=int(np.prod(s, dtype=int)),
                                        max_size=int(np.prod(s, dtype=int))))).reshape(s)
              for n, s in shapes.items()}
    requires = {n: draw(st.booleans()) or i == 0 for i, n in enumerate(shapes)}
    steps = []
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "const", "where",
                                     "reduce", "linalg", "detach"]))
        other = draw(st.sampled_from(sorted(shapes)))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(UNARY + ["neg"]))))
        elif kind == "binary":
            steps.append(("binary", draw(st.sampled_from(BINARY)), other,
                          draw(st.booleans())))
        elif kind == "const":
            steps.append(("const", draw(st.sampled_from(CONST_OPS)),
                          draw(st.sampled_from([0.5, 2.0, 3.0]))))
        elif kind == "where":
            steps.append(("where", draw(st.sampled_from(COMPARISONS)), other))
        elif kind == "reduce":
            steps.append(("reduce", draw(st.sampled_from(REDUCTIONS)),
                          draw(st.integers(0, 7)), draw(st.booleans())))
        else:
            steps.append((kind,))
    retain = draw(st.integers(-1, len(steps) - 1))
    misuse = draw(st.sampled_from(MISUSES))
    return inputs, requires, steps, retain, misuse


def _domain(s, y, how):
    if how == "unit01":
        return s.op("sigmoid", y) * 0.8 + 0.1
    if how == "above1":
        return y * y + 1.5
    return s.op("tanh", y)


def _axes(mask: int, ndim: int) -> tuple[int, ...] | None:
    axes = tuple(d for d in range(ndim) if mask >> d & 1)
    return axes or None


def _fit(s, y, other):
    """``other``, summed to a scalar when its shape does not broadcast with ``y``'s."""
    try:
        np.broadcast_shapes(tuple(y.shape), tuple(other.shape))
        return other
    except ValueError:
        return s.op("sum", other, tuple(range(len(other.shape))), False)


def run_program(s: Side, leaves: dict, steps, retain):
    """Interpret a program on one side; the output and the retained intermediate."""
    names = sorted(leaves)
    y = leaves[names[0]]
    kept = {}
    for k, step in enumerate(steps):
        kind = step[0]
        if kind == "unary":
            name = step[1]
            arg = _domain(s, y, INTO_DOMAIN[name]) if name in INTO_DOMAIN else y
            y = -arg if name == "neg" else s.op(name, arg)
        elif kind == "binary":
            _, name, other, swap = step
            o = _fit(s, y, leaves[other])
            a, b = (o, y) if swap else (y, o)
            if name == "div":
                b = s.op("abs", b) + 0.5
            if name == "pow":
                a = s.op("abs", a) + 0.5
            y = s.op(name, a, b)
        elif kind == "const":
            op, c = step[1], step[2]
            y = {"+": lambda: y + c, "-": lambda: y - c, "*": lambda: y * c,
                 "/": lambda: y / c, "r-": lambda: c - y,
                 "r/": lambda: c / (s.op("abs", y) + 0.5),
                 "**": lambda: (s.op("abs", y) + 0.5) ** c, "r**": lambda: c ** y}[op]()
        elif kind == "where":
            o = _fit(s, y, leaves[step[2]])
            y = s.op("where", s.op(step[1], y, o), y * 2.0, s.op("sin", o))
        elif kind == "reduce":
            ndim = len(y.shape)
            if ndim:
                name, mask, keep = step[1], step[2], step[3]
                axes = _axes(mask, ndim)
                if name == "prod":  # the column reduces one axis at a time as torch does
                    y = s.op("prod", y, axes or tuple(range(ndim)), keep)
                else:
                    y = s.op(name, y, axes or tuple(range(ndim)), keep)
        elif kind == "linalg":
            if len(y.shape) == 2:
                y = s.op("matmul", y, s.op("transpose", y))
            elif len(y.shape) == 1:
                y = s.op("dot", y, y)
        elif kind == "detach":
            y = y.detach() * 2.0 + _fit(s, y, leaves[names[-1]])
        if k == retain and y.requires_grad and not y.is_leaf:
            y.retain_grad()
            kept["retained"] = y
    return y, kept


def execute(side: str, program) -> dict:
    """Everything a user can observe of one program on one side."""
    inputs, requires, steps, retain, misuse = program
    s = Side(side)
    leaves = {n: s.leaf(a, requires[n]) for n, a in inputs.items()}
    names = {id(t): n for n, t in leaves.items()}
    out, kept = run_program(s, leaves, steps, retain)
    seen = {"value": arr(out), "requires_grad": out.requires_grad,
            "is_leaf": out.is_leaf, "graph": structure(out, names) if out.grad_fn else []}
    shape = tuple(out.shape)

    def tensor(a):
        return E.Tensor(np.asarray(a)) if side == "engine" else torch.tensor(np.asarray(a))

    v = np.linspace(-1.0, 1.0, int(np.prod(shape, dtype=int))).reshape(shape)
    gradient = None if (misuse == "implicit" or shape == ()) else tensor(v)
    if misuse == "wrong_shape":
        gradient = tensor(np.ones(shape + (2,)))
    target = out.detach() if misuse == "no_grad_output" else out
    calls = [dict(retain_graph=True)] if misuse == "retain_graph" else [{}]
    if misuse in ("twice", "retain_graph"):
        calls.append({})
    seen["calls"] = []
    for kwargs in calls:
        error = outcome(lambda: target.backward(gradient, **kwargs))
        grads = {n: arr(t.grad) for n, t in {**leaves, **kept}.items()}
        seen["calls"].append((error, grads))
    return seen


def assert_same(e: dict, t: dict) -> None:
    np.testing.assert_allclose(e["value"], t["value"], rtol=1e-12, atol=1e-300)
    for key in ("requires_grad", "is_leaf", "graph"):
        assert e[key] == t[key], key
    assert len(e["calls"]) == len(t["calls"])
    for (e_err, e_grads), (t_err, t_grads) in zip(e["calls"], t["calls"]):
        assert e_err == t_err
        assert e_grads.keys() == t_grads.keys()
        for name in t_grads:
            assert (e_grads[name] is None) == (t_grads[name] is None), name
            if t_grads[name] is not None:
                np.testing.assert_allclose(e_grads[name], t_grads[name], rtol=1e-10,
                                           atol=1e-13, err_msg=name)


@settings(max_examples=EXAMPLES)
@given(programs())
def test_random_programs_are_indistinguishable_from_torch(program):
    assert_same(execute("engine", program), execute("torch", program))


@settings(max_examples=EXAMPLES)
@given(programs(), st.sampled_from(["float32"]))
def test_random_programs_in_float32_match_torch_in_float32(program, dtype):
    inputs, requires, steps, retain, misuse = program
    program = ({n: a.astype(dtype) for n, a in inputs.items()}, requires, steps, retain,
               "none")
    e, t = execute("engine", program), execute("torch", program)
    assert e["graph"] == t["graph"]
    np.testing.assert_allclose(e["value"], t["value"], rtol=2e-5, atol=1e-6)
    for (_, eg), (_, tg) in zip(e["calls"], t["calls"]):
        for name in tg:
            assert (eg[name] is None) == (tg[name] is None), name
            if tg[name] is not None:
                np.testing.assert_allclose(eg[name], tg[name], rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("row, vjp", [
    ("tanh", lambda g, ans, x: g * (1 - ans)),                  # forgot the square
    ("mul", None),                                              # second VJP swapped
    ("sum", lambda g, ans, x, axis, keepdims: np.ones_like(x)),  # ignores grad_output
])
def test_the_differential_property_catches_a_broken_vjp(monkeypatch, row, vjp):
    rule = RULES[row]
    vjps = list(rule.engine.vjps)
    if vjp is None:
        vjps[1] = vjps[0]
    else:
        vjps[0] = vjp
    monkeypatch.setitem(RULES, row, dataclasses.replace(
        rule, engine=dataclasses.replace(rule.engine, vjps=tuple(vjps))))
    with pytest.raises((AssertionError, ExceptionGroup)):
        test_random_programs_are_indistinguishable_from_torch()


def test_a_second_backward_that_stops_at_a_freed_node_ran_the_ready_leaves_first():
    # Found by the property above: PyTorch runs AccumulateGrad nodes before the others
    # that are ready, so x1.grad has already grown when AbsBackward0 finds its saved
    # tensor freed.
    program = ({"x0": np.array(0.5), "x1": np.array(0.25)}, {"x0": True, "x1": True},
               [("unary", "abs"), ("binary", "add", "x1", True)], -1, "twice")
    engine, torch_side = execute("engine", program), execute("torch", program)
    assert_same(engine, torch_side)
    assert engine["calls"][1][1]["x1"] == 2.0
