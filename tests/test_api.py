"""The library calls: check_op and assert_op inside a project's own tests."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradcheck
from gradcheck import GradientMismatch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g


class CubeTwiceTooSteep(Cube):
    @staticmethod
    def backward(ctx, g):
        return 2 * Cube.backward(ctx, g)


def test_check_op_passes_a_correct_op():
    result = gradcheck.check_op(Cube, "x ** 3", {"x": (5,)})
    assert result.status == "passed"
    names = {w.witness for w in result.witnesses}
    assert {"op.forward", "op.backward", "op.jacobian", "op.zero", "op.shapes"} <= names


def test_assert_op_raises_gradient_mismatch_with_the_diagnosis():
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_op(CubeTwiceTooSteep, "x ** 3", {"x": (5,)}, seed=3)
    assert isinstance(info.value, AssertionError)
    text = str(info.value)
    assert "op.backward" in text and "2 times the exact gradient" in text
    assert "reproduce: gradcheck.check_op(CubeTwiceTooSteep, 'x ** 3'" in text
    assert "seed=3" in text


def test_concrete_inputs_are_used_as_given():
    x = np.array([0.5, -1.0, 2.0])
    result = gradcheck.check_op(lambda t: t * t, "x * x", {"x": torch.tensor(x)}, points=1)
    assert result.status == "passed"
    result = gradcheck.check_op(lambda t: t * t + 1, "x * x", {"x": x}, points=1)
    assert result.status == "failed"
    assert result.witness("op.forward").status == "failed"


def test_float32_and_options():
    result = gradcheck.check_op(Cube, "x ** 3", {"x": {"shape": [4], "domain": [0.5, 1]}},
                                dtype="float32", points=2)
    assert result.status == "passed" and result.dtype == "float32"


def test_check_and_assert_gradients_on_a_formula():
    result = gradcheck.check("sum(tanh(x @ W) ** 2)", {"x": (2, 3), "W": (3, 2)})
    assert result.status == "passed"
    assert {w.witness for w in result.witnesses} == {"engine", "torch", "numeric"}
    assert gradcheck.assert_gradients("x * y", {"x": (3,), "y": np.ones(3)}).status \
        == "passed"


def test_assert_gradients_fails_like_pytest_approx(monkeypatch):
    import dataclasses

    from gradcheck.rules import RULES

    class BadExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.exp(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.exp(x) * 1.5

    monkeypatch.setitem(RULES, "exp", dataclasses.replace(RULES["exp"], torch=BadExp.apply))
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients("sum(exp(x))", {"x": (4,)}, seed=7)
    text = str(info.value)
    # 3 bulk and 2 extreme points x (value + 4)
    assert "torch: Mismatched elements: 20 / 25" in text
    assert "Max absolute difference" in text and "Max relative difference: 0.5" in text
    assert "diagnosis: x.grad is 3/2 times the exact gradient" in text
    header = next(line for line in text.splitlines() if "Index" in line)
    assert [c.strip() for c in header.split("|")] == ["Index", "Obtained", "Expected",
                                                      "Witness", "Point"]
    assert "x.grad[" in text
    assert "reproduce: gradcheck.check('sum(exp(x))', {'x': (4,)}, seed=7, " \
           "dtype='float64')" in text


def test_run_takes_one_path_as_one_path():
    """``gradcheck.run("cases/activations.toml")`` is that file, not the characters of
    its name (a str is iterable)."""
    from pathlib import Path

    import gradcheck

    file = str(Path(__file__).resolve().parents[1] / "cases" / "activations.toml")
    one = gradcheck.run(file)
    assert one.cases and [c.name for c in one.cases] == [
        c.name for c in gradcheck.run([file]).cases]
