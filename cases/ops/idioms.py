"""Custom autograd Functions as real projects write them, each with a hand-written
backward, and a wrong twin of each with one realistic mistake.

``cases/idioms.toml`` states each op's formula in gradcheck's language (NumPy/PyTorch
spelling) and checks the op against it; the twins are expected to fail there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# =========================================================================== norms


class ChannelLayerNorm(torch.autograd.Function):
    """Layer norm over the channels of an NCHW tensor, at every pixel (ConvNeXt's
    ``channels_first`` LayerNorm): y = (x - μ) / √(σ² + ε) · w[c] + b[c], with μ, σ²
    over axis 1. Backward: with x̂ the normalised input and ĝ = g · w,
    x̄ = (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂)) / √(σ² + ε) (means over the channels)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mu = x.mean(1, keepdim=True)
        var = (x - mu).pow(2).mean(1, keepdim=True)
        rstd = torch.rsqrt(var + eps)
        xhat = (x - mu) * rstd
        ctx.save_for_backward(xhat, rstd, weight)
        return xhat * weight[:, None, None] + bias[:, None, None]

    @staticmethod
    def backward(ctx, g):
        xhat, rstd, weight = ctx.saved_tensors
        gh = g * weight[:, None, None]
        gx = (gh - gh.mean(1, keepdim=True)
              - xhat * (gh * xhat).mean(1, keepdim=True)) * rstd
        return gx, (g * xhat).sum((0, 2, 3)), g.sum((0, 2, 3)), None


class ChannelLayerNormNoMeanTerm(ChannelLayerNorm):
    """Wrong: drops the -mean(ĝ) term of x̄ (the gradient through μ)."""

    @staticmethod
    def backward(ctx, g):
        xhat, rstd, weight = ctx.saved_tensors
        gh = g * weight[:, None, None]
        gx = (gh - xhat * (gh * xhat).mean(1, keepdim=True)) * rstd
        return gx, (g * xhat).sum((0, 2, 3)), g.sum((0, 2, 3)), None


def channel_layer_norm(x, weight, bias, eps=1e-6):
    return ChannelLayerNorm.apply(x, weight, bias, eps)


def channel_layer_norm_no_mean_term(x, weight, bias, eps=1e-6):
    return ChannelLayerNormNoMeanTerm.apply(x, weight, bias, eps)


class RMSNorm(torch.autograd.Function):
    """y = x / √(mean(x²) + ε) · w over the last axis (LLaMA's RMSNorm), ε a keyword.
    Backward: with r = 1/√(mean(x²) + ε) and ĝ = g · w,
    x̄ = r · ĝ - x · r³ · mean(ĝ · x)."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, r)
        return x * r * weight

    @staticmethod
    def backward(ctx, g):
        x, weight, r = ctx.saved_tensors
        gh = g * weight
        gx = r * gh - x * r.pow(3) * (gh * x).mean(-1, keepdim=True)
        gw = (g * x * r).reshape(-1, x.shape[-1]).sum(0)
        return gx, gw, None


class RMSNormEpsOutside(RMSNorm):
    """Wrong: the backward's r is 1/(√mean(x²) + ε), the forward's eps placement of
    another implementation; off by O(ε) where mean(x²) is small."""

    @staticmethod
    def backward(ctx, g):
        x, weight, _ = ctx.saved_tensors
        r = 1 / (x.pow(2).mean(-1, keepdim=True).sqrt() + 0.1)
        gh = g * weight
        gx = r * gh - x * r.pow(3) * (gh * x).mean(-1, keepdim=True)
        return gx, (g * x * r).reshape(-1, x.shape[-1]).sum(0), None


class RMSNormNoProjection(RMSNorm):
    """Wrong: x̄ = r · ĝ, the backward of x · r with r held constant: it drops the
    term through r, -x · r³ · mean(ĝ · x), the projection out of the direction of x."""

    @staticmethod
    def backward(ctx, g):
        x, weight, r = ctx.saved_tensors
        gx = r * g * weight
        return gx, (g * x * r).reshape(-1, x.shape[-1]).sum(0), None


def rms_norm(x, weight, eps=1e-6):
    return RMSNorm.apply(x, weight, eps)


def rms_norm_eps_outside(x, weight, eps=1e-6):
    return RMSNormEpsOutside.apply(x, weight, eps)


def rms_norm_no_projection(x, weight, eps=1e-6):
    return RMSNormNoProjection.apply(x, weight, eps)


# =========================================================================== rotary


def rotate_half(x):
    """[x1, x2] -> [-x2, x1] over the last axis (GPT-NeoX / LLaMA rotary embedding)."""
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rotate_half_adjoint(g):
    """The transpose of :func:`rotate_half`: [g1, g2] -> [g2, -g1]."""
    h = g.shape[-1] // 2
    return torch.cat((g[..., h:], -g[..., :h]), dim=-1)


class Rotary(torch.autograd.Function):
    """y = x · cos + rotate_half(x) · sin; cos and sin are position tables (no grad).
    Backward: x̄ = g · cos + rotate_halfᵀ(g · sin)."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return x * cos + rotate_half(x) * sin

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return g * cos + rotate_half_adjoint(g * sin), None, None


class RotaryNotTransposed(Rotary):
    """Wrong: rotates the gradient forward again (rotate_half, not its transpose)."""

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return g * cos + rotate_half(g * sin), None, None


def rotary(x, cos, sin):
    return Rotary.apply(x, cos, sin)


def rotary_not_transposed(x, cos, sin):
    return RotaryNotTransposed.apply(x, cos, sin)


# =========================================================================== sparsemax


class Sparsemax(torch.autograd.Function):
    """Sparsemax over the last axis (Martins & Astudillo 2016): the Euclidean projection
    onto the simplex, max(z - τ, 0), τ from the sorted z and their cumulative sums.
    Backward on the support S (k elements): z̄ = 1_S · (g - Σ_S g / k)."""

    @staticmethod
    def forward(ctx, z):
        zs, _ = torch.sort(z, dim=-1, descending=True)
        r = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
        support = (1 + r * zs > zs.cumsum(-1)).to(z.dtype)
        k = support.sum(-1, keepdim=True)
        tau = ((zs * support).sum(-1, keepdim=True) - 1) / k
        out = torch.clamp(z - tau, min=0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        s = (out > 0).to(g.dtype)
        return s * (g - (g * s).sum(-1, keepdim=True) / s.sum(-1, keepdim=True))


class SparsemaxSoftmaxBackward(Sparsemax):
    """Wrong: the backward of softmax (y ⊙ (g - Σ y ⊙ g)) copied for sparsemax."""

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return out * (g - (g * out).sum(-1, keepdim=True))


def sparsemax(z):
    return Sparsemax.apply(z)


def sparsemax_softmax_backward(z):
    return SparsemaxSoftmaxBackward.apply(z)


# =========================================================================== losses


class LabelSmoothingCE(torch.autograd.Function):
    """Cross-entropy with integer class labels and label smoothing α, averaged over
    the batch: the target is (1 - α)·onehot(label) + α/C. Backward:
    z̄ = (softmax(z) - target) / N."""

    @staticmethod
    def forward(ctx, logits, labels, smoothing):
        n, c = logits.shape
        target = (1 - smoothing) * F.one_hot(labels, c).to(logits.dtype) + smoothing / c
        logp = torch.log_softmax(logits, dim=-1)
        ctx.save_for_backward(logp, target)
        return -(target * logp).sum(-1).mean()

    @staticmethod
    def backward(ctx, g):
        logp, target = ctx.saved_tensors
        return g * (logp.exp() - target) / logp.shape[0], None, None


class LabelSmoothingCEUnsmoothedBackward(LabelSmoothingCE):
    """Wrong: the backward uses the one-hot target, forgetting the smoothing."""

    @staticmethod
    def backward(ctx, g):
        logp, target = ctx.saved_tensors
        hard = (target == target.max(-1, keepdim=True).values).to(logp.dtype)
        return g * (logp.exp() - hard) / logp.shape[0], None, None


def label_smoothing_ce(logits, labels, smoothing=0.1):
    return LabelSmoothingCE.apply(logits, labels, smoothing)


def label_smoothing_ce_unsmoothed(logits, labels, smoothing=0.1):
    return LabelSmoothingCEUnsmoothedBackward.apply(logits, labels, smoothing)


# =========================================================================== attention


class CausalAttention(torch.autograd.Function):
    """softmax(q kᵀ / √d + causal mask) v over [batch, T, d], the mask -inf above the
    diagonal. Backward: P̄ = ḡ vᵀ, S̄ = P ⊙ (P̄ - Σ P ⊙ P̄) / √d, q̄ = S̄ k, k̄ = S̄ᵀ q,
    v̄ = Pᵀ ḡ."""

    @staticmethod
    def forward(ctx, q, k, v):
        t, d = q.shape[-2], q.shape[-1]
        s = q @ k.transpose(-2, -1) / d ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
        p = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        ctx.save_for_backward(q, k, v, p)
        return p @ v

    @staticmethod
    def backward(ctx, g):
        q, k, v, p = ctx.saved_tensors
        dp = g @ v.transpose(-2, -1)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True)) / q.shape[-1] ** 0.5
        return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ g


class CausalAttentionLeaky(CausalAttention):
    """Wrong: the backward recomputes P without the mask (future positions leak into
    the gradients, while the forward is right)."""

    @staticmethod
    def backward(ctx, g):
        q, k, v, _ = ctx.saved_tensors
        p = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        dp = g @ v.transpose(-2, -1)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True)) / q.shape[-1] ** 0.5
        return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ g


def causal_attention(q, k, v):
    return CausalAttention.apply(q, k, v)


def causal_attention_leaky(q, k, v):
    return CausalAttentionLeaky.apply(q, k, v)


# =========================================================================== surrogates


class SignSTE(torch.autograd.Function):
    """Binarisation with a straight-through estimator: the forward is sign(x), the
    backward the derivative of the surrogate tanh(x), g · (1 - tanh²(x))."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (1 - torch.tanh(x) ** 2)


class SignSTEIdentity(SignSTE):
    """Wrong for the stated surrogate: passes g straight through (the surrogate of x,
    not of tanh(x))."""

    @staticmethod
    def backward(ctx, g):
        return g


class GradientReversal(torch.autograd.Function):
    """The identity forward, the gradient times -λ backward (domain-adversarial
    training, Ganin & Lempitsky 2015): the surrogate is -λ·x."""

    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.lam * g, None


class GradientReversalNotReversed(GradientReversal):
    """Wrong: scales but forgets the sign."""

    @staticmethod
    def backward(ctx, g):
        return ctx.lam * g, None


def sign_ste(x):
    return SignSTE.apply(x)


def sign_ste_identity(x):
    return SignSTEIdentity.apply(x)


def gradient_reversal(x, lam=0.5):
    return GradientReversal.apply(x, lam)


def gradient_reversal_not_reversed(x, lam=0.5):
    return GradientReversalNotReversed.apply(x, lam)


# =========================================================================== convolution


class Conv2d(torch.autograd.Function):
    """conv2d (NCHW, stride and padding) with the backward written out: the input's
    gradient is the transposed convolution of g with w, the weight's the correlation
    of the input with g (torch.nn.grad's conv2d_input and conv2d_weight)."""

    @staticmethod
    def forward(ctx, x, w, stride, padding):
        ctx.save_for_backward(x, w)
        ctx.conf = (stride, padding)
        return F.conv2d(x, w, stride=stride, padding=padding)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        stride, padding = ctx.conf
        gx = torch.nn.grad.conv2d_input(x.shape, w, g, stride=stride, padding=padding)
        gw = torch.nn.grad.conv2d_weight(x, w.shape, g, stride=stride, padding=padding)
        return gx, gw, None, None


class Conv2dFlippedKernel(Conv2d):
    """Wrong: the input's gradient correlates g with the kernel unflipped (a full
    convolution written by hand, missing the 180° rotation of w)."""

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        stride, padding = ctx.conf
        gx = torch.nn.grad.conv2d_input(x.shape, w.flip(-1, -2), g, stride=stride,
                                        padding=padding)
        gw = torch.nn.grad.conv2d_weight(x, w.shape, g, stride=stride, padding=padding)
        return gx, gw, None, None


def conv2d(x, w, stride=1, padding=0):
    return Conv2d.apply(x, w, stride, padding)


def conv2d_flipped_kernel(x, w, stride=1, padding=0):
    return Conv2dFlippedKernel.apply(x, w, stride, padding)


# =========================================================================== second order


def pick(k, zs):
    """Each row's k-th entry (k from 1) picked by a one-hot mask and summed: plain torch
    ops, so autograd differentiates its backward again."""
    r = torch.arange(1, zs.shape[-1] + 1, device=zs.device)
    return torch.where(r == k, zs, 0).sum()


class PickDetached(torch.autograd.Function):
    """Wrong at second order only: the mask times ``grad_output.detach()`` is the right
    gradient, but its derivative in grad_output (J u, op.double) is zero."""

    @staticmethod
    def forward(ctx, k, zs):
        r = torch.arange(1, zs.shape[-1] + 1, device=zs.device)
        mask = (r == k).to(zs.dtype)
        ctx.save_for_backward(mask)
        return (zs * mask).sum()

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return None, g.detach() * mask


def pick_detached(k, zs):
    return PickDetached.apply(k, zs)


def _entmax15_tau(z):
    """entmax 1.5's threshold τ along the last axis of z, from the sorted z: for each
    support size k, the mean and the mean of squares of the k largest give
    τ_k = mean - √δ_k, δ_k = (1 - k·(mean of squares - mean²)) / k (no τ where δ_k <=
    0); the support is the k with τ_k <= z_(k), τ its last one's."""
    zs, _ = torch.sort(z, dim=-1, descending=True)
    rho = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    mean = zs.cumsum(-1) / rho
    mean_sq = (zs * zs).cumsum(-1) / rho
    delta = (1 - rho * (mean_sq - mean * mean)) / rho
    positive = delta > 0
    tau = torch.where(positive, mean - torch.sqrt(torch.where(positive, delta, 1)), 1e9)
    k = (tau <= zs).sum(-1, keepdim=True)
    return tau.gather(-1, k - 1)


class Entmax15(torch.autograd.Function):
    """entmax with α = 1.5 over the last axis (Peters, Niculae & Martins 2019), as the
    entmax package writes it: p = relu(x/2 - τ)², τ from the sorted x
    (:func:`_entmax15_tau`). Backward from the output alone: with s = √p,
    x̄ = s ⊙ g - s · Σ(s ⊙ g) / Σ s. Its √p is taken where p > 0 only, so that the
    backward is differentiable again: √ has no derivative at the zeros of p."""

    @staticmethod
    def forward(ctx, x):
        z = x / 2
        p = torch.clamp(z - _entmax15_tau(z), min=0) ** 2
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        inside = p > 0
        s = torch.where(inside, torch.sqrt(torch.where(inside, p, 1)), 0)
        return _entmax15_vjp(s, g)


def _entmax15_vjp(s, g):
    gs = g * s
    return gs - s * gs.sum(-1, keepdim=True) / s.sum(-1, keepdim=True)


class Entmax15SqrtOfOutput(Entmax15):
    """Wrong at second order only: √p of the whole output (the entmax package's
    ``Y.sqrt()``) gives the right gradient, but differentiated again its derivative at
    the zeros of p is infinite, times p's zero derivative there: NaN."""

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        return _entmax15_vjp(torch.sqrt(p), g)


def entmax15(x):
    return Entmax15.apply(x)


def entmax15_sqrt_of_output(x):
    return Entmax15SqrtOfOutput.apply(x)
