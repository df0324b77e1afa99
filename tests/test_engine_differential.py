"""Differential tests: random programs run on gradcheck's engine and on PyTorch must be
indistinguishable: values, gradients (to float64 rounding), the grad_fn graph with its
AccumulateGrad leaves and None slots, which .grad are None, and, for the misuses, the
same exception type and message.

Programs are formulas drawn by gradcheck.strategies (so every row of the rule table,
its arguments mapped into its domain, and a new row with nothing to add here), on
broadcasting shapes, then Python constants on either side, with ``detach``,
``retain_grad``, repeated backward calls with and without ``retain_graph``, and the
classic misuses.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

import gradcheck.engine as E
from gradcheck.rules import RULES
from gradcheck.strategies import DEFAULT_FUNCTIONS, formulas, functions_for
from gradcheck.generate.templates import TEMPLATE_LABELS, TEMPLATES
from test_engine import Side, arr, formula_program, ops, outcome, primitives, structure

EXAMPLES = 500

SHAPES = [(), (3,), (2, 3), (2, 1), (1, 3)]
CONST_OPS = ["+", "-", "*", "/", "r-", "r/", "**", "r**"]
MISUSES = ["none", "none", "implicit", "wrong_shape", "twice", "retain_graph",
           "no_grad_output"]


@st.composite
def programs(draw, functions=DEFAULT_FUNCTIONS, own=()):
    """``own``: the (name, shape) inputs a row's templates bring (a convolution's image,
    the indices of x[idx]), beside the drawn ones; an integer one holds zeros."""
    n_inputs = draw(st.integers(1, 3))
    shapes = {f"x{i}": draw(st.sampled_from(SHAPES)) for i in range(n_inputs)}
    shapes.update(own)
    inputs = {n: np.array(draw(st.lists(st.floats(-1.5, 1.5, allow_subnormal=False),
                                        min_size=int(np.prod(s, dtype=int)),
                                        max_size=int(np.prod(s, dtype=int))))).reshape(s)
              for n, s in shapes.items() if n not in TEMPLATE_LABELS}
    inputs.update({n: np.zeros(s, dtype=np.int64) for n, s in own if n in TEMPLATE_LABELS})
    requires = {n: (draw(st.booleans()) or i == 0) and n not in TEMPLATE_LABELS
                for i, n in enumerate(shapes)}
    table = draw(formulas(depth=4, functions=functions, inputs={
        n: {"shape": list(s), "requires_grad": requires[n],
            **({k: TEMPLATE_LABELS[n][k] for k in ("dtype", "domain")}
               if n in TEMPLATE_LABELS else {})}
        for n, s in shapes.items()}))
    steps = [(draw(st.sampled_from(CONST_OPS)), draw(st.sampled_from([0.5, 2.0, 3.0])))
             for _ in range(draw(st.integers(0, 2)))]
    n = primitives(table)
    retain = draw(st.integers(-1, n + len(steps) - 1))
    detach = draw(st.integers(-1, n - 1))
    misuse = draw(st.sampled_from(MISUSES))
    return inputs, requires, (table, steps, detach), retain, misuse


def run_program(s: Side, leaves: dict, formula, retain):
    """Interpret a program on one side; the output and the retained intermediate."""
    table, steps, detach = formula
    y, kept = formula_program(table, retain, detach)(s, **leaves)
    n = primitives(table)
    for k, (op, c) in enumerate(steps, n):
        y = {"+": lambda: y + c, "-": lambda: y - c, "*": lambda: y * c,
             "/": lambda: y / c, "r-": lambda: c - y,
             "r/": lambda: c / (s.op("abs", y) + 0.5),
             "**": lambda: (s.op("abs", y) + 0.5) ** c, "r**": lambda: c ** y}[op]()
        if k == retain and y.requires_grad and not y.is_leaf:
            y.retain_grad()
            kept["retained"] = y
    return y, kept


def execute(side: str, program) -> dict:
    """Everything a user can observe of one program on one side."""
    inputs, requires, formula, retain, misuse = program
    s = Side(side, next(iter(inputs.values())).dtype)
    leaves = {n: s.leaf(a, requires[n]) for n, a in inputs.items()}
    names = {id(t): n for n, t in leaves.items()}
    out, kept = run_program(s, leaves, formula, retain)
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
    inputs, requires, formula, retain, misuse = program
    program = ({n: a.astype(dtype) for n, a in inputs.items()}, requires, formula, retain,
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
    # the same property on (derandomized) programs drawn over the broken row alone, so
    # that a row added to the table does not thin its share of the draws; without
    # shrinking the failure it must find
    inner = test_random_programs_are_indistinguishable_from_torch.hypothesis.inner_test
    unshrunk = settings(max_examples=EXAMPLES, phases=[Phase.generate])(
        given(programs(functions_for(row)))(inner))
    with pytest.raises((AssertionError, ExceptionGroup)):
        unshrunk()


def test_a_second_backward_that_stops_at_a_freed_node_ran_the_ready_leaves_first():
    # Found by the property above: PyTorch runs AccumulateGrad nodes before the others
    # that are ready, so x1.grad has already grown when AbsBackward0 finds its saved
    # tensor freed.
    table = {"name": "t", "expr": "x1 + abs(x0)", "inputs": {"x0": [], "x1": []}}
    program = ({"x0": np.array(0.5), "x1": np.array(0.25)}, {"x0": True, "x1": True},
               (table, [], -1), -1, "twice")
    engine, torch_side = execute("engine", program), execute("torch", program)
    assert_same(engine, torch_side)
    assert engine["calls"][1][1]["x1"] == 2.0


@pytest.mark.parametrize("row", sorted(RULES))
def test_every_row_is_drawn_by_the_programs_and_indistinguishable(row):
    # The programs' coverage is the table's: each row (a comparison through where) is
    # drawn, in the simplest program that applies it.
    # the first program found (not shrunk: shrinking each row's program costs more
    # than the check)
    own = {n: s for t in TEMPLATES.get(row, ()) for n, s in t.inputs}
    program = find(programs(functions_for(row), tuple(own.items())),
                   lambda p: row in ops(p[2][0]),
                   settings=settings(database=None, deadline=None, max_examples=200,
                                     phases=[Phase.generate]))
    assert_same(execute("engine", program), execute("torch", program))
