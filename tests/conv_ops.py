"""Test fixtures: a conv2d written as a torch.autograd.Function with a hand-written
backward (torch.nn.grad's input and weight gradients), and its wrong twin, whose weight
gradient has the kernel's two spatial axes swapped (a slip that keeps the shape of a
square kernel). Reference: ``conv2d(x, w, stride=s, padding=p)``, with s and p the op's
plain arguments after the tensors."""

import torch


class Conv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, stride, padding):
        ctx.save_for_backward(x, w)
        ctx.stride, ctx.padding = stride, padding
        return torch.nn.functional.conv2d(x, w, stride=stride, padding=padding)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = torch.nn.grad.conv2d_input(x.shape, w, g, stride=ctx.stride,
                                        padding=ctx.padding)
        gw = torch.nn.grad.conv2d_weight(x, w.shape, g, stride=ctx.stride,
                                         padding=ctx.padding)
        return gx, gw, None, None


class Conv2dWrongWeight(Conv2d):
    @staticmethod
    def backward(ctx, g):
        gx, gw, _, _ = Conv2d.backward(ctx, g)
        return gx, gw.transpose(-1, -2), None, None
