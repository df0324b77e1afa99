"""A bilinear row's bound terms whose bound operand is 0 everywhere are left out, not
computed (gradcheck.bounds.bilinear._nothing): the bounds are the same to the bit as
with every term computed, an inf operand (0·inf = NaN, kept) included."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck.bounds.bilinear as bilinear
from gradcheck.bounds.point import PointBounds, error_bounds
from gradcheck.cases import case_from_dict


def _case(expr: str, shapes: dict, let: dict | None = None):
    return case_from_dict({"name": "t", "expr": expr, "let": let or {},
                           "gradient": "random",
                           "inputs": {n: {"shape": s} for n, s in shapes.items()}},
                          file="<test>")


CASES = [
    ("tanh(x @ W)", {"x": [5, 7], "W": [7, 3]}, None),
    ("exp(s - logsumexp(s, axis=-1, keepdims=True)) @ v",
     {"q": [2, 4, 3], "k": [2, 4, 3], "v": [2, 4, 3]}, {"s": "q @ transpose(k) / 8"}),
    ("dot(a, b) * a", {"a": [6], "b": [6]}, None),
]


@pytest.mark.parametrize("with_inf", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("expr,shapes,let", CASES)
def test_leaving_out_the_zero_terms_changes_no_bit(monkeypatch, expr, shapes, let, dtype,
                                                   with_inf):
    case = _case(expr, shapes, let)
    rng = np.random.default_rng(3)
    point = {n: rng.standard_normal(s) for n, s in shapes.items()}
    if with_inf:   # an inf operand: 0·inf is NaN, which the map keeps (computed)
        point[next(iter(point))].flat[0] = np.inf
    v = rng.standard_normal(case.output.shape)
    answers = []
    nothing = bilinear._nothing
    monkeypatch.setattr(bilinear, "_nothing",
                        lambda *a: answers.append(nothing(*a)) or answers[-1])
    left_out = error_bounds(case, point, v, dtype, at=PointBounds())
    monkeypatch.setattr(bilinear, "_nothing", lambda *a: False)
    every = error_bounds(case, point, v, dtype, at=PointBounds())
    assert any(answers) and not all(answers)   # some terms left out, some computed
    assert left_out.keys() == every.keys()
    for name in every:
        np.testing.assert_array_equal(left_out[name], every[name])


def test_an_exact_operand_takes_one_product_per_cotangent(monkeypatch):
    """tanh(x @ W) @ V with x, W and V inputs (exact): the cotangents into x and W
    of x @ W sum E(ḡ) and γ·u_acc·|ḡ| in one product with the other operand's
    magnitudes, two VJPs each (the cotangent and its bound), not three; the bounds
    are those of the three-product form to float64's rounding of the bound."""
    from gradcheck.bounds.model import RoundingModel

    shapes = {"x": [6, 5], "W": [5, 7], "V": [7, 3]}
    case = _case("tanh(x @ W) @ V", shapes)
    rng = np.random.default_rng(4)
    point = {n: rng.standard_normal(s) for n, s in shapes.items()}
    v = rng.standard_normal(case.output.shape)
    calls = []
    real = RoundingModel.call
    monkeypatch.setattr(RoundingModel, "call", lambda self, node, *a: calls.append(
        node.op) or real(self, node, *a))
    one = error_bounds(case, point, v, "float32", at=PointBounds())
    assert calls.count("matmul") == 8, calls    # 2 + 2 into x @ W's, 2 + 2 into (·) @ V
    calls.clear()
    monkeypatch.setattr(bilinear, "_through_g", lambda ge, e: False)   # the other form
    two = error_bounds(case, point, v, "float32", at=PointBounds())
    assert calls.count("matmul") == 10, calls
    for name in one:
        np.testing.assert_allclose(one[name], two[name], rtol=1e-14, atol=0)
