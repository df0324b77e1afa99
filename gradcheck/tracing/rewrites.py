"""``torch.nn.functional`` calls traced through a formulation of their own.

Some functions dispatch to ATen graphs the rule table cannot read although the
mathematics is a few rows: ``F.scaled_dot_product_attention``'s CPU path zeroes rows
that are wholly masked with ``any`` over a comparison with ``-inf``; ``F.cross_entropy``
indexes with labels it first rewrites with ``where`` (integer arithmetic on a gradient's
path). While a function is traced (:func:`rewriting`), a ``TorchFunctionMode`` answers
those calls with the same mathematics written in mapped ops: a class label picks its
log-probability through a comparison with ``arange`` (a one-hot mask: an ignored label
matches no class), the causal mask is a ``masked_fill`` with ``-inf``. Each rewrite is
tested against the function it stands for, in value and gradient
(``tests/test_tracing_ops.py``).
"""

from __future__ import annotations

import contextlib
import math

from .values import TraceError


def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
    """softmax(q kᵀ · scale + mask) v, as ``F.scaled_dot_product_attention``'s math."""
    import torch

    if dropout_p:
        raise TraceError("scaled_dot_product_attention with dropout_p > 0 is random: "
                         "trace it with dropout_p=0.0")
    if enable_gqa and q.shape[-3] != k.shape[-3]:
        raise TraceError("scaled_dot_product_attention with enable_gqa over unequal "
                         "head counts has no rewrite")
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * s
    length, source = q.shape[-2], k.shape[-2]
    if is_causal:
        keep = torch.ones(length, source, dtype=q.dtype).tril()
        scores = scores.masked_fill(keep == 0, -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, -1) @ v


def _classes(x, target):
    """The one-hot mask of ``target``'s labels over ``x``'s class axis (1): an ignored
    or out-of-range label matches no class."""
    import torch

    c = x.shape[1]
    shape = [1, c] + [1] * (x.ndim - 2)
    return torch.arange(c).view(shape) == target.unsqueeze(1)


def _weighted(x, weight):
    if weight is None:
        return None
    return weight.view([1, x.shape[1]] + [1] * (x.ndim - 2))


def _reduce(loss, reduction: str, count):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / count


def negative_log_likelihood(logp, target, weight=None, size_average=None,
                            ignore_index=-100, reduce=None, reduction="mean",
                            smoothing=0.0):
    """``F.nll_loss`` over log-probabilities ``logp`` (N, C, ...) and class labels."""
    import torch

    if size_average is not None or reduce is not None:
        raise TraceError("nll_loss's size_average and reduce are deprecated: pass reduction")
    onehot = _classes(logp, target)
    w = _weighted(logp, weight)
    picked = torch.where(onehot, logp if w is None else logp * w, 0.0).sum(1)
    valid = (target != ignore_index).to(logp.dtype)
    loss = -picked
    if smoothing:
        spread = -(logp if w is None else logp * w).sum(1) * valid
        loss = (1.0 - smoothing) * loss + (smoothing / logp.shape[1]) * spread
    if w is None:
        count = valid.sum()
    else:
        count = torch.where(onehot, w.expand(logp.shape), 0.0).sum()
    return _reduce(loss, reduction, count)


def cross_entropy(x, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """``F.cross_entropy``: class labels, or class probabilities (a float target)."""
    import torch

    logp = torch.log_softmax(x, 1)
    if target.dtype.is_floating_point:
        c = x.shape[1]
        target = target * (1.0 - label_smoothing) + label_smoothing / c \
            if label_smoothing else target
        w = _weighted(x, weight)
        loss = -((logp if w is None else logp * w) * target).sum(1)
        return _reduce(loss, reduction, loss.numel())
    return negative_log_likelihood(logp, target, weight, size_average, ignore_index,
                                   reduce, reduction, label_smoothing)


def _rewrites() -> dict:
    import torch
    import torch.nn.functional as F

    return {F.scaled_dot_product_attention: attention, F.cross_entropy: cross_entropy,
            F.nll_loss: negative_log_likelihood,
            torch._C._nn.scaled_dot_product_attention: attention}


@contextlib.contextmanager
def rewriting():
    """While tracing: the calls of :func:`_rewrites` answered by their formulation here."""
    from torch.overrides import TorchFunctionMode

    table = _rewrites()

    class Rewrite(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            own = table.get(func)
            return own(*args, **kwargs) if own is not None else func(*args, **kwargs)

    with Rewrite():
        yield
