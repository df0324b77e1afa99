"""What every family's engine column shares: :func:`engine_rule`, and the pieces several
families' VJPs use (a reduction's cotangent with its axes kept, the product of the
others). Each family's own VJPs are in its folder (``elementwise/vjps.py``...)."""

from __future__ import annotations

import numbers

import numpy as np

from .row import EngineRule


def engine_rule(grad_fn, *vjps, saves=True) -> EngineRule:
    return EngineRule(grad_fn, vjps, saves)


def is_number(v) -> bool:
    """A Python number: PyTorch keeps it out of the graph (``x ** 2``, ``2 - x``)."""
    return isinstance(v, numbers.Number)


def ndim(v) -> int:
    return np.ndim(getattr(v, "data", v))


def keep(g, axis, keepdims):
    """A reduction's cotangent with the reduced axes put back (size 1) to broadcast."""
    return g if keepdims else np.expand_dims(g, axis)


def others_product(x, axis):
    """Product of the other elements along ``axis`` for each element (exact at zeros)."""
    axis = tuple(axis)
    rest = [d for d in range(np.ndim(x)) if d not in axis]
    moved = np.transpose(x, rest + list(axis))
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    ones = np.ones_like(flat[..., :1])
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)
    return np.transpose((left * right[..., ::-1]).reshape(moved.shape),
                        np.argsort(rest + list(axis)))


