"""Reverse-mode (adjoint) differentiation of SymPy expressions, linear in the size of
the expression DAG.

``sympy.diff`` differentiates a tree: on a nested formula every use of a subexpression
is differentiated again and the product rule multiplies the copies, so the derivative of
a depth-8 formula over 8 inputs (about 190 operations) does not finish in minutes.
Here the formula is first turned into a straight-line program, one assignment per
distinct subexpression (SymPy expressions are compared structurally, so a shared
subexpression is one assignment); reverse mode then walks that DAG once per output,
and each adjoint is a sum of (adjoint of a parent) x (local partial) terms, itself
bound to a symbol. Every local partial is the exact derivative of one node with respect
to the symbols of its operands, so the program computes exactly what ``sympy.diff``
computes, with each intermediate value named once instead of copied.

The program goes to ``lambdify`` through its ``cse`` hook: the assignments are the
common subexpressions, already found.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable

import sympy
from sympy.logic.boolalg import Boolean

from .kernelnames import lambdify, printer_settings


def _is_number_valued(node) -> bool:
    """True for a real-valued subexpression (something with a derivative). A Piecewise
    whose pieces are booleans (SymPy folds a comparison against a Piecewise into one)
    is a condition, not a number. (A Symbol is also a Boolean to SymPy; ours are real.)"""
    if isinstance(node, sympy.Symbol):
        return True
    if not isinstance(node, sympy.Expr) or isinstance(node, Boolean):
        return False
    if isinstance(node, sympy.Piecewise):
        return not any(isinstance(pair.expr, Boolean)
                       and not isinstance(pair.expr, sympy.Symbol) for pair in node.args)
    return True


class Program:
    """A straight-line program being built: assignments ``(symbol, shallow expression)``
    in evaluation order, and the symbol that holds each subexpression's value.

    Args:
        clean: applied to every local partial (the caller's rule for the derivatives of
            step functions, e.g. DiracDelta -> 0 away from kinks).
    """

    def __init__(self, clean: Callable = lambda e: e):
        self.assignments: list[tuple[sympy.Symbol, sympy.Expr]] = []
        self._value: dict = {}        # subexpression -> the symbol or atom holding it
        self._rebuilt: dict = {}      # number-valued node -> its assignment's right side
        self._operands: dict = {}     # number-valued node -> its number-valued operands
        self._partials: dict = {}     # node -> [(operand, local partial)]
        self._fdiff: dict = {}        # a function of one symbol -> its derivative
        self._clean = clean

    def _bind(self, expr) -> sympy.Symbol:
        # "_0..." cannot collide with an input's symbol: those are "_" + an identifier,
        # and an identifier never starts with a digit.
        symbol = sympy.Symbol(f"_0t{len(self.assignments)}", real=True)
        self.assignments.append((symbol, expr))
        return symbol

    def define(self, symbol: sympy.Symbol, expr) -> None:
        """Bind ``symbol`` (e.g. a retained intermediate) to the value of ``expr``."""
        self.assignments.append((symbol, self.value(expr)))
        self._value[symbol] = symbol

    def value(self, expr):
        """The symbol (or atom) that holds ``expr``'s value; emits the assignments of
        every subexpression not seen before, children first."""
        return self.values([expr])[0]

    def values(self, exprs: list) -> list:
        """:meth:`value` of each of ``exprs``, in one walk."""
        exprs = [sympy.sympify(e) for e in exprs]
        stack = [(e, False) for e in reversed(exprs) if e not in self._value]
        if stack:
            # Each node is rebuilt as it is, over its operands' symbols, unevaluated
            # (one context for the whole walk: entering one clears SymPy's cache).
            with sympy.core.parameters.evaluate(False):
                self._walk(stack)
        return [self._value[e] for e in exprs]

    def _walk(self, stack: list) -> None:
        while stack:
            node, ready = stack.pop()
            if node in self._value:
                continue
            if node.is_Atom:
                self._value[node] = node
                continue
            if not ready:
                stack.append((node, True))
                stack.extend((a, False) for a in node.args if a not in self._value)
                continue
            rebuilt = node.func(*[self._value[a] for a in node.args])
            if _is_number_valued(node):
                self._rebuilt[node] = rebuilt
                self._value[node] = self._bind(rebuilt)
                _early_fdiff(rebuilt, self._fdiff)
            else:
                self._value[node] = rebuilt

    def operands(self, node) -> list:
        """The number-valued subexpressions ``node`` is computed from directly: its
        arguments, looking through conditions and (expression, condition) pairs."""
        if node not in self._operands:
            found, stack, seen = [], list(node.args), set()
            while stack:
                a = stack.pop()
                if a in seen or a.is_Number or isinstance(a, sympy.NumberSymbol):
                    continue
                seen.add(a)
                if _is_number_valued(a):
                    found.append(a)
                else:
                    stack.extend(a.args)
            self._operands[node] = found
        return self._operands[node]

    def partials(self, node) -> list:
        """``[(operand, ∂node/∂operand)]`` in terms of value symbols, computed once."""
        if node not in self._partials:
            symbol, rebuilt = self._value[node], self._rebuilt[node]
            out = []
            for operand in self.operands(node):
                s = self._value[operand]
                if not isinstance(s, sympy.Symbol):
                    continue
                d = self._fdiff.get(rebuilt) if rebuilt.args == (s,) else None
                d = self._clean(_local_derivative(rebuilt, s) if d is None else d)
                if d != 0:
                    # exp, tanh, ...: the derivative repeats the node; name it once.
                    out.append((operand, _replaced(d, rebuilt, symbol)))
            self._partials[node] = out
        return self._partials[node]

    def gradient(self, y, wrt: Iterable[sympy.Symbol], seed=sympy.S.One) -> dict:
        """``{x: seed · ∂y/∂x}`` for the symbols ``wrt`` that ``y`` depends on, as
        expressions over the program's symbols (one reverse sweep over y's DAG)."""
        y = sympy.sympify(y)
        self.value(y)
        wrt = set(wrt)
        order, seen, stack = [], set(), [(y, False)]
        while stack:                      # post-order over y's number-valued DAG
            node, ready = stack.pop()
            if ready:
                order.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            if not node.is_Atom:
                stack.extend((o, False) for o in self.operands(node) if o not in seen)
        terms: dict = {y: [seed]}
        grads = {}
        for node in reversed(order):
            parts = terms.pop(node, None)
            if not parts:
                continue
            total = sympy.Add(*parts, evaluate=False)
            if node.is_Atom:
                if node in wrt:
                    grads[node] = total
                continue
            if not total.is_Atom:
                total = self._bind(total)
            for operand, d in self.partials(node):
                terms.setdefault(operand, []).append(
                    total if d == 1 else sympy.Mul(total, d, evaluate=False))
        return grads

    def lambdify(self, args, outputs: list, **options):
        """Compile ``outputs`` (expressions over the program's symbols and ``args``) into
        one NumPy function; only the assignments the outputs need are kept."""
        needed = set().union(*(sympy.sympify(o).free_symbols for o in outputs)) \
            if outputs else set()
        kept = []
        for symbol, expr in reversed(self.assignments):
            if symbol in needed:
                kept.append((symbol, expr))
                needed |= expr.free_symbols
        kept.reverse()
        modules = options.pop("modules", None)
        printer = _printer(modules)
        # The outputs go in printed by the same printer, as lambdify would print them
        # (it passes text through as it is): the same code, without lambdify's walks of
        # each output for Subs and implemented functions, which it cannot contain.
        texts = [printer.doprint(o) for o in outputs]
        return lambdify(args, texts, cse=lambda exprs: (kept, exprs), modules=modules,
                        printer=printer, docstring_limit=0, **options)


def _fast_code(expr) -> str | None:
    """Python code for sums, products and integer powers of symbols and integers (most
    of a program's lines), or None for anything else."""
    if isinstance(expr, sympy.Symbol):
        return expr.name
    if isinstance(expr, sympy.Integer):
        return f"({expr.p})"     # (its int: str() of a SymPy number runs its printer)
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        parts = [_fast_code(a) for a in expr.args]
        if None in parts:
            return None
        return "(" + (" + " if isinstance(expr, sympy.Add) else "*").join(parts) + ")"
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer):
        base = _fast_code(expr.base)
        return None if base is None else f"({base}**({expr.exp.p}))"
    return None


def _printer(modules):
    """lambdify's own SciPy printer, told not to sort the terms of sums (sorting does not
    change a value), with a short cut for the program's most common lines (printing is
    most of the compile time otherwise)."""
    return _printer_class()(dict(printer_settings(modules), order="none"))


@functools.cache
def _printer_class():
    """The printer's class, defined once (SymPy's printing is imported on first use)."""
    from sympy.printing.numpy import SciPyPrinter

    class Printer(SciPyPrinter):
        def doprint(self, expr, assign_to=None):
            code = _fast_code(expr) if assign_to is None else None
            return code if code is not None else super().doprint(expr, assign_to)

        def _print_ITE(self, expr):
            # if-then-else of truth values, elementwise
            a, b, c = (self._print(x) for x in expr.args)
            return f"{self._module_format(self._module + '.where')}({a}, {b}, {c})"

        def _print_Piecewise(self, expr):
            # NumPy's printer without its simplify_logic of conditions that hold an ITE
            # (it can take minutes on nested conditions): ITE prints itself above.
            exprs = ",".join(self._print(arg.expr) for arg in expr.args)
            conds = ",".join(self._print(arg.cond) for arg in expr.args)
            return (f"{self._module_format(self._module + '.select')}([{conds}], [{exprs}], "
                    f"default={self._print(sympy.S.NaN)})")

    return Printer


#: what a function's derivative must not hold to be taken unevaluated (the derivatives
#: of steps, which ``clean`` turns into zeros, and forms SymPy only settles evaluated)
_SETTLED_ONLY = (sympy.DiracDelta, sympy.Heaviside, sympy.Derivative, sympy.Subs,
                 sympy.Piecewise)


def _early_fdiff(rebuilt, found: dict) -> None:
    """For a function of one symbol (tanh(t₀)), its own derivative rule taken now, in
    :meth:`Program.values`' unevaluated context: the same expression the evaluated one
    is (``1 - tanh(t₀)**2``), without evaluating the function anew (tanh's evaluation
    asks assumption queries on a cache each unevaluated context empties: a third of
    the cost of differentiating a kernel). A derivative holding a step's derivative or
    a form SymPy settles only evaluated is left to :func:`_local_derivative`."""
    if not (isinstance(rebuilt, sympy.Function) and len(rebuilt.args) == 1
            and isinstance(rebuilt.args[0], sympy.Symbol)):
        return
    try:
        d = rebuilt.fdiff(1)
    except Exception:   # (a function without its own rule: the evaluated path's)
        return
    if isinstance(d, sympy.Expr) and not d.has(*_SETTLED_ONLY):
        found[rebuilt] = d


def _local_derivative(rebuilt, s: sympy.Symbol):
    """∂rebuilt/∂s for one shallow node: sums and products directly, else SymPy on a
    single level (cheap: the operands are symbols)."""
    if isinstance(rebuilt, sympy.Add):
        return sympy.S(sum(1 for a in rebuilt.args if a == s))
    if isinstance(rebuilt, sympy.Mul) and s in rebuilt.args:
        others = list(rebuilt.args)
        others.remove(s)
        if s not in others:
            return sympy.Mul(*others, evaluate=False)
    if isinstance(rebuilt, sympy.Function) and rebuilt.args == (s,):
        return rebuilt.fdiff(1)  # sin, exp, tanh, ...: the function's own rule
    if isinstance(rebuilt, sympy.Piecewise):
        # Conditions are constant almost everywhere: the derivative is the chosen
        # piece's. Built unevaluated: SymPy's own would simplify the conditions, which
        # can take minutes on nested ones and changes no value.
        pieces = [(sympy.S.One if e == s else sympy.S.Zero, c) for e, c in rebuilt.args]
        if all(e == 0 for e, _ in pieces):
            return sympy.S.Zero
        return sympy.Piecewise(*pieces, evaluate=False)
    # What sympy.diff computes for one derivative by a symbol of the node: the node's own
    # rule (Derivative calls the same method), without Derivative's question whether
    # the result is zero (an assumption query, half the cost of diff on x**-1, whose
    # answer returns the same result early). A result still holding a Derivative (or
    # none) is left to diff itself, which makes those canonical.
    found = rebuilt._eval_derivative_n_times(s, 1) if s in rebuilt.free_symbols else None
    if found is None or found.has(sympy.Derivative):
        return sympy.diff(rebuilt, s)
    return found


def _replaced(expr, old, new):
    """``expr.xreplace({old: new})``, the nodes above each ``old`` rebuilt unevaluated:
    the derivative SymPy returned is already in its canonical form, and replacing a
    function by a symbol leaves nothing to combine, while SymPy's evaluated rebuild of
    ``1 - tanh(x)**2`` asks assumption queries, on a cache that every unevaluated
    context empties (half of the cost of a tanh's partial). A node that does not take
    ``evaluate=False`` is rebuilt the evaluated way."""
    if expr == old:
        return new
    if not expr.args or not expr.has(old):
        return expr
    args = tuple(_replaced(a, old, new) for a in expr.args)
    try:
        return expr.func(*args, evaluate=False)
    except TypeError:
        return expr.func(*args)


def inline(program: Program, expr):
    """``expr`` with every program symbol replaced by its definition (for tests and
    small formulas: this is the tree ``sympy.diff`` would have produced)."""
    for symbol, definition in reversed(program.assignments):
        if expr.has(symbol):
            expr = expr.xreplace({symbol: definition})
    return expr
