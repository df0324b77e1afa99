"""The per-element tolerance model (gradcheck.rounding, gradcheck.compare): correct but
numerically hard ops pass in every dtype, and bug classes the old per-tensor scale hid
are caught. Every op here is run for real, through PyTorch's autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import gradcheck
from gradcheck.cases import case_from_dict
from gradcheck.dtypes import round_to
from gradcheck.rounding import error_bounds
from gradcheck.symbolic import Reference

DTYPES = ["float64", "float32", "bfloat16", "float16"]


def _status(op, reference, inputs, dtype, **options):
    result = gradcheck.check_op(op, reference, inputs, dtype=dtype, **options)
    failed = {w.witness: w.message for w in result.witnesses if w.status == "failed"}
    return result.status, failed


# --------------------------------------------------------------------------- correct, hard

class Expm1MinusLog1p(torch.autograd.Function):
    """expm1(x) - log1p(x): both terms ~x near 0, the result ~x²; so is the backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.expm1(x) - torch.log1p(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (torch.exp(x) - 1 / (1 + x))


def _layer_norm(x):
    return F.layer_norm(x, x.shape[-1:], eps=1e-5)


LAYER_NORM = ("(x - mean(x, axis=1, keepdims=True)) / sqrt(mean((x - mean(x, axis=1, "
              "keepdims=True))**2, axis=1, keepdims=True) + 0.00001)")

HARD = {
    # name: (op, reference, inputs)
    "tanh-saturated": (torch.tanh, "tanh(x)", {"x": {"shape": [32], "domain": [8, 16]}}),
    "tanh-saturated-negative": (torch.tanh, "tanh(x)",
                                {"x": {"shape": [32], "domain": [-16, -8]}}),
    "sigmoid-saturated": (torch.sigmoid, "sigmoid(x)",
                          {"x": {"shape": [32], "domain": [6, 16]}}),
    "softmax-wide-logits": (lambda x: torch.softmax(x, dim=-1),
                            "exp(x - logsumexp(x, axis=1, keepdims=True))",
                            {"x": {"shape": [4, 8], "domain": [-30, 30]}}),
    "expm1-minus-log1p": (Expm1MinusLog1p, "expm1(x) - log1p(x)",
                          {"x": {"shape": [32], "domain": [-0.001, 0.001]}}),
    "layer-norm": (_layer_norm, LAYER_NORM, {"x": {"shape": [4, 16]}}),
    "mish": (F.mish, "x * tanh(softplus(x))", {"x": {"shape": [32], "domain": [-6, 6]}}),
    "gelu-tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))",
                  {"x": {"shape": [32], "domain": [-5, 5]}}),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(HARD))
def test_correct_hard_ops_pass(name, dtype):
    op, reference, inputs = HARD[name]
    if dtype in ("float16", "bfloat16") and name == "expm1-minus-log1p":
        # |x| <= 1e-3 is below float16's/bfloat16's resolution of 1 + x: the op itself is
        # meaningless there (log1p(x) rounds x to 0); float64 and float32 cover it.
        pytest.skip("no such class in this dtype")
    status, failed = _status(op, reference, inputs, dtype)
    assert status == "passed", failed


# --------------------------------------------------------------------------- caught bugs

class ExpSmallElementsWrong(torch.autograd.Function):
    """exp whose backward adds 1e-6: right for the large elements, wrong by ~1e7x on
    the small ones. A per-tensor scale (max |gradient| ~ 7) hid it in float32."""

    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y + 1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_large_relative_error_on_small_elements_is_caught(dtype):
    status, failed = _status(ExpSmallElementsWrong, "exp(x)",
                             {"x": {"shape": [32], "domain": [-30, 2]}}, dtype)
    assert status == "failed" and "op.backward" in failed


class ClippedBackward(torch.autograd.Function):
    """A backward that rescales grad_output to unit norm: 0/0 = NaN for a zero one."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        norm = g.norm()
        return 2 * x * (g / norm) * norm


def test_nan_for_a_zero_grad_output_fails_op_zero():
    result = gradcheck.check_op(ClippedBackward, "x**2", {"x": (8,)})
    by = {w.witness: w for w in result.witnesses}
    assert by["op.backward"].status == "passed"
    assert by["op.zero"].status == "failed"
    assert result.status == "failed"


class SoftmaxShiftsInput(torch.autograd.Function):
    """A stabilised softmax that subtracts the max from its input in place."""

    @staticmethod
    def forward(ctx, x):
        x -= x.max(dim=-1, keepdim=True).values
        y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(dim=-1, keepdim=True))


class ScalesGradOutputInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return g.mul_(2)


class NegatesSavedWeight(torch.autograd.Function):
    """-(w * x) whose backward negates the caller's w in place. Kept on ctx rather than
    saved with save_for_backward, it escapes autograd's version counter."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w
        return -(w * x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.w.neg_(), None


@pytest.mark.parametrize("op, reference, message", [
    (SoftmaxShiftsInput, "exp(x - logsumexp(x, axis=1, keepdims=True))",
     "forward modified input x in place"),
    (ScalesGradOutputInPlace, "2 * x", "backward modified grad_output of out0 in place"),
    (NegatesSavedWeight, "-(w * x)", "backward modified input w in place"),
])
def test_in_place_modifications_are_caught(op, reference, message):
    shape = (3, 4) if "axis" in reference else (6,)
    inputs = {"x": shape}
    if "w" in reference:
        inputs["w"] = {"shape": list(shape), "requires_grad": False}
    result = gradcheck.check_op(op, reference, inputs)
    inplace = result.witness("op.inplace")
    assert inplace.status == "failed" and message in inplace.message
    assert result.status == "failed"


def test_correct_ops_pass_op_inplace():
    result = gradcheck.check_op(torch.tanh, "tanh(x)", {"x": (6,)})
    assert result.witness("op.inplace").status == "passed"


class DetachedGradOutput(torch.autograd.Function):
    """Its backward detaches grad_output: first derivatives are right, and so is the
    Hessian part of double backward, but d(vᵀJ)/dv comes out zero."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.detach() * torch.cos(x)


class LinearOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, W):
        ctx.save_for_backward(x, W)
        return x @ W

    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.T, x.T @ g


class LinearDetachedW(LinearOp):
    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.detach().T, x.T @ g


def test_double_backward_checks_the_grad_output_derivative():
    result = gradcheck.check_op(DetachedGradOutput, "sin(x)", {"x": (8,)}, order=2)
    double = result.witness("op.double")
    assert double.status == "failed" and "grad_output" in double.worst.quantity
    assert result.witness("op.backward").status == "passed"


def test_double_backward_works_for_a_reference_that_mixes_elements():
    inputs = {"x": (3, 4), "W": (4, 2)}
    good = gradcheck.check_op(LinearOp, "x @ W", inputs, order=2)
    assert good.status == "passed", good.message
    assert good.witness("op.double").checked > 0
    bad = gradcheck.check_op(LinearDetachedW, "x @ W", inputs, order=2)
    assert bad.witness("op.double").status == "failed"
    assert bad.witness("op.backward").status == "passed"


# --------------------------------------------------------------------------- the bound

BOUND_CASES = [
    ("sum(tanh(x))", {"x": [64]}, (8, 16)),
    ("sum(sigmoid(x))", {"x": [64]}, (4, 12)),
    ("sum(expm1(x) - log1p(x))", {"x": [64]}, (-1e-3, 1e-3)),
    ("sum(tanh(x @ W))", {"x": [8, 16], "W": [16, 8]}, (-2, 2)),
    ("sum(x * tanh(softplus(x)))", {"x": [64]}, (-5, 5)),
    (LAYER_NORM, {"x": [4, 32]}, (-2, 2)),
    ("x - logsumexp(x, axis=1, keepdims=True)", {"x": [4, 16]}, (-30, 30)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("expr, shapes, domain", BOUND_CASES)
def test_bound_covers_torchs_actual_error(expr, shapes, domain, dtype):
    """The derived bound holds for PyTorch's own float computation, without the safety
    factor (the float64 reference's own rounding is the same bound at float64's u).
    That it is tight enough to catch bugs, the tests above show."""
    from gradcheck.backends.torch import run as torch_run
    from gradcheck.dtypes import unit_roundoff

    table = {"name": "b", "expr": expr, "gradient": "random",
             "inputs": {k: {"shape": s} for k, s in shapes.items()}}
    case = case_from_dict(table)
    rng = np.random.default_rng(0)
    point = {k: round_to(rng.uniform(*domain, s), dtype) for k, s in shapes.items()}
    v = round_to(rng.standard_normal(case.output.shape), dtype)
    exact = Reference(case).evaluate(point, v).quantities()
    got = torch_run(case, point, v, dtype).quantities()
    both = 1 + unit_roundoff("float64") / unit_roundoff(dtype)
    bounds = {q: both * b for q, b in error_bounds(case, point, v, dtype).items()}
    for q, e in exact.items():
        err = np.abs(got[q] - e)
        assert np.all(err <= bounds[q]), (q, float(np.max(err - bounds[q])))
