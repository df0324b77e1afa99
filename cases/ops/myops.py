"""Custom autograd ops of the kind a project writes by hand, and deliberately wrong
versions of them, one per kind of bug gradcheck diagnoses.

``cases/ops/ops.toml`` checks each op against the formula it claims to compute. The
correct ops come first; the wrong ones (``expect = "fail"`` there) follow, each a copy of
a correct op with one realistic mistake in its backward.
"""

import torch

import gradcheck.engine as engine

# =========================================================================== correct ops


class Swish(torch.autograd.Function):
    """x * sigmoid(x), saving x for a hand-written backward.

    The backward is written with differentiable torch ops on the saved input, so autograd
    can differentiate it again: double backward (``order = 2``) works.
    """

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))


class Linear(torch.autograd.Function):
    """A fused linear layer ``x @ W + b``: x is [batch, in], W is [in, out], b is [out]
    (broadcast over the batch, so its gradient is summed over the batch)."""

    @staticmethod
    def forward(ctx, x, W, b):
        ctx.save_for_backward(x, W)
        return torch.addmm(b, x, W)

    @staticmethod
    def backward(ctx, grad_output):
        x, W = ctx.saved_tensors
        grad_x = grad_output @ W.T
        grad_W = x.T @ grad_output
        grad_b = grad_output.sum(dim=0)
        return grad_x, grad_W, grad_b


class StraightThroughRound(torch.autograd.Function):
    """Rounds to the nearest integer; the backward passes the gradient straight through
    (the straight-through estimator of quantization-aware training).

    The gradient it implements is that of the surrogate ``x``, not of ``round`` (whose
    derivative is zero almost everywhere): the surrogate is the formula it claims.
    """

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class Clamp(torch.autograd.Function):
    """``x`` clamped to ``[lo, hi]`` (two plain floats after the tensor), with its true
    piecewise derivative: 1 inside the interval, 0 outside. The bounds are not tensors,
    so backward returns ``None`` for them."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        inside = (x > lo) & (x < hi)
        ctx.save_for_backward(inside)
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, grad_output):
        (inside,) = ctx.saved_tensors
        return grad_output * inside, None, None


class LeakyReLU(torch.autograd.Function):
    """``x`` where positive, ``negative_slope * x`` elsewhere; the slope is a plain float
    argument after the tensor (``args`` in the case file)."""

    @staticmethod
    def forward(ctx, x, negative_slope):
        ctx.save_for_backward(x)
        ctx.negative_slope = negative_slope
        return torch.where(x > 0, x, negative_slope * x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        slope = torch.where(x > 0, 1.0, ctx.negative_slope).to(grad_output.dtype)
        return grad_output * slope, None


class SinCos(torch.autograd.Function):
    """Two outputs from one input: ``(sin x, cos x)``. Backward receives one
    grad_output per output and adds their contributions."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x), torch.cos(x)

    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        (x,) = ctx.saved_tensors
        return grad_sin * torch.cos(x) - grad_cos * torch.sin(x)


class WeightedSquare(torch.autograd.Function):
    """``w * x ** 2`` with fixed weights ``w`` (``requires_grad = false`` in the case
    file): backward returns ``None`` for w, as ``ctx.needs_input_grad`` says."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return w * x ** 2

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        grad_x = 2 * w * x * grad_output if ctx.needs_input_grad[0] else None
        grad_w = x ** 2 * grad_output if ctx.needs_input_grad[1] else None
        return grad_x, grad_w


class EngineSoftplus(engine.Function):
    """``log(1 + exp(x))`` as a ``gradcheck.engine.Function`` (the same protocol as
    torch's, on gradcheck's NumPy engine): its derivative is sigmoid(x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return engine.softplus(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * engine.sigmoid(x)


def log_softmax(x):
    """A plain callable: log-softmax over the last axis, composed of torch ops (autograd
    differentiates it; gradcheck checks the composition against the formula)."""
    return x - torch.logsumexp(x, dim=-1, keepdim=True)


# =========================================================================== wrong ops
# Each is a correct op above with one mistake in its backward; the comment says which
# diagnosis gradcheck gives it.


class SwishSignFlipped(Swish):
    """Sign flipped: returns minus the gradient (e.g. a loss written as a reward)."""

    @staticmethod
    def backward(ctx, grad_output):
        return -Swish.backward(ctx, grad_output)


class SwishNoGradInBackward(Swish):
    """Swish whose backward computes the derivative under ``torch.no_grad()``: the first
    derivative is right, but autograd cannot differentiate it again, so double backward
    (``order = 2``) silently gives zero instead of the second derivative."""

    @staticmethod
    def backward(ctx, grad_output):
        with torch.no_grad():
            return Swish.backward(ctx, grad_output)


class HalfSquareTwice(torch.autograd.Function):
    """``x ** 2 / 2`` whose backward forgot the 1/2: ``2 * x`` instead of ``x``
    (off by a constant factor, 2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2 / 2

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_output


class RowSumSquaresMean(torch.autograd.Function):
    """``sum(x ** 2, axis=1)`` whose backward divides by the row length, as if the
    forward were a mean (off by the factor 1/n, mean instead of sum)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x ** 2).sum(dim=1)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_output[:, None] / x.shape[1]


class MulSwapped(torch.autograd.Function):
    """``x * y`` whose backward returns the gradient of y for x and of x for y
    (``grad * x`` is the gradient of y)."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return grad_output * x, grad_output * y


class LinearTransposedW(Linear):
    """The linear layer with ``grad_W`` computed as ``grad_output.T @ x``: the
    transpose of ``x.T @ grad_output``. Only a square W lets it through autograd's
    shape check, which is where the bug hides."""

    @staticmethod
    def backward(ctx, grad_output):
        x, W = ctx.saved_tensors
        return grad_output @ W.T, grad_output.T @ x, grad_output.sum(dim=0)


class LinearBiasNotSummed(Linear):
    """The linear layer returning the bias gradient with the batch shape, not summed
    back over the broadcast batch axis. PyTorch's autograd sums a returned gradient
    that expands to its input's shape, so the values reaching ``b.grad`` are right:
    only the raw return of backward (op.shapes) shows the bug, which a caller of
    backward outside autograd (or another framework) would get."""

    @staticmethod
    def backward(ctx, grad_output):
        x, W = ctx.saved_tensors
        return grad_output @ W.T, x.T @ grad_output, grad_output


class TanhIgnoresGradOutput(torch.autograd.Function):
    """``tanh(x)`` whose backward returns the derivative ``1 - tanh(x) ** 2`` without
    multiplying by grad_output: the Jacobian's row sums."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return 1 - y ** 2


class LeakyReLUWrongSlope(LeakyReLU):
    """The leaky ReLU whose backward uses ReLU's slope (0) on the negative side: right
    where x > 0, wrong elsewhere (a wrong branch of a piecewise function)."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x > 0).to(grad_output.dtype), None
