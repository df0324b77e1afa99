"""Half-precision convolutions where torch adds their parts in the dtype itself: aten's
Slow2d / SlowDilated2d, the kernels torch runs for float16 on a CPU without avx512_fp16
or avx_ne_convert (an AMD EPYC) and for any dtype with oneDNN off. The tests turn oneDNN
off, so that they run those kernels on every CPU: an emulation of them matches torch
bit for bit, the rounding bound covers torch's result without the safety factor and
stays close to it, the model follows torch's own choice of kernel, and wrong float16
gradients still fail."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from conftest import check, make_case
from conv_ops import Conv2d, Conv2dWrongWeight
from gradcheck.witnesses.torch import run as torch_run
from gradcheck.base.dtypes import round_to, unit_roundoff
from gradcheck.reference import Reference
from gradcheck.bounds.point import error_bounds
from gradcheck.rules import RULES
from gradcheck.rules.conv.columns import pad, torch_adds_in_dtype, windows
from gradcheck.testing import check_op

H = np.float16


@pytest.fixture
def slow():
    """oneDNN off while the test runs (torch then picks aten's own kernels)."""
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    yield
    torch._C._set_mkldnn_enabled(was)


def _half(a):
    """float64 sums as torch's float32 accumulators hold them, rounded into float16."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(H)


def _emulate(x, w, g, stride, padding, dilation):
    """aten's Slow2d in float16 (groups 1, a 4-d input): x̄ one GEMM per kernel offset,
    each rounded, added into x̄ by col2im in float16, offsets in order; w̄ one GEMM per
    batch sample, added into w̄ in float16 (β = 1)."""
    (n, c, *size), kernel = x.shape, w.shape[2:]
    outs = g.shape[2:]
    gx = np.zeros((n, c) + tuple(m + 2 * p for m, p in zip(size, padding)), H)
    for k in itertools.product(*map(range, kernel)):
        t = _half(np.einsum("nohw,oc->nchw", g.astype(float), w[(Ellipsis,) + k].astype(float)))
        place = (slice(None), slice(None)) + tuple(
            slice(i * dl, i * dl + s * (m - 1) + 1, s)
            for i, dl, s, m in zip(k, dilation, stride, outs))
        gx[place] = (gx[place].astype(np.float32) + t.astype(np.float32)).astype(H)
    gx = gx[:, :, padding[0]:padding[0] + size[0], padding[1]:padding[1] + size[1]]
    win = windows(pad(x.astype(float), padding), kernel, stride, dilation)
    gw = np.zeros(w.shape, H)
    for i in range(n):
        part = np.einsum("ohw,chwab->ocab", g[i].astype(float), win[i])
        gw = (gw.astype(np.float32) + part.astype(np.float32)).astype(H)
    return gx, gw


@pytest.mark.parametrize("shapes, stride, padding, dilation", [
    (((2, 32, 8, 8), (32, 32, 3, 3)), (1, 1), (1, 1), (1, 1)),
    (((3, 16, 9, 9), (24, 16, 3, 2)), (2, 1), (0, 2), (1, 2)),
])
def test_torchs_own_kernels_round_each_part_into_float16(slow, shapes, stride, padding,
                                                         dilation):
    """The emulation of per-part rounding is torch's float16 result at nearly every
    element (at the others one float16 step off: float32 sums in another order); one
    rounding of exact sums, what oneDNN's float32 accumulation gives, is not."""
    rng = np.random.default_rng(0)
    x, w = (rng.uniform(-2, 2, s).astype(H) for s in shapes)
    xt, wt = (torch.tensor(a, requires_grad=True) for a in (x, w))
    assert "Slow" in str(torch._C._select_conv_backend(
        xt, wt, None, list(stride), list(padding), list(dilation), False, [0, 0], 1, None))
    y = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=padding, dilation=dilation)
    g = rng.standard_normal(y.shape).astype(H)
    y.backward(torch.tensor(g))
    x64, w64 = (torch.tensor(a.astype(float), requires_grad=True) for a in (x, w))
    torch.nn.functional.conv2d(x64, w64, stride=stride, padding=padding,
                               dilation=dilation).backward(torch.tensor(g.astype(float)))
    for got, emulated, exact in zip((xt.grad.numpy(), wt.grad.numpy()),
                                    _emulate(x, w, g, stride, padding, dilation),
                                    (x64.grad.numpy(), w64.grad.numpy())):
        assert np.mean(got == emulated) > 0.995
        assert np.all(np.abs(got.astype(float) - emulated) <= np.spacing(np.abs(got)))
        assert np.mean(got == _half(exact)) < 0.8


LAYERS = [
    ("conv2d(x, w, padding=1)", {"x": [2, 64, 8, 8], "w": [64, 64, 3, 3]}),
    ("conv2d(x, w, stride=2, groups=4)", {"x": [2, 32, 9, 9], "w": [16, 8, 5, 5]}),
    ("conv1d(x, w, padding=2, dilation=2)", {"x": [4, 64, 40], "w": [64, 64, 5]}),
    ("conv2d(x, w, stride=(1, 2), padding=(2, 0), dilation=(2, 1))",
     {"x": [5, 16, 9, 9], "w": [24, 16, 3, 4]}),
    ("conv2d(x, w, padding=1)", {"x": [16, 10, 10], "w": [16, 16, 3, 3]}),
    ("conv1d(x, w, stride=3, groups=8)", {"x": [7, 64, 50], "w": [32, 8, 4]}),
]


def _ratios(expr, shapes, dtype):
    """max |torch − exact| / bound of each quantity, at one point."""
    case = make_case(expr, shapes, gradient="random")
    rng = np.random.default_rng(0)
    point = {k: round_to(rng.uniform(-2, 2, s), dtype) for k, s in shapes.items()}
    v = round_to(rng.standard_normal(case.output.shape), dtype)
    exact = Reference(case).evaluate(point, v).quantities()
    got = torch_run(case, point, v, dtype).quantities()
    return {q: float(np.max(np.abs(got[q] - exact[q]) / b))
            for q, b in error_bounds(case, point, v, dtype).items()}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("expr, shapes", LAYERS)
def test_the_bound_covers_torchs_own_kernels_and_stays_close(slow, expr, shapes, dtype):
    """Without the safety factor (float64's own share aside); and within 5× of torch's
    worst element (measured: 0.23 to 0.99 of the bound)."""
    ratios = _ratios(expr, shapes, dtype)
    both = 1 + unit_roundoff("float64") / unit_roundoff(dtype)
    assert max(ratios.values()) <= both, ratios
    assert min(ratios["x.grad"], ratios["w.grad"]) > 0.2, ratios


def test_the_model_follows_torchs_choice_of_kernel(slow):
    """The bound asks torch which kernel it runs: aten's own with oneDNN off, oneDNN where
    the CPU has what oneDNN's float16 (bfloat16) needs; and the looser model where it
    cannot ask."""
    args = ((2, 8, 6, 6), (4, 8, 3, 3), (("stride", 1), ("padding", 1), ("dilation", 1),
                                          ("groups", 1)))
    assert torch_adds_in_dtype(*args, "float16") and torch_adds_in_dtype(*args, "bfloat16")
    torch._C._set_mkldnn_enabled(True)
    mkldnn = torch.ops.mkldnn
    assert torch_adds_in_dtype(*args, "float16") == (not mkldnn._is_mkldnn_fp16_supported())
    assert torch_adds_in_dtype(*args, "bfloat16") == (not mkldnn._is_mkldnn_bf16_supported())
    assert torch_adds_in_dtype(*args, "float16", device="no-such-device")


def test_the_bound_is_the_one_rounding_bound_where_torch_adds_in_float32(slow):
    """Same point, same dtype: aten's kernels get the larger bound, a float32-accumulating
    kernel (oneDNN, made to stand in by the choice itself) the smaller one."""
    import gradcheck.bounds.bilinear as cb

    case = make_case("conv2d(x, w, padding=1)", {"x": [2, 8, 6, 6], "w": [4, 8, 3, 3]},
                     gradient="random")
    point = {k: round_to(np.random.default_rng(1).uniform(-2, 2, s.shape), "float16")
             for k, s in ((s.name, s) for s in case.inputs)}
    v = round_to(np.random.default_rng(2).standard_normal(case.output.shape), "float16")
    parts = error_bounds(case, point, v, "float16")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(cb, "torch_adds_in_dtype", lambda *a, **k: False)
        once = error_bounds(case, point, v, "float16")
    for q in ("x.grad", "w.grad"):
        assert np.all(parts[q] >= once[q]) and np.mean(parts[q] > 1.5 * once[q]) > 0.5
    np.testing.assert_array_equal(parts["value"], once["value"])


def test_batched_cotangents_are_bounded_as_each_alone(slow):
    """op.jacobian's one-hot cotangents in one backward: the parts of each, as alone."""
    from test_tolerance_model import _assert_batched_equals_per_v
    from gradcheck.sampling.points import sample

    case = make_case("conv1d(x, w, stride=2, padding=1, groups=2)",
                     {"x": [2, 4, 5], "w": [2, 2, 2]}, gradient="random")
    _assert_batched_equals_per_v(case, sample(case, "float16", 0).values, "float16")


def _scaled(arg: int, factor: float):
    """torch's conv2d with the cotangent into argument ``arg`` scaled by ``factor``."""
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.clone()

        @staticmethod
        def backward(ctx, g):
            return g * factor

    def call(x, w, stride, padding, dilation, groups):
        x, w = (Scaled.apply(a) if i == arg else a for i, a in enumerate((x, w)))
        return torch.nn.functional.conv2d(x, w, stride=stride, padding=padding,
                                          dilation=dilation, groups=groups)

    return call


@pytest.mark.parametrize("arg, factor", [(None, 1), (0, 2), (1, -1), (0, 1 + 2 ** -6),
                                         (1, 1 + 2 ** -6)])
def test_a_wrong_float16_gradient_fails(slow, monkeypatch, arg, factor):
    """At a layer's size in float16, with torch's own kernels' looser bound: torch passes;
    twice x̄, −w̄ and either 1.6% off fail on that quantity."""
    if arg is not None:
        monkeypatch.setitem(RULES, "conv2d", dataclasses.replace(
            RULES["conv2d"], torch=_scaled(arg, factor)))
    case = make_case("conv2d(x, w, padding=1)", {"x": [2, 32, 8, 8], "w": [32, 32, 3, 3]},
                     points=1, extreme_points=0, gradient="random", witnesses=["torch"])
    result = check(case, "float16")
    assert result.status == ("passed" if arg is None else "failed"), result.message
    if arg is not None:
        assert result.witness("torch").worst.quantity == "xw"[arg] + ".grad"


def test_a_conv2d_op_passes_in_float16_and_its_transposed_twin_fails():
    """On this CPU's own choice of kernel: a hand-written backward (torch.nn.grad) passes;
    its twin, whose weight gradient swaps the kernel's axes, fails on w.grad."""
    reference, inputs = "conv2d(x, w, stride=1, padding=1)", {"x": [2, 3, 5, 5],
                                                              "w": [4, 3, 3, 3]}
    right = check_op(Conv2d, reference, inputs, args=[1, 1], dtype="float16", points=2)
    assert right.status == "passed", right.message
    wrong = check_op(Conv2dWrongWeight, reference, inputs, args=[1, 1], dtype="float16",
                     points=2)
    assert wrong.status == "failed"
    assert wrong.witness("op.backward").worst.quantity == "w.grad"
