"""A computation a formula writes twice (layer norm's ``x - mu``) is done once where the
result cannot tell: the float forward (fold(merge=True)) and the rounding model's
forward bound; bit-identical to doing it twice."""

from __future__ import annotations

import numpy as np

import gradcheck.bounds.model as rounding
from gradcheck.bounds.point import error_bounds
from gradcheck.cases import case_from_dict
from gradcheck.formula.forward import evaluate
from gradcheck.formula.tree import twins, walk

LAYER_NORM = {
    "name": "ln", "expr": "(x - mu) / sqrt(variance + 0.00001) * g + b",
    "let": {"mu": "mean(x, axis=-1, keepdims=True)",
            "variance": "mean((x - mu)**2, axis=-1, keepdims=True)"},
    "inputs": {"x": {"shape": [5, 7]}, "g": {"shape": [7]}, "b": {"shape": [7]}},
}


def _point(case):
    rng = np.random.default_rng(0)
    return {s.name: rng.standard_normal(s.shape) for s in case.inputs}


def test_twins_finds_the_repeated_subtraction_only():
    case = case_from_dict(LAYER_NORM)
    same = twins(case.output)
    assert len(same) == 1
    (key, first), = same.items()
    twin = next(n for n in walk(case.output) if id(n) == key)
    assert twin.op == first.op == "sub" and twin is not first
    assert [a.name for a in twin.args] == ["x", "mu"]


def test_merged_forward_visits_each_computation_once_and_agrees_bitwise():
    case = case_from_dict(LAYER_NORM)
    point = _point(case)
    seen: list = []
    merged = evaluate(case.output, point, merge=True,
                      on_node=lambda node, args, value: seen.append(node.op))
    plain = evaluate(case.output, point)
    assert seen.count("sub") == 1
    assert np.array_equal(merged, plain)


def test_merged_forward_keeps_overrides_given_by_node_id():
    case = case_from_dict(LAYER_NORM)
    point = _point(case)
    sub = next(n for n in walk(case.output) if n.op == "sub")
    pinned = np.zeros(sub.shape)
    a = evaluate(case.output, point, {id(sub): pinned}, merge=True)
    b = evaluate(case.output, point, {id(sub): pinned})
    assert np.array_equal(a, b)


def test_rounding_bounds_do_not_change_when_twins_share_their_forward(monkeypatch):
    case = case_from_dict(LAYER_NORM)
    point = _point(case)
    v = np.random.default_rng(1).standard_normal(case.output.shape)
    shared = error_bounds(case, point, v, "float32")
    monkeypatch.setattr(rounding, "twins", lambda root: {})
    alone = error_bounds(case, point, v, "float32")
    assert shared.keys() == alone.keys()
    for q in shared:
        assert np.array_equal(shared[q], alone[q]), q
