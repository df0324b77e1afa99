"""Traced references of torch.nn.functional (and torch) calls, one test a call: each is
traced to formula text (:mod:`gradcheck.tracing`), read as a case, and its exact value
and vᵀJ compared with torch's float64 autograd of the call itself
(``tests/tracing_harness.py``). The last test walks the mapping table
(:data:`gradcheck.tracing.aten.ATEN`): every packet in it is used by some call here."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))

from tracing_harness import assert_traced_matches_torch  # noqa: E402

from gradcheck.tracing.aten import ATEN  # noqa: E402
from gradcheck.tracing.trace import Argument as A  # noqa: E402
from gradcheck.tracing.trace import trace  # noqa: E402

CASES: dict[str, tuple] = {}


def case(name, fn, arguments, domains=None, frozen=(), rtol=1e-9):
    assert name not in CASES, name
    CASES[name] = (fn, arguments, domains, tuple(frozen), rtol)


X = [A("x", (4, 6))]
XY = [A("x", (4, 6)), A("y", (4, 6))]
POS = {"x": (0.2, 2.0)}
UNIT = {"x": (-0.9, 0.9)}

# ------------------------------------------------------------------ elementwise
for _name in ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
              "abs", "sign", "erf", "sigmoid", "relu", "reciprocal", "floor", "ceil",
              "round", "trunc", "square"):
    _dom = {"log": POS, "sqrt": POS, "rsqrt": POS, "reciprocal": POS, "acosh": {"x": (1.2, 3.0)},
            "asin": UNIT, "acos": UNIT, "atanh": UNIT, "tan": {"x": (-1.2, 1.2)},
            "log1p": {"x": (-0.5, 2.0)}}.get(_name)
    case(f"torch.{_name}", (lambda f: lambda x: f(x))(getattr(torch, _name)), X, _dom)
case("neg", lambda x: -x, X)
case("torch.atan2_hypot_logaddexp", lambda x, y: torch.atan2(x, y + 3.0) + torch.hypot(x, y)
     + torch.logaddexp(x, y), XY)
case("add_sub_alpha", lambda x, y: torch.add(x, y, alpha=2.0) - torch.sub(y, x, alpha=0.5), XY)
case("rsub", lambda x: 1.0 - x, X)
case("mul_div", lambda x, y: x * y / (y * y + 1.0), XY)
case("pow", lambda x, y: x.abs() ** 2.5 + (x * x + 1.0) ** y, XY)
case("clamp", lambda x: torch.clamp(x, -0.5, 0.7) + x.clamp(min=0.1), X)
case("maximum_minimum", lambda x, y: torch.maximum(x, y) * torch.minimum(x, y), XY)
case("where", lambda x, y: torch.where(x > y, x, y * 2.0), XY)
case("comparisons", lambda x, y: torch.where((x < y) | (x >= 0.5), x, y)
     + torch.where((x <= y) & (x != 0.3), y, 1.0)
     + torch.where(torch.logical_not(x == y) & torch.logical_and(x > -1.5, y > -1.5), x, 0.0)
     + torch.where(~(x > 0) | torch.logical_or(y > 1, y < -1), y, x), XY)
case("clone_contiguous", lambda x: x.t().contiguous().clone() * 2.0, X)
case("detach_ste", lambda w: w + (torch.round(w / 0.1) * 0.1 - w).detach(), X)
case("to_dtype", lambda x, n: x * n.to(torch.float64) + (x > 0).to(torch.float64),
     [A("x", (4, 6)), A("n", (4, 6), "int")], {"n": (-3, 4)})
case("constants", lambda x: x * torch.tensor(0.5) + torch.full((4, 6), 2.0)
     + torch.full_like(x, 3.0) * torch.ones_like(x) + torch.zeros_like(x)
     + torch.arange(6), X)

# ------------------------------------------------------------------ activations
case("F.relu", lambda x: F.relu(x), X)
case("F.gelu", lambda x: F.gelu(x), X)
case("F.gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), X)
case("F.silu", lambda x: F.silu(x), X)
case("F.mish", lambda x: F.mish(x), X)
case("F.softplus", lambda x: F.softplus(x), X)
# the exact softplus(beta x) / beta: torch gives x above the threshold, so the inputs
# stay below it (beta x <= 4 < 5)
case("F.softplus_beta_threshold", lambda x: F.softplus(x, beta=2.0, threshold=5.0), X)
case("F.elu", lambda x: F.elu(x, alpha=0.7), X)
case("F.leaky_relu", lambda x: F.leaky_relu(x, 0.2), X)
case("F.hardtanh", lambda x: F.hardtanh(x, -0.5, 0.8), X)
case("F.sigmoid", lambda x: F.sigmoid(x), X)
case("F.tanh", lambda x: F.tanh(x), X)
case("F.hardswish", lambda x: F.hardswish(x), X, {"x": (-4.0, 4.0)})
# torch's hardsigmoid_backward multiplies by 1/6 rounded to float32, even in float64
# (a relative 3e-8): the exact reference is checked to that
case("F.hardsigmoid", lambda x: F.hardsigmoid(x), X, {"x": (-4.0, 4.0)}, rtol=1e-7)
case("F.logsigmoid", lambda x: F.logsigmoid(x), X)
case("F.softsign", lambda x: F.softsign(x), X)
case("F.softmax", lambda x: F.softmax(x, -1), X)
case("F.log_softmax", lambda x: F.log_softmax(x, 0), X)

# ------------------------------------------------------------------ normalisations
X3 = [A("x", (2, 6, 5))]
case("F.layer_norm", lambda x, w, b: F.layer_norm(x, (6,), w, b),
     [A("x", (4, 6)), A("w", (6,)), A("b", (6,))])
case("F.rms_norm", lambda x, w: F.rms_norm(x, (6,), w, eps=1e-6),
     [A("x", (4, 6)), A("w", (6,))])
case("F.group_norm", lambda x, w, b: F.group_norm(x, 3, w, b),
     [*X3, A("w", (6,)), A("b", (6,))])
case("F.batch_norm_eval", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
     [*X3, A("m", (6,)), A("v", (6,)), A("w", (6,)), A("b", (6,))],
     {"v": (0.5, 1.5)}, frozen=("m", "v"))
case("F.normalize", lambda x: F.normalize(x, dim=-1), X)

# ------------------------------------------------------------------ losses
N, C = 5, 4
LOGITS = [A("x", (N, C)), A("y", (N,), "int")]
LABELS = {"y": (0, C)}
IGNORED = {"y": (-1, C)}
for _reduction in ("none", "sum", "mean"):
    case(f"F.cross_entropy_{_reduction}",
         (lambda r: lambda x, y: F.cross_entropy(x, y, reduction=r))(_reduction),
         LOGITS, LABELS)
    case(f"F.nll_loss_{_reduction}",
         (lambda r: lambda x, y: F.nll_loss(F.log_softmax(x, 1), y, reduction=r))(_reduction),
         LOGITS, LABELS)
case("F.cross_entropy_ignore_index",
     lambda x, y: F.cross_entropy(x, y, ignore_index=-1), LOGITS, IGNORED)
case("F.cross_entropy_label_smoothing",
     lambda x, y: F.cross_entropy(x, y, ignore_index=-1, label_smoothing=0.1), LOGITS, IGNORED)
case("F.cross_entropy_weight",
     lambda x, y, w: F.cross_entropy(x, y, weight=w, ignore_index=-1),
     [*LOGITS, A("w", (C,))], {**IGNORED, "w": (0.5, 1.5)}, frozen=("w",))
case("F.cross_entropy_weight_smoothing_sum",
     lambda x, y, w: F.cross_entropy(x, y, weight=w, label_smoothing=0.2, reduction="sum"),
     [*LOGITS, A("w", (C,))], {**LABELS, "w": (0.5, 1.5)}, frozen=("w",))
case("F.cross_entropy_probabilities",
     lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1),
     [A("x", (N, C)), A("p", (N, C))], {"p": (0.0, 1.0)})
case("F.cross_entropy_spatial",
     lambda x, y: F.cross_entropy(x, y, ignore_index=-1),
     [A("x", (2, C, 3)), A("y", (2, 3), "int")], IGNORED)
case("F.nll_loss_weight_ignore",
     lambda x, y, w: F.nll_loss(F.log_softmax(x, 1), y, weight=w, ignore_index=-1),
     [*LOGITS, A("w", (C,))], {**IGNORED, "w": (0.5, 1.5)}, frozen=("w",))
case("F.mse_loss", lambda x, y: F.mse_loss(x, y), XY)
case("F.huber_loss", lambda x, y: F.huber_loss(x, y, delta=0.7, reduction="sum"), XY)
case("F.smooth_l1_loss", lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), XY)
case("F.l1_loss", lambda x, y: F.l1_loss(x, y, reduction="none"), XY)
case("F.binary_cross_entropy_with_logits",
     lambda x, y, p: F.binary_cross_entropy_with_logits(x, y, pos_weight=p),
     [*XY, A("p", (6,))], {"y": (0.0, 1.0), "p": (0.5, 2.0)}, frozen=("p",))
case("F.kl_div", lambda x, y: F.kl_div(F.log_softmax(x, -1), y, reduction="batchmean"),
     XY, {"y": (0.05, 1.0)})
case("F.kl_div_log_target",
     lambda x, y: F.kl_div(F.log_softmax(x, -1), F.log_softmax(y, -1), reduction="sum",
                           log_target=True), XY)

# ------------------------------------------------------------------ attention
QKV = [A("q", (2, 3, 5, 4)), A("k", (2, 3, 5, 4)), A("v", (2, 3, 5, 4))]
case("F.sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     QKV)
case("F.sdpa_bool_mask",   # the diagonal is kept: no row is wholly masked
     lambda q, k, v, m: F.scaled_dot_product_attention(
         q, k, v, attn_mask=m | torch.eye(5, dtype=torch.bool)),
     [*QKV, A("m", (5, 5), "bool")])
case("F.sdpa_float_mask",
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
     [*QKV, A("m", (5, 5))])

# ------------------------------------------------------------------ layers
case("F.embedding", lambda i, w: F.embedding(i, w), [A("i", (2, 3), "int"), A("w", (7, 4))],
     {"i": (0, 7)})
case("F.conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
     [A("x", (2, 4, 9)), A("w", (6, 2, 3)), A("b", (6,))])
case("F.conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1)),
     [A("x", (2, 3, 6, 7)), A("w", (4, 3, 3, 2)), A("b", (4,))])
case("F.conv2d_groups", lambda x, w: F.conv2d(x, w, groups=2),
     [A("x", (1, 4, 5, 5)), A("w", (6, 2, 2, 2))])
case("F.avg_pool2d", lambda x: F.avg_pool2d(x, 2), [A("x", (2, 3, 6, 4))])
case("F.avg_pool2d_stride", lambda x: F.avg_pool2d(x, (3, 2), stride=(2, 1)),
     [A("x", (2, 3, 7, 5))])
case("F.max_pool2d", lambda x: F.max_pool2d(x, 2), [A("x", (2, 3, 6, 4))])
case("F.max_pool2d_stride", lambda x: F.max_pool2d(x, (2, 3), stride=(1, 2)),
     [A("x", (2, 3, 5, 7))])
case("F.pad", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), [A("x", (2, 3, 4))])
case("F.interpolate_nearest", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
     [A("x", (1, 2, 3, 4))])
case("F.interpolate_nearest_size", lambda x: F.interpolate(x, size=(5, 7)),
     [A("x", (1, 2, 3, 4))])
case("F.interpolate_nearest_exact", lambda x: F.interpolate(x, size=(5, 3), mode="nearest-exact"),
     [A("x", (1, 2, 3, 4))])
case("F.interpolate_linear", lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"),
     [A("x", (2, 3, 4))])
case("F.interpolate_bilinear", lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"),
     [A("x", (1, 2, 3, 4))])
case("F.interpolate_bilinear_corners",
     lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
     [A("x", (1, 2, 3, 4))])
case("F.linear", lambda x, w, b: F.linear(x, w, b), [A("x", (4, 6)), A("w", (3, 6)), A("b", (3,))])
case("F.linear_3d", lambda x, w: F.linear(x, w), [A("x", (2, 4, 6)), A("w", (3, 6))])

# ------------------------------------------------------------------ indexing
case("torch.gather", lambda x, i: x.gather(1, i), [A("x", (4, 6)), A("i", (4, 3), "int")],
     {"i": (0, 6)})
case("torch.scatter_add", lambda x, i, s: x.scatter_add(1, i, s),
     [A("x", (4, 6)), A("i", (4, 3), "int"), A("s", (4, 3))], {"i": (0, 6)})
case("torch.index_add", lambda x, i, s: x.index_add(0, i, s, alpha=2.0),
     [A("x", (4, 6)), A("i", (3,), "int"), A("s", (3, 6))], {"i": (0, 4)})
case("torch.index_select", lambda x, i: x.index_select(1, i),
     [A("x", (4, 6)), A("i", (5,), "int")], {"i": (0, 6)})
case("torch.masked_fill", lambda x, m: x.masked_fill(m, -1.5) + x.masked_fill(~m, float("-inf")).amax(-1, keepdim=True).clamp(min=-3.0),
     [A("x", (4, 6)), A("m", (4, 6), "bool")])
case("torch.cumsum", lambda x: x.cumsum(1), X)
case("torch.cumprod", lambda x: x.cumprod(0), X)
case("torch.sort", lambda x: torch.sort(x, -1, descending=True).values, X)
case("torch.topk", lambda x: torch.topk(x, 3, dim=0).values, X)
case("torch.max_dim", lambda x: torch.max(x, 1).values, X)
case("torch.min_dim_keepdim", lambda x: torch.min(x, 0, keepdim=True).values, X)
case("torch.amax_amin", lambda x: torch.amax(x, 1) - torch.amin(x, 1), X)
case("torch.logsumexp", lambda x: torch.logsumexp(x, 1), X)
case("torch.var_std", lambda x: x.var(1) + x.std(0, correction=0).sum() + x.var(), X)
case("torch.vector_norm", lambda x: torch.linalg.vector_norm(x, dim=1)
     + torch.linalg.vector_norm(x, ord=1, dim=1) + torch.linalg.vector_norm(x, 3.0, dim=1)
     + torch.linalg.vector_norm(x, float("inf"), dim=1), X)
case("torch.norm", lambda x: x.norm(dim=0), X)
case("torch.sum_mean_prod", lambda x: x.sum(0) + x.mean(0) * x.prod(0) + x.sum(), X)

# ------------------------------------------------------------------ products
case("torch.einsum", lambda a, b, c: torch.einsum("ij,jk,k->i", a, b, c),
     [A("a", (3, 4)), A("b", (4, 5)), A("c", (5,))])
case("torch.matmul", lambda a, b: a @ b, [A("a", (3, 4)), A("b", (4, 5))])
case("torch.matmul_batched", lambda a, b: torch.matmul(a, b), [A("a", (2, 3, 4)), A("b", (4, 5))])
case("torch.bmm", lambda a, b: torch.bmm(a, b), [A("a", (2, 3, 4)), A("b", (2, 4, 5))])
case("torch.mv", lambda a, b: a @ b, [A("a", (3, 4)), A("b", (4,))])
case("torch.dot", lambda a, b: torch.dot(a, b), [A("a", (4,)), A("b", (4,))])
case("torch.addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
     [A("c", (3, 5)), A("a", (3, 4)), A("b", (4, 5))])

# ------------------------------------------------------------------ layout
case("torch.log2_log10", lambda x: torch.log2(x) + torch.log10(x), X, POS)
case("torch.repeat", lambda x: x.repeat(2, 1, 3), X)
case("torch.cat", lambda x, y: torch.cat([x, y * 2.0], 1), XY)
case("torch.stack", lambda x, y: torch.stack([x, y], 1), XY)
case("torch.split", lambda x: torch.split(x, [2, 4], 1)[1] * 2.0, X)
case("torch.chunk", lambda x: x.chunk(2, 0)[0] - x.chunk(2, 0)[1], X)
case("torch.flip", lambda x: x.flip(0, 1) + x.flip(-1), X)
case("torch.roll", lambda x: x.roll(2, 1) + x.roll(1) + x.roll((1, -1), (0, 1)), X)
case("torch.tril_triu", lambda x: x.tril(1) + x.triu(-1) * 2.0, X)
case("views", lambda x: x.view(2, 12).reshape(3, 8).permute(1, 0).unsqueeze(0)
     .expand(2, 8, 3).transpose(1, 2).squeeze().sum(0), X)
case("indexing", lambda x: x[1:3, ::2] * x[0, 1::2] + x[:, -1:][0] + x[..., None][2, 1:4, 0], X)


# prims have no autograd formula in torch: their translation is checked against that of
# the aten ops they stand for, which the calls above compare with torch
PRIMS = torch.ops.prims
PRIMS_ARGUMENTS = [*XY, A("n", (4, 6), "int")]


def prims_call(x, y, n):
    return PRIMS.add(PRIMS.mul(x, y), PRIMS.neg(PRIMS.sub(x, y))) \
        * PRIMS.convert_element_type(n, torch.float64)


def aten_call(x, y, n):
    return (x * y + -(x - y)) * n.to(torch.float64)


@functools.lru_cache(maxsize=None)
def traced(name):
    fn, arguments, *_ = CASES[name]
    return trace(fn, arguments)


@pytest.mark.parametrize("name", list(CASES))
def test_traced_call_matches_torch(name):
    fn, arguments, domains, frozen, rtol = CASES[name]
    assert_traced_matches_torch(fn, arguments, domains, frozen=frozen, rtol=rtol)


def test_indices_of_sort_have_no_formula():
    """sort's values trace; an op reading its indices is an error naming them, with
    the line of the user's code that read them."""
    from gradcheck.tracing.values import TraceError

    def by_order(x):
        return x.gather(1, torch.sort(x, 1).indices)

    with pytest.raises(TraceError, match=r"aten.gather reads a value with no formula: "
                                         r"the indices sort returns") as caught:
        trace(by_order, X)
    assert "test_tracing_ops.py" in caught.value.where


def test_prims_translate_as_their_aten_ops():
    prims, aten = trace(prims_call, PRIMS_ARGUMENTS), trace(aten_call, PRIMS_ARGUMENTS)
    assert (prims.outputs, prims.lets) == (aten.outputs, aten.lets)
    assert {"prims.add", "prims.mul", "prims.neg", "prims.sub"} <= set(prims.ops)


def test_every_mapped_packet_is_used():
    used: set[str] = set(trace(prims_call, PRIMS_ARGUMENTS).ops)
    for name in CASES:
        try:
            used.update(traced(name).ops)
        except Exception:   # its own test says why
            pass
    unused = sorted(set(ATEN) - used)
    assert not unused, f"mapped but no traced call uses: {unused}"


#: traced calls whose reference is built at tensor level, checked against the
#: element-expanded one (one SymPy symbol per element) at these small sizes
EXPANDED = ("F.layer_norm", "F.group_norm", "F.sdpa_causal", "F.sdpa_bool_mask",
            "F.cross_entropy_label_smoothing", "F.cross_entropy_ignore_index",
            "F.conv2d", "F.embedding", "F.interpolate_bilinear", "F.max_pool2d")


@pytest.mark.parametrize("name", [n for n in EXPANDED if n in CASES])
def test_a_traced_reference_equals_the_element_expanded_one(name):
    """The trust chain of written formulas holds for traced ones: the reference built
    from the trace at tensor level equals the element-expanded reference."""
    import numpy as np

    from gradcheck.reference import Reference, kind_of
    from tracing_harness import _draw, traced_case

    fn, arguments, domains, frozen, _ = CASES[name]
    case, _ = traced_case(fn, arguments, domains, frozen)
    assert kind_of(case).mode != "expanded"
    rng = np.random.default_rng(1)
    point = {a.name: _draw(rng, a, (domains or {}).get(a.name)) for a in arguments}
    v = rng.standard_normal(case.output.shape)
    mine = kind_of(case)(case).evaluate(point, v)
    expanded = Reference.kinds["expanded"](case).evaluate(point, v)
    np.testing.assert_allclose(mine.value, expanded.value, rtol=1e-10, atol=1e-12)
    for n in mine.grads:
        if mine.grads[n] is not None or expanded.grads.get(n) is not None:
            np.testing.assert_allclose(mine.grads[n], expanded.grads[n], rtol=1e-10,
                                       atol=1e-12, err_msg=n)
