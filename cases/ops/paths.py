"""Ops checked along the other paths autograd takes through them (cases/ops/paths.toml):
under torch.func.vmap (op.vmap), for torch.library ops through torch.library's
registrations (op.registration), and under torch.compile (op.compile). Each right op is
followed by a wrong twin that is right on every plain forward and backward and wrong
only on its path."""

import math

import torch


# =========================================================================== vmap


def _softmax_backward(ctx, g):
    (y,) = ctx.saved_tensors
    return y * (g - (g * y).sum(-1, keepdim=True))


class Softmax(torch.autograd.Function):
    """Softmax over the last axis, ready for torch.func: forward without ctx,
    setup_context, and a vmap staticmethod that moves the batch axis first (the last
    axis stays the one normalised)."""

    @staticmethod
    def forward(x):
        return torch.softmax(x, -1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    backward = staticmethod(_softmax_backward)

    @staticmethod
    def vmap(info, in_dims, x):
        if in_dims[0] is None:
            return Softmax.apply(x), None
        return Softmax.apply(x.movedim(in_dims[0], 0)), 0


class SoftmaxBatchLast(torch.autograd.Function):
    """Wrong: the vmap staticmethod moves the batch axis last, so under vmap the op
    normalises over the batch (every plain call is right)."""

    @staticmethod
    def forward(x):
        return torch.softmax(x, -1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    backward = staticmethod(_softmax_backward)

    @staticmethod
    def vmap(info, in_dims, x):
        if in_dims[0] is None:
            return SoftmaxBatchLast.apply(x), None
        return SoftmaxBatchLast.apply(x.movedim(in_dims[0], -1)), -1


# =========================================================================== torch.library


def _keep_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _swish_backward(ctx, g):
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(x)
    return g * (s + x * s * (1 - s))


@torch.library.custom_op("gradcheck_paths::swish", mutates_args=())
def swish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


@swish.register_fake
def _(x):
    return torch.empty_like(x)


swish.register_autograd(_swish_backward, setup_context=_keep_input)


@torch.library.custom_op("gradcheck_paths::swish_fake_shape", mutates_args=())
def swish_fake_shape(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


@swish_fake_shape.register_fake
def _(x):
    """Wrong: the fake drops the last axis, as a reduction's would (torch.compile then
    plans for a tensor of another shape than the kernel returns)."""
    return x.new_empty(x.shape[:-1])


swish_fake_shape.register_autograd(_swish_backward, setup_context=_keep_input)


# =========================================================================== torch.compile


def _gelu_forward(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def _keep_x(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _gelu_erf_derivative(x):
    """d/dx of x·Φ(x): Φ(x) + x·φ(x)."""
    return (0.5 * (1 + torch.erf(x / math.sqrt(2)))
            + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))


class Gelu(torch.autograd.Function):
    """GELU in its erf form: x·Φ(x), and its own derivative in backward."""

    forward = staticmethod(_gelu_forward)
    setup_context = staticmethod(_keep_x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _gelu_erf_derivative(x)


class GeluTanhBackwardUnderCompile(torch.autograd.Function):
    """Wrong: under torch.compile, backward takes a "faster" branch, the derivative of
    the tanh approximation of GELU, for the erf forward (a gap of up to ~1e-3; eager
    calls are right). Such a branch is how a kernel picked only when compiling, or a
    compile-only fast path, reaches a model: every eager check passes it."""

    forward = staticmethod(_gelu_forward)
    setup_context = staticmethod(_keep_x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if torch.compiler.is_compiling():
            k, c = math.sqrt(2 / math.pi), 0.044715
            t = torch.tanh(k * (x + c * x ** 3))
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x))
        return g * _gelu_erf_derivative(x)


class Mul(torch.autograd.Function):
    """x * y, its backward the two products: under torch.compile with one tensor in
    both slots, the gradient must be the sum of the slots' (2·x·v)."""

    @staticmethod
    def forward(x, y):
        return x * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x
