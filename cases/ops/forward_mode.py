"""Custom ops with a forward-mode rule of their own (``jvp``), for op.jvp: right ones, and
wrong twins whose backward is right and whose ``jvp`` is not, so only op.jvp catches
them. Written in the separate ``forward`` + ``setup_context`` style that torch.func
requires; forward-mode AD (``torch.autograd.forward_ad``) calls ``jvp`` with the
tangents of forward's inputs."""

import torch


class Sin(torch.autograd.Function):
    """sin(x): backward g·cos(x), jvp t·cos(x)."""

    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.x = x   # (jvp reads no saved tensors)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)

    @staticmethod
    def jvp(ctx, t):
        return t * torch.cos(ctx.x)


class SinJvpTwice(Sin):
    """WRONG: the tangent is twice J t (a stray factor 2 in the forward-mode rule only)."""

    @staticmethod
    def jvp(ctx, t):
        return 2 * t * torch.cos(ctx.x)


class Mul(torch.autograd.Function):
    """x * y: backward (g·y, g·x), jvp x_t·y + x·y_t."""

    @staticmethod
    def forward(x, y):
        return x * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y = inputs
        ctx.save_for_backward(x, y)
        ctx.x, ctx.y = x, y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x

    @staticmethod
    def jvp(ctx, x_t, y_t):
        return x_t * ctx.y + ctx.x * y_t


class MulForgetsY(Mul):
    """WRONG: the jvp forgets y's tangent (x_t·y only)."""

    @staticmethod
    def jvp(ctx, x_t, y_t):
        return x_t * ctx.y


class MatVec(torch.autograd.Function):
    """A @ x with its own jvp, A_t @ x + A @ x_t (sums over the inner axis)."""

    @staticmethod
    def forward(A, x):
        return A @ x

    @staticmethod
    def setup_context(ctx, inputs, output):
        A, x = inputs
        ctx.save_for_backward(A, x)
        ctx.A, ctx.x = A, x

    @staticmethod
    def backward(ctx, g):
        A, x = ctx.saved_tensors
        return torch.outer(g, x), A.mT @ g

    @staticmethod
    def jvp(ctx, A_t, x_t):
        return A_t @ ctx.x + ctx.A @ x_t


def sin_plain(x):
    """A plain function of PyTorch ops: PyTorch derives its forward mode."""
    return torch.sin(x) * x


class SinJvpRaises(Sin):
    """WRONG: claims forward mode (defines jvp) and raises in it."""

    @staticmethod
    def jvp(ctx, t):
        raise RuntimeError("tangent buffer not allocated")


# ======================================================================= order = 2


class Cos(torch.autograd.Function):
    """cos(x) as a Function of its own (a kernel the backward below calls): backward
    -g·sin(x), jvp -t·sin(x)."""

    @staticmethod
    def forward(x):
        return torch.cos(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.x = x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g * torch.sin(x)

    @staticmethod
    def jvp(ctx, t):
        return -t * torch.sin(ctx.x)


class CosJvpSign(Cos):
    """WRONG: its jvp has the wrong sign (t·sin(x)); its backward is right."""

    @staticmethod
    def jvp(ctx, t):
        return t * torch.sin(ctx.x)


class SinByCos(Sin):
    """sin(x) whose backward calls the Cos kernel: its second derivatives run through
    Cos's backward (reverse over reverse) or Cos's jvp (forward over reverse)."""

    kernel = Cos

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        return g * cls.kernel.apply(x)


class SinByCosJvpSign(SinByCos):
    """WRONG under forward-over-reverse only: its backward's kernel has a wrong jvp, so
    the Hessian-vector product forward mode takes through the backward is -(what it
    should be); reverse over reverse (op.double) goes through the kernel's backward,
    which is right."""

    kernel = CosJvpSign
