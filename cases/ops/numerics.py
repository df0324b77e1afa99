"""Ops whose gradients are right but hard to verify in low precision, and ops with the
bugs only per-element tolerances and the newer checks catch (``numerics.toml``).

The right ones cancel inside one Jacobian entry (``1 - y*y`` of a saturated tanh,
``y * (1 - y)`` of a saturated sigmoid, ``expm1(x) - log1p(x)`` near 0, a softmax over
wide logits, layer norm): a tolerance proportional to the size of the result fails them
in float32, float16 and bfloat16. PyTorch's own functions are wrapped here so that every
op a case names lives in the project.
"""

import torch
import torch.nn.functional as F

# =========================================================================== right


def tanh(x):
    return torch.tanh(x)


def sigmoid(x):
    return torch.sigmoid(x)


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x):
    return F.layer_norm(x, x.shape[-1:], eps=1e-5)


def mish(x):
    return F.mish(x)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


class Expm1MinusLog1p(torch.autograd.Function):
    """expm1(x) - log1p(x): both terms ~x near 0, the result ~x²; so is the backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.expm1(x) - torch.log1p(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (torch.exp(x) - 1 / (1 + x))


class Linear(torch.autograd.Function):
    """x @ W with a backward of differentiable torch ops: double backward works."""

    @staticmethod
    def forward(ctx, x, W):
        ctx.save_for_backward(x, W)
        return x @ W

    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.T, x.T @ g


# =========================================================================== wrong


class ExpSmallElementsWrong(torch.autograd.Function):
    """exp whose backward adds 1e-6: right for the large elements, wrong by ~1e7x on
    the small ones. A per-tensor scale (the largest gradient, ~7) hid it in float32."""

    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y + 1e-6)


class NormalisedGradOutput(torch.autograd.Function):
    """x**2 whose backward rescales grad_output by its norm and back: 0/0 = NaN for a
    zero grad_output, right for every other."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        norm = g.norm()
        return 2 * x * (g / norm) * norm


class SoftmaxShiftsInput(torch.autograd.Function):
    """A stabilised softmax that subtracts the row max from the caller's input in place."""

    @staticmethod
    def forward(ctx, x):
        x -= x.max(dim=-1, keepdim=True).values
        y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(dim=-1, keepdim=True))


class ScalesGradOutputInPlace(torch.autograd.Function):
    """2x whose backward doubles grad_output in place (and so returns the right value)."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return g.mul_(2)


class NegatesSavedWeight(torch.autograd.Function):
    """-(w * x) whose backward negates the caller's w in place. Kept on ctx rather than
    saved with save_for_backward, it escapes autograd's version counter."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w
        return -(w * x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.w.neg_(), None


class SinDetachedGradOutput(torch.autograd.Function):
    """sin whose backward detaches grad_output: first derivatives are right, and so is
    the Hessian part of double backward, but d(vᵀJ)/dv comes out zero."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.detach() * torch.cos(x)


class LinearDetachedW(Linear):
    """x @ W whose grad_x uses a detached W: d(grad_x)/dW is lost at second order."""

    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.detach().T, x.T @ g
