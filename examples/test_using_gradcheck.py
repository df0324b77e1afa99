"""How a project uses gradcheck in its own test suite: ``pytest examples/``.

Each test below is one way in: a library call on a custom op, the ``gradchecker``
fixture, a marker that turns every case of a case file into a test of its own, and a
Hypothesis property over random formulas. A result's ``assert_passed()`` fails the test
with gradcheck's report (the worst elements, the diagnosis), where ``assert
result.status == "passed"`` would say only ``'failed' == 'passed'``.
"""

import pytest
import torch
from hypothesis import given, settings

import gradcheck as gc
from gradcheck.cases import case_from_dict
from gradcheck.checking.case import run_case
from gradcheck.strategies import formulas


class Swish(torch.autograd.Function):
    """x * sigmoid(x) with a hand-written backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))


def test_swish_matches_its_formula():
    gc.assert_op(Swish, "x * sigmoid(x)", {"x": (32,)}, dtype="float32")


def test_a_formula_with_the_fixture(gradchecker):
    result = gradchecker.check("sum(tanh(x @ W + b) ** 2)", {"x": (4, 3), "W": (3, 2),
                                                             "b": (2,)})
    result.assert_passed()


@pytest.mark.gradcheck_cases("../cases/activations.toml", k="gelu")
def test_bundled_gelu_cases(gradcheck_case):
    gradcheck_case.assert_passed()


@settings(max_examples=10, deadline=None)
@given(formulas(depth=2, functions=["sin", "tanh", "mul", "add", "sum"]))
def test_random_formulas_agree_with_the_exact_derivative(table):
    gc.assert_passed(run_case(case_from_dict(table), "float64"))
