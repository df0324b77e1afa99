"""Lowering a parsed formula to SymPy: the meaning of every node through the rule table's
``sympy`` column, over scalar symbols (an elementwise formula) or over object arrays of
element symbols (a formula that mixes elements).

The symbolic reference (:mod:`gradcheck.reference`) differentiates what :func:`lower`
builds; the bench's plain-SymPy baseline starts from it too.
"""

from __future__ import annotations

import numpy as np
import sympy

from ..rules import COMPARISON, ELEMENTWISE
from ..formula.tree import Node, fold


def symbol(name: str) -> sympy.Symbol:
    """The scalar symbol of an input or ``let``. The leading underscore keeps it apart
    from every name in lambdify's namespace (an input may be called ``e`` or ``nan``)."""
    return sympy.Symbol(f"_{name}", real=True)


def element_symbols(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """One symbol per element, ``_{name}_{flat index}``: unique (names are unique and
    the index is all digits) and a valid identifier, so lambdify need not dummify them,
    which costs more than the whole rest of the compile on large formulas."""
    out = np.empty(shape, dtype=object)
    for k, idx in enumerate(np.ndindex(*shape)):
        out[idx] = sympy.Symbol(f"_{name}_{k}", real=True)
    return out


def visit(node: Node, args: list, symbols: dict, scalar: bool, selectors: dict | None):
    """The SymPy meaning of one node from its operands' meanings ``args`` (see
    :func:`lower` for the other arguments)."""
    if node.op == "input":
        return symbols[node.name]
    if node.op == "const":
        return node.value if scalar else np.asarray(node.value, dtype=object)
    if node.op == "let":
        return args[0]
    rule = node.rule
    if scalar:
        return node.call("sympy", args)
    if rule.selector is not None:
        if id(node) not in selectors:   # one symbol per element of the selector's mask
            shape = np.shape(node.call("selector", [np.zeros(node.args[0].shape)]))
            selectors[id(node)] = (node, element_symbols(f"{len(selectors)}pick", shape))
        onehot = selectors[id(node)][1]
        return np.asarray(node.call("sympy", args, onehot), dtype=object)
    if rule.family in (ELEMENTWISE, COMPARISON):   # the scalar meaning, element by element
        return np.asarray(np.frompyfunc(lambda *a: node.call("sympy", a), rule.arity, 1)(
            *args), dtype=object)
    return np.asarray(node.call("sympy", args), dtype=object)   # reductions, linalg


def lower(root: Node, symbols: dict[str, object], scalar: bool,
          selectors: dict | None = None, evaluated: bool = False) -> object:
    """Build the SymPy meaning of ``root`` through the table's ``sympy`` column.

    ``symbols`` maps input (and retained ``let``) names to a scalar symbol (``scalar``)
    or to an object array of element symbols. ``selectors`` collects, for each
    max/min reduction, the one-hot symbols that stand for its pick (see rules.py).
    """

    def at(node: Node, args: list):
        return visit(node, args, symbols, scalar, selectors)

    # Unevaluated first: SymPy's automatic simplification asks assumption queries that
    # cost milliseconds per node (tanh of a sum of products: 3 ms) and changes no value.
    # Some constructions need it, though (a Piecewise nested in a condition is rewritten
    # through simplify(), which fails on unevaluated sums): those are lowered evaluated.
    # ``evaluated``: for SymPy's own diff and cse (hvp, the bench's baseline): cse
    # mistranslates unevaluated products such as x*x.
    if evaluated:   # (evaluated even in a caller's unevaluated context)
        with sympy.core.parameters.evaluate(True):
            return fold(root, at, symbols)
    try:
        with sympy.core.parameters.evaluate(False):
            return fold(root, at, symbols)
    except Exception:
        if selectors is not None:
            selectors.clear()
        with sympy.core.parameters.evaluate(True):
            return fold(root, at, symbols)


def lower_cut(root: Node, cuts: dict[int, sympy.Symbol]) -> sympy.Expr:
    """The scalar SymPy meaning of the elementwise region below ``root``, each node in
    ``cuts`` (by identity: inputs, the results of structural operations) standing for
    its symbol; the walk does not descend below a cut, so a region costs its own size.
    Unevaluated, with the evaluated fallback of :func:`lower` (evaluated even when the
    caller's own context is unevaluated)."""

    def fold_region() -> sympy.Expr:
        return fold(root, lambda node, args: visit(node, args, {}, True, None), cuts)

    try:
        with sympy.core.parameters.evaluate(False):
            return fold_region()
    except Exception:
        with sympy.core.parameters.evaluate(True):
            return fold_region()
