"""The columns' functions of the activation and rounding rows (:mod:`.activations`):
SymPy meanings, NumPy forwards, torch calls, hazards, PyTorch's backward formulas as
NumPy VJPs, and the size of the terms their float formulas add (:mod:`.terms`).

Every VJP here is the formula of PyTorch's ``derivatives.yaml`` or of its CPU kernel
(``GeluKernel.cpp``, ``Activation.cpp``), so the rounding model sees the operations
PyTorch performs; the NumPy forwards are the accurate forms (erfc, expit, expm1), which
the numeric witness differentiates.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from ...base.shapes import ShapeError
from ..columns import _torch, cfunction, sympy
from ..elementwise.columns import sym_sigmoid, sym_softplus

SQRT_2_OVER_PI = math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5   # torch's kBeta, as written
KAPPA = 0.044715   # the cubic coefficient of gelu's tanh approximation, as torch's double


# ----------------------------------------------------------------------- step functions
# floor, ceil, round and trunc are constant between their jumps: derivative zero there
# (PyTorch's FloorBackward0... return zeros), and points are sampled away from the
# jumps. SymPy's own floor has no derivative (Derivative(floor(x), x) stays unevaluated)
# and it has no round-half-even nor trunc, so each is a SymPy function of its own: exact
# on numbers, derivative 0, printed by lambdify as NumPy's function (rint rounds half to
# even, as torch.round does).

_EXACT = {"floor": math.floor, "ceil": math.ceil, "round": round, "trunc": math.trunc}
_NUMPY_NAMES = {"floor": "floor", "ceil": "ceil", "round": "rint", "trunc": "trunc"}


@functools.lru_cache(maxsize=None)
def step_function(name: str):
    """The SymPy function class of the step row ``name`` (built on first use: SymPy is
    imported lazily)."""
    exact, np_name = _EXACT[name], _NUMPY_NAMES[name]

    def eval_(cls, a):
        if a.is_Rational or a.is_Float:   # round() of a Fraction rounds half to even
            return sympy.Integer(exact(Fraction(a.p, a.q) if a.is_Rational
                                       else Fraction(float(a))))
        return None

    def numpycode(self, printer):
        return f"{printer._module_format('numpy.' + np_name)}({printer._print(self.args[0])})"

    def evalf_(self, prec):
        a = self.args[0].evalf(prec)
        return eval_(None, a) if a.is_Number else None

    return type(name, (sympy.Function,), {
        "nargs": 1, "eval": classmethod(eval_), "_numpycode": numpycode,
        "_eval_evalf": evalf_,
        "fdiff": lambda self, argindex=1: sympy.S.Zero,
        "is_real": True, "__module__": __name__})


def sym_step(name: str) -> Callable[..., Any]:
    def meaning(x):
        return step_function(name)(x)

    meaning.__name__ = f"sym_{name}"
    return meaning


def integer_distance(x):
    """Distance to the nearest integer (where floor and ceil jump)."""
    x = np.asarray(x, dtype=float)
    return np.abs(x - np.rint(x))


def half_distance(x):
    """Distance to the nearest half-integer (where round jumps)."""
    return integer_distance(np.asarray(x, dtype=float) - 0.5)


def trunc_distance(x):
    """Distance to the nearest nonzero integer: trunc is 0 on all of (-1, 1)."""
    x = np.asarray(x, dtype=float)
    return np.where(np.abs(x) < 1, 1 - np.abs(x), integer_distance(x))


def zero_distance(x, *params):
    """Distance to 0 (elu's and leaky_relu's kink; the parameters do not move it)."""
    return np.abs(x)


def zero_vjp(g, ans, x):
    return np.zeros_like(g)


# ----------------------------------------------------------------------- two operands

def sym_rsqrt(x):
    return 1 / sympy.sqrt(x)


def sym_hypot(a, b):
    return sympy.sqrt(a ** 2 + b ** 2)


# These meanings hold no Piecewise whose condition reads the operands: nested in another
# condition, SymPy rewrites such conditions into boolean trees that grow with every level
# (an expanded logaddexp of logaddexps printed past Python's parser). Max, Min, Abs and
# Heaviside differentiate into steps instead, as clamp's meaning does.

def _decaying(d):
    """exp(-|d|): never overflows, nor does its derivative."""
    return sympy.exp(-sympy.Abs(d))


def sym_logaddexp(a, b):
    # log(exp(a) + exp(b)) as the larger plus log1p(exp(-|a - b|)): no overflow, and
    # log1p keeps the digits 1 + tiny would lose
    return sympy.Max(a, b) + cfunction("log1p")(_decaying(a - b))


@functools.lru_cache(maxsize=None)
def _xlogy():
    """SymPy's x·log(y) that is 0 at x == 0 whatever y (0·log 0 = 0, as torch.xlogy):
    printed as SciPy's xlogy; its derivatives are log(y) (the limit at x == 0 too, as
    PyTorch's backward computes it) and x/y."""

    def eval_(cls, x, y):
        if x.is_zero:
            return sympy.S.Zero
        return x * sympy.log(y) if x.is_Number and y.is_Number else None

    def fdiff(self, argindex=1):
        x, y = self.args
        return sympy.log(y) if argindex == 1 else x / y

    def numpycode(self, printer):
        x, y = (printer._print(a) for a in self.args)
        return f"{printer._module_format('scipy.special.xlogy')}({x}, {y})"

    def evalf_(self, prec):
        x, y = self.args
        return sympy.S.Zero if x.is_zero else (x * sympy.log(y)).evalf(prec)

    return type("xlogy", (sympy.Function,), {
        "nargs": 2, "eval": classmethod(eval_), "fdiff": fdiff, "_numpycode": numpycode,
        "_eval_evalf": evalf_,
        "is_real": True, "__module__": __name__})


def sym_xlogy(x, y):
    return _xlogy()(x, y)


def np_xlogy(x, y):
    from scipy.special import xlogy

    return xlogy(x, y)


def logaddexp_vjp(g, ans, a, b):
    # PyTorch: grad / (1 + exp(other - self)), which is expit(self - other) without the
    # overflow of exp
    from scipy.special import expit

    return g * expit(np.asarray(a) - np.asarray(b))


def xlogy_x(g, ans, x, y):
    # PyTorch: xlogy(grad, other).masked_fill((self == 0) & (other <= 0), 0)
    x, y = np.asarray(x), np.asarray(y)
    return np.where((x == 0) & (y <= 0), 0.0, np_xlogy(g, y))


# ----------------------------------------------------------------------- activations

def sym_gelu(x, approximate):
    if approximate == "tanh":
        # 0.5·x·(1 + tanh(z)) is x·sigmoid(2z): no 1 + tanh cancelling for x ≪ 0
        w = 2 * sympy.sqrt(2 / sympy.pi) * (x + sympy.Rational(KAPPA) * x ** 3)
        e, h = _decaying(w), sympy.Heaviside(w)   # sigmoid(w): 1/(1+e) for w > 0, else
        return x * (h + (1 - h) * e) / (1 + e)    # e/(1+e); never exp(|w|), w cubic
    # x·Φ(x) with Φ(x) = erfc(-x/√2)/2: accurate where 1 + erf(x/√2) cancels
    return x * sympy.erfc(-x / sympy.sqrt(2)) / 2


def gelu_shown(approximate) -> tuple[str, ...]:
    """gelu's derivative as printed (the row's ``shown``): Φ(x) + x·φ(x), or that of its
    tanh form, 0.5·(1 + tanh(u)) + 0.5·x·(1 - tanh(u)²)·u'."""
    if approximate == "tanh":
        u = f"sqrt(2 / pi) * (x + {KAPPA} * x ** 3)"
        return (f"(1 + tanh({u})) / 2 + x * (1 - tanh({u}) ** 2) * sqrt(2 / pi) * "
                f"(1 + {3 * KAPPA} * x ** 2) / 2",)
    return ("(1 + erf(x / sqrt(2))) / 2 + x * exp(-x ** 2 / 2) / sqrt(2 * pi)",)


def _phi(x):
    """The standard normal density."""
    return np.exp(-0.5 * np.square(x)) / math.sqrt(2 * math.pi)


def np_gelu(x, approximate):
    from scipy.special import erfc, expit

    if approximate == "tanh":
        return x * expit(2 * SQRT_2_OVER_PI * (x + KAPPA * x ** 3))
    return 0.5 * x * erfc(-x / math.sqrt(2))


def torch_gelu(x, approximate):
    return _torch().nn.functional.gelu(x, approximate=approximate)


def gelu_vjp(g, ans, x, approximate):
    """PyTorch's GeluBackward0 (GeluKernel.cpp), operation for operation."""
    from scipy.special import erf

    if approximate == "tanh":
        inner = SQRT_2_OVER_PI * (x + KAPPA * (x * x * x))
        t = np.tanh(inner)
        left, right = 0.5 * x, 1 + t
        right_derivative = left * (1 - t * t) * (SQRT_2_OVER_PI * (1 + 3 * KAPPA * (x * x)))
        return g * (0.5 * right + right_derivative)
    cdf = 0.5 * (1 + erf(x * math.sqrt(0.5)))
    return g * (cdf + x * _phi(x))


def gelu_terms(t, x, approximate):
    # 0.5·x·(1 + erf) (or 1 + tanh): the sum errs by a few u of 1, times 0.5·|x|
    return np.abs(x) + np.abs(t)


def gelu_vjp_terms(g, t, x, approximate):
    # cdf (1 + erf, or 1 + tanh) errs by a few u of 1; the product term x·pdf (x·(1 -
    # tanh²)·√(2/π)(1 + 3κx²)) by a few u of its size
    x = np.asarray(x, dtype=float)
    if approximate == "tanh":
        return np.abs(g) * (1 + np.abs(x) * (1 + x * x / 7))
    return np.abs(g) * (1 + np.abs(x) * _phi(x))


def _expit(x):
    from scipy.special import expit

    return expit(x)


def sym_silu(x):
    return x * sym_sigmoid(x)


def silu_vjp(g, ans, x):
    # PyTorch: dy * sigmoid * (1 + x * (1 - sigmoid)), sigmoid = 1 / (1 + exp(-x))
    s = _expit(x)
    return g * s * (1 + x * (1 - s))


def silu_vjp_terms(g, t, x):
    # 1 + x·(1 - s) cancels near x = -1.28 (where silu' = 0); 1 - s errs by u·|x| times
    return np.abs(g) * _expit(x) * (1 + np.abs(x))


def sym_mish(x):
    return x * sympy.tanh(sym_softplus(x))


def np_mish(x):
    return x * np.tanh(np.logaddexp(0.0, x))


def mish_vjp(g, ans, x):
    # PyTorch: dy * (tanh_sp + x * sigmoid * (1 - tanh_sp²)), tanh_sp = tanh(softplus(x))
    tsp = np.tanh(np.logaddexp(0.0, x))
    return g * (tsp + x * _expit(x) * (1 - tsp * tsp))


def mish_vjp_terms(g, t, x):
    # the two terms cancel near x = -1.19 (mish' = 0); 1 - tanh_sp² errs by a few u
    return np.abs(g) * (np.abs(np.tanh(np.logaddexp(0.0, x))) + np.abs(x) * _expit(x))


def sym_elu(x, alpha):
    # x for x > 0, alpha·expm1(x) below; expm1 of min(x, 0) never overflows
    zero = sympy.S.Zero
    return sympy.Max(x, zero) + sympy.Rational(alpha) * cfunction("expm1")(sympy.Min(x, zero))


def np_elu(x, alpha):
    return np.where(np.asarray(x) > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def elu_vjp(g, ans, x, alpha):
    # PyTorch (elu_backward, is_result false): grad where x > 0, else grad·alpha·exp(x)
    # (x == 0 takes the exponential side)
    return np.where(np.asarray(x) > 0, g, g * alpha * np.exp(np.minimum(x, 0)))


def sym_leaky_relu(x, slope):
    zero = sympy.S.Zero
    return sympy.Max(x, zero) + sympy.Rational(slope) * sympy.Min(x, zero)


def np_leaky_relu(x, slope):
    return np.where(np.asarray(x) > 0, x, slope * np.asarray(x))


def leaky_relu_vjp(g, ans, x, slope):
    # PyTorch: self > 0 ? grad : grad * negative_slope
    return np.where(np.asarray(x) > 0, g, g * slope)


def sym_hardtanh(x, lo, hi):
    # Max and Min, as clamp's meaning (SymPy differentiates them into steps)
    return sympy.Min(sympy.Max(x, sympy.Rational(lo)), sympy.Rational(hi))


def hardtanh_vjp(g, ans, x, lo, hi):
    # PyTorch: grad strictly inside (min_val, max_val), else 0: the bounds pass none
    # (unlike clamp's), nor does NaN
    x = np.asarray(x)
    return np.where((x > lo) & (x < hi), g, 0.0)


def same_shape(x, *params):
    """The shape rule of a one-operand row with parameters: the operand's shape (the
    default broadcast rule would read the parameters as shapes)."""
    return x


def hardtanh_shape(x, lo, hi):
    if lo > hi:
        raise ShapeError(f"needs lo <= hi, got lo={lo:g} and hi={hi:g}")
    return x


def torch_activation(fname: str, *keywords: str):
    """``torch.nn.functional.<fname>(x, **{keyword: parameter})``, the parameters in the
    row's order under torch's names (negative_slope, min_val, max_val)."""

    def call(x, *params):
        return getattr(_torch().nn.functional, fname)(x, **dict(zip(keywords, params)))

    call.__name__ = f"torch_{fname}"
    return call
