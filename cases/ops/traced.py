"""Ops checked against the plain PyTorch code they replace (``cases/ops/traced.toml``).

Each op has a hand-written backward; its reference is a plain function below (the
``ref_*`` ones: ``F.layer_norm``, ``F.scaled_dot_product_attention``, ``F.gelu``,
``F.cross_entropy``, a five-line RMSNorm), which gradcheck traces to its ATen graph and
maps to the rule table: the exact reference is built from that trace. Each op is
followed by a wrong twin with one realistic mistake in its backward.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# =========================================================================== references


def ref_layer_norm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


def ref_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def ref_gelu(x, approximate="none"):
    return F.gelu(x, approximate=approximate)


def ref_rms_norm(x, weight, eps=1e-6):
    """RMSNorm as a model writes it."""
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x


def ref_cross_entropy(logits, labels):
    return F.cross_entropy(logits, labels, ignore_index=-1, label_smoothing=0.1)


def ref_scaled_tanh(x):
    return torch.tanh(x) * 2.5


def ref_straight_through(w):
    """Round to a grid of 0.1 forward, identity backward: the detach idiom."""
    return w + (torch.round(w / 0.1) * 0.1 - w).detach()


# =========================================================================== layer norm


class LayerNorm(torch.autograd.Function):
    """y = x̂ · w + b, x̂ = (x - μ) / √(σ² + ε) over the last axis. Backward, with
    ĝ = g · w: x̄ = (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂)) / √(σ² + ε)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        mu = x.mean(-1, keepdim=True)
        rstd = torch.rsqrt((x - mu).pow(2).mean(-1, keepdim=True) + 1e-5)
        xhat = (x - mu) * rstd
        ctx.save_for_backward(xhat, rstd, weight)
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, g):
        xhat, rstd, weight = ctx.saved_tensors
        gh = g * weight
        gx = (gh - gh.mean(-1, keepdim=True) - xhat * (gh * xhat).mean(-1, keepdim=True))
        lead = tuple(range(g.ndim - 1))
        return gx * rstd, (g * xhat).sum(lead), g.sum(lead)


class LayerNormBiasedVariance(LayerNorm):
    """Wrong: the backward rescales by the unbiased variance's n / (n - 1)."""

    @staticmethod
    def backward(ctx, g):
        gx, gw, gb = LayerNorm.backward(ctx, g)
        n = g.shape[-1]
        return gx * math.sqrt(n / (n - 1)), gw, gb


def layer_norm(x, weight, bias):
    return LayerNorm.apply(x, weight, bias)


def layer_norm_biased_variance(x, weight, bias):
    return LayerNormBiasedVariance.apply(x, weight, bias)


# =========================================================================== attention


class CausalAttention(torch.autograd.Function):
    """softmax(q kᵀ / √d + causal mask) v, with the backward written out:
    P̄ = ḡ vᵀ, S̄ = P ⊙ (P̄ - rowsum(P̄ ⊙ P)), q̄ = S̄ k / √d, k̄ = S̄ᵀ q / √d, v̄ = Pᵀ ḡ."""

    @staticmethod
    def forward(ctx, q, k, v):
        scale = 1.0 / math.sqrt(q.shape[-1])
        n = q.shape[-2]
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        p = torch.softmax((q @ k.transpose(-2, -1) * scale).masked_fill(future, -math.inf), -1)
        ctx.save_for_backward(q, k, v, p)
        ctx.scale = scale
        return p @ v

    @staticmethod
    def backward(ctx, g):
        q, k, v, p = ctx.saved_tensors
        dp = g @ v.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        return ds @ k * ctx.scale, ds.transpose(-2, -1) @ q * ctx.scale, p.transpose(-2, -1) @ g


class CausalAttentionUnscaledKey(CausalAttention):
    """Wrong: k̄ forgets the 1/√d of the scores."""

    @staticmethod
    def backward(ctx, g):
        gq, gk, gv = CausalAttention.backward(ctx, g)
        return gq, gk / ctx.scale, gv


def causal_attention(q, k, v):
    return CausalAttention.apply(q, k, v)


def causal_attention_unscaled_key(q, k, v):
    return CausalAttentionUnscaledKey.apply(q, k, v)


# =========================================================================== GELU


class Gelu(torch.autograd.Function):
    """x Φ(x), or its tanh form; backward Φ(x) + x φ(x), or the tanh form's derivative."""

    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        if approximate == "tanh":
            return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            t = torch.tanh(c * (x + 0.044715 * x**3))
            d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x**2)
        else:
            d = 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        return g * d, None


class GeluTanhBackwardForErf(Gelu):
    """Wrong: the erf GELU's backward is the tanh form's derivative."""

    @staticmethod
    def backward(ctx, g):
        ctx.approximate = "tanh"
        return Gelu.backward(ctx, g)


def gelu(x, approximate="none"):
    return Gelu.apply(x, approximate)


def gelu_tanh_backward_for_erf(x, approximate="none"):
    return GeluTanhBackwardForErf.apply(x, approximate)


# =========================================================================== RMSNorm


class RMSNorm(torch.autograd.Function):
    """y = x r w, r = 1/√(mean(x²) + ε). Backward: x̄ = r (ĝ - x r² mean(ĝ x)), ĝ = g w."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, r, weight)
        return x * r * weight

    @staticmethod
    def backward(ctx, g):
        x, r, weight = ctx.saved_tensors
        gh = g * weight
        gx = r * (gh - x * r * r * (gh * x).mean(-1, keepdim=True))
        return gx, (g * x * r).sum(tuple(range(g.ndim - 1))), None


class RMSNormNoWeightInInput(RMSNorm):
    """Wrong: x̄ is computed from g, not g · w."""

    @staticmethod
    def backward(ctx, g):
        x, r, weight = ctx.saved_tensors
        gx = r * (g - x * r * r * (g * x).mean(-1, keepdim=True))
        return gx, (g * x * r).sum(tuple(range(g.ndim - 1))), None


def rms_norm(x, weight, eps=1e-6):
    return RMSNorm.apply(x, weight, eps)


def rms_norm_no_weight_in_input(x, weight, eps=1e-6):
    return RMSNormNoWeightInInput.apply(x, weight, eps)


# =========================================================================== cross-entropy


class CrossEntropy(torch.autograd.Function):
    """Mean label-smoothed cross-entropy over the rows whose label is not -1:
    x̄ = (softmax(x) - (1 - ε) onehot(y) - ε / C) / n_valid on valid rows, 0 elsewhere."""

    @staticmethod
    def forward(ctx, logits, labels, smoothing=0.1):
        logp = torch.log_softmax(logits, -1)
        valid = labels != -1
        safe = labels.clamp(min=0)
        nll = -logp.gather(1, safe[:, None])[:, 0]
        spread = -logp.mean(-1)
        loss = ((1 - smoothing) * nll + smoothing * spread) * valid
        count = valid.sum()
        ctx.save_for_backward(logp, safe, valid)
        ctx.smoothing, ctx.count = smoothing, count
        return loss.sum() / count

    @staticmethod
    def backward(ctx, g):
        logp, safe, valid = ctx.saved_tensors
        c = logp.shape[-1]
        target = F.one_hot(safe, c).to(logp.dtype) * (1 - ctx.smoothing) + ctx.smoothing / c
        grad = (logp.exp() - target) * valid[:, None] / ctx.count
        return g * grad, None, None


class CrossEntropyCountsIgnored(CrossEntropy):
    """Wrong: the backward divides by every row, ignored ones included."""

    @staticmethod
    def backward(ctx, g):
        gx, _, _ = CrossEntropy.backward(ctx, g)
        return gx * ctx.count / gx.shape[0], None, None


def cross_entropy(logits, labels):
    return CrossEntropy.apply(logits, labels)


def cross_entropy_counts_ignored(logits, labels):
    return CrossEntropyCountsIgnored.apply(logits, labels)


# =========================================================================== torch.library


@torch.library.custom_op("gradcheck_cases::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2.5


@scaled_tanh.register_fake
def _(x):
    return torch.empty_like(x)


def _keep_output(ctx, inputs, output):
    ctx.save_for_backward(output)


def _scaled_tanh_backward(ctx, g):
    (y,) = ctx.saved_tensors
    return g * (2.5 - y * y / 2.5)


scaled_tanh.register_autograd(_scaled_tanh_backward, setup_context=_keep_output)


@torch.library.custom_op("gradcheck_cases::scaled_tanh_unscaled", mutates_args=())
def scaled_tanh_unscaled(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2.5


@scaled_tanh_unscaled.register_fake
def _(x):
    return torch.empty_like(x)


def _unscaled_backward(ctx, g):
    """Wrong: 1 - tanh², the derivative of tanh without the scale."""
    (y,) = ctx.saved_tensors
    return g * (1 - (y / 2.5) ** 2)


scaled_tanh_unscaled.register_autograd(_unscaled_backward, setup_context=_keep_output)


# =========================================================================== straight-through


class RoundStraightThrough(torch.autograd.Function):
    """Forward: w rounded to a grid of 0.1; backward: the identity."""

    @staticmethod
    def forward(ctx, w):
        return torch.round(w / 0.1) * 0.1

    @staticmethod
    def backward(ctx, g):
        return g


class RoundStraightThroughZero(RoundStraightThrough):
    """Wrong: the rounding's own derivative (zero almost everywhere) flows back."""

    @staticmethod
    def backward(ctx, g):
        return torch.zeros_like(g)


def round_straight_through(w):
    return RoundStraightThrough.apply(w)


def round_straight_through_zero(w):
    return RoundStraightThroughZero.apply(w)


# =========================================================================== formulas


def swiglu_mlp(x, w1, w3, w2):
    """A SwiGLU feed-forward block as a model writes it: the formula of a formula case
    (``expr_function``), checked in every witness and, as written, as an op."""
    return (F.silu(x @ w1) * (x @ w3)) @ w2
