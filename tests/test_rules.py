"""Every row of the rule table, checked against torch and finite differences, and the
table's completeness: a row that lacks a backend, or a test, fails here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gradcheck import rules
from gradcheck import engine
from gradcheck.rules import BACKENDS, RULES, EngineRule
from gradcheck.rules.activation.rows import STEPS
from conftest import check, make_case

M = [4, 3]
V = [3]
CM = {"shape": M, "dtype": "complex"}
CV = {"shape": V, "dtype": "complex"}

# (expression, inputs) exercising each row; the coverage test below keeps this complete.
ROW_CASES = {
    "add": ("x + y", {"x": M, "y": V}),
    "sub": ("x - y + (2 - x)", {"x": M, "y": V}),
    "mul": ("x * y * 3", {"x": M, "y": V}),
    "div": ("x / y + 1 / y", {"x": M, "y": {"shape": V, "domain": "nonzero"}}),
    "pow": ("x ** y + x ** 3 + x ** 0.5 + 2 ** y + x ** -1.5",
            {"x": {"shape": M, "domain": "positive"}, "y": V}),
    "neg": ("-x * y", {"x": M, "y": V}),
    "exp": ("exp(x)", {"x": M}),
    "log": ("log(x)", {"x": {"shape": M, "domain": "positive"}}),
    "log1p": ("log1p(x)", {"x": {"shape": M, "domain": [-0.9, 3]}}),
    "expm1": ("expm1(x)", {"x": M}),
    "sqrt": ("sqrt(x)", {"x": {"shape": M, "domain": "positive"}}),
    "sin": ("sin(x)", {"x": M}),
    "cos": ("cos(x)", {"x": M}),
    "tan": ("tan(x)", {"x": {"shape": M, "domain": [-1.2, 1.2]}}),
    "asin": ("asin(x)", {"x": {"shape": M, "domain": "unit"}}),
    "acos": ("acos(x)", {"x": {"shape": M, "domain": "unit"}}),
    "atan": ("atan(x)", {"x": M}),
    "atan2": ("atan2(x, y) + atan2(2, y)", {"x": M, "y": V}),
    "sinh": ("sinh(x)", {"x": M}),
    "cosh": ("cosh(x)", {"x": M}),
    "tanh": ("tanh(x)", {"x": M}),
    "asinh": ("asinh(x)", {"x": M}),
    "acosh": ("acosh(x)", {"x": {"shape": M, "domain": [1.0, 4.0]}}),
    "atanh": ("atanh(x)", {"x": {"shape": M, "domain": "unit"}}),
    "abs": ("abs(x) * y", {"x": M, "y": V}),
    "sign": ("sign(x) * x ** 2", {"x": M}),
    "erf": ("erf(x)", {"x": M}),
    "sigmoid": ("sigmoid(x)", {"x": M}),
    "softplus": ("softplus(x * 4)", {"x": M}),
    "relu": ("relu(x) * y", {"x": M, "y": V}),
    "clamp": ("clamp(x, min=-0.5) * y + clamp(x * y, min=-1, max=0.5) + clamp(x, max=0.3)",
              {"x": M, "y": V}),
    "maximum": ("maximum(x, y)", {"x": M, "y": V}),
    "minimum": ("minimum(x, y) + minimum(x, 0.5)", {"x": M, "y": V}),
    "where": ("where(x > y, x * y, sin(x))", {"x": M, "y": V}),
    # x broadcast against the mask (y's gradient sums over it); -inf, as an attention mask
    "masked_fill": ("masked_fill(x, x > 0.3, 0.5) * y + masked_fill(y, x < 0, -1.5) "
                    "+ exp(masked_fill(x, m, -inf))",
                    {"x": M, "y": V, "m": {"shape": M, "dtype": "bool"}}),
    "lt": ("where(x < 0.3, x ** 2, 2 * x)", {"x": M}),
    "le": ("where(x <= y, exp(x), y)", {"x": M, "y": V}),
    "gt": ("where(x > 0, x, x / 2)", {"x": M}),
    "ge": ("where(y >= x, cos(y), x)", {"x": M, "y": V}),
    "sum": ("sum(x ** 2, axis=1)", {"x": M}),
    "mean": ("mean(x * y, axis=0)", {"x": M, "y": V}),
    "prod": ("prod(x, axis=1)", {"x": M}),
    "max": ("max(x, axis=0)", {"x": M}),
    "min": ("min(x * y, axis=1, keepdims=True)", {"x": M, "y": V}),
    "logsumexp": ("logsumexp(x, axis=1)", {"x": M}),
    "matmul": ("x @ W", {"x": M, "W": [3, 2]}),
    "dot": ("dot(a, b)", {"a": V, "b": V}),
    "transpose": ("transpose(x) @ x + transpose(z, 0, 2)[0] * 2", {"x": M, "z": [3, 3, 3]}),
    # structural rows (gradcheck/rules/structure/rows.py): exact linear maps
    "reshape": ("reshape(x, [2, -1]) * reshape(transpose(x), [2, 12]) "
                "+ reshape(x[:, ::2], [-1, 12])[0]", {"x": [4, 6]}),
    "flatten": ("flatten(x) * flatten(transpose(x), 0, 1) + flatten(x, 1, 1)[0, 0]",
                {"x": M}),
    "squeeze": ("squeeze(unsqueeze(x, 0), 0) + squeeze(sum(x, axis=0, keepdims=True))",
                {"x": M}),
    "unsqueeze": ("unsqueeze(x, 1) * unsqueeze(y, -1)", {"x": M, "y": V}),
    "permute": ("sum(permute(z, [2, 0, 1]) * x[:, :, None], axis=2) "
                "+ permute(x, [1, 0])[0][:, None]", {"x": M, "z": [3, 2, 4]}),
    "expand": ("expand(y, [4, -1]) * x + expand(unsqueeze(y, 0), [2, 4, 3])",
               {"x": M, "y": V}),
    "flip": ("flip(x, axis=1) * x + flip(x)", {"x": M}),
    "roll": ("roll(x, 1, axis=1) * x + roll(x, -2) + roll(x, [1, 2], [0, 1])", {"x": M}),
    "pad": ("sin(pad(x, [[0, 0], [1, 2]], value=0.5)) + pad(x, [[0, 0], [3, 0]])",
            {"x": M}),
    "tril": ("tril(x) + tril(x * x, k=-1)", {"x": [3, 3]}),
    "triu": ("triu(x, k=1) * x + triu(x)", {"x": M}),
    "index": ("x[0] + x[-1, ::-1] + x[:, None][:, 0, 0:][0] + sum(x[..., ::2]) "
              "+ x[1:, :][::-2, None][0, 0] + x[...]", {"x": M}),
    "concat": ("concat([x, y * y], axis=-1) * concat([y, x], 1)", {"x": M, "y": M}),
    "stack": ("stack([x, sin(y)], axis=1) * 2 + stack([x], axis=1)", {"x": M, "y": M}),
    "split": ("split(x, [1, 2], axis=1)[0] * split(x, [1, 2], axis=1)[-1]", {"x": M}),
    "take": ("sum(x[idx], axis=0) * 2 + x[:, jdx][0, 0]",
             {"x": [3, 4], "idx": {"shape": [5], "dtype": "int64", "domain": [-3, 3]},
              "jdx": {"shape": [2, 4], "dtype": "int64", "domain": [0, 3]}}),
    "gather": ("gather(x, jdx, axis=1) * gather(x * x, kdx, 0)",
               {"x": [3, 4], "jdx": {"shape": [2, 4], "dtype": "int64", "domain": [0, 3]},
                "kdx": {"shape": [2, 4], "dtype": "int64", "domain": [0, 3]}}),
    "take_along_axis": ("take_along_axis(x, jdx, axis=1) + take_along_axis(x[0:1], kdx, 1)",
                        {"x": [3, 4], "jdx": {"shape": [1, 5], "dtype": "int64", "domain": [0, 3]},
                         "kdx": {"shape": [1, 5], "dtype": "int64", "domain": [0, 4]}}),
    # adding src at an integer input's indices (several at one place: the sum rounds)
    "scatter_add": ("scatter_add(x, jdx, y[None, :2] * x[:, :2], axis=1) "
                    "+ scatter_add(x, kdx, x[0:1] * 2, 0)",
                    {"x": [3, 4], "y": V, "jdx": {"shape": [3, 2], "dtype": "int64",
                                                  "domain": [0, 4]},
                     "kdx": {"shape": [1, 4], "dtype": "int64", "domain": [0, 3]}}),
    "index_add": ("index_add(x, idx, y * x[:, :2], axis=1) + index_add(x, jdx, exp(x), 0)",
                  {"x": [3, 4], "y": [3, 2], "idx": {"shape": [2], "dtype": "int64",
                                                     "domain": [0, 4]},
                   "jdx": {"shape": [3], "dtype": "int64", "domain": [0, 3]}}),
    # convolutions and pooling (NCHW): batched and unbatched, every parameter
    "conv1d": ("conv1d(s, w, stride=2, padding=1, dilation=2, groups=2) + conv1d(t, k)",
               {"s": [2, 4, 7], "w": [4, 2, 2], "t": [4, 6], "k": [4, 4, 3]}),
    "conv2d": ("conv2d(x, w, stride=[1, 2], padding=1) + conv2d(x, g, padding=[1, 0], "
               "dilation=[1, 2], groups=2)", {"x": [2, 2, 4, 5], "w": [2, 2, 3, 3],
                                             "g": [2, 1, 3, 2]}),
    "avg_pool2d": ("avg_pool2d(x, 2) + avg_pool2d(y, [2, 3], stride=[2, 1])",
                   {"x": [2, 3, 4, 4], "y": [3, 4, 4]}),
    "max_pool2d": ("max_pool2d(x, 2, stride=1) + max_pool2d(y, [1, 3])",
                   {"x": [2, 2, 3, 4], "y": [2, 2, 5]}),
    # composite reductions, scans and sorts (gradcheck/rules/composite/rows.py)
    "softmax": ("softmax(x * 3) * y + softmax(x, axis=0)", {"x": M, "y": V}),
    "log_softmax": ("log_softmax(x * 3) * y + log_softmax(x, 0)", {"x": M, "y": V}),
    "var": ("var(x, axis=1) + var(x * y, correction=0) + var(x, 1, 2, True)[:, 0]", {"x": M, "y": V}),
    "std": ("std(x, axis=1) + std(x * y, correction=0) + std(x, 1, keepdims=True)[:, 0]",
            {"x": M, "y": V}),
    "norm": ("norm(x) + norm(x, ord=1, axis=1) + norm(x * y, inf, axis=1) "
             "+ norm(x, 3, axis=0, keepdims=True)[0, 0]", {"x": M, "y": V}),
    "cumsum": ("cumsum(x, 1) * y + cumsum(x * x, axis=0)", {"x": M, "y": V}),
    "cumprod": ("cumprod(x, 1) * y + cumprod(x, axis=0)", {"x": M, "y": V}),
    "sort": ("sort(x) * y + sort(x * y, axis=0, descending=True)", {"x": M, "y": V}),
    "topk": ("topk(x, 2) * topk(y, 2) + topk(x, 3, axis=0)[0, :2]", {"x": M, "y": V}),
    "einsum": ('einsum("ij,jk->ik", x, W) + einsum("ij->j", x)[None, :2] '
               '+ einsum("...j,j", x, y)[:, None] + einsum("ij,ij->ij", x, x)[:, 1:] '
               '+ einsum("ij,jk,k->i", x, W, u)[:, None] + einsum("i,ij,kj,k->ik", y, W, W, y)[0:1, :2]',
               {"x": M, "y": V, "W": [3, 2], "u": [2]}),
    # the FFTs, spelled as torch.fft's: z, w complex inputs (their rows take the
    # view_as_real layout the complex table lowers them to), x, y real
    "fft": ('fft(z, axis=0) * w + fft(z, n=6, axis=1, norm="ortho")[:, :3]',
            {"z": CM, "w": CV}),
    "ifft": ('ifft(z, axis=1, norm="forward") * w + sum(ifft(z, n=5, axis=0), axis=0)',
             {"z": CM, "w": CV}),
    "rfft": ('rfft(x, axis=0) + rfft(x * y, n=5, axis=0, norm="ortho")', {"x": M, "y": V}),
    "irfft": ('irfft(z, axis=0) * y + irfft(z * w, n=5, axis=0, norm="ortho")[:1]',
              {"z": CM, "w": CV, "y": V}),
    "one_hot": ("one_hot(idx, 4) @ W + sum(one_hot(lab, 3) * y, axis=1)[:, None]",
                {"idx": {"shape": [4], "dtype": "int64", "domain": [0, 4]}, "W": [4, 3],
                 "lab": {"shape": [4], "dtype": "int32", "domain": [0, 3]}, "y": V}),
    # elementwise functions, activations and steps (gradcheck/rules/activation/rows.py)
    "hypot": ("hypot(x, y) + hypot(x, 2)", {"x": M, "y": V}),
    "logaddexp": ("logaddexp(x * 3, y) + logaddexp(x, 0.5)", {"x": M, "y": V}),
    "xlogy": ("xlogy(x, y) + xlogy(2, y)", {"x": M, "y": {"shape": V, "domain": "positive"}}),
    "square": ("square(x) * y", {"x": M, "y": V}),
    "rsqrt": ("rsqrt(x)", {"x": {"shape": M, "domain": "positive"}}),
    "reciprocal": ("reciprocal(x)", {"x": {"shape": M, "domain": "nonzero"}}),
    "floor": ("floor(x * 3) * y + x", {"x": M, "y": V}),
    "ceil": ("ceil(x * 3) * y + x", {"x": M, "y": V}),
    "round": ("round(x * 3) * y + x", {"x": M, "y": V}),
    # a straight-through estimator: x's gradient is y, as if round were the identity
    "detach": ("(x + detach(round(x * 3) / 3 - x)) * y", {"x": M, "y": V}),
    "trunc": ("trunc(x * 3) * y + x", {"x": M, "y": V}),
    "gelu": ('gelu(x * 3) + gelu(x * 3, approximate="tanh")', {"x": M}),
    "silu": ("silu(x * 4)", {"x": M}),
    "mish": ("mish(x * 4)", {"x": M}),
    "elu": ("elu(x * 2) + elu(x, 0.5)", {"x": M}),
    "leaky_relu": ("leaky_relu(x) + leaky_relu(x * y, slope=0.2)", {"x": M, "y": V}),
    "hardtanh": ("hardtanh(x * 2) + hardtanh(x, lo=-0.5, hi=0.25)", {"x": M}),
    # equality holds on regions of round's results (sampling waives its hazard there)
    "eq": ("where(round(x) == 0, x ** 2, 2 * x) + where(x == y, x, y)", {"x": M, "y": V}),
    "ne": ("where(round(x * 2) != round(y), sin(x), x * y)", {"x": M, "y": V}),
    "logical_and": ("where((x > 0) & (y < 0.5), x * y, exp(x))", {"x": M, "y": V}),
    "logical_or": ("where((x < -0.5) | (x > y), x ** 2, y)", {"x": M, "y": V}),
    "logical_not": ("where(~(x > y), cos(x), x * y)", {"x": M, "y": V}),
}

REDUCTIONS_WHOLE = ["sum", "mean", "prod", "max", "min", "logsumexp"]


def test_every_row_has_every_backend():
    for name, rule in RULES.items():
        for column in BACKENDS:
            # the engine column is data (grad_fn name, VJPs); its op is generated from it
            fill = getattr(rule, column)
            ok = isinstance(fill, EngineRule) and callable(getattr(engine, name)) \
                if column == "engine" else callable(fill)
            assert ok, f"{name} lacks its {column} column"
        assert rule.name == name


def test_table_covers_the_documented_language():
    wanted = ("add sub mul div pow neg exp log log1p expm1 sqrt sin cos tan asin acos atan "
              "sinh cosh tanh asinh acosh atanh abs sign erf sigmoid softplus relu maximum "
              "minimum where sum mean prod max min logsumexp matmul dot transpose").split()
    assert not set(wanted) - set(RULES)


def test_every_row_has_a_test_case():
    assert set(ROW_CASES) == set(RULES), set(RULES) ^ set(ROW_CASES)


@pytest.mark.parametrize("name", sorted(ROW_CASES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_row_agrees_with_torch_and_finite_differences(name, dtype):
    expr, inputs = ROW_CASES[name]
    case = make_case(expr, inputs, points=2)
    result = check(case, dtype)
    assert result.status == "passed", result.message
    assert [w.witness for w in result.witnesses] == ["engine", "torch", "numeric"]
    assert all(w.checked > 0 for w in result.witnesses)


@pytest.mark.parametrize("name", REDUCTIONS_WHOLE)
def test_whole_reductions_and_keepdims(name):
    case = make_case(f"{name}(x) + {name}(x * 2, axis=(0, 1), keepdims=True)", {"x": M})
    assert case.output.shape == (1, 1)
    result = check(case)
    assert result.status == "passed", result.message


def test_grad_fn_names_follow_the_users_operations():
    case = make_case("sum(sigmoid(x) - x / y)", {"x": M, "y": {"shape": V,
                                                              "domain": "positive"}})
    torch_w = check(case).witness("torch")
    assert torch_w.grad_fn[0] == "SumBackward0"
    for name in ("SubBackward0", "SigmoidBackward0", "DivBackward0", "AccumulateGrad"):
        assert name in torch_w.grad_fn


# ----------------------------------------------------------------- deliberate bugs

def _patched(monkeypatch, name, **columns):
    monkeypatch.setitem(RULES, name, dataclasses.replace(RULES[name], **columns))


def _wrong_backward_sin():
    import torch

    class BadSin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return -g * torch.cos(x)      # sign flipped

    return BadSin.apply


def test_torch_witness_catches_a_wrong_backward(monkeypatch):
    _patched(monkeypatch, "sin", torch=_wrong_backward_sin())
    result = check(make_case("sum(sin(x) * y)", {"x": M, "y": V}))
    assert result.status == "failed"
    assert result.witness("torch").status == "failed"
    assert result.witness("numeric").status == "passed"
    assert result.witness("torch").worst.quantity == "x.grad"


def test_numeric_witness_catches_a_wrong_forward(monkeypatch):
    # The numeric witness differentiates the numpy column; a forward that disagrees
    # with the formula's meaning shows up as a wrong derivative.
    _patched(monkeypatch, "cos", numpy=lambda x: np.cos(1.01 * x))
    result = check(make_case("cos(x)", {"x": M}))
    assert result.witness("numeric").status == "failed"
    assert result.witness("torch").status == "passed"


def test_both_witnesses_catch_a_wrong_reference(monkeypatch):
    import sympy

    _patched(monkeypatch, "tanh", sympy=lambda x: sympy.tanh(x) * (1 + x / 1000))
    result = check(make_case("tanh(x)", {"x": M}))
    assert result.witness("torch").status == "failed"
    assert result.witness("numeric").status == "failed"


def test_a_wrong_reduction_vjp_is_caught(monkeypatch):
    import torch

    class BadSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, axis, keepdims):
            ctx.shape = x.shape
            return torch.sum(x, dim=axis, keepdim=keepdims)

        @staticmethod
        def backward(ctx, g):
            return torch.ones(ctx.shape, dtype=g.dtype), None, None   # ignores g

    _patched(monkeypatch, "sum", torch=BadSum.apply)
    result = check(make_case("sum(x, axis=1)", {"x": M}))
    assert result.witness("torch").status == "failed"
    assert result.witness("numeric").status == "passed"


def _scaled_backward(fn, factor=1.01):
    """``fn`` with its true forward but every gradient through it scaled by ``factor``."""
    import torch

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            return y.clone()

        @staticmethod
        def backward(ctx, g):
            return g * factor

    def wrapped(*args, **kwargs):
        return Scale.apply(fn(*args, **kwargs))

    return wrapped


# The steps' true VJP is zero (sign, floor, round...), so a scaled one is still right;
# they get their own bug below.
# (one_hot of integer labels has no derivative at all: no grad_fn)
DIFFERENTIABLE = sorted(n for n in ROW_CASES
                        if RULES[n].family != rules.COMPARISON and n not in STEPS
                        and RULES[n].engine.grad_fn is not None)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_a_one_percent_wrong_vjp_in_any_row_is_caught(monkeypatch, name):
    _patched(monkeypatch, name, torch=_scaled_backward(RULES[name].torch))
    expr, inputs = ROW_CASES[name]
    result = check(make_case(expr, inputs, points=2))
    assert result.witness("torch").status == "failed", name
    assert result.witness("numeric").status == "passed", name


# einsum's engine op records PyTorch's decomposition (permutes, views, sums, one bmm or
# mul): its gradient goes through those rows' VJPs, each mutated under its own name; the
# einsum row's own VJP is the rounding model's (tests/test_composites.py checks it
# against torch's gradients).
RECORDED_BY_OTHER_ROWS = {"einsum"}


def test_a_masked_fill_vjp_that_ignores_the_mask_is_caught(monkeypatch):
    # the gradient passed where the value was filled in (as if masked_fill were x)
    rule = RULES["masked_fill"]
    _patched(monkeypatch, "masked_fill", engine=dataclasses.replace(
        rule.engine, vjps=(lambda g, ans, x, mask, value: g, None)))
    result = check(make_case("masked_fill(x, x > 0.3, 0.5) * y", {"x": M, "y": V}))
    assert result.witness("engine").status == "failed"
    assert result.witness("engine").worst.quantity == "x.grad"
    assert result.witness("torch").status == "passed"


@pytest.mark.parametrize("name", ["scatter_add", "index_add"])
def test_a_src_vjp_that_ignores_the_indices_is_caught(monkeypatch, name):
    # src's cotangent read at src's own positions, not where it was added
    rule = RULES[name]
    _patched(monkeypatch, name, engine=dataclasses.replace(rule.engine, vjps=(
        rule.engine.vjps[0], None,
        lambda g, ans, x, idx, src, axis: g[tuple(slice(0, n) for n in np.shape(src))])))
    expr, inputs = ROW_CASES[name]
    result = check(make_case(expr, inputs, points=2))
    assert result.witness("engine").status == "failed"
    assert result.witness("engine").worst.quantity in ("x.grad", "y.grad")
    assert result.witness("torch").status == "passed"


def _third_scaled(operands, scale):
    """The operands, the third one's gradient scaled by ``scale``."""
    return [scale(a) if k == 2 else a for k, a in enumerate(operands)]


def test_a_wrong_vjp_for_einsums_third_operand_is_caught(monkeypatch):
    # PyTorch's left-to-right chain of three operands, the third's gradient 1% off in
    # torch, then in the engine: each caught on that operand's gradient alone
    import importlib

    import torch

    from gradcheck.engine.views import _derive

    engine_einsum = importlib.import_module("gradcheck.engine.einsum")   # (the module,
    # which the package's einsum op shadows)

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            return y.clone()

        @staticmethod
        def backward(ctx, g):
            return g * 1.01

    expr = 'einsum("bij,bjk,k->bi", a, b, u)'
    inputs = {"a": [2, 3, 4], "b": [2, 4, 5], "u": [5]}
    rule = RULES["einsum"]
    _patched(monkeypatch, "einsum", torch=lambda *args: rule.torch(
        *_third_scaled(args[:-1], Scale.apply), args[-1]))
    result = check(make_case(expr, inputs, points=2))
    assert result.witness("torch").status == "failed"
    assert result.witness("torch").worst.quantity == "u.grad"
    assert result.witness("numeric").status == "passed"
    monkeypatch.undo()

    contract = engine_einsum.contract
    monkeypatch.setattr(engine_einsum, "contract", lambda subscripts, operands, apply: contract(
        subscripts, _third_scaled(operands, lambda x: _derive(
            x, x.data, "AliasBackward0", lambda g, ans, a: 1.01 * g)), apply))
    result = check(make_case(expr, inputs, points=2))
    assert result.witness("engine").status == "failed"
    assert result.witness("engine").worst.quantity == "u.grad"
    assert result.witness("torch").status == "passed"


@pytest.mark.parametrize("name", sorted(set(DIFFERENTIABLE) - RECORDED_BY_OTHER_ROWS))
def test_a_one_percent_wrong_engine_vjp_in_any_row_is_caught(monkeypatch, name):
    # every VJP of the row's engine column scaled by 1.01: the engine witness fails,
    # the others (which do not use the column) still pass
    rule = RULES[name]
    scaled = tuple(None if f is None else
                   (lambda f: lambda g, *rest: 1.01 * np.asarray(f(g, *rest)))(f)
                   for f in rule.engine.vjps)
    monkeypatch.setitem(RULES, name, dataclasses.replace(
        rule, engine=dataclasses.replace(rule.engine, vjps=scaled)))
    expr, inputs = ROW_CASES[name]
    result = check(make_case(expr, inputs, points=2))
    assert result.witness("engine").status == "failed", name
    assert result.witness("torch").status == "passed", name


def test_a_nonzero_vjp_for_sign_is_caught(monkeypatch):
    import torch

    class SignPassThrough(torch.autograd.Function):   # straight-through, not sign's VJP
        @staticmethod
        def forward(ctx, x):
            return torch.sign(x)

        @staticmethod
        def backward(ctx, g):
            return g

    _patched(monkeypatch, "sign", torch=SignPassThrough.apply)
    result = check(make_case("sum(sign(x) * y)", {"x": M, "y": V}))
    assert result.witness("torch").status == "failed"
    assert result.witness("torch").worst.quantity == "x.grad"
