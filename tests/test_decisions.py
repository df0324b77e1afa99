"""Decisions judged as the witness made them (gradcheck.checking.decisions): a witness whose
rounded values order a sort, pick a max or land on a kink's other side than the exact
values do is checked against the derivative of the branch it took, so right code passes
in every dtype; a wrong backward of those rows (a wrong permutation, the wrong side, the
wrong pick) still fails in every dtype, where the near-ties are there."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gradcheck import check
from gradcheck.rules import RULES
from gradcheck.checking.decisions import _tie_broken

DTYPES = ("float64", "float32", "bfloat16", "float16")

# tanh(3x) rounds to equal values in the narrow dtypes (its saturated tail): sort keys,
# max candidates and a relu's switch 1e-3 below 1 all sit within a rounding of each other
SORT = ("sum(sort(tanh(3 * x), axis=-1) * y)", {"x": [4, 256], "y": [4, 256]})
MAX = ("sum(max(tanh(3 * x), axis=-1) * y)", {"x": [4, 256], "y": [4]})
RELU = ("sum(relu(tanh(3 * x) - 0.999) * y)", {"x": [4, 256], "y": [4, 256]})
CLAMP = ("sum(clamp(tanh(3 * x), min=-0.999, max=0.999) * y)",
         {"x": [4, 256], "y": [4, 256]})
# a sweep's formula that failed bfloat16 and float16 before: exact ties of the sort keys
SWEPT = ("sum(sort(elu(x) * sin(y), axis=-1) * elu(x) * sin(y))",
         {"x": [512], "y": {"shape": [512], "domain": [-0.5, 0.5]}})


# keys that float32 rounds to exactly 0 while their exact values differ: 1 + exp(x) is 1
# below x = -16.6, so log(1 + exp(x)) is a tie of 32 zeros, ordered by the engine's
# stable sort and by torch's sort of more than 16 elements, which is not stable
ZEROS = ("sum(sort(log(1 + exp(x)), axis=-1) * y)",
         {"x": {"shape": [2, 32], "domain": [-30, -18]}, "y": [2, 32]})


def _decided(result) -> list[str]:
    return [n for n in result.notes if "decisions in" in n]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [SORT, MAX, RELU, CLAMP, SWEPT],
                         ids=["sort", "max", "relu", "clamp", "swept"])
def test_right_code_passes_where_rounding_flips_a_decision(case, dtype):
    result = check(*case, dtype=dtype)
    assert result.status == "passed", result.message


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_a_flipped_sort_is_named_in_a_note(dtype):
    result = check(*SORT, dtype=dtype)
    assert result.status == "passed", result.message
    notes = _decided(result)
    assert notes and "sort at" in notes[0] and dtype in notes[0]


def test_without_the_branch_judge_the_sort_fails(monkeypatch):
    # the judge is what makes the narrow dtypes pass: taken away, the same runs fail
    import gradcheck.checking.decisions as decisions

    monkeypatch.setattr(decisions, "judged", lambda *a, **k: None)
    assert check(*SWEPT, dtype="float16").status == "failed"


# ----------------------------------------------------------------- wrong backwards

def _patched(monkeypatch, name, **columns):
    monkeypatch.setitem(RULES, name, dataclasses.replace(RULES[name], **columns))


def _wrong_sort():
    import torch

    class Sort(torch.autograd.Function):   # ḡ routed by the reversed permutation
        @staticmethod
        def forward(ctx, x, axis, descending):
            out, idx = torch.sort(x, dim=axis[0], descending=descending)
            ctx.save_for_backward(idx)
            ctx.dim = axis[0]
            return out

        @staticmethod
        def backward(ctx, g):
            (idx,) = ctx.saved_tensors
            return (torch.zeros_like(g).scatter(ctx.dim, idx, g.flip(ctx.dim)),
                    None, None)

    return Sort.apply


def _wrong_max():
    import torch

    class Amax(torch.autograd.Function):   # the gradient to the smallest, not the largest
        @staticmethod
        def forward(ctx, x, axis, keepdims):
            ctx.save_for_backward(x)
            ctx.axis, ctx.keep = axis, keepdims
            return torch.amax(x, dim=axis, keepdim=keepdims)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            pick = x == torch.amin(x, dim=ctx.axis, keepdim=True)
            if not ctx.keep:
                for d in sorted(ctx.axis):
                    g = g.unsqueeze(d)
            return g * pick / pick.sum(dim=ctx.axis, keepdim=True), None, None

    return Amax.apply


def _wrong_side(forward, mask):
    import torch

    class Kink(torch.autograd.Function):   # the derivative of the other side
        @staticmethod
        def forward(ctx, x, *params):
            ctx.save_for_backward(x)
            ctx.params = params
            return forward(x, *params)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return (g * ~mask(x, *ctx.params),) + (None,) * len(ctx.params)

    return Kink.apply


def _wrong_relu():
    import torch

    return _wrong_side(torch.relu, lambda x: x > 0)


def _wrong_clamp():
    import torch

    return _wrong_side(lambda x, lo, hi: torch.clamp(x, min=lo, max=hi),
                       lambda x, lo, hi: (x >= lo) & (x <= hi))


WRONG = {"sort": (_wrong_sort, SORT), "max": (_wrong_max, MAX),
         "relu": (_wrong_relu, RELU), "clamp": (_wrong_clamp, CLAMP)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_branch_in_the_torch_column_still_fails(monkeypatch, name, dtype):
    make, case = WRONG[name]
    _patched(monkeypatch, name, torch=make())
    result = check(*case, dtype=dtype)
    assert result.witness("torch").status == "failed", (name, dtype)
    if dtype in ("float64", "float32"):   # finite differences use no backward
        assert result.witness("numeric").status == "passed", (name, dtype)


@pytest.mark.parametrize("case, dtype", [
    pytest.param(SORT, "float64", id="sort-float64"),
    pytest.param(SORT, "float32", id="sort-float32"),
    pytest.param(ZEROS, "float32", id="zeros-float32")])
def test_a_wrong_permutation_in_the_engine_column_still_fails(monkeypatch, case, dtype):
    # the engine's sort VJP routes ḡ by the reversed permutation: the engine fails, and
    # torch (judged by the engine where its decisions flipped) is not made to fail;
    # among keys float32 rounds to equal zeros too (ZEROS), where the judge pins them
    rule = RULES["sort"]
    right = rule.engine.vjps[0]

    def reversed_vjp(g, ans, x, axis, descending):
        return right(np.flip(g, axis[0]), ans, x, axis, descending)

    monkeypatch.setitem(RULES, "sort", dataclasses.replace(
        rule, engine=dataclasses.replace(rule.engine, vjps=(reversed_vjp,))))
    result = check(*case, dtype=dtype)
    assert result.witness("engine").status == "failed"


def test_tie_break_orders_equal_keys_as_the_witness_did():
    w = np.array([[1.0, 0.5, 1.0, 0.5, 2.0]])
    perm = np.array([[3, 1, 2, 0, 4]])   # the witness put the second 0.5 and 1.0 first
    out = _tie_broken(w, perm, 1, descending=False)
    assert np.array_equal(np.argsort(out, axis=1, kind="stable"), perm)
    assert np.max(np.abs(out - w)) <= 2 * np.spacing(2.0)
    down = _tie_broken(w, np.array([[4, 2, 0, 3, 1]]), 1, descending=True)
    assert np.array_equal(np.argsort(-down, axis=1, kind="stable"), [[4, 2, 0, 3, 1]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_keys_rounded_to_equal_zeros_are_judged_in_the_witness_order(dtype):
    # the judge pins the sort's keys to the witness's, tie-broken by a few spacings of
    # 0; pinned as a + (w - a) that break was lost (a ≈ 1e-9 rounds it away) and the
    # judge's own sort ordered the zeros: the engine and torch failed in float32
    result = check(*ZEROS, dtype=dtype)
    assert result.status == "passed", result.message


def test_pinned_arguments_take_the_pinned_values_to_the_bit():
    # (a - ā) + w is w exactly, with ∂/∂a = 1; a + (w - a) was not, at |a| ≫ |w|
    import torch

    from gradcheck.witnesses.drive import _pinned

    a = torch.tensor([1e-9, 3e-11, 2.0], dtype=torch.float64, requires_grad=True)
    w = np.array([0.0, 5e-324, 2.0 + 2 ** -51])
    node = object()
    pinned = _pinned(lambda n, args: args[0], {id(node): [w]},
                     lambda x: torch.tensor(x, dtype=torch.float64),
                     lambda t: t.detach().numpy())
    out = pinned(node, [a])
    assert np.array_equal(out.detach().numpy(), w)
    out.sum().backward()
    assert np.array_equal(a.grad.numpy(), np.ones(3))
