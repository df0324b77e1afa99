"""``call = "op(x, w, eps=1e-6)"``: exactly what a custom op receives, parsed under the
formula parser's whitelist and bounds (never evaluated); inputs it does not pass are
reference-only; the op's backward is judged by the arguments it was given (keywords
count, as autograd counts them)."""

from __future__ import annotations

import pytest
import torch

import gradcheck
from conftest import bounded_work
from gradcheck.cases import case_from_dict
from gradcheck.cases.call import parse_call
from gradcheck.cases.model import OpArgument
from gradcheck.base.errors import CaseFileError


def _op_case(**keys):
    raw = {"name": "c", "op": "m:F", "reference": "x * w",
           "inputs": {"x": [3], "w": [3]}, **keys}
    return case_from_dict(raw)


# --------------------------------------------------------------------------- parsing

def test_a_call_holds_inputs_literals_and_keywords():
    positional, keywords = parse_call(
        "op(x, -2, 1.5e-3, [1, -2.5, [3]], True, None, 'mean', w, eps=1e-6, scale=-1, "
        "name=\"a\", dims=[0, 1], weight=w)", ["x", "w"])
    assert positional == (OpArgument(input="x"), OpArgument(value=-2),
                          OpArgument(value=1.5e-3), OpArgument(value=[1, -2.5, [3]]),
                          OpArgument(value=True), OpArgument(value=None),
                          OpArgument(value="mean"), OpArgument(input="w"))
    assert dict(keywords) == {"eps": OpArgument(value=1e-6), "scale": OpArgument(value=-1),
                              "name": OpArgument(value="a"),
                              "dims": OpArgument(value=[0, 1]),
                              "weight": OpArgument(input="w")}


@pytest.mark.parametrize("text, message", [
    ("f(x)", r"must be the op applied to its arguments"),
    ("op", r"must be the op applied"),
    ("op(x, wieght)", r"unknown input 'wieght' \(the inputs: x, weight\); did you mean "
                      r"weight\?"),
    ("op(x, eps=2 * 3)", r"arithmetic is not an argument"),
    ("op(x.T)", r"attribute access is not an argument"),
    ("op(exp(x))", r"a call is not an argument"),
    ("op(*x)", r"\* and \*\* arguments"),
    ("op(x, **k)", r"\* and \*\* arguments"),
    ("op(x, eps=1, eps=2)", r"keyword eps= is given twice|invalid syntax"),
    ("op(x, [x])", r"a list may hold numbers"),
    ("op(x, 1e400)", r"beyond"),
    ("op(x, (1, 2))", r"a tuple \(write a list\) is not an argument"),
    ("op(x,", r"invalid syntax"),
    ("op(x, " + "[" * 80 + "]" * 80 + ")", r"nests too deep"),
    ("op(x, '" + "s" * 300 + "')", r"a string longer than"),
])
def test_bad_calls_are_case_file_errors(text, message):
    with pytest.raises(CaseFileError, match=message) as info:
        parse_call(text, ["x", "weight"], file="f.toml", case="c", line=7)
    assert (info.value.file, info.value.case) == ("f.toml", "c")
    assert info.value.line == 7


def test_a_hostile_call_is_rejected_fast():
    with bounded_work():
        with pytest.raises(CaseFileError):
            parse_call("op(" + "x, " * 30000 + ")", ["x"])
    with pytest.raises(CaseFileError, match="not a string|must be a string"):
        parse_call(["op(x)"], ["x"])


def test_the_reader_checks_call(tmp_path):
    with pytest.raises(CaseFileError, match="call says everything the op receives"):
        _op_case(call="op(x, w)", args=[1])
    with pytest.raises(CaseFileError, match="passes the op no input that requires grad"):
        _op_case(call="op(1.0)")
    with pytest.raises(CaseFileError, match="only apply to a case with op"):
        case_from_dict({"name": "c", "expr": "sum(x)", "inputs": {"x": [3]},
                        "call": "op(x)"})
    path = tmp_path / "c.toml"
    path.write_text('[[case]]\nname = "c"\nop = "m:F"\nreference = "x * w"\n'
                    'inputs.x = [3]\ninputs.w = [3]\ncall = "op(x, W)"\n')
    cases, errors = gradcheck.cases.read_file(path)
    assert not cases and errors[0].line == 7 and "did you mean w?" in str(errors[0])
    with pytest.raises(CaseFileError, match=r"unknown input 'ww'.*did you mean w\?"):
        _op_case(call="op(x, ww)")
    case = _op_case(call="op(w, x, eps=0.5)")
    assert case.passed == ("x", "w") and case.reference_only == ()
    only = _op_case(call="op(x)")
    assert only.passed == ("x",) and only.reference_only == ("w",)


# --------------------------------------------------------------------------- calling

def seen(result) -> set[str]:
    """What the op printed of its arguments (it runs in a process of its own: its prints
    come back as the result's output)."""
    return set(result.output.splitlines())


def test_the_op_receives_exactly_what_the_call_says():
    def op(a, scale, *, mode, dims, eps=None):
        print((a.dtype, tuple(a.shape), scale, mode, type(dims), tuple(dims), eps))
        return a * scale

    result = gradcheck.check_op(op, "2.5 * x", {"x": (3,)},
                                call="op(x, 2.5, mode='sum', dims=[0, -1], eps=None)",
                                points=1, extreme_points=0)
    assert result.status == "passed", result.message
    assert seen(result) == {str((torch.float64, (3,), 2.5, "sum", list, (0, -1), None))}


def test_without_call_the_inputs_come_in_order_then_args():
    def op(a, b, c):
        print((a.shape, b.shape, c))
        return a * b * c

    result = gradcheck.check_op(op, "x * y * 3", {"x": (2,), "y": (2,)}, args=[3],
                                points=1, extreme_points=0)
    assert result.status == "passed", result.message
    assert seen(result) == {str((torch.Size([2]), torch.Size([2]), 3))}


class _Scaled(torch.autograd.Function):
    """x * w + eps, eps a keyword; backward returns one gradient per argument given."""

    @staticmethod
    def forward(ctx, x, w, eps=1e-6):
        ctx.save_for_backward(x, w)
        return x * w + eps

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x, None


class _ScaledTwo(_Scaled):
    """Returns two gradients: what autograd rejects once eps is given (by keyword too)."""

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


def test_op_shapes_counts_keyword_arguments_as_autograd_does():
    good = gradcheck.check_op(_Scaled, "x * w + 0.5", {"x": (3,), "w": (3,)},
                              call="op(x, w, eps=0.5)")
    assert good.status == "passed", good.message
    assert good.witness("op.shapes").status == "passed"
    # what autograd itself says of two gradients for three arguments
    x, w = (torch.randn(3, dtype=torch.float64, requires_grad=True) for _ in range(2))
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        _ScaledTwo.apply(x, w, eps=0.5).sum().backward()
    bad = gradcheck.check_op(_ScaledTwo, "x * w + 0.5", {"x": (3,), "w": (3,)},
                             call="op(x, w, eps=0.5)")
    assert bad.status == "failed"
    # without eps, two gradients are what autograd expects
    fine = gradcheck.check_op(_ScaledTwo, "x * w + 1e-6", {"x": (3,), "w": (3,)},
                              call="op(x, w)")
    assert fine.status == "passed", fine.message


def test_a_reference_only_input_is_differentiated_but_not_checked():
    """The op bakes w in (it is given x only): its vᵀJ for x is checked, none for w, and
    the report says why."""
    w_value = [0.5, -1.0, 2.0]

    def op(x):
        return x * torch.tensor(w_value, dtype=x.dtype)

    inputs = {"x": (3,), "w": {"shape": [3], "value": w_value}}
    result = gradcheck.check_op(op, "x * w", inputs, call="op(x)")
    assert result.status == "passed", result.message
    assert any("reference-only input w" in n and "not checked" in n for n in result.notes)
    backward = result.witness("op.backward")
    assert backward.checked > 0
    assert all(not e.quantity.startswith("w.") for e in backward.worst_elements)
    # mutation: an op whose x.grad is wrong is still caught with w reference-only
    wrong = gradcheck.check_op(lambda x: _Half.apply(x) * torch.tensor(w_value,
                                                                        dtype=x.dtype),
                               "x * w", inputs, call="op(x)")
    assert wrong.witness("op.backward").status == "failed"


class _Half(torch.autograd.Function):
    """The identity whose backward halves the gradient (wrong)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return 0.5 * g


def test_a_setup_context_function_binds_its_defaults():
    """torch.autograd.Function with setup_context: Function.apply binds forward's
    defaults, so backward owes a gradient for eps even when the call leaves it out."""

    class WithSetup(torch.autograd.Function):
        @staticmethod
        def forward(x, w, eps=1e-6):
            return x * w + eps

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], inputs[1])

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w, g * x

    result = gradcheck.check_op(WithSetup, "x * w + 1e-6", {"x": (3,), "w": (3,)},
                                call="op(x, w)")
    assert result.status == "failed"
    assert "returned 2 gradients; forward was given 3" in result.message \
        or "incorrect number of gradients" in result.message


def test_an_engine_function_gets_integer_tensors_and_plain_values_from_the_call():
    from gradcheck.engine import Function

    class ScaleBy(Function):
        @staticmethod
        def forward(ctx, x, k, c):
            assert k.dtype.kind == "i" and not k.requires_grad
            ctx.save_for_backward(k)
            return x.data * k.data * c

        @staticmethod
        def backward(ctx, g):
            (k,) = ctx.saved_tensors
            return g.data * k.data * 2.0, None, None

    inputs = {"x": (4,), "k": {"shape": [4], "dtype": "int64", "domain": [1, 5]}}
    result = gradcheck.check_op(ScaleBy, "x * k * 2", inputs, call="op(x, k, 2.0)")
    assert result.status == "passed", result.message
    wrong = gradcheck.check_op(ScaleBy, "x * k * 3", inputs, call="op(x, k, 3.0)")
    assert wrong.witness("op.backward").status == "failed"
