"""Ops of the kink probes (tests/test_kink_points.py): each is wrong only within 0.05 of
a kink, where the bulk and extreme points never go; the right twins beside them pass."""

import torch


class ShortRelu(torch.autograd.Function):
    """relu whose backward drops the gradient on (0, 0.04): a threshold written 0.04
    instead of 0."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x >= 0.04).to(g.dtype)


class Relu(torch.autograd.Function):
    """relu, right: its backward passes the gradient where x > 0."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype)


class LeakyAbs(torch.autograd.Function):
    """abs whose backward is sign(x) only beyond 0.01 of its kink, 0.5·sign(x) inside:
    a smoothing of the kink that is not the derivative."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        inside = (x.abs() < 0.01).to(g.dtype)
        return g * torch.sign(x) * (1 - 0.5 * inside)


class LateClamp(torch.autograd.Function):
    """clamp(x, -1, 1) whose backward passes the gradient up to 1.02, beyond the bound
    on the far side (the switch written at the wrong place)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1.0, 1.0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x >= -1.0) & (x <= 1.02)).to(g.dtype)


class ShiftedRelu(torch.autograd.Function):
    """relu(2x - 0.7) whose backward switches at x = 0.36 instead of 0.35."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(2 * x - 0.7)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * g * (x > 0.36).to(g.dtype)
