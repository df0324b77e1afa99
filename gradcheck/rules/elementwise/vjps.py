"""The elementwise rows' engine column: PyTorch's backward formulas as NumPy VJPs, and the
choosers of PyTorch's grad_fn names where one row records several node classes."""

from __future__ import annotations

import math

import numpy as np

from ..vjps import is_number


def sub_name(a, b):
    return "RsubBackward1" if is_number(a) else "SubBackward0"


def pow_name(a, b):
    # x ** 2, 2 ** x, x ** y: three overloads, three nodes in PyTorch.
    return ("PowBackward0" if is_number(b) else "PowBackward2" if is_number(a)
            else "PowBackward1")


def pow_base(g, ans, a, b):
    # b * a**(b-1), and 0 where b == 0 (PyTorch's convention; a**-1 is inf at a == 0).
    if np.ndim(b) == 0 and b != 0:
        # a constant exponent, not 0 (a NaN one included): np.where would copy every
        # element of b * a**(b-1), the same bits; and a**1 is a itself (IEEE pow is
        # exact there, -0, inf and NaN included): a square's, the commonest, has no pow
        # (at a layer's size the rounding bounds call this VJP hundreds of times)
        return g * (b * (a if b - 1 == 1 else a ** (b - 1)))
    return g * np.where(b == 0, 0.0, b * a ** (b - 1))


def pow_exponent(g, ans, a, b):
    # a**b * log(a), and 0 where a == 0 and b >= 0 (PyTorch's convention).
    return g * np.where((a == 0) & (b >= 0), 0.0, ans * np.log(a))


def share(a, b):
    """a's share of maximum(a, b)'s cotangent: 1 where a wins, 1/2 on a tie (PyTorch)."""
    return (a > b) + (a == b) / 2


def identity_vjp(g, ans, a, b):
    return g


SQRT_PI = math.sqrt(math.pi)


def clamp_vjp(g, ans, x, lo, hi):
    # PyTorch's: g where lo <= x <= hi (the bounds themselves pass the gradient)
    inside = np.ones(np.shape(x), dtype=bool)
    if lo is not None:
        inside &= x >= lo
    if hi is not None:
        inside &= x <= hi
    return np.where(inside, g, 0.0)


def atan2_recip(y, x):
    # PyTorch's atan2 backward: 1 / (y² + x²), taken as 0 where that is 0 (so the
    # gradient at the origin, or where the squares underflow, is a signed zero)
    d = y * y + x * x
    with np.errstate(divide="ignore"):
        return np.where(d == 0, 0, 1 / d)
