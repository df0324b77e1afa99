"""The primitive table: one row per primitive, the single place a primitive is defined.

Each row holds, for one operation of the expression language:

- ``sympy``: its meaning as a SymPy expression. For elementwise rows a function of SymPy
  scalars; for reductions and linear algebra a function of NumPy *object* arrays whose
  elements are SymPy scalars (NumPy supplies broadcasting, matmul and axis handling).
  The symbolic reference differentiates what this column builds, so derivatives come
  from SymPy's own calculus, never from this table.
- ``numpy``: its float forward on NumPy arrays (the numeric witness differentiates this
  by finite differences; sampling evaluates it to find kinks and singularities).
- ``torch``: the same operation in PyTorch, as a user would write it.
- ``hazard``: distance of the arguments to the nearest kink or singularity of the
  operation (zero of a denominator, edge of a domain, switch of a branch), or ``None``
  where the operation is smooth everywhere. Points are sampled away from these.
- ``selector``: for a reduction that picks one element (max, min): the one-hot mask of
  the picked element, from float values. Its ``sympy`` column then receives a one-hot
  array of symbols and means "the selected element", Σ a·onehot, which SymPy
  differentiates exactly wherever the pick is locally constant (points are sampled away
  from ties). SymPy's own ``Max`` of many arguments compiles far too slowly.
- ``engine``: reserved for gradcheck's own reverse-mode engine (forward and VJP).

Axes reaching the array-valued columns are already normalised to a tuple of
non-negative ints (``None`` never reaches them).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import sympy

ELEMENTWISE = "elementwise"
REDUCTION = "reduction"
LINALG = "linalg"
COMPARISON = "comparison"


@dataclass(frozen=True)
class Rule:
    """One primitive of the expression language."""

    name: str
    kind: str                       # ELEMENTWISE, REDUCTION, LINALG or COMPARISON
    arity: int
    sympy: Callable[..., Any]
    numpy: Callable[..., Any]
    torch: Callable[..., Any]
    hazard: Callable[..., Any] | None = None
    selector: Callable[..., Any] | None = None
    engine: Any = None              # filled by the engine (forward, vjp)
    doc: str = ""


# --------------------------------------------------------------------------- helpers

def _torch():
    import torch  # imported lazily: listing cases must not pay for torch

    return torch


def _t(fname: str) -> Callable[..., Any]:
    """``torch.<fname>``, looked up when called (torch is imported lazily)."""

    def call(*args):
        return getattr(_torch(), fname)(*args)

    call.__name__ = f"torch_{fname}"
    return call


def _reduce_objects(a: np.ndarray, axis: tuple[int, ...], keepdims: bool,
                    combine: Callable[[list], Any]) -> np.ndarray:
    """Reduce an object array of SymPy scalars over ``axis`` with ``combine(elements)``."""
    a = np.asarray(a, dtype=object)
    keep = [d for d in range(a.ndim) if d not in axis]
    moved = np.transpose(a, keep + list(axis))
    kept_shape = moved.shape[: len(keep)]
    flat = moved.reshape(kept_shape + (-1,))
    out = np.empty(kept_shape, dtype=object)
    for idx in np.ndindex(*kept_shape):
        out[idx] = combine(list(flat[idx]))
    if keepdims:
        out = out.reshape([1 if d in axis else n for d, n in enumerate(a.shape)])
    return out


def _sym_reduction(combine: Callable[[list], Any]) -> Callable[..., np.ndarray]:
    return lambda a, axis, keepdims: _reduce_objects(a, axis, keepdims, combine)


def _top_two_gap(x, axis, keepdims):
    """Gap between the largest two elements along ``axis`` (where max switches)."""
    x = np.asarray(x, dtype=float)
    keep = [d for d in range(x.ndim) if d not in axis]
    flat = np.transpose(x, keep + list(axis)).reshape([x.shape[d] for d in keep] + [-1])
    if flat.shape[-1] < 2:
        return None
    part = -np.partition(-flat, 1, axis=-1)
    gap = part[..., 0] - part[..., 1]
    if keepdims:
        gap = gap.reshape([1 if d in axis else n for d, n in enumerate(x.shape)])
    return gap


def _bottom_two_gap(x, axis, keepdims):
    return _top_two_gap(-np.asarray(x, dtype=float), axis, keepdims)


def _one_hot(pick):
    """One-hot mask of the element ``pick`` (np.argmax/np.argmin) selects along ``axis``."""

    def mask(x, axis):
        x = np.asarray(x, dtype=float)
        keep = [d for d in range(x.ndim) if d not in axis]
        moved = np.transpose(x, keep + list(axis))
        flat = moved.reshape(moved.shape[: len(keep)] + (-1,))
        hot = np.zeros_like(flat)
        np.put_along_axis(hot, pick(flat, axis=-1)[..., None], 1.0, axis=-1)
        return np.transpose(hot.reshape(moved.shape), np.argsort(keep + list(axis)))

    return mask


def _sym_selected(a, axis, keepdims, onehot):
    return _reduce_objects(np.asarray(a, dtype=object) * onehot, axis, keepdims,
                           lambda e: sympy.Add(*e))


def _abs(x):
    return np.abs(x)


def _pow_hazard(a, b):
    # A non-integer or negative exponent is singular (or undefined) at a zero base.
    b = np.asarray(b)
    if b.ndim == 0 and float(b) == int(b) and float(b) >= 0:
        return None
    return np.abs(a)


def _np_erf(x):
    from scipy.special import erf

    return erf(x)


def _np_sigmoid(x):
    from scipy.special import expit

    return expit(x)


def _np_logsumexp(x, axis, keepdims):
    from scipy.special import logsumexp

    return logsumexp(x, axis=axis, keepdims=keepdims)


def _torch_reduce(fname: str, need_dim: bool = False):
    def call(x, axis, keepdims):
        torch = _torch()
        fn = getattr(torch, fname)
        if axis == tuple(range(x.dim())) and not keepdims and not need_dim:
            return fn(x)
        if fname == "prod":
            # torch.prod reduces one dim at a time; reduce the highest axis first.
            for d in sorted(axis, reverse=True):
                x = fn(x, dim=d, keepdim=keepdims)
            return x
        return fn(x, dim=axis, keepdim=keepdims)

    call.__name__ = f"torch_{fname}"
    return call


def _np_reduce(fn):
    return lambda x, axis, keepdims: fn(np.asarray(x, dtype=float), axis=axis,
                                        keepdims=keepdims)


def _sym_mean(elems):
    return sympy.Add(*elems) / len(elems)


def _sym_logsumexp(elems):
    return sympy.log(sympy.Add(*[sympy.exp(e) for e in elems]))


def _sym_where(c, a, b):
    return sympy.Piecewise((a, c), (b, True))


def _sym_relu(x):
    return sympy.Piecewise((x, x > 0), (0, True))


def _torch_softplus(x):
    torch = _torch()
    return torch.nn.functional.softplus(x)


def _torch_transpose(x):
    return _torch().transpose(x, -2, -1)


def _obj_matmul(a, b):
    out = np.matmul(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    return np.asarray(out, dtype=object)


def _obj_dot(a, b):
    return np.asarray(sympy.Add(*[x * y for x, y in zip(a, b)]), dtype=object)


# --------------------------------------------------------------------------- the table

def _unary(name, sym, np_fn, torch_fn, hazard=None, doc=""):
    return Rule(name, ELEMENTWISE, 1, sym, np_fn, torch_fn, hazard, doc=doc)


def _binary(name, sym, np_fn, torch_fn, hazard=None, doc=""):
    return Rule(name, ELEMENTWISE, 2, sym, np_fn, torch_fn, hazard, doc=doc)


def _reduction(name, combine, np_fn, torch_fn, hazard=None, doc=""):
    return Rule(name, REDUCTION, 1, _sym_reduction(combine), np_fn, torch_fn, hazard,
                doc=doc)


def _comparison(name, sym, op):
    return Rule(name, COMPARISON, 2, sym, lambda a, b: op(np.asarray(a), np.asarray(b)), op,
                hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b)),
                doc="condition of where()")


_ROWS: list[Rule] = [
    # arithmetic (operators of the expression language)
    _binary("add", lambda a, b: a + b, np.add, lambda a, b: a + b, doc="a + b"),
    _binary("sub", lambda a, b: a - b, np.subtract, lambda a, b: a - b, doc="a - b"),
    _binary("mul", lambda a, b: a * b, np.multiply, lambda a, b: a * b, doc="a * b"),
    _binary("div", lambda a, b: a / b, np.divide, lambda a, b: a / b,
            hazard=lambda a, b: np.abs(b), doc="a / b"),
    _binary("pow", lambda a, b: a ** b, np.power, lambda a, b: a ** b,
            hazard=_pow_hazard, doc="a ** b (tensor or constant exponent)"),
    _unary("neg", lambda x: -x, np.negative, lambda x: -x, doc="-x"),
    # exponentials and logarithms
    _unary("exp", sympy.exp, np.exp, _t("exp")),
    _unary("log", sympy.log, np.log, _t("log"), hazard=_abs),
    _unary("log1p", lambda x: sympy.log(1 + x), np.log1p, _t("log1p"),
           hazard=lambda x: np.abs(1 + np.asarray(x))),
    _unary("expm1", lambda x: sympy.exp(x) - 1, np.expm1, _t("expm1")),
    _unary("sqrt", sympy.sqrt, np.sqrt, _t("sqrt"), hazard=_abs),
    # trigonometric and hyperbolic
    _unary("sin", sympy.sin, np.sin, _t("sin")),
    _unary("cos", sympy.cos, np.cos, _t("cos")),
    _unary("tan", sympy.tan, np.tan, _t("tan"), hazard=lambda x: np.abs(np.cos(x))),
    _unary("asin", sympy.asin, np.arcsin, _t("asin"), hazard=lambda x: 1 - np.abs(x)),
    _unary("acos", sympy.acos, np.arccos, _t("acos"), hazard=lambda x: 1 - np.abs(x)),
    _unary("atan", sympy.atan, np.arctan, _t("atan")),
    _unary("sinh", sympy.sinh, np.sinh, _t("sinh")),
    _unary("cosh", sympy.cosh, np.cosh, _t("cosh")),
    _unary("tanh", sympy.tanh, np.tanh, _t("tanh")),
    _unary("asinh", sympy.asinh, np.arcsinh, _t("asinh")),
    _unary("acosh", sympy.acosh, np.arccosh, _t("acosh"),
           hazard=lambda x: np.asarray(x) - 1),
    _unary("atanh", sympy.atanh, np.arctanh, _t("atanh"), hazard=lambda x: 1 - np.abs(x)),
    # non-smooth and special
    _unary("abs", sympy.Abs, np.abs, _t("abs"), hazard=_abs),
    _unary("sign", sympy.sign, np.sign, _t("sign"), hazard=_abs),
    _unary("erf", sympy.erf, _np_erf, _t("erf")),
    _unary("sigmoid", lambda x: 1 / (1 + sympy.exp(-x)), _np_sigmoid, _t("sigmoid"),
           doc="1 / (1 + exp(-x))"),
    _unary("softplus", lambda x: sympy.log(1 + sympy.exp(x)), lambda x: np.logaddexp(0.0, x),
           _torch_softplus,
           doc="log(1 + exp(x))"),
    _unary("relu", _sym_relu, lambda x: np.maximum(x, 0.0), _t("relu"), hazard=_abs,
           doc="max(x, 0)"),
    _binary("maximum", sympy.Max, np.maximum, _t("maximum"),
            hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b))),
    _binary("minimum", sympy.Min, np.minimum, _t("minimum"),
            hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b))),
    Rule("where", ELEMENTWISE, 3, _sym_where, np.where, _t("where"),
         doc="where(cond, a, b): a where cond holds, else b"),
    # conditions of where()
    _comparison("lt", sympy.StrictLessThan, operator.lt),
    _comparison("le", sympy.LessThan, operator.le),
    _comparison("gt", sympy.StrictGreaterThan, operator.gt),
    _comparison("ge", sympy.GreaterThan, operator.ge),
    # reductions, with axis= and keepdims=
    _reduction("sum", lambda e: sympy.Add(*e), _np_reduce(np.sum), _torch_reduce("sum")),
    _reduction("mean", _sym_mean, _np_reduce(np.mean), _torch_reduce("mean")),
    _reduction("prod", lambda e: sympy.Mul(*e), _np_reduce(np.prod),
               _torch_reduce("prod")),
    Rule("max", REDUCTION, 1, _sym_selected, _np_reduce(np.max), _torch_reduce("amax"),
         hazard=_top_two_gap, selector=_one_hot(np.argmax)),
    Rule("min", REDUCTION, 1, _sym_selected, _np_reduce(np.min), _torch_reduce("amin"),
         hazard=_bottom_two_gap, selector=_one_hot(np.argmin)),
    _reduction("logsumexp", _sym_logsumexp, _np_logsumexp,
               _torch_reduce("logsumexp", need_dim=True)),
    # linear algebra
    Rule("matmul", LINALG, 2, _obj_matmul, np.matmul, lambda a, b: a @ b, doc="a @ b"),
    Rule("dot", LINALG, 2, _obj_dot, np.dot, _t("dot"),
         doc="inner product of two vectors"),
    Rule("transpose", LINALG, 1, lambda a: np.swapaxes(np.asarray(a, dtype=object), -1, -2),
         lambda a: np.swapaxes(a, -1, -2), _torch_transpose,
         doc="swap the last two axes"),
]

RULES: dict[str, Rule] = {rule.name: rule for rule in _ROWS}

#: Names callable as functions in an expression (operators have their own syntax).
FUNCTIONS: frozenset[str] = frozenset(
    name for name, rule in RULES.items()
    if name not in {"add", "sub", "mul", "div", "pow", "neg", "matmul",
                    "lt", "le", "gt", "ge"}
)

#: Column names every row must fill; the engine column joins when the engine lands.
BACKENDS: tuple[str, ...] = ("sympy", "numpy", "torch")


def sympy_scalar_constant(text: str) -> sympy.Expr:
    """An exact SymPy number for a decimal literal (``0.1`` becomes ``1/10``)."""
    from fractions import Fraction

    f = Fraction(text)
    return sympy.Integer(f.numerator) if f.denominator == 1 else sympy.Rational(
        f.numerator, f.denominator)


__all__ = ["Rule", "RULES", "FUNCTIONS", "BACKENDS", "ELEMENTWISE", "REDUCTION",
           "LINALG", "COMPARISON", "sympy_scalar_constant"]
