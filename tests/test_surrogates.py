"""Surrogate gradients (``forward`` beside ``reference``): op.forward checks the op's
outputs against ``forward``, every gradient check the vᵀJ of ``reference``; and the
custom ops of ``tests/fixtures/custom_ops.toml`` (straight-through estimator, gradient
reversal, RMSNorm with a keyword, cross-entropy with integer labels, double backward
through mixing references), each right one passing and each wrong twin caught by the
check its bug belongs to."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck.cases import case_from_dict, load_cases
from gradcheck.base.errors import CaseFileError
from gradcheck.checking.case import run_case
from gradcheck.sampling.points import case_points
from conftest import skipped_saying_why  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "custom_ops.toml"
CASES = {c.name: c for c in load_cases(FIXTURES)}
RIGHT = sorted(n for n, c in CASES.items() if c.expect == "pass")
#: wrong op -> the checks that must fail (and no other)
WRONG = {
    "straight-through-sign-identity": {"op.backward", "op.jacobian"},
    "straight-through-sign-wrong-forward": {"op.forward"},
    "gradient-reversal-unreversed": {"op.backward", "op.jacobian"},
    "rms-norm-ignores-eps": {"op.forward", "op.backward", "op.jacobian"},
    # a plain function: PyTorch derives its forward mode, wrong with the wrong labels
    "cross-entropy-labels-off-by-one": {"op.forward", "op.backward", "op.jacobian",
                                        "op.jvp"},
    "scale-by-count-plus-one": {"op.backward", "op.jacobian"},
    "tanh-linear-detached": {"op.double"},
}


@pytest.fixture(scope="module")
def results():
    cache: dict = {}
    return {(n, d): run_case(c, d, cache=cache, timeout=None)
            for n, c in CASES.items() for d in c.dtypes}


def test_every_fixture_is_named_here():
    assert set(CASES) == set(RIGHT) | set(WRONG)
    assert all(CASES[n].expect == "fail" for n in WRONG)


@pytest.mark.parametrize("name", RIGHT)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_right_ops_pass(results, name, dtype):
    result = results[name, dtype]
    assert result.status == "passed", result.message
    # (a path the op does not support, forward mode or vmap, skipped saying why)
    assert all(w.status == "passed" and w.checked > 0 for w in result.witnesses
               if not skipped_saying_why(w))
    if CASES[name].order == 2:
        assert result.witness("op.double").checked > 0


@pytest.mark.parametrize("name", sorted(WRONG))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_each_wrong_twin_is_caught_by_its_own_checks(results, name, dtype):
    result = results[name, dtype]
    assert result.status == "passed", result.message      # caught, as expect = "fail"
    failed = {w.witness for w in result.witnesses if w.status == "failed"}
    assert failed == WRONG[name], result.message


def test_the_report_says_the_case_is_a_surrogate(results):
    notes = results["straight-through-sign", "float64"].notes
    assert any(n.startswith("surrogate: op.forward checks the op's outputs against "
                            "forward = 'sign(x)'") and "reference = 'tanh(x)'" in n
               for n in notes), notes
    labels = results["cross-entropy-labels", "float64"].notes
    assert any("reference-only input classes" in n for n in labels), labels


def test_without_forward_the_reference_is_what_the_outputs_must_equal():
    """The straight-through estimator checked against tanh(x) alone: its outputs
    (sign) are wrong for that formula, its gradients right."""
    from gradcheck.checking.opcheck.loader import load

    StraightThroughSign = load("custom_ops:StraightThroughSign", str(FIXTURES))
    result = gradcheck.check_op(StraightThroughSign, "tanh(x)", {"x": (8,)})
    failed = {w.witness for w in result.witnesses if w.status == "failed"}
    assert failed == {"op.forward"}
    surrogate = gradcheck.check_op(StraightThroughSign, "tanh(x)", {"x": (8,)},
                                   forward="sign(x)")
    assert surrogate.status == "passed", surrogate.message


@pytest.mark.parametrize("keys, message", [
    ({"forward": ["x", "x"]}, r"forward gives 2 formulas, reference 1"),
    ({"forward": "sum(x)"}, r"forward has shape \[\], but the reference has shape \[4\]"),
    ({"forward": "y"}, r"unknown name 'y'"),
])
def test_bad_forwards_are_case_file_errors(keys, message):
    with pytest.raises(CaseFileError, match=message):
        case_from_dict({"name": "s", "op": "m:F", "reference": "tanh(x)",
                        "inputs": {"x": [4]}, **keys})


def test_forward_needs_an_op():
    with pytest.raises(CaseFileError, match="forward only apply to a case with op"):
        case_from_dict({"name": "s", "expr": "tanh(x)", "forward": "x",
                        "inputs": {"x": [4]}})


def test_a_surrogate_case_travels_whole_and_keeps_away_from_its_forwards_kinks():
    case = case_from_dict({"name": "s", "op": "m:F", "forward": "sign(x - 0.3)",
                           "reference": "tanh(x)", "inputs": {"x": [256]}})
    again = pickle.loads(pickle.dumps(case))
    assert repr(again.forward[0]) == "sign(sub(x, 0.3))" and again.surrogate
    for point in case_points(case, "float32"):
        assert np.all(np.abs(point.values["x"] - 0.3) >= 0.05 - 1e-6)


def _rounding_op():
    """forward 3.1·x − 2.1·x, which rounds in float32 (about x, off by a few u·|x|);
    backward -0.5·g: a surrogate whose values need their own formula's bound."""
    import torch

    class Rounding(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 3.1 * x - 2.1 * x

        @staticmethod
        def backward(ctx, g):
            return -0.5 * g

    return Rounding


def test_a_surrogates_values_get_the_forward_formulas_tolerance(monkeypatch):
    """With no peer (the rounding model alone decides), op.forward passes on the bound of
    forward = "3.1 * x - 2.1 * x", the formula the op computes; with that bound taken
    away (zero, mutation) it fails: the tolerance of the values is the forward's."""
    from gradcheck.checking.opcheck import tolerances

    op = _rounding_op()
    def no_peer(self, point):
        raise RuntimeError("torch cannot run it")

    monkeypatch.setattr(tolerances.OpTolerance, "_peer_graph", no_peer)
    ok = gradcheck.check_op(op, "-0.5 * x", {"x": (64,)}, forward="3.1 * x - 2.1 * x",
                            dtype="float32")
    assert ok.status == "passed", ok.message
    assert ok.witness("op.forward").max_abs_err > 0     # (it rounds: the bound is used)
    monkeypatch.setattr(tolerances.OpTolerance, "_forward_bounds",
                        lambda self, point: [np.zeros(n.shape) for n in self.case.forward])
    bad = gradcheck.check_op(op, "-0.5 * x", {"x": (64,)}, forward="3.1 * x - 2.1 * x",
                             dtype="float32")
    assert {w.witness for w in bad.witnesses if w.status == "failed"} == {"op.forward"}
