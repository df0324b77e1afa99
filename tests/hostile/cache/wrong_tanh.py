"""A tanh op whose backward is plainly wrong (1 - y instead of 1 - y**2): every honest
check fails it. tests/test_hostile_cache.py runs it after planting kernels in the old
cache folder that would make the reference agree with it."""

import torch


class WrongTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y)
