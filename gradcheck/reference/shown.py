"""A kernel's formulas as printed (explain, the reports' exact gradients): in the rows'
own spelling, never SymPy's internals.

A row's ``sympy`` meaning may be a numerically stable rewriting (sigmoid as a Piecewise
of two exponentials, gelu's tanh form through exp(-|w|)): SymPy prints it, and
differentiates it, as that rewriting. A row that declares ``shown`` (its derivatives in
the language, :class:`gradcheck.rules.row.Rule`) is printed here as a SymPy function of
its own name whose derivative is what the row declares, so that d/dx sigmoid(x) prints
``sigmoid(x)*(1 - sigmoid(x))``. What is computed is untouched: the kernel's value and
partials come from the ``sympy`` column (:mod:`.regions`); these expressions are built
only to be printed. Whatever SymPy leaves in the others (a Piecewise of a relu or a
where, Heaviside of a maximum, Max and Min of a clamp, Abs, Eq) is printed as the
language writes it (:class:`_Printer`).
"""

from __future__ import annotations

import functools

import sympy
from sympy.printing.str import StrPrinter

from ..rules import COMPARISON, ELEMENTWISE, RULES
from ..rules.row import param_values
from ..formula.tree import Node, fold
from .lowering import visit


def has_shown(root: Node, cuts) -> bool:
    """Whether the region below ``root`` (down to ``cuts``, ids) holds a row printed
    through its ``shown`` form."""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen or id(node) in cuts:
            continue
        seen.add(id(node))
        if _printed_by_name(node):
            return True
        stack.extend(node.args)
    return False


def lower_shown(root: Node, cuts: dict) -> sympy.Expr:
    """The SymPy expression of the region below ``root`` (``cuts``: node id -> symbol)
    for printing: as :func:`.lowering.lower_cut`, but each row with a ``shown`` form a
    function of its own name. Evaluated, so that SymPy's ``diff`` sees through it."""
    with sympy.core.parameters.evaluate(True):
        return fold(root, _meaning, cuts)


def _printed_by_name(node: Node) -> bool:
    return (node.op not in ("input", "const", "let")
            and node.rule.family in (ELEMENTWISE, COMPARISON) and bool(node.rule.shown))


def _meaning(node: Node, args: list):
    if _printed_by_name(node):
        return function(node.op, node.params)(*args)
    return visit(node, args, {}, True, None)


@functools.lru_cache(maxsize=256)
def function(name: str, params: tuple) -> type:
    """The SymPy function printed as row ``name`` with ``params`` (``gelu(x,
    approximate="tanh")``), whose derivative is the row's ``shown`` formula."""
    rule = RULES[name]

    def fdiff(self, argindex=1):
        return derivative(name, params, argindex - 1, self.args)

    def _sympystr(self, printer):
        return rule.spell([printer._print(a) for a in self.args], rule.keywords(params))

    return type(f"shown_{name}", (sympy.Function,), {
        "nargs": rule.arity, "fdiff": fdiff, "_sympystr": _sympystr, "is_real": True,
        "row": name, "row_params": params, "__module__": __name__})


def derivative(name: str, params: tuple, k: int, args: tuple) -> sympy.Expr:
    """The row's ``shown`` derivative with respect to operand ``k``, at ``args``."""
    tree, operands = _parsed(name, params, k)
    with sympy.core.parameters.evaluate(True):
        return fold(tree, _meaning, dict(zip(operands, args)))


@functools.lru_cache(maxsize=256)
def _parsed(name: str, params: tuple, k: int) -> tuple[Node, tuple[str, ...]]:
    """The row's ``k``-th ``shown`` formula, parsed over scalar operands."""
    from ..formula.parser import parse

    rule = RULES[name]
    texts = rule.shown(*param_values(params)) if callable(rule.shown) else rule.shown
    operands = ("x",) if rule.arity == 1 else tuple("abcdefgh"[: rule.arity])
    return parse(texts[k], {o: Node("input", shape=(), name=o) for o in operands}), operands


def text(expr) -> str:
    """``expr`` as the formula language writes it (see the module docstring)."""
    # a step as the kernel computes it, 1/2 at 0 (derivatives.MODULES); then a float
    # the formula wrote (slope=0.1), which SymPy keeps as its exact binary fraction
    # 3602879701896397/36028797018963968, as that float
    expr = sympy.sympify(expr).replace(sympy.Heaviside,
                                       lambda z, *h: (1 + sympy.sign(z)) / 2)
    expr = expr.xreplace({r: sympy.Float(float(r)) for r in expr.atoms(sympy.Rational)
                          if r.q > 1000})
    return _Printer().doprint(expr)


class _Printer(StrPrinter):
    """SymPy's printer, with what the language spells otherwise in its own rows:
    Piecewise as where, Max and Min as maximum and minimum, Abs as abs, Eq and Ne as ==
    and !=, a float as Python writes it (0.1, not 0.100000000000000)."""

    def _print_Piecewise(self, expr):
        shown = "nan"   # (a Piecewise with no True branch is undefined outside them)
        for value, condition in reversed(expr.args):
            shown = (self._print(value) if condition == sympy.true else
                     f"where({self._print(condition)}, {self._print(value)}, {shown})")
        return shown

    def _print_ITE(self, expr):
        return "where({}, {}, {})".format(*map(self._print, expr.args))

    def _fold(self, name: str, args) -> str:
        *rest, last = map(self._print, args)
        shown = last
        for a in reversed(rest):
            shown = f"{name}({a}, {shown})"
        return shown

    def _print_Max(self, expr):
        return self._fold("maximum", expr.args)

    def _print_Min(self, expr):
        return self._fold("minimum", expr.args)

    def _print_Abs(self, expr):
        return f"abs({self._print(expr.args[0])})"

    def _print_Equality(self, expr):
        return f"{self._print(expr.lhs)} == {self._print(expr.rhs)}"

    def _print_Unequality(self, expr):
        return f"{self._print(expr.lhs)} != {self._print(expr.rhs)}"

    def _print_Float(self, expr):
        return repr(float(expr))
