"""detach(x), the stop-gradient: x's value, derivative zero, in every witness (the
reference differentiates a SymPy function whose fdiff is 0, torch runs x.detach(), the
engine records no node, finite differences hold its value at the unmoved point); a
straight-through estimator checks, and a detach that lets the gradient through is
caught by the witness it is wrong in."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import gradcheck
from conftest import check, make_case
from gradcheck.base.errors import CaseFileError
from gradcheck.engine import Tensor, ops
from gradcheck.reference import ExpandedReference, TensorReference
from gradcheck.rules import RULES
from gradcheck.rules.vjps import engine_rule
from gradcheck.sampling.points import sample
from gradcheck.witnesses import engine as engine_backend
from gradcheck.witnesses import numeric as numeric_backend
from gradcheck.witnesses import torch as torch_backend

STE = "w + detach(round(w / s) * s - w)"
INPUTS = {"w": [3, 4], "s": {"shape": [], "domain": [0.2, 0.5]}}


def test_it_is_pytorchs_detach():
    x = torch.ones(3, requires_grad=True)
    y = x.detach()
    assert y.grad_fn is None and not y.requires_grad
    e = ops.detach(Tensor(np.ones(3), requires_grad=True))
    assert e.grad_fn is None and not e.requires_grad
    rule = RULES["detach"]
    assert rule.stops_gradient and not rule.differentiable and rule.rounding == 0


def test_its_sympy_meaning_has_derivative_zero_and_lambdifies_as_its_argument():
    import sympy

    x = sympy.Symbol("x", real=True)
    d = RULES["detach"].sympy(sympy.sin(x))
    assert sympy.diff(d * x, x) == d and sympy.diff(d, x, 2) == 0
    assert RULES["detach"].sympy(sympy.Integer(3)) == 3
    assert d.subs(x, 1).evalf() == sympy.sin(1).evalf()
    f = sympy.lambdify([x], d * x, modules=["scipy", "numpy"])
    assert f(0.5) == pytest.approx(np.sin(0.5) * 0.5, rel=1e-15)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_straight_through_estimator_checks_in_every_witness(dtype):
    result = gradcheck.check(STE, INPUTS, dtype=dtype)
    assert result.status == "passed", result.message
    assert {w.witness for w in result.witnesses} == {"engine", "torch", "numeric"}
    assert all(w.status == "passed" and w.checked > 0 for w in result.witnesses)
    assert result.witness("torch").grad_fn == ("AddBackward0", "AccumulateGrad")
    assert result.witness("engine").grad_fn == result.witness("torch").grad_fn


def test_the_gradient_through_it_is_the_identitys():
    """w's gradient is v (round's is 0 and detach's too); s gets none (only reached
    through detach, as PyTorch leaves s.grad None)."""
    case = make_case(STE, INPUTS)
    point = sample(case, "float64", 0).values
    v = np.arange(1.0, 13.0).reshape(3, 4)
    for run in (torch_backend.run, engine_backend.run, numeric_backend.run):
        got = run(case, point, v, "float64")
        np.testing.assert_allclose(got.grads["w"], v, rtol=1e-7, atol=1e-9)
        assert got.grads.get("s") is None
    for ref in (TensorReference(case), ExpandedReference(case)):
        np.testing.assert_array_equal(ref.evaluate(point, v).grads["w"], v)


def test_a_mixing_formula_with_detach_agrees_with_the_expanded_reference():
    case = make_case("sum(tanh(x @ W) * detach(sigmoid(x @ W)), axis=1)",
                     {"x": [3, 4], "W": [4, 2]})
    point = sample(case, "float64", 0).values
    v = np.array([1.0, -2.0, 0.5])
    a, b = TensorReference(case).evaluate(point, v), ExpandedReference(case).evaluate(point, v)
    for n in ("x", "W"):
        np.testing.assert_allclose(a.grads[n], b.grads[n], rtol=1e-12, atol=1e-14)
    assert check(case).status == "passed"


def test_what_only_a_detach_reaches_has_no_gradient_to_check():
    with pytest.raises(CaseFileError, match="differentiable path"):
        make_case("sum(detach(x) * 2)", {"x": [3]})


# --------------------------------------------------------------------------- mutations

def _patched(monkeypatch, **columns):
    monkeypatch.setitem(RULES, "detach", dataclasses.replace(RULES["detach"], **columns))


def test_a_torch_detach_that_lets_the_gradient_through_is_caught(monkeypatch):
    _patched(monkeypatch, torch=lambda x: x * 1)
    result = check(make_case(STE, INPUTS))
    assert result.witness("torch").status == "failed"
    assert result.witness("torch").worst.quantity == "w.grad"
    assert result.witness("numeric").status == "passed"


def test_an_engine_detach_that_lets_the_gradient_through_is_caught(monkeypatch):
    _patched(monkeypatch, engine=engine_rule("AliasBackward0", lambda g, ans, x: g,
                                             saves=False))
    result = check(make_case(STE, INPUTS))
    engine = result.witness("engine")
    assert engine.status == "failed" and engine.worst.quantity == "w.grad"
    assert result.witness("numeric").status == "passed"


def test_finite_differences_that_move_a_detach_are_caught(monkeypatch):
    from gradcheck.witnesses.numeric import _stopped

    monkeypatch.setattr(numeric_backend, "_stopped", lambda root, env: {})
    monkeypatch.setattr(numeric_backend, "_frozen", lambda root, env, name: {})
    assert _stopped(make_case(STE, INPUTS).output, sample(make_case(STE, INPUTS),
                                                          "float64", 0).values)
    result = check(make_case(STE, INPUTS))
    assert result.witness("numeric").status == "failed"
    assert result.witness("torch").status == "passed"
