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
        # Built in grad_output's dtype: torch.where(x > 0, 1.0, slope) would make a
        # float32 tensor of two Python floats, rounding the slope even in a float64 run.
        slope = torch.where(x > 0, torch.ones_like(grad_output),
                            torch.full_like(grad_output, ctx.negative_slope))
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


# Right by PyTorch's contract for backward, though backward's own return is not one
# exact gradient per input: autograd sums a gradient of a shape its input broadcasts to,
# drops trailing Nones and discards a gradient for an input that needs none. op.shapes
# notes each of these; strict_shapes = true makes them failures.


class BiasTanh(torch.autograd.Function):
    """A fused ``tanh(x + b)``, b broadcast over the batch: backward returns the bias
    gradient with the batch axis, as for x, and leaves the sum over it to autograd."""

    @staticmethod
    def forward(ctx, x, b):
        y = torch.tanh(x + b)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        grad = grad_output * (1 - y * y)
        return grad, grad


class BatchedLinear(torch.autograd.Function):
    """``x @ W`` for a batch of matrices x [batch, n, in] and one W [in, out]: backward
    returns grad_W per batch element, x[k]ᵀ @ grad_output[k] ([batch, in, out]); autograd
    sums it over the batch to W's shape."""

    @staticmethod
    def forward(ctx, x, W):
        ctx.save_for_backward(x, W)
        return x @ W

    @staticmethod
    def backward(ctx, grad_output):
        x, W = ctx.saved_tensors
        return grad_output @ W.T, x.transpose(-1, -2) @ grad_output


class RMSNorm(torch.autograd.Function):
    """RMS normalization ``x / sqrt(mean(x**2) + eps) * g`` over the last axis, ``eps`` a
    defaulted keyword of forward. backward returns one gradient per forward parameter,
    the None for eps included, whether the caller passed eps or not (autograd drops a
    trailing None beyond the arguments given).

    With r = (mean(x²) + eps)^(-1/2) and h = grad_output · g along a row of n elements:
    ∂/∂x_j Σ_i h_i x_i r = r h_j - r³ x_j (Σ_i h_i x_i) / n, since ∂r/∂x_j = -r³ x_j / n.
    """

    @staticmethod
    def forward(ctx, x, g, eps=1e-6):
        r = torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)
        ctx.save_for_backward(x, g, r)
        return x * r * g

    @staticmethod
    def backward(ctx, grad_output):
        x, g, r = ctx.saved_tensors
        h = grad_output * g
        n = x.shape[-1]
        grad_x = r * h - r ** 3 * x * (h * x).sum(dim=-1, keepdim=True) / n
        grad_g = (grad_output * x * r).sum(dim=0)
        return grad_x, grad_g, None


class WeightedSquareBothGrads(WeightedSquare):
    """``w * x ** 2`` whose backward computes both gradients without looking at
    ``ctx.needs_input_grad``: w's is computed for nothing when w needs none, and
    autograd discards it."""

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        return 2 * w * x * grad_output, x ** 2 * grad_output


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
    that expands to its input's shape, so the values reaching ``b.grad`` are right and
    the op is right by PyTorch's contract (op.shapes notes it). Only a caller of
    backward outside autograd (or another framework) gets the unsummed gradient: with
    ``strict_shapes = true`` op.shapes fails it."""

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


class CubeLoopOffByOne(torch.autograd.Function):
    """``x ** 3`` whose backward fills the gradient in a loop that stops one element
    short (``range(n - 1)``): the last element keeps its initial zero (a few fixed wrong
    indices, the same at every point)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad = torch.zeros_like(x)
        for i in range(x.shape[0] - 1):
            grad[i] = 3 * x[i] ** 2 * grad_output[i]
        return grad


class ErfRoundedConstant(torch.autograd.Function):
    """``erf(x)`` whose backward writes 2/sqrt(pi) = 1.1283792 as 1.13: 0.14% off at every
    element (a small systematic relative error)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.erf(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 1.13 * torch.exp(-x * x) * grad_output


class TanhOverflow(torch.autograd.Function):
    """``tanh(x)`` whose backward writes sech(x)**2 as 4 e^(2x) / (e^(2x) + 1)**2: e^(2x)
    overflows for large x (above 355 in float64, 44 in float32), giving inf / inf = NaN
    where the exact gradient is (nearly) zero."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        e = torch.exp(2 * x)
        return 4 * e / (e + 1) ** 2 * grad_output


class LogCoshGuard(torch.autograd.Function):
    """``log(cosh(x))``, computed stably as |x| + log1p(e^(-2|x|)) - log 2, whose backward
    guards large |x| (where cosh would overflow) by returning 0 there, the limit of the
    second derivative, not of the first (sign(x)): wrong exactly where |x| > 20."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        a = x.abs()
        return a + torch.log1p(torch.exp(-2 * a)) - 0.6931471805599453

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.where(x.abs() > 20, torch.zeros_like(x), torch.tanh(x)) * grad_output


class SquareAccumulatingBuffer(torch.autograd.Function):
    """``x ** 2`` whose backward adds its result into a buffer made in forward and returns
    the buffer: right on the first backward, but each later backward through the same
    graph returns the sum of all so far (state modified in place)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.buffer = torch.zeros_like(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        ctx.buffer += 2 * x * grad_output
        return ctx.buffer.clone()


class SinCosOneCotangent(SinCos):
    """The two-output sin/cos op whose backward takes the cotangents as alternatives: it
    uses grad_cos only when grad_sin is all zero. Every one-hot v (the Jacobian) is
    right; a v with both outputs' cotangents non-zero loses the cos term (cross terms)."""

    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        (x,) = ctx.saved_tensors
        if grad_sin.any():
            return grad_sin * torch.cos(x)
        return -grad_cos * torch.sin(x)
