"""The elementwise rows' columns: SymPy meanings, NumPy forwards, torch calls, hazards
and shapes (SymPy and torch imported when a column is first called)."""

from __future__ import annotations

import functools

import numpy as np

from ...base.shapes import ShapeError, broadcast
from ..columns import _torch, cfunction, sympy


def sym_sigmoid(x):
    # 1 / (1 + exp(-x)), written so that exp never overflows: the float64 reference
    # stays exact to rounding at any |x| (its derivative too).
    return sympy.Piecewise((1 / (1 + sympy.exp(-x)), x >= 0),
                           (sympy.exp(x) / (1 + sympy.exp(x)), True))


def sym_softplus(x):
    # log(1 + exp(x)) as x + log1p(exp(-x)) for x > 0 and log1p(exp(x)) otherwise: no
    # overflow, and no 1 + tiny rounding to 1 (softplus(-60) is 8.8e-27, not 0).
    log1p = cfunction("log1p")
    return sympy.Piecewise((x + log1p(sympy.exp(-x)), x > 0),
                           (log1p(sympy.exp(x)), True))


def abs_distance(x):
    return np.abs(x)


def pow_hazard(a, b):
    # A non-integer or negative exponent is singular (or undefined) at a zero base.
    b = np.asarray(b)
    if b.ndim == 0 and float(b) == int(b) and float(b) >= 0:
        return None
    return np.abs(a)


def np_erf(x):
    from scipy.special import erf

    return erf(x)


def np_sigmoid(x):
    from scipy.special import expit

    return expit(x)


def sym_where(c, a, b):
    return sympy.Piecewise((a, c), (b, True))


def sym_relu(x):
    return sympy.Piecewise((x, x > 0), (0, True))


def torch_softplus(x):
    # Above ``threshold`` PyTorch returns x itself, off by log1p(exp(-x)) ≈ e^-x: at its
    # default 20 that is 2e-9, below float32's rounding but not float64's; at 37, e^-37
    # = 8.5e-17 is below float64's unit roundoff and exp(37) far from overflow.
    torch = _torch()
    return torch.nn.functional.softplus(x, threshold=37.0 if x.dtype == torch.float64
                                        else 20.0)


# clamp(x, min=None, max=None) is min(max(x, lo), hi), in that order, as torch.clamp
# computes it (so lo > hi gives hi everywhere). lo and hi are the formula's constants,
# floats: their SymPy meaning is the float's exact binary value, as float64 torch uses.

def sym_clamp(x, lo, hi):
    # Max and Min, as the maximum and minimum rows: SymPy differentiates them into steps
    # (Heaviside) that lambdify prints; a Piecewise here would put x in its conditions,
    # and a Piecewise inside x (relu, where) would send SymPy through simplify()
    if lo is not None:
        x = sympy.Max(x, sympy.Rational(lo))
    return x if hi is None else sympy.Min(x, sympy.Rational(hi))


def np_clamp(x, lo, hi):
    if lo is not None:
        x = np.maximum(x, lo)
    return x if hi is None else np.minimum(x, hi)


def torch_clamp(x, lo, hi):
    return _torch().clamp(x, min=lo, max=hi)


def clamp_hazard(x, lo, hi):
    x = np.asarray(x, dtype=float)
    return np.minimum(np.inf if lo is None else np.abs(x - lo),
                      np.inf if hi is None else np.abs(x - hi))


def clamp_shape(x, lo, hi):
    if lo is None and hi is None:
        raise ShapeError("clamp() needs min= or max=")
    return x


# ----------------------------------------------------------------------- stop-gradient
# detach(x): x's value, derivative zero. A SymPy function of its own (built on first use:
# SymPy is imported lazily): a number is itself, its fdiff is 0 (so the chain rule gives
# 0 through it, at every order), evalf evaluates its argument, and lambdify prints it as
# its argument alone.

@functools.lru_cache(maxsize=None)
def stop_gradient_function():
    """The SymPy function class of detach."""
    def eval_(cls, a):
        return a if a.is_Number else None

    def numpycode(self, printer):
        return f"({printer._print(self.args[0])})"

    return type("detach", (sympy.Function,), {
        "nargs": 1, "eval": classmethod(eval_), "_numpycode": numpycode,
        "_eval_evalf": lambda self, prec: self.args[0].evalf(prec),
        "_eval_is_real": lambda self: self.args[0].is_real,
        "fdiff": lambda self, argindex=1: sympy.S.Zero, "__module__": __name__})


def sym_detach(x):
    return stop_gradient_function()(x)


def torch_detach(x):
    return x.detach()


# masked_fill(x, mask, value): value where the mask holds, else x (torch's
# x.masked_fill(mask, value), both broadcast); value is the formula's constant, its SymPy
# meaning the float's exact binary value.
def sym_masked_fill(x, mask, value):
    fill = sympy.Rational(value) if np.isfinite(value) else sympy.sign(value) * sympy.oo
    return sympy.Piecewise((fill, mask), (x, True))


def np_masked_fill(x, mask, value):
    return np.where(mask, np.asarray(value, dtype=np.result_type(x)), x)


def torch_masked_fill(x, mask, value):
    return _torch().masked_fill(x, mask, value)


def masked_fill_shape(x, mask, value):
    if value is None:
        raise ShapeError("masked_fill() needs its value: masked_fill(x, x > 0, 0.5)")
    return broadcast(x, mask)
