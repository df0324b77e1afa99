"""Convolutions and pooling (conv1d, conv2d, avg_pool2d, max_pool2d): every column
against PyTorch itself, the engine's graph, the exact tensor adjoints against the
element-expanded SymPy reference and the adjoint identity, shape errors with file, case
and line, the rounding bound at layer sizes in float32 (no false alarm, a wrong gradient
caught), sampling away from max pooling's ties, the generators, and a custom conv2d op
with a hand-written backward and its wrong twin (tests/conv_ops.py)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings

import gradcheck
import gradcheck.engine as E
from conftest import check, make_case
from conv_ops import Conv2d, Conv2dWrongWeight
from gradcheck.witnesses.drive import grad_fn_chain
from gradcheck.cases import case_from_dict, load_cases
from gradcheck.base.errors import CaseFileError
from gradcheck.reference import ExpandedReference, Reference, TensorReference
from gradcheck.reference.texpr import Builder, evaluate, leaf
from gradcheck.rules import RULES, TensorRule
from gradcheck.rules.conv import tensor as ct
from gradcheck.sampling.points import MARGIN, sample
from gradcheck.formula.forward import hazard_distances
from gradcheck.strategies import formulas
from gradcheck.generate.templates import TEMPLATE_INPUTS
from gradcheck.testing import check_op
from gradcheck.formula.tree import walk

RNG = np.random.default_rng(0)
ROWS = ("conv1d", "conv2d", "avg_pool2d", "max_pool2d")

# (row, argument shapes, parameters): batched and unbatched, every parameter
CALLS = [
    ("conv2d", [(2, 3, 7, 6), (4, 3, 3, 2)], {"padding": 1}),
    ("conv2d", [(2, 4, 7, 6), (6, 2, 3, 2)],
     {"stride": (2, 1), "padding": (0, 2), "dilation": (1, 2), "groups": 2}),
    ("conv2d", [(4, 5, 5), (2, 4, 2, 2)], {"stride": 2, "padding": 3}),
    ("conv1d", [(2, 3, 9), (4, 3, 3)], {"stride": 2, "padding": 1, "dilation": 2}),
    ("conv1d", [(3, 10), (6, 1, 4)], {"stride": 3, "groups": 3}),
    ("avg_pool2d", [(2, 3, 6, 7)], {"kernel_size": 2}),
    ("avg_pool2d", [(3, 5, 5)], {"kernel_size": (2, 3), "stride": (1, 2)}),
    ("max_pool2d", [(2, 3, 6, 7)], {"kernel_size": 2}),
    ("max_pool2d", [(1, 2, 5, 5)], {"kernel_size": 3, "stride": 1}),
]
IDS = [f"{r}-{s}" for r, s, _ in CALLS]


def _torch_run(row, params, arrays, g):
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = RULES[row].call("torch", leaves, params)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), [t.grad.numpy() for t in leaves], grad_fn_chain(y), y


@pytest.mark.parametrize("row, shapes, given", CALLS, ids=IDS)
def test_every_column_agrees_with_torch(row, shapes, given):
    """The NumPy forward, the SymPy meaning (on numbers), the engine's VJPs (PyTorch's
    formulas) and the tensor column's exact adjoints all give what torch gives."""
    rule = RULES[row]
    arrays = [RNG.standard_normal(s) for s in shapes]
    params = rule.bind(list(shapes), given)
    value = rule.call("numpy", arrays, params)
    assert value.shape == rule.result_shape(list(shapes), params)
    g = RNG.standard_normal(value.shape)
    want, grads, _, _ = _torch_run(row, params, arrays, g)
    np.testing.assert_allclose(value, want, rtol=1e-12, atol=1e-12)
    extra = [rule.call("selector", arrays, params)] if rule.selector else []
    meaning = rule.call("sympy", [a.astype(object) for a in arrays], params, *extra)
    np.testing.assert_allclose(np.asarray(meaning, dtype=float), want, rtol=1e-12, atol=1e-12)
    for k, grad in enumerate(grads):
        np.testing.assert_allclose(rule.vjp(k, g, value, arrays, params), grad,
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(_tensor_adjoint(row, shapes, params, arrays, g, k),
                                   grad, rtol=1e-12, atol=1e-12)


def _tensor_adjoint(row, shapes, params, arrays, g, k):
    """The tensor column's cotangent of argument ``k``, evaluated as a tensor program."""
    b = Builder()
    leaves = [leaf(f"a{i}", s) for i, s in enumerate(shapes)]
    ans = b.row(row, *leaves, **dict(params))
    out = RULES[row].tensor_vjp(k, b, leaf("g", ans.shape), ans, leaves, params)
    env = {f"a{i}": a for i, a in enumerate(arrays)} | {"g": g}
    return evaluate([b.sum_to(out, shapes[k])], env)[0]


@pytest.mark.parametrize("batched", [True, False])
def test_the_engine_records_torchs_graph(batched):
    """ConvolutionBackward0 with an edge for the bias (None without one); an unbatched
    input unsqueezed first and the result squeezed back, as torch records them."""
    x, w = RNG.standard_normal((2, 3, 5, 5) if batched else (3, 5, 5)), \
        RNG.standard_normal((4, 3, 3, 3))
    graphs = []
    for lib, make, conv, pool in ((E, lambda a: E.Tensor(a, requires_grad=True), E.conv2d,
                                   E.max_pool2d),
                                  (torch, lambda a: torch.tensor(a, requires_grad=True),
                                   torch.nn.functional.conv2d, torch.nn.functional.max_pool2d)):
        xt, wt = make(x), make(w)
        y = pool(conv(xt, wt, padding=1), 2)
        node = y.grad_fn.next_functions[0][0]
        while type(node).__name__ != "ConvolutionBackward0":
            node = node.next_functions[0][0]
        edges = [None if f is None else type(f).__name__ for f, _ in node.next_functions]
        y.sum().backward()
        graphs.append((grad_fn_chain(y), edges, np.asarray(xt.grad.data if lib is E else
                                                             xt.grad.numpy())))
    (engine, e_edges, e_grad), (want, t_edges, t_grad) = graphs
    first = "AccumulateGrad" if batched else "UnsqueezeBackward0"
    assert engine == want and e_edges == t_edges == [first, "AccumulateGrad", None]
    assert ("SqueezeBackward1" in want) == (not batched)
    np.testing.assert_allclose(e_grad, t_grad, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- references

REFERENCE_CASES = [
    ("conv2d(x, w, stride=[1, 2], padding=1)", {"x": [2, 2, 4, 5], "w": [3, 2, 3, 3]}),
    ("conv2d(tanh(x), w, padding=[1, 0], dilation=[1, 2], groups=2) * 2",
     {"x": [1, 4, 4, 5], "w": [2, 2, 3, 2]}),
    ("sum(conv1d(x, w, stride=2, padding=2, dilation=2) ** 2)", {"x": [2, 2, 7], "w": [3, 2, 3]}),
    ("conv1d(x, w * 2, groups=2)", {"x": [4, 6], "w": [2, 2, 3]}),
    ("max_pool2d(conv2d(x, w, padding=1), 2, stride=1)", {"x": [1, 2, 4, 4], "w": [2, 2, 3, 3]}),
    ("avg_pool2d(sin(x), [2, 3], stride=[1, 2]) + max_pool2d(x, [2, 3], stride=[1, 3])",
     {"x": [2, 4, 6]}),
]


@pytest.mark.parametrize("expr, inputs", REFERENCE_CASES)
def test_the_tensor_reference_equals_the_expanded_one(expr, inputs):
    case = make_case(expr, inputs, gradient="random")
    assert Reference(case).mode == "tensor"
    point = sample(case, "float64", 0).values
    v = RNG.standard_normal(case.output.shape)
    got = TensorReference(case).evaluate(point, v).quantities()
    want = ExpandedReference(case).evaluate(point, v).quantities()
    for q, w in want.items():
        scale = max(1.0, float(np.max(np.abs(w))))
        assert np.max(np.abs(got[q] - w)) <= 1e-12 * scale, q


def test_the_gradient_formulas_name_the_adjoints():
    ref = Reference(make_case("sum(conv2d(x, w, padding=1) ** 2)",
                              {"x": [1, 2, 4, 4], "w": [3, 2, 3, 3]}))
    shown = ref.formulas()
    assert shown["x.grad"].startswith("conv_input_grad(") and "padding=1" in shown["x.grad"]
    assert shown["w.grad"].startswith("conv_weight_grad(")


def _wrong_input_grad(g, w, shape=(), stride=1, padding=0, dilation=1, groups=1):
    # the classic slip: the kernel not flipped back (its spatial axes reversed)
    return ct.conv_input_grad(g, np.flip(w, (-2, -1)), shape, stride, padding, dilation,
                              groups)


def test_a_wrong_tensor_adjoint_is_caught(monkeypatch):
    from test_tensor_reference import _adjoint_gap

    case = make_case("sum(conv2d(x, w, padding=1) * y)",
                     {"x": [1, 2, 4, 4], "w": [2, 2, 3, 3], "y": [1, 2, 4, 4]}, points=1)
    assert check(case).status == "passed"

    def wrong_x(b, g, ans, x, w, stride, padding, dilation, groups):
        return b.apply(_wrong_input_grad, g, w, shape=x.shape, stride=stride,
                       padding=padding, dilation=dilation, groups=groups)

    monkeypatch.setitem(RULES, "conv2d", dataclasses.replace(
        RULES["conv2d"], tensor=TensorRule((wrong_x, ct.conv_w))))
    assert _adjoint_gap("conv2d", [(1, 2, 4, 4), (2, 2, 3, 3)], {"padding": 1}, 0,
                        np.random.default_rng(1)) > 1e-3
    result = check(case)
    assert result.status == "failed"
    assert all(w.status == "failed" for w in result.witnesses)
    assert result.witness("torch").worst.quantity == "x.grad"


@pytest.mark.parametrize("expr, inputs", [
    ("sin(conv1d(x, w, stride=2, padding=2, dilation=2, groups=2)) ** 2",
     {"x": [2, 4, 5], "w": [4, 2, 2]}),
    ("tanh(avg_pool2d(x * x, 2, stride=1)) + max_pool2d(sin(x), 2, stride=1) ** 2",
     {"x": [2, 3, 4]}),
])
def test_double_backward_at_tensor_level_equals_the_expanded_one(expr, inputs):
    """The adjoints' own adjoints (a convolution's input gradient is bilinear: its
    adjoints are the convolution and the weight gradient): the Hessian-vector and
    Jacobian-vector products equal SymPy's, element by element."""
    from gradcheck.reference.second import Hessian

    case = make_case(expr, inputs, gradient="random")
    tensor, expanded = TensorReference(case), ExpandedReference(case)
    assert isinstance(tensor._second(), Hessian)
    point = sample(case, "float64", 0).values
    v = RNG.standard_normal(case.output.shape)
    u = {n: RNG.standard_normal(s) for n, s in inputs.items()}
    got, want = tensor.hvp(point, v, u), expanded.hvp(point, v, u)
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tensor.jvp(point, u), expanded.jvp(point, u), rtol=1e-12,
                               atol=1e-12)


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("expr, message", [
    ("conv2d(x, w)", "the input has 3 channels (shape [2, 3, 5, 5]); the weight [4, 2, 3, 3]"
                     " expects 2 per group × groups=1 = 2"),
    ("conv2d(x, v, groups=2)", "groups=2 does not divide the input's channels (3)"),
    ("conv2d(x, k, groups=3)", "groups=3 does not divide the weight's output channels (4)"),
    ("conv2d(x, k, dilation=3)", "the kernel spans 7 (size 3, dilation 3) along axis 2, "
                                 "more than the padded input's 5 (size 5 + 2 × padding 0)"),
    ("conv2d(x, k, stride=[1, 2, 3])", "stride= must be an integer or a list of 2 integers"),
    ("conv2d(x, k, padding=-1)", "padding= must be at least 0"),
    ("conv1d(x, k)", "conv1d needs an input of 2 (C, L) or 3 (N, C, L) dimensions"),
    ("avg_pool2d(x, 6)", "the kernel size 6 is larger than the input's 5 along axis 2"),
    ("max_pool2d(x)", "the kernel size is required"),
])
def test_shape_errors_say_what_and_where(tmp_path, expr, message):
    path = tmp_path / "conv.toml"
    path.write_text('[[case]]\nname = "bad"\ninputs.x = { shape = [2, 3, 5, 5] }\n'
                    'inputs.w = { shape = [4, 2, 3, 3] }\ninputs.v = { shape = [4, 1, 3, 3] }\n'
                    f'inputs.k = {{ shape = [4, 3, 3, 3] }}\nexpr = "sum({expr})"\n')
    with pytest.raises(CaseFileError) as caught:
        load_cases(path)
    text = str(caught.value)
    assert text.startswith(f"{path}:7: case 'bad': ") and message in text, text


# --------------------------------------------------------------------------- rounding

LAYERS = [
    ("conv2d(x, w, padding=1)", {"x": [2, 64, 8, 8], "w": [64, 64, 3, 3]}),
    ("conv2d(x, w, stride=2, groups=4)", {"x": [2, 32, 9, 9], "w": [16, 8, 5, 5]}),
    ("conv1d(x, w, padding=2, dilation=2)", {"x": [4, 64, 40], "w": [64, 64, 5]}),
    ("avg_pool2d(x, 3, stride=1)", {"x": [4, 8, 10, 10]}),
    ("max_pool2d(conv2d(x, w, padding=1), 2)", {"x": [2, 16, 8, 8], "w": [16, 16, 3, 3]}),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("expr, shapes", LAYERS)
def test_the_bound_covers_torchs_own_convolution(expr, shapes, dtype):
    """torch's CPU kernels (oneDNN's orders of summation, pooling's backward adding in
    its own dtype) stay within the derived bound, without the safety factor."""
    from gradcheck.witnesses.torch import run as torch_run
    from gradcheck.base.dtypes import round_to, unit_roundoff
    from gradcheck.bounds.point import error_bounds

    case = make_case(expr, shapes, gradient="random")
    rng = np.random.default_rng(0)
    point = {k: round_to(rng.uniform(-2, 2, s), dtype) for k, s in shapes.items()}
    v = round_to(rng.standard_normal(case.output.shape), dtype)
    exact = Reference(case).evaluate(point, v).quantities()
    got = torch_run(case, point, v, dtype).quantities()
    both = 1 + unit_roundoff("float64") / unit_roundoff(dtype)
    for q, bound in error_bounds(case, point, v, dtype).items():
        assert np.all(np.abs(got[q] - exact[q]) <= both * bound), q


@pytest.mark.parametrize("expr, shapes", [
    ("conv1d(x, w, stride=2, padding=1, groups=2)", {"x": [2, 4, 5], "w": [2, 2, 2]}),
    ("max_pool2d(tanh(conv2d(x, w, padding=1)), 2, stride=1) + avg_pool2d(x, 2, stride=1)",
     {"x": [1, 2, 3, 3], "w": [2, 2, 3, 3]}),
])
def test_batched_bounds_are_the_per_v_bounds(expr, shapes):
    """op.jacobian bounds its one-hot cotangents in one backward: the conv rows take them
    one at a time, each as it would be alone."""
    from test_tolerance_model import _assert_batched_equals_per_v

    case = make_case(expr, shapes, gradient="random")
    for dtype in ("float64", "float32"):
        _assert_batched_equals_per_v(case, sample(case, dtype, 0).values, dtype)


def _slightly_wrong_conv(factor):
    """torch's conv2d with its weight gradient scaled by ``factor``."""
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            return w.clone()

        @staticmethod
        def backward(ctx, g):
            return g * factor

    def call(x, w, stride, padding, dilation, groups):
        return torch.nn.functional.conv2d(x, Scaled.apply(w), stride=stride,
                                          padding=padding, dilation=dilation, groups=groups)

    return call


@pytest.mark.parametrize("wrong", [False, True])
def test_float32_at_a_layer_size_passes_and_a_wrong_gradient_fails(monkeypatch, wrong):
    """The engine (NumPy's summation orders) and torch (oneDNN's) pass at a layer's size
    in float32; a weight gradient 1e-4 off (torch's, scaled) fails."""
    if wrong:
        monkeypatch.setitem(RULES, "conv2d", dataclasses.replace(
            RULES["conv2d"], torch=_slightly_wrong_conv(1 + 1e-4)))
    case = make_case("conv2d(x, w, padding=1)", {"x": [4, 32, 8, 8], "w": [32, 32, 3, 3]},
                     points=1, extreme_points=0, gradient="random",
                     witnesses=["torch"] if wrong else ["engine", "torch"])
    result = check(case, "float32")
    assert result.status == ("failed" if wrong else "passed"), result.message
    if wrong:
        assert result.witness("torch").worst.quantity == "w.grad"


# --------------------------------------------------------------------------- sampling

def test_points_keep_away_from_max_pooling_ties():
    """96 windows of 4 pixels: a tie (a gap below the margin) somewhere in nearly every
    draw; only the pixels of the windows near one are redrawn."""
    case = make_case("sum(max_pool2d(img, 2)) + sum(max_pool2d(img * 2, 3, stride=1))",
                     {"img": [2, 3, 8, 8]}, points=3)
    (node, *_), root = [n for n in walk(case.output) if n.op == "max_pool2d"], case.output
    for i in range(3):
        point = sample(case, "float64", i)
        assert not point.notes
        gaps = [d for n, d in hazard_distances(root, point.values) if n.op == "max_pool2d"]
        assert len(gaps) == 2 and all(np.min(d) >= MARGIN for d in gaps)
    assert RULES["max_pool2d"].call("hazard", [np.zeros((1, 1, 2, 2))], node.params).shape \
        == (1, 1, 2, 2)
    assert check(case, "float32").status == "passed"


# --------------------------------------------------------------------------- generators

@settings(max_examples=12)
@given(formulas(depth=3, functions=[*ROWS, "tanh", "sum", "mul", "add"]))
def test_drawn_formulas_over_the_conv_rows_pass(table):
    result = check(case_from_dict(table))
    assert result.status == "passed", (table["expr"], result.message)
    assert set(table["inputs"]) <= {"x", "y", "s", *TEMPLATE_INPUTS}


def test_the_generators_draw_every_conv_row_and_honour_given_inputs():
    from hypothesis import find

    for row in ROWS:
        table = find(formulas(functions=[row]), lambda t: row in t["expr"])
        assert set(table["inputs"]) & set(TEMPLATE_INPUTS)
    # given inputs are the only inputs: a conv of those that fit, or none
    seen = []

    @settings(max_examples=20)
    @given(formulas(functions=["conv1d"], inputs={"a": [2, 5], "w": [3, 2, 2]}))
    def given_only(table):
        assert set(table["inputs"]) <= {"a", "w"}
        seen.append("conv1d" in table["expr"])

    given_only()
    assert any(seen)


# --------------------------------------------------------------------------- a custom op

OP_INPUTS = {"x": [2, 3, 5, 5], "w": [4, 3, 3, 3]}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_conv2d_op_with_a_hand_written_backward_passes_and_its_twin_fails(dtype):
    reference = "conv2d(x, w, stride=1, padding=1)"
    right = check_op(Conv2d, reference, OP_INPUTS, args=[1, 1], dtype=dtype, points=2)
    assert right.status == "passed", right.message
    wrong = check_op(Conv2dWrongWeight, reference, OP_INPUTS, args=[1, 1], dtype=dtype,
                     points=2)
    assert wrong.status == "failed"
    backward = wrong.witness("op.backward")
    assert backward.status == "failed" and backward.worst.quantity == "w.grad"
    assert wrong.witness("op.forward").status == "passed"


def test_the_conv2d_op_passes_double_backward():
    """torch.nn.grad's gradients are differentiable: order = 2 checks d/dx of ⟨ḡ, grad⟩
    and d/dḡ against the tensor-level second order."""
    result = check_op(Conv2d, "conv2d(x, w, stride=1, padding=1)",
                      {"x": [2, 2, 4, 4], "w": [3, 2, 3, 3]}, args=[1, 1], points=1,
                      extreme_points=1, order=2)
    assert result.status == "passed", result.message
    assert result.witness("op.double").checked > 0


def test_the_conv2d_ops_as_cases_of_a_case_file(tmp_path):
    shutil.copy(Path(__file__).parent / "conv_ops.py", tmp_path / "conv_ops.py")
    op_case = """
[[case]]
name = "{name}"
op = "conv_ops:{op}"
reference = "conv2d(x, w, stride=2, padding=1)"
args = [2, 1]
inputs.x = {{ shape = [2, 3, 6, 6] }}
inputs.w = {{ shape = [4, 3, 3, 3] }}
"""
    (tmp_path / "conv.toml").write_text(
        '[defaults]\ndtype = ["float64", "float32"]\n'
        + op_case.format(name="conv2d-op", op="Conv2d")
        + op_case.format(name="conv2d-op-transposed-weight-grad", op="Conv2dWrongWeight")
        + 'expect = "fail"\n')
    result = gradcheck.run([tmp_path / "conv.toml"], timeout=None)
    assert [(r.name, r.dtype, r.status) for r in result.cases] == [
        (n, d, "passed") for n in ("conv2d-op", "conv2d-op-transposed-weight-grad")
        for d in ("float64", "float32")]
    caught = [r for r in result.cases if r.expect == "fail"]
    assert all(r.witness("op.backward").status == "failed" for r in caught)


def test_the_torch_witness_runs_cudnn_convolutions_in_float32_itself():
    """cuDNN's default TF32 (a 10-bit significand) is no float32: on a CUDA device the
    witness turns it off while it runs, and restores the user's setting (the flag is
    only a setting: this runs without a GPU)."""
    from gradcheck.witnesses.torch import _ieee_float32

    cudnn = torch.backends.cudnn
    kept = cudnn.allow_tf32
    try:
        cudnn.allow_tf32 = True
        with _ieee_float32("cuda:0"):
            assert cudnn.allow_tf32 is False
        assert cudnn.allow_tf32 is True
        with _ieee_float32("cpu"):
            assert cudnn.allow_tf32 is True
    finally:
        cudnn.allow_tf32 = kept
