"""The rounding bounds' probes and the pow VJP, written to do less work, give the bits
of the formulas they replace: the per-element probe scale and move computed once and in
place (gradcheck.bounds.elementwise.own_scales, _moved), and a constant exponent's VJP
without np.where, a square's without pow (gradcheck.rules.elementwise.vjps.pow_base)."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.bounds.elementwise import PERTURBATION, _moved, own_scales
from gradcheck.rules.elementwise.vjps import pow_base

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -1e-310, 1e300, -1e300]


def _same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)                        # (NaN where NaN)
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))   # (-0 where -0)


def _values(dtype=np.float64):
    rng = np.random.default_rng(0)
    with np.errstate(over="ignore"):   # (1e300 is inf in float32)
        return np.concatenate([rng.standard_normal(200) * 10, SPECIALS]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("b", [2.0, np.asarray(2.0), np.float64(2.0), 2, np.float32(2.0),
                               3.0, 0.5, np.asarray(-0.5), -1.0, 2.000001907348633,
                               np.nan, 0.0, np.asarray(0.0), "tensor"])
def test_pow_base_is_the_formula_as_written(dtype, b):
    a = _values(dtype)
    g = np.random.default_rng(1).standard_normal(a.size).astype(dtype)
    if isinstance(b, str):   # a tensor exponent, 0 at some elements
        b = np.where(np.arange(a.size) % 3 == 0, 0.0, 2.0).astype(dtype)
    with np.errstate(all="ignore"):
        _same(pow_base(g, None, a, b), g * np.where(b == 0, 0.0, b * a ** (b - 1)))


def _old_scales_and_move(value, e, u):
    v = np.abs(value)
    ep = e + u * v
    with np.errstate(all="ignore"):
        rel = ep / np.maximum(np.maximum(v, ep), 1e-300)
    s = PERTURBATION / np.maximum(rel, PERTURBATION * u)
    moved = np.array(s * (e + u * np.abs(value)), dtype=float)
    moved *= np.where(value < 0, -1.0, 1.0)
    return s, moved + value


@pytest.mark.parametrize("shape", [(), (209,), (11, 19)])
def test_own_scales_and_the_move_are_the_formulas_as_written(shape):
    u = 2.0 ** -53
    size = int(np.prod(shape))
    value = _values()[:size].reshape(shape) if size > 1 else np.asarray(-3.5)
    rng = np.random.default_rng(2)
    e = np.abs(rng.standard_normal(np.shape(value))) * 10.0 ** rng.integers(-20, 2, np.shape(value))
    if size > 1:
        e.flat[:3] = [0.0, np.inf, np.nan]
    s_old, moved_old = _old_scales_and_move(value, e, u)
    with np.errstate(all="ignore"):
        s, moves = own_scales(value, e, u)
        _same(s, s_old)
        _same(_moved(value, e, s, False, u, moves), moved_old)
        _same(_moved(value, e, s, False, u), moved_old)   # (without the move handed in)
