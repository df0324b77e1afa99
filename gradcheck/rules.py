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
- ``engine``: gradcheck's own reverse-mode engine (:mod:`gradcheck.engine`): an
  :class:`EngineRule` with the ``grad_fn`` name PyTorch gives the operation and one VJP
  per argument. The engine's forward is the ``numpy`` column; calling the column
  (``rule.engine(*args)``) applies the engine's op to engine tensors, like ``torch``.

Axes reaching the array-valued columns are already normalised to a tuple of
non-negative ints (``None`` never reaches them).

Importing this module costs only NumPy: SymPy, SciPy, torch and the engine are imported
when a column that needs them is first called (``_s`` and ``_t`` look a function up at
call time), so parsing and listing cases stay instant.
"""

from __future__ import annotations

import importlib
import math
import numbers
import operator
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np


class _LazyModule:
    """A module imported on first attribute access (``sympy`` below: only the columns'
    bodies touch it, when called)."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


sympy = _LazyModule("sympy")

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
    engine: Any = None              # an EngineRule: the engine's VJPs (forward: numpy)
    doc: str = ""
    # units of the unit roundoff u its result is rounded by, beyond its arguments'
    # errors (gradcheck.rounding): 0 exact (a sign, a selection), 1 correctly rounded
    # arithmetic, 2 a library function (vectorised exp, tanh, ... are within 1-2 ulp);
    # a reduction's or product's accumulation is counted apart
    rounding: float = 2.0

    def __post_init__(self):
        # The engine column applies gradcheck.engine's op of this row's name.
        if isinstance(self.engine, EngineRule) and self.engine.op != self.name:
            object.__setattr__(self, "engine", replace(self.engine, op=self.name))


@dataclass(frozen=True)
class EngineRule:
    """The engine column of a row: its reverse-mode rule, HIPS-autograd style.

    ``vjps[i](g, ans, *args)`` is the cotangent of argument ``i``, given the output's
    cotangent ``g``, the forward's result ``ans`` and the forward's arguments (NumPy
    arrays or Python numbers; reductions also get ``axis, keepdims``). It may have the
    broadcast shape: the engine sums it back to the argument's shape in one place.
    ``None`` marks an argument with no derivative (the condition of ``where``).
    ``grad_fn`` is the class name PyTorch gives the node (or a function of the
    arguments choosing it; ``None``: the result is not differentiable); ``saves`` whether
    PyTorch's node saves tensors, so a second backward through it needs ``retain_graph``.
    """

    grad_fn: str | Callable[..., str] | None
    vjps: tuple[Callable[..., Any] | None, ...] = ()
    saves: bool = True
    op: str = ""                    # the row's name, set by Rule

    def __call__(self, *args):
        from .engine import ops

        return getattr(ops, self.op)(*args)


# --------------------------------------------------------------------------- helpers

def _torch():
    import torch  # imported lazily: listing cases must not pay for torch

    return torch


def _s(fname: str) -> Callable[..., Any]:
    """``sympy.<fname>``, looked up when called (SymPy is imported lazily)."""

    def call(*args, **kwargs):
        return getattr(sympy, fname)(*args, **kwargs)

    call.__name__ = f"sympy_{fname}"
    return call


def _t(fname: str) -> Callable[..., Any]:
    """``torch.<fname>``, looked up when called (torch is imported lazily)."""

    def call(*args):
        return getattr(_torch(), fname)(*args)

    call.__name__ = f"torch_{fname}"
    return call


def _cfunction(name: str):
    """SymPy's C99 functions (``expm1``, ``log1p``): differentiable like ``exp(x) - 1``
    and ``log(1 + x)``, but lambdify prints them as NumPy's accurate ``expm1``/``log1p``,
    so the float64 reference does not lose the digits those forms cancel near 0."""
    from sympy.codegen import cfunctions

    return getattr(cfunctions, name)


def _sym_sigmoid(x):
    # 1 / (1 + exp(-x)), written so that exp never overflows: the float64 reference
    # stays exact to rounding at any |x| (its derivative too).
    return sympy.Piecewise((1 / (1 + sympy.exp(-x)), x >= 0),
                           (sympy.exp(x) / (1 + sympy.exp(x)), True))


def _sym_softplus(x):
    # log(1 + exp(x)) as x + log1p(exp(-x)) for x > 0 and log1p(exp(x)) otherwise: no
    # overflow, and no 1 + tiny rounding to 1 (softplus(-60) is 8.8e-27, not 0).
    log1p = _cfunction("log1p")
    return sympy.Piecewise((x + log1p(sympy.exp(-x)), x > 0),
                           (log1p(sympy.exp(x)), True))


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
    # Above ``threshold`` PyTorch returns x itself, off by log1p(exp(-x)) ≈ e^-x: at its
    # default 20 that is 2e-9, below float32's rounding but not float64's; at 37, e^-37
    # = 8.5e-17 is below float64's unit roundoff and exp(37) far from overflow.
    torch = _torch()
    return torch.nn.functional.softplus(x, threshold=37.0 if x.dtype == torch.float64
                                        else 20.0)


def _torch_transpose(x):
    return _torch().transpose(x, -2, -1)


def _obj_matmul(a, b):
    out = np.matmul(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    return np.asarray(out, dtype=object)


def _obj_dot(a, b):
    return np.asarray(sympy.Add(*[x * y for x, y in zip(a, b)]), dtype=object)


# --------------------------------------------------------------------------- engine VJPs

def _e(grad_fn, *vjps, saves=True) -> EngineRule:
    return EngineRule(grad_fn, vjps, saves)


def _number(v) -> bool:
    """A Python number: PyTorch keeps it out of the graph (``x ** 2``, ``2 - x``)."""
    return isinstance(v, numbers.Number)


def _ndim(v) -> int:
    return np.ndim(getattr(v, "data", v))


def _sub_name(a, b):
    return "RsubBackward1" if _number(a) else "SubBackward0"


def _pow_name(a, b):
    # x ** 2, 2 ** x, x ** y: three overloads, three nodes in PyTorch.
    return ("PowBackward0" if _number(b) else "PowBackward2" if _number(a)
            else "PowBackward1")


def _reduction_name(stem: str):
    # torch.sum(x) is SumBackward0; torch.sum(x, dim=...) is SumBackward1 (the torch
    # column uses the first form for a whole reduction without keepdims).
    return lambda x, axis, keepdims: (f"{stem}Backward0" if len(axis) == _ndim(x)
                                      and not keepdims else f"{stem}Backward1")


def _matmul_name(a, b):
    # gradcheck.engine.matmul reduces every rank pair as PyTorch's _matmul_impl does
    # (unsqueeze, fold, squeeze, expand and view nodes around one product), so this
    # row's node sees vector·vector, matrix·vector, matrix·matrix or a batch of
    # matrices (3-D, one batch axis) times another.
    return {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (2, 2): "MmBackward0"}.get(
        (_ndim(a), _ndim(b)), "BmmBackward0")


def _pow_base(g, ans, a, b):
    # b * a**(b-1), and 0 where b == 0 (PyTorch's convention; a**-1 is inf at a == 0).
    return g * np.where(b == 0, 0.0, b * a ** (b - 1))


def _pow_exponent(g, ans, a, b):
    # a**b * log(a), and 0 where a == 0 and b >= 0 (PyTorch's convention).
    return g * np.where((a == 0) & (b >= 0), 0.0, ans * np.log(a))


def _share(a, b):
    """a's share of maximum(a, b)'s cotangent: 1 where a wins, 1/2 on a tie (PyTorch)."""
    return (a > b) + (a == b) / 2


def _keep(g, axis, keepdims):
    """A reduction's cotangent with the reduced axes put back (size 1) to broadcast."""
    return g if keepdims else np.expand_dims(g, axis)


def _count(x, axis) -> int:
    return math.prod(np.shape(x)[d] for d in axis)


def _ties(x, ans, axis, keepdims):
    """Where x attains its max/min; ties share the cotangent evenly, as in PyTorch."""
    hit = x == _keep(ans, axis, keepdims)
    return hit / hit.sum(axis=axis, keepdims=True)


def _others_product(x, axis):
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


def _matrices(g, a, b):
    """g, a, b with the axes NumPy's matmul drops for 1-D operands put back."""
    if np.ndim(b) == 1:
        g, b = g[..., None], b[:, None]
    if np.ndim(a) == 1:
        g, a = g[..., None, :], a[None, :]
    return g, a, b


def _matmul_a(g, ans, a, b):
    gm, am, bm = _matrices(g, a, b)
    d = gm @ np.swapaxes(bm, -1, -2)
    return d[..., 0, :] if np.ndim(a) == 1 else d


def _matmul_b(g, ans, a, b):
    gm, am, bm = _matrices(g, a, b)
    d = np.swapaxes(am, -1, -2) @ gm
    return d[..., 0] if np.ndim(b) == 1 else d


def _grad(g, ans, a, b):
    return g


_SQRT_PI = math.sqrt(math.pi)


# --------------------------------------------------------------------------- the table

def _unary(name, sym, np_fn, torch_fn, hazard=None, doc="", engine=None, rounding=2.0):
    return Rule(name, ELEMENTWISE, 1, sym, np_fn, torch_fn, hazard, doc=doc, engine=engine,
                rounding=rounding)


def _binary(name, sym, np_fn, torch_fn, hazard=None, doc="", engine=None, rounding=2.0):
    return Rule(name, ELEMENTWISE, 2, sym, np_fn, torch_fn, hazard, doc=doc, engine=engine,
                rounding=rounding)


def _reduction(name, combine, np_fn, torch_fn, hazard=None, doc="", engine=None):
    return Rule(name, REDUCTION, 1, _sym_reduction(combine), np_fn, torch_fn, hazard,
                doc=doc, engine=engine)


def _comparison(name, sym, op):
    return Rule(name, COMPARISON, 2, sym, lambda a, b: op(np.asarray(a), np.asarray(b)), op,
                hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b)),
                doc="condition of where()", engine=_e(None))   # not differentiable


_ROWS: list[Rule] = [
    # arithmetic (operators of the expression language)
    _binary("add", lambda a, b: a + b, np.add, lambda a, b: a + b, doc="a + b",
            rounding=1,
            engine=_e("AddBackward0", _grad, _grad, saves=False)),
    _binary("sub", lambda a, b: a - b, np.subtract, lambda a, b: a - b, doc="a - b",
            rounding=1,
            engine=_e(_sub_name, _grad, lambda g, ans, a, b: -g, saves=False)),
    _binary("mul", lambda a, b: a * b, np.multiply, lambda a, b: a * b, doc="a * b",
            rounding=1,
            engine=_e("MulBackward0", lambda g, ans, a, b: g * b,
                      lambda g, ans, a, b: g * a)),
    _binary("div", lambda a, b: a / b, np.divide, lambda a, b: a / b,
            hazard=lambda a, b: np.abs(b), doc="a / b",
            rounding=1,
            engine=_e("DivBackward0", lambda g, ans, a, b: g / b,
                      lambda g, ans, a, b: -g * a / (b * b))),
    _binary("pow", lambda a, b: a ** b, np.power, lambda a, b: a ** b,
            hazard=_pow_hazard, doc="a ** b (tensor or constant exponent)",
            engine=_e(_pow_name, _pow_base, _pow_exponent)),
    _unary("neg", lambda x: -x, np.negative, lambda x: -x, doc="-x",
           rounding=0,
           engine=_e("NegBackward0", lambda g, ans, x: -g, saves=False)),
    # exponentials and logarithms
    _unary("exp", _s("exp"), np.exp, _t("exp"),
           engine=_e("ExpBackward0", lambda g, ans, x: g * ans)),
    _unary("log", _s("log"), np.log, _t("log"), hazard=_abs,
           engine=_e("LogBackward0", lambda g, ans, x: g / x)),
    _unary("log1p", lambda x: _cfunction("log1p")(x), np.log1p, _t("log1p"),
           hazard=lambda x: np.abs(1 + np.asarray(x)),
           engine=_e("Log1PBackward0", lambda g, ans, x: g / (x + 1))),
    _unary("expm1", lambda x: _cfunction("expm1")(x), np.expm1, _t("expm1"),
           engine=_e("Expm1Backward0", lambda g, ans, x: g * (ans + 1))),
    _unary("sqrt", _s("sqrt"), np.sqrt, _t("sqrt"), hazard=_abs,
           rounding=1,
           engine=_e("SqrtBackward0", lambda g, ans, x: g / (2 * ans))),
    # trigonometric and hyperbolic
    _unary("sin", _s("sin"), np.sin, _t("sin"),
           engine=_e("SinBackward0", lambda g, ans, x: g * np.cos(x))),
    _unary("cos", _s("cos"), np.cos, _t("cos"),
           engine=_e("CosBackward0", lambda g, ans, x: g * -np.sin(x))),
    _unary("tan", _s("tan"), np.tan, _t("tan"), hazard=lambda x: np.abs(np.cos(x)),
           engine=_e("TanBackward0", lambda g, ans, x: g * (1 + ans * ans))),
    _unary("asin", _s("asin"), np.arcsin, _t("asin"), hazard=lambda x: 1 - np.abs(x),
           engine=_e("AsinBackward0", lambda g, ans, x: g / np.sqrt(1 - x * x))),
    _unary("acos", _s("acos"), np.arccos, _t("acos"), hazard=lambda x: 1 - np.abs(x),
           engine=_e("AcosBackward0", lambda g, ans, x: -g / np.sqrt(1 - x * x))),
    _unary("atan", _s("atan"), np.arctan, _t("atan"),
           engine=_e("AtanBackward0", lambda g, ans, x: g / (x * x + 1))),
    _unary("sinh", _s("sinh"), np.sinh, _t("sinh"),
           engine=_e("SinhBackward0", lambda g, ans, x: g * np.cosh(x))),
    _unary("cosh", _s("cosh"), np.cosh, _t("cosh"),
           engine=_e("CoshBackward0", lambda g, ans, x: g * np.sinh(x))),
    _unary("tanh", _s("tanh"), np.tanh, _t("tanh"),
           engine=_e("TanhBackward0", lambda g, ans, x: g * (1 - ans * ans))),
    _unary("asinh", _s("asinh"), np.arcsinh, _t("asinh"),
           engine=_e("AsinhBackward0", lambda g, ans, x: g / np.sqrt(x * x + 1))),
    _unary("acosh", _s("acosh"), np.arccosh, _t("acosh"),
           hazard=lambda x: np.asarray(x) - 1,
           engine=_e("AcoshBackward0", lambda g, ans, x: g / np.sqrt(x * x - 1))),
    _unary("atanh", _s("atanh"), np.arctanh, _t("atanh"), hazard=lambda x: 1 - np.abs(x),
           engine=_e("AtanhBackward0", lambda g, ans, x: g / (1 - x * x))),
    # non-smooth and special
    _unary("abs", _s("Abs"), np.abs, _t("abs"), hazard=_abs,
           rounding=0,
           engine=_e("AbsBackward0", lambda g, ans, x: g * np.sign(x))),
    _unary("sign", _s("sign"), np.sign, _t("sign"), hazard=_abs,
           rounding=0,
           engine=_e("SignBackward0", lambda g, ans, x: np.zeros_like(g), saves=False)),
    _unary("erf", _s("erf"), _np_erf, _t("erf"),
           engine=_e("ErfBackward0",
                     lambda g, ans, x: g * (2 / _SQRT_PI) * np.exp(-x * x))),
    _unary("sigmoid", _sym_sigmoid, _np_sigmoid, _t("sigmoid"),
           doc="1 / (1 + exp(-x))",
           engine=_e("SigmoidBackward0", lambda g, ans, x: g * (1 - ans) * ans)),
    _unary("softplus", _sym_softplus, lambda x: np.logaddexp(0.0, x),
           _torch_softplus,
           doc="log(1 + exp(x))",
           engine=_e("SoftplusBackward0", lambda g, ans, x: g * _np_sigmoid(x))),
    _unary("relu", _sym_relu, lambda x: np.maximum(x, 0.0), _t("relu"), hazard=_abs,
           doc="max(x, 0)",
           rounding=0,
           engine=_e("ReluBackward0", lambda g, ans, x: np.where(ans > 0, g, 0.0))),
    _binary("maximum", _s("Max"), np.maximum, _t("maximum"),
            hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b)),
            rounding=0,
            engine=_e("MaximumBackward0", lambda g, ans, a, b: g * _share(a, b),
                      lambda g, ans, a, b: g * _share(b, a))),
    _binary("minimum", _s("Min"), np.minimum, _t("minimum"),
            hazard=lambda a, b: np.abs(np.asarray(a) - np.asarray(b)),
            rounding=0,
            engine=_e("MinimumBackward0", lambda g, ans, a, b: g * _share(b, a),
                      lambda g, ans, a, b: g * _share(a, b))),
    Rule("where", ELEMENTWISE, 3, _sym_where, np.where, _t("where"),
         doc="where(cond, a, b): a where cond holds, else b",
         rounding=0,
         engine=_e("WhereBackward0", None, lambda g, ans, c, a, b: np.where(c, g, 0.0),
                   lambda g, ans, c, a, b: np.where(c, 0.0, g))),
    # conditions of where()
    _comparison("lt", _s("StrictLessThan"), operator.lt),
    _comparison("le", _s("LessThan"), operator.le),
    _comparison("gt", _s("StrictGreaterThan"), operator.gt),
    _comparison("ge", _s("GreaterThan"), operator.ge),
    # reductions, with axis= and keepdims=
    _reduction("sum", lambda e: sympy.Add(*e), _np_reduce(np.sum), _torch_reduce("sum"),
               engine=_e(_reduction_name("Sum"), lambda g, ans, x, axis, keepdims:
                         np.broadcast_to(_keep(g, axis, keepdims), np.shape(x)),
                         saves=False)),
    _reduction("mean", _sym_mean, _np_reduce(np.mean), _torch_reduce("mean"),
               engine=_e(_reduction_name("Mean"), lambda g, ans, x, axis, keepdims:
                         np.broadcast_to(_keep(g, axis, keepdims) / _count(x, axis),
                                         np.shape(x)), saves=False)),
    _reduction("prod", lambda e: sympy.Mul(*e), _np_reduce(np.prod),
               _torch_reduce("prod"),
               engine=_e(_reduction_name("Prod"), lambda g, ans, x, axis, keepdims:
                         _keep(g, axis, keepdims) * _others_product(x, axis))),
    Rule("max", REDUCTION, 1, _sym_selected, _np_reduce(np.max), _torch_reduce("amax"),
         hazard=_top_two_gap, selector=_one_hot(np.argmax),
         rounding=0,
         engine=_e("AmaxBackward0", lambda g, ans, x, axis, keepdims:
                   _keep(g, axis, keepdims) * _ties(x, ans, axis, keepdims))),
    Rule("min", REDUCTION, 1, _sym_selected, _np_reduce(np.min), _torch_reduce("amin"),
         hazard=_bottom_two_gap, selector=_one_hot(np.argmin),
         rounding=0,
         engine=_e("AminBackward0", lambda g, ans, x, axis, keepdims:
                   _keep(g, axis, keepdims) * _ties(x, ans, axis, keepdims))),
    _reduction("logsumexp", _sym_logsumexp, _np_logsumexp,
               _torch_reduce("logsumexp", need_dim=True),
               engine=_e("LogsumexpBackward0", lambda g, ans, x, axis, keepdims:
                         _keep(g, axis, keepdims)
                         * np.exp(x - _keep(ans, axis, keepdims)))),
    # linear algebra
    Rule("matmul", LINALG, 2, _obj_matmul, np.matmul, lambda a, b: a @ b, doc="a @ b",
         engine=_e(_matmul_name, _matmul_a, _matmul_b)),
    Rule("dot", LINALG, 2, _obj_dot, np.dot, _t("dot"),
         doc="inner product of two vectors",
         engine=_e("DotBackward0", lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a)),
    Rule("transpose", LINALG, 1, lambda a: np.swapaxes(np.asarray(a, dtype=object), -1, -2),
         lambda a: np.swapaxes(a, -1, -2), _torch_transpose,
         doc="swap the last two axes",
         rounding=0,
         engine=_e("TransposeBackward0", lambda g, ans, x: np.swapaxes(g, -1, -2),
                   saves=False)),
]

RULES: dict[str, Rule] = {rule.name: rule for rule in _ROWS}

#: Names callable as functions in an expression (operators have their own syntax).
FUNCTIONS: frozenset[str] = frozenset(
    name for name, rule in RULES.items()
    if name not in {"add", "sub", "mul", "div", "pow", "neg", "matmul",
                    "lt", "le", "gt", "ge"}
)

#: Column names every row must fill.
BACKENDS: tuple[str, ...] = ("sympy", "numpy", "torch", "engine")


def sympy_scalar_constant(text: str) -> sympy.Expr:
    """The exact SymPy number a constant's text stands for: a decimal literal (``0.1``
    becomes ``1/10``), ``pi`` or ``E``, possibly negated (``-pi``)."""
    from fractions import Fraction

    if text.startswith("-"):
        return -sympy_scalar_constant(text[1:])
    if text in ("pi", "E"):
        return getattr(sympy, text)
    f = Fraction(text)
    return sympy.Integer(f.numerator) if f.denominator == 1 else sympy.Rational(
        f.numerator, f.denominator)


__all__ = ["Rule", "EngineRule", "RULES", "FUNCTIONS", "BACKENDS", "ELEMENTWISE",
           "REDUCTION", "LINALG", "COMPARISON", "sympy_scalar_constant"]
