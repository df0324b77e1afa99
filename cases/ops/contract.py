"""Custom autograd Functions right on the path the other op checks take (contiguous
tensors, every input requiring grad, separate tensors) and wrong on another path
autograd takes through them, each beside its right version (``cases/ops/contract.toml``):

- a backward that flattens grad_output with ``.view(-1)``, which raises for a strided
  or transposed grad_output (op.contract);
- a backward that reads grad_output's memory as if it were contiguous (op.contract);
- a backward that packs its gradients by ``ctx.needs_input_grad``, so that with only
  the weight requiring grad its gradient lands in the input's slot (op.contract);
- a Gram matrix whose fast path for one tensor passed twice returns the gradient of
  one slot only (op.contract);
- a forward that reads its input's memory as if it were contiguous (op.layout catches
  it: its inputs laid out otherwise).
"""

from __future__ import annotations

import torch


def _contiguous_view(t):
    """``t``'s memory read as a contiguous tensor of its shape, whatever its strides: what
    a kernel handed ``t.data_ptr()`` reads (wrong unless ``t`` is contiguous)."""
    strides, step = [], 1
    for n in reversed(t.shape):
        strides.append(step)
        step *= n
    return torch.as_strided(t, t.shape, tuple(reversed(strides)), t.storage_offset())


# ======================================================================= flat kernels


class FlatSilu(torch.autograd.Function):
    """x · sigmoid(x), forward and backward on the flattened tensor (as a 1-D kernel
    takes it); grad_output flattened with ``reshape``, which copies where it must."""

    @staticmethod
    def forward(ctx, x):
        flat = x.reshape(-1)
        ctx.save_for_backward(flat)
        return (flat * torch.sigmoid(flat)).reshape(x.shape)

    @staticmethod
    def backward(ctx, grad_output):
        (flat,) = ctx.saved_tensors
        s = torch.sigmoid(flat)
        g = grad_output.reshape(-1)
        return (g * (s + flat * s * (1 - s))).reshape(grad_output.shape)


class FlatSiluView(FlatSilu):
    """Wrong: flattens grad_output with ``.view(-1)``, which raises for a grad_output
    that is not contiguous (a transposed or strided one autograd hands it)."""

    @staticmethod
    def backward(ctx, grad_output):
        (flat,) = ctx.saved_tensors
        s = torch.sigmoid(flat)
        g = grad_output.view(-1)
        return (g * (s + flat * s * (1 - s))).reshape(grad_output.shape)


class FlatSiluRawGrad(FlatSilu):
    """Wrong: reads grad_output's memory as contiguous (a kernel given its data
    pointer): right for a contiguous grad_output only."""

    @staticmethod
    def backward(ctx, grad_output):
        (flat,) = ctx.saved_tensors
        s = torch.sigmoid(flat)
        g = _contiguous_view(grad_output).reshape(-1)
        return (g * (s + flat * s * (1 - s))).reshape(grad_output.shape)


class RowScale(torch.autograd.Function):
    """x · s[:, None] (a per-row scale), read through a contiguous copy of x."""

    @staticmethod
    def forward(ctx, x, s):
        x = x.contiguous()
        ctx.save_for_backward(x, s)
        return x * s[:, None]

    @staticmethod
    def backward(ctx, grad_output):
        x, s = ctx.saved_tensors
        return grad_output * s[:, None], (grad_output * x).sum(1)


class RowScaleRawInput(RowScale):
    """Wrong: reads x's memory as contiguous (a kernel given its data pointer): right
    for a contiguous x only; op.layout gives it a strided and a transposed one."""

    @staticmethod
    def forward(ctx, x, s):
        x = _contiguous_view(x)
        ctx.save_for_backward(x, s)
        return x * s[:, None]


class RowScaleLastStride(RowScale):
    """Wrong: takes x as dense where its innermost stride is 1 (a kernel that checks
    ``x.stride(-1) == 1`` for "contiguous"), copying it otherwise: right for a contiguous,
    a strided and a transposed x; an x broadcast along its rows (strides (0, 1), one row
    of memory) is read past its memory's end. op.layout's expanded inputs catch it."""

    @staticmethod
    def forward(ctx, x, s):
        x = _contiguous_view(x) if x.stride(-1) == 1 else x.contiguous()
        ctx.save_for_backward(x, s)
        return x * s[:, None]


# ======================================================================= needs_input_grad


class Scale(torch.autograd.Function):
    """x · w (w one weight per feature, broadcast over the rows), computing only the
    gradients asked for (``ctx.needs_input_grad``), None for the others."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        gx = grad_output * w if ctx.needs_input_grad[0] else None
        gw = (grad_output * x).sum(0) if ctx.needs_input_grad[1] else None
        return gx, gw


class ScalePackedGrads(Scale):
    """Wrong: returns the gradients asked for packed in order, so that with x not
    requiring grad w's gradient lands in x's slot (which autograd drops) and w gets
    None. Right whenever x requires grad."""

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        grads = []
        if ctx.needs_input_grad[0]:
            grads.append(grad_output * w)
        if ctx.needs_input_grad[1]:
            grads.append((grad_output * x).sum(0))
        return tuple(grads) + (None,) * (2 - len(grads))


# ======================================================================= aliasing


class Gram(torch.autograd.Function):
    """a @ bᵀ (the similarities of rows), with a fast path for a Gram matrix of one
    tensor (``a is b``: one product, symmetric)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        ctx.same = a is b
        return a @ b.mT

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        if ctx.same:   # both slots hold a: autograd sums what each slot returns
            half = (grad_output + grad_output.mT) @ a / 2
            return half, half
        return grad_output @ b, grad_output.mT @ a


class GramSameOnce(Gram):
    """Wrong: for one tensor passed twice, returns its whole gradient through the first
    slot and the same again through the second, counting it twice (it meant None
    there)."""

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        if ctx.same:
            whole = (grad_output + grad_output.mT) @ a
            return whole, whole
        return grad_output @ b, grad_output.mT @ a
