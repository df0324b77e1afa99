"""Ops of tests/hostile/verdicts/reductions.toml: reductions over 4096 elements checked
to second order, and one whose double backward is wrong."""

import torch


def prod(x):
    return torch.prod(x)


def amax(x):
    return torch.amax(x)


def logsumexp(x):
    return torch.logsumexp(x, 0)


class DetachedProd(torch.autograd.Function):
    """Right first derivative (the product of the others), but computed from a detached
    product: its own derivative, the second of prod, is missing its cross terms."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.prod(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.prod(x).detach() / x
