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
