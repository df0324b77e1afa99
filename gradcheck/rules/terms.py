"""A row's own rounding as the rounding model reads it (:mod:`gradcheck.bounds.model`): ρ
units of u of the result (the row's ``rounding``, a number), or, where the row's float
formula adds terms that cancel, of the size of those terms (:class:`Terms`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Terms:
    """A row's own rounding where its float formula adds terms that cancel, so that the
    error is relative to the terms rather than to the result: gelu computes
    ``0.5·x·(1 + erf(x/√2))``, whose ``1 + erf`` loses every digit for x ≪ 0 (torch's
    float32 gelu(-5) is 17% off). The forward errs by ``rho``·u·``value(t, *args,
    *params)`` (None: |t|), the VJP into argument k by (2·``rho`` + 1)·u·``vjps[k](g, t,
    *args, *params)`` (missing or None: |VJP|, as for a plain ρ)."""

    rho: float
    value: Callable[..., Any] | None = None
    vjps: tuple[Callable[..., Any] | None, ...] = ()


def rho(rule) -> float:
    """ρ of the row (its ``rounding``, or its Terms' ``rho``)."""
    return getattr(rule.rounding, "rho", rule.rounding)


def value_rounding(rule, t, args, params, u: float, eta: float) -> np.ndarray:
    """The forward's own rounding error: ρ·u·|t|, or ρ·u times the row's terms' size,
    plus η (underflow) where ρ is not 0; a library function's (ρ >= 2) result below
    the dtype's smallest normal at least |t|."""
    size = getattr(rule.rounding, "value", None)
    r = rho(rule)
    if size is None:   # |t|, a fresh array: scaled in place
        size = np.abs(np.asarray(t, dtype=float))
        size *= r * u
    else:
        size = r * u * np.asarray(size(t, *args, *(v for _, v in params)), dtype=float)
    size += eta if r else 0.0
    infinite = np.isinf(np.asarray(t, dtype=float))
    if infinite.any():   # ±inf (masked_fill's -inf) is held exactly: it rounds nothing
        size = np.where(infinite, 0.0, size)
    if r >= 2 and eta:
        # a library function's result in the subnormals (below the smallest normal,
        # η/u) keeps no digit it can vouch for: torch's silu(-100) in float32 divides by
        # exp(100) = inf and returns -0 where the exact value is -3.7e-42
        t = np.abs(np.asarray(t, dtype=float))
        tiny = t < eta / u
        if tiny.any():
            size = np.where(tiny, np.maximum(size, t), size)
    return size


def vjp_size(rule, k: int, g, t, args, params, c) -> np.ndarray:
    """The size the VJP into argument ``k`` (``c``) rounds relative to: |c|, or the row's
    terms'; a fresh array of c's shape (the caller scales it in place). Rows with Terms
    are elementwise, so ``g`` may carry a batch of cotangents in front as it is."""
    sizes = getattr(rule.rounding, "vjps", ())
    if k >= len(sizes) or sizes[k] is None:
        return np.abs(np.asarray(c, dtype=float))
    size = sizes[k](g, t, *args, *(v for _, v in params))
    return np.array(np.broadcast_to(size, np.shape(c)), dtype=float)
