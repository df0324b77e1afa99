"""Ops that approximate their formula (``approximations.toml``): right within float32's
tolerance, beyond float64's. In a float64 run each is ``approximate`` (exit 0; a
failure with ``--strict`` or ``strict = true``), and each comes with a version whose
approximation is too coarse for float32 as well, which fails in every dtype.

- a threshold: ``F.softplus`` with PyTorch's own ``threshold=20``, which returns x above
  it (off by log1p(e^-x) ≈ e^-20 ≈ 2e-9 there);
- a rounded constant: a tanh-GELU whose backward writes 3·0.044715·√(2/π) to 10 digits
  (a relative error of 4e-12 in the gradient);
- float32 arithmetic inside: an op that casts its float64 inputs to float32, computes,
  and casts back, in forward and backward.
"""

import math

import torch
import torch.nn.functional as F

# =========================================================================== right
# (within float32's tolerance: approximate in float64)


def softplus_threshold(x):
    """torch's softplus as it comes: x itself where x > 20."""
    return F.softplus(x)


_K = math.sqrt(2 / math.pi)
_KAPPA = 0.044715


class GeluTanh(torch.autograd.Function):
    """0.5·x·(1 + tanh(k(x + κx³))), its backward written out with the constant
    ``three_k_kappa`` = 3·κ·k as given (a class attribute, so the wrong version below
    only changes how many digits it has)."""

    three_k_kappa = 0.1070322244   # 3 * 0.044715 * sqrt(2 / pi), 10 significant digits

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * (1 + torch.tanh(_K * (x + _KAPPA * x ** 3)))

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        t = torch.tanh(_K * (x + _KAPPA * x ** 3))
        inner = _K + cls.three_k_kappa * x * x
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * inner)


class Float32Inside(torch.autograd.Function):
    """x·sigmoid(x) (swish) computed in float32 whatever the dtype it is called in: the
    inputs are cast to float32, and the results back to the caller's dtype."""

    inner = torch.float32

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        y = x.to(Float32Inside.inner)
        return (y * torch.sigmoid(y)).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y, h = x.to(Float32Inside.inner), g.to(Float32Inside.inner)
        s = torch.sigmoid(y)
        return (h * (s + y * s * (1 - s))).to(x.dtype)


# =========================================================================== wrong
# (beyond float32's tolerance too: a failure in every dtype)


def softplus_threshold_5(x):
    """A threshold far too low: x itself where x > 5 (off by e^-5 ≈ 7e-3)."""
    return F.softplus(x, threshold=5)


class GeluTanh3Digits(GeluTanh):
    """The same backward with the constant written to 3 digits (0.107: 3e-4 off)."""

    three_k_kappa = 0.107


class HalfInside(torch.autograd.Function):
    """Swish computed in bfloat16 inside: 8 significant bits, far beyond float32's
    tolerance."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        y = x.to(torch.bfloat16)
        return (y * torch.sigmoid(y)).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y, h = x.to(torch.bfloat16), g.to(torch.bfloat16)
        s = torch.sigmoid(y)
        return (h * (s + y * s * (1 - s))).to(x.dtype)
