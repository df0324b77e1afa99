"""Conditions of where(): == and != beside < <= > >=, combined with & | ~ (the rows eq,
ne, logical_and, logical_or, logical_not), checked against torch, their sampling
(equality where it can hold), the generators drawing them, and wrong conditions caught."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

import gradcheck.engine as engine
from conftest import check, make_case
from gradcheck.formula.forward import steady_nodes
from gradcheck.rules import RULES
from gradcheck.sampling.points import MARGIN, case_points
from gradcheck.strategies import formulas
from gradcheck.formula.tree import walk

M, V = [4, 3], [3]
IDX = {"shape": V, "dtype": "int64", "domain": [0, 4]}
MASK = {"shape": V, "dtype": "bool"}

CONDITIONS = {
    "and": ("where((x > 0) & (y < 0.5), x * y, exp(x))", {"x": M, "y": V}),
    "or": ("where((x < -0.5) | (x > y), x ** 2, y)", {"x": M, "y": V}),
    "not": ("where(~(x > y), cos(x), x * y)", {"x": M, "y": V}),
    "nested": ("where(~((x > 0) & (y != 0.3)) | (x <= y * 2), sin(x), x * y)",
               {"x": M, "y": V}),
    "steps equal": ("where(round(x * 2) == round(y), x * y, sin(x))", {"x": M, "y": V}),
    "sign differs": ("where(sign(x) != sign(y), x, y * x)", {"x": M, "y": V}),
    "integer label": ("where(idx == 2, x ** 2, x * y)", {"x": M, "y": V, "idx": IDX}),
    "mask and comparison": ("where(mask & (x > 0), x, 2 * x)", {"x": M, "mask": MASK}),
    "float equality": ("where(x == 0.5, x, x * y)", {"x": M, "y": V}),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(CONDITIONS))
def test_condition_agrees_with_torch_and_finite_differences(name, dtype):
    expr, inputs = CONDITIONS[name]
    result = check(make_case(expr, inputs, points=3), dtype)
    assert result.status == "passed", result.message
    assert {w.witness for w in result.witnesses} == {"engine", "torch", "numeric"}


def test_torch_computes_them_with_its_bool_operators():
    x = torch.tensor([-1.0, 0.2, 2.0])
    got = RULES["logical_and"].torch(x > 0, x < 1), RULES["logical_not"].torch(x > 0)
    assert got[0].tolist() == [False, True, False] and got[1].tolist() == [True, False,
                                                                           False]
    assert RULES["logical_or"].torch(x < 0, x > 1).tolist() == [True, False, True]
    e = engine.tensor(np.array([-1.0, 0.2, 2.0]))
    assert engine.logical_and(e > 0, e < 1).data.tolist() == [False, True, False]
    assert engine.eq(e, 0.2).data.tolist() == [False, True, False]


def test_equality_of_steps_holds_at_sampled_points():
    # the hazard of a comparison of locally constant values is waived, so the points
    # meet round(x) == 0 on its whole interval (the else branch elsewhere)
    case = make_case("where(round(x) == 0, x ** 2, 2 * x)", {"x": [64]}, points=3)
    held = [np.rint(p.values["x"]) == 0 for p in case_points(case, "float64")]
    assert any(h.any() for h in held) and not all(h.all() for h in held)
    node = next(n for n in walk(case.output) if n.op == "eq")
    assert id(node) in steady_nodes(case.output)


def test_equality_of_floats_is_kept_away_from():
    # x == 0.5 holds nowhere near a drawn point: points keep |x - 0.5| >= MARGIN, where
    # finite differences of the where() would straddle the switch
    case = make_case("where(x == 0.5, x, 2 * x)", {"x": [64]}, points=3)
    node = next(n for n in walk(case.output) if n.op == "eq")
    assert id(node) not in steady_nodes(case.output)
    for p in case_points(case, "float64"):
        assert np.all(np.abs(p.values["x"] - 0.5) >= MARGIN)


def test_integer_equality_takes_both_branches():
    case = make_case("where(idx == 2, x, 2 * x)", {"x": M, "idx": IDX}, points=4)
    hits = np.concatenate([p.values["idx"] == 2 for p in case_points(case, "float64")])
    assert hits.any() and not hits.all()


# ------------------------------------------------------------------ deliberate bugs

@pytest.mark.parametrize("row, column, wrong, witness", [
    ("logical_and", "torch", lambda a, b: a | b, "torch"),
    ("logical_or", "numpy", np.logical_and, "engine"),
    ("logical_not", "torch", lambda a: a, "torch"),
    ("eq", "torch", lambda a, b: a != b, "torch"),
    ("ne", "numpy", lambda a, b: np.asarray(a) == np.asarray(b), "engine"),
])
def test_a_wrong_condition_is_caught(monkeypatch, row, column, wrong, witness):
    expr, inputs = {
        "logical_and": CONDITIONS["and"], "logical_or": CONDITIONS["or"],
        "logical_not": CONDITIONS["not"], "eq": CONDITIONS["steps equal"],
        "ne": CONDITIONS["sign differs"]}[row]
    monkeypatch.setitem(RULES, row, dataclasses.replace(RULES[row], **{column: wrong}))
    result = check(make_case(expr, inputs, points=3))
    assert result.witness(witness).status == "failed", row


# ------------------------------------------------------------------ the generators

COMBINED = {"eq", "ne", "logical_and", "logical_or", "logical_not"}


def _ops(table) -> set[str]:
    from gradcheck.cases import case_from_dict

    case = case_from_dict({"name": "f", **table})
    return {n.op for n in walk(case.output)}


@pytest.mark.parametrize("row", sorted(COMBINED))
def test_the_generators_draw_each_new_condition(row):
    found = []

    @settings(max_examples=300, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(formulas(functions=["where", "round"], depth=2))
    def draw(table):
        if row in _ops(table):
            found.append(table["expr"])

    draw()
    assert found, row
    if row in ("eq", "ne"):   # equality is drawn where it holds on regions too
        assert any("round(" in text for text in found), found[:5]
