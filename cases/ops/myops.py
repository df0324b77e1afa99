"""Custom autograd ops of the kind a project writes by hand, and deliberately wrong
versions of them (one per kind of bug gradcheck diagnoses). cases/ops/ops.toml checks
them against the formulas they claim to compute."""

import torch


class Swish(torch.autograd.Function):
    """x * sigmoid(x), saving x for a hand-written backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))


class SwishSignFlipped(Swish):
    @staticmethod
    def backward(ctx, grad_output):
        return -Swish.backward(ctx, grad_output)
