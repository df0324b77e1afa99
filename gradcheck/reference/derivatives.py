"""What the reference does with SymPy derivatives besides taking them: the derivative of a
step function away from its kink, the size of a derivative's terms, and compiling
derivatives to NumPy."""

from __future__ import annotations

import functools

import numpy as np
import sympy

from .kernelnames import lambdify
from ..rules import RULES
from ..formula.tree import walk


def _select(condlist, choicelist, default=0.0):
    # SymPy folds a comparison against a Piecewise into a boolean-valued Piecewise;
    # np.select then returns floats, which must be read back as truth values here.
    return np.select([np.asarray(c).astype(bool) for c in condlist], choicelist, default)


class _Broadcasting:
    """np.logical_and or np.logical_or whose ``reduce`` over a tuple broadcasts, as SymPy
    prints And(a, b) (``logical_and.reduce((a, b))``): conditions of where over inputs of
    different shapes, (x > 0) & (y < 1)."""

    def __init__(self, ufunc):
        self.ufunc = ufunc

    def __call__(self, *args, **kwargs):
        return self.ufunc(*args, **kwargs)

    def reduce(self, operands, axis=0):
        return functools.reduce(self.ufunc, operands)


#: lambdify's namespaces for every compiled reference kernel.
MODULES = [{"sign": np.sign, "Heaviside": lambda x, h=0.5: np.heaviside(x, h),
            "select": _select, "logical_and": _Broadcasting(np.logical_and),
            "logical_or": _Broadcasting(np.logical_or)}, "scipy", "numpy"]


def _is_step_derivative(e) -> bool:
    return isinstance(e, sympy.Derivative) and isinstance(e.expr, (sympy.sign,
                                                                    sympy.Heaviside))


def clean(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with the derivatives of sign/Heaviside set to 0, their value away from
    the kinks."""
    # SymPy says DiracDelta, or leaves Derivative(sign(f), x) unevaluated when it cannot
    # tell that f is real. (One walk first: most partials have neither.)
    if not expr.has(sympy.DiracDelta, sympy.Derivative):
        return expr
    if expr.has(sympy.DiracDelta):
        expr = expr.replace(sympy.DiracDelta, lambda *a: sympy.S.Zero)
    if expr.has(sympy.Derivative):
        expr = expr.replace(_is_step_derivative, lambda e: sympy.S.Zero)
    return expr


def compile(args, exprs):
    """``exprs`` as one NumPy function of ``args`` (SymPy's own common subexpressions)."""
    return lambdify(args, exprs, modules=MODULES, cse=True)


def own_meanings(*roots) -> bool:
    """Whether every row below ``roots`` has gradcheck's own SymPy meaning. A meaning
    replaced at run time (a test's deliberately wrong row, a user's patch) is not in the
    source digest a cached kernel is keyed by: such kernels must not be cached."""
    for root in roots:
        for node in walk(root):
            meaning = RULES[node.op].sympy if node.op in RULES else None
            if meaning is not None and not (getattr(meaning, "__module__", None)
                                           or "").startswith("gradcheck.rules"):
                return False
    return True


def magnitude(e):
    """An upper bound of |e| that keeps the size of every term: |a| + |b| for a + b,
    |a|·|b| for a·b, M(b)^p for b^p (p > 0): the size rounding errors in computing e
    scale with, which |e| misses where terms cancel (1 - tanh(x)² is tiny where both
    terms are 1). Other subexpressions (a function's value, b^-1) count as |e|."""
    if e.is_Number:
        return abs(e)
    if isinstance(e, sympy.Add):
        return sympy.Add(*[magnitude(a) for a in e.args])
    if isinstance(e, sympy.Mul):
        return sympy.Mul(*[magnitude(a) for a in e.args])
    if isinstance(e, sympy.Pow) and e.exp.is_number and e.exp.is_positive:
        return sympy.Pow(magnitude(e.base), e.exp)
    if isinstance(e, sympy.Piecewise):
        return sympy.Piecewise(*[(magnitude(x), c) for x, c in e.args])
    return sympy.Abs(e)
