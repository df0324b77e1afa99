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


def _resampling(n_in: int, n_out: int, scale, mode: str, align_corners):
    """The (n_out, n_in) matrix of one axis of ``F.interpolate``: row i weighs the input
    positions output i reads (nearest: one 1; linear: two weights)."""
    import numpy as np

    a = np.zeros((n_out, n_in))
    ratio = (1.0 / scale) if scale else n_in / n_out
    for i in range(n_out):
        if mode == "nearest":
            a[i, min(int(np.floor(i * ratio)), n_in - 1)] = 1.0
        elif mode == "nearest-exact":
            a[i, min(int(np.floor((i + 0.5) * ratio)), n_in - 1)] = 1.0
        else:
            if align_corners:
                src = i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
            else:
                src = max((i + 0.5) * ratio - 0.5, 0.0)
            lo = min(int(np.floor(src)), n_in - 1)
            hi = min(lo + 1, n_in - 1)
            frac = src - lo
            a[i, lo] += 1.0 - frac
            a[i, hi] += frac
    return a


def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """``F.interpolate`` (nearest, nearest-exact, linear, bilinear) as products with
    constant resampling matrices, one an axis: the indices torch computes are constants
    that no row takes (``take`` reads integer inputs only)."""
    import torch

    spatial = x.ndim - 2
    modes = {"nearest": (1, 2), "nearest-exact": (1, 2), "linear": (1,), "bilinear": (2,)}
    if mode not in modes or spatial not in modes[mode] or antialias:
        raise TraceError(f"F.interpolate mode {mode!r} over {spatial} spatial axes has "
                         "no rewrite (nearest, nearest-exact, linear, bilinear)")
    sizes = list(size) if isinstance(size, (list, tuple)) else [size] * spatial
    scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) \
        else [scale_factor] * spatial
    if size is None:
        sizes = [int(math.floor(n * s)) for n, s in zip(x.shape[2:], scales)]
    if size is not None or recompute_scale_factor:
        scales = [None] * spatial
    kind = "nearest" if mode == "nearest" else mode if mode == "nearest-exact" else "linear"
    out = x
    for k in range(spatial):
        n_in = x.shape[2 + k]
        a = torch.tensor(_resampling(n_in, sizes[k], scales[k], kind, align_corners),
                         dtype=x.dtype)
        if k == spatial - 1:
            out = out @ a.t()
        else:   # the axis before last: (n_out, n_in) @ (..., n_in, W)
            out = a @ out
    return out


def _rewrites() -> dict:
    import torch
    import torch.nn.functional as F

    return {F.scaled_dot_product_attention: attention, F.cross_entropy: cross_entropy,
            F.nll_loss: negative_log_likelihood, F.interpolate: interpolate,
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
