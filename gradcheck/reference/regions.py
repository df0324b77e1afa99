"""The formula as a program of tensors (:mod:`.texpr`): each structural operation
(matmul, a reduction over an axis, transpose) is one ``row`` node, and each maximal
elementwise region between them is fused into one :class:`Kernel`, a scalar SymPy
expression over the region's boundary tensors, differentiated by reverse mode over its
DAG (:mod:`.adjoint`) and compiled with ``lambdify`` into one NumPy function that
returns its value and its partial derivatives.

A region's boundary is where it stops: an input, the result of a structural operation,
or a ``let`` listed in ``retain_grad`` (which is a tensor of its own, so that its
cotangent is what PyTorch's ``h.grad`` holds). Constants are folded into the kernel.
"""

from __future__ import annotations

import re

import numpy as np
import sympy

from . import shown
from .kernelcache import cached_lambdify, enabled
from .lowering import lower_cut
from ..rules import COMPARISON, ELEMENTWISE
from ..formula.tree import Node, canonical
from .adjoint import Program, inline
from .derivatives import MODULES, clean, own_meanings
from .texpr import Builder, T, leaf


SHOWN_OPERATIONS = 400    # a kernel's printed formula beyond this many operations is named


class Kernel:
    """One fused elementwise region: ``run(args)`` returns its value and the partial
    derivative with respect to each boundary argument it depends on, ``partials[j]``
    being ``(argument index, constant or None)``: a partial that is a number (1 for
    ``a + b``) is kept as that number, never as an array."""

    def __init__(self, root: Node, cuts: list[Node], shape: tuple[int, ...]):
        self.shape = shape
        self.symbols = [sympy.Symbol(f"_0b{i}", real=True) for i in range(len(cuts))]
        self.program = Program(clean)
        # The lowering and the program's assignments are both built unevaluated: in one
        # context (entering or leaving one clears SymPy's cache)
        with sympy.core.parameters.evaluate(False):
            self.expr = lower_cut(root, {id(n): s for n, s in zip(cuts, self.symbols)})
            self.program.value(self.expr)
        grads = self.program.gradient(self.expr, self.symbols)
        outputs = [self.program.value(self.expr)]
        # (argument index, the partial's number or None, its output's index or None);
        # equal partials are one output (∂(a + b)/∂a and /∂b under tanh: one array)
        self.partials: list[tuple[int, float | None, int | None]] = []
        computed: dict = {}
        for i, s in enumerate(self.symbols):
            if s not in grads:
                continue
            d = grads[s]
            if not sympy.sympify(d).free_symbols:
                self.partials.append((i, float(d), None))
                continue
            if d not in computed:
                computed[d] = len(outputs)
                outputs.append(d)
            self.partials.append((i, None, computed[d]))
        self.outputs = outputs
        key = None if not enabled() or not own_meanings(root) else "tensor kernel\n" + \
            canonical(root, {id(n): s.name for n, s in zip(cuts, self.symbols)},
                      shapes=False)
        self.fn = cached_lambdify(key, lambda: self.program.lambdify(
            self.symbols, outputs, modules=MODULES), modules=MODULES)
        self._tree_sizes: tuple[dict, int] = ({}, 0)
        # a region with a row printed by its name (sigmoid): printed from an expression
        # of its own (:mod:`.shown`), built when first printed
        cut = {id(n): s for n, s in zip(cuts, self.symbols)}
        self._shown = (root, cut) if shown.has_shown(root, cut) else None

    def run(self, args: list[np.ndarray]) -> list[np.ndarray]:
        from ..base.arrays import run_kernel

        # (an integer or boolean boundary as float64 numbers: the kernel's arithmetic
        # is float, and NumPy refuses an integer to a negative integer power)
        return run_kernel(self.fn, [np.asarray(a, dtype=float) for a in args], self.shape)

    def shown(self, names: list[tuple[str, bool]], output: int) -> str:
        """Output ``output`` of the kernel (0: its value, else a partial) as text, the
        boundary arguments spelled ``names`` ((text, atomic) pairs: a compound one is
        parenthesised unless it is a function's whole argument already). A formula whose
        printed tree would have more than :data:`SHOWN_OPERATIONS` operations (a DAG
        unfolds exponentially) is named, not printed. Only the outputs a report shows
        are printed (SymPy's printing is most of the cost of ``formulas()``)."""
        if self._shown is not None:
            expr = self._shown_output(output)
            inlined = False
        else:
            inlined = output != 0
            expr = sympy.sympify(self.outputs[output]) if inlined else self.expr
        size = _tree_size(expr, self._sizes() if inlined else {})
        if size > SHOWN_OPERATIONS:
            return f"a formula of {size:.3g} operations, not printed"
        if inlined:
            try:   # (rebuilding a condition, SymPy may evaluate Eq(0 + 0, ...) and fail)
                expr = inline(self.program, expr)
            except (ArithmeticError, TypeError, ValueError) as exc:
                return f"a formula SymPy could not print ({type(exc).__name__})"
        try:   # SymPy's own simplification of the unevaluated program (1*(2*t))
            expr = expr.doit()
        except Exception:
            pass
        text = shown.text(expr)
        for s, (name, atomic) in zip(self.symbols, names):
            if not atomic:
                text = re.sub(rf"\({s.name}\)", lambda m: f"({name})", text)
            text = re.sub(rf"\b{s.name}\b", lambda m: name if atomic else f"({name})",
                          text)
        return text

    def _shown_output(self, output: int):
        """Output ``output`` printed through :mod:`.shown`: the region's value in the
        rows' own names, or its derivative by the argument whose partial it is."""
        if not isinstance(self._shown, sympy.Basic):
            self._shown = shown.lower_shown(*self._shown)
        if output == 0:
            return self._shown
        i = next(i for i, _, k in self.partials if k == output)
        return sympy.diff(self._shown, self.symbols[i])

    def _sizes(self) -> dict:
        """The printed tree size of each program symbol's definition (kept, and extended
        by the assignments added since: second.py differentiates the same program)."""
        sizes, done = self._tree_sizes
        for symbol, definition in self.program.assignments[done:]:
            sizes[symbol] = _tree_size(definition, sizes)
        self._tree_sizes = (sizes, len(self.program.assignments))
        return sizes


def _tree_size(expr, sizes: dict) -> int:
    """Operations in ``expr`` printed as a tree (each shared subexpression counted as
    often as it appears), a symbol of the program counting as its own definition's
    (``sizes``); computed over the DAG, once per distinct subexpression."""
    memo: dict = {}
    stack = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if node in memo:
            continue
        if not node.args:
            memo[node] = sizes.get(node, 1)
        elif ready:
            memo[node] = 1 + sum(memo[a] for a in node.args)
        else:
            stack.append((node, True))
            stack.extend((a, False) for a in node.args if a not in memo)
    return memo[expr]


class Forward:
    """The forward program of a case: ``output`` (its tensor), ``inputs`` (a leaf per
    input name), ``retained`` (the tensor of each retained ``let``), ``builder``."""

    def __init__(self, case):
        self.builder = Builder()
        self.inputs = {s.name: leaf(s.name, s.shape) for s in case.inputs}
        self._retain = set(case.retain_grad)
        self._memo: dict[int, T] = {}
        self.retained: dict[str, T] = {}
        self.output = self.tensor(case.output)
        for name in case.retain_grad:
            self.retained[name] = self.tensor(case.nodes[name])

    def tensor(self, node: Node) -> T:
        """The tensor that holds ``node``'s value (built once per node)."""
        key = id(node)
        if key not in self._memo:
            self._memo[key] = self._build(node)
        return self._memo[key]

    def _build(self, node: Node) -> T:
        if node.op == "input":
            return self.inputs[node.name]
        if node.op == "const":
            return self.builder.const(node.const)
        if node.op == "let":
            value = self.tensor(node.args[0])
            if node.name in self._retain:
                self.retained[node.name] = value
            return value
        if node.rule.family in (ELEMENTWISE, COMPARISON):
            return self._kernel(node)
        return self.builder.make("row", tuple(self.tensor(a) for a in node.args),
                                 node.shape, (node.op, node.params))

    def _is_cut(self, node: Node) -> bool:
        if node.op == "input":
            return True
        if node.op == "let":
            return node.name in self._retain
        return node.op != "const" and node.rule.family not in (ELEMENTWISE, COMPARISON)

    def _kernel(self, root: Node) -> T:
        cuts: list[Node] = []
        seen: set[int] = set()
        stack = [root]
        while stack:                      # the region: down to its cuts
            node = stack.pop()
            for c in node.args:
                if id(c) in seen:
                    continue
                seen.add(id(c))
                if self._is_cut(c):
                    cuts.append(c)
                elif c.op != "const":
                    stack.append(c)
        fused = Kernel(root, cuts, root.shape)
        kernel = self.builder.make("kernel", tuple(self.tensor(c) for c in cuts),
                                   root.shape, fused)
        return self.builder.value(kernel)

    def partial(self, kernel: T, j: int) -> T:
        """The tensor of the kernel's ``j``-th partial derivative (a const when it is a
        number; one tensor for equal partials)."""
        _, constant, index = kernel.data.partials[j]
        if constant is not None:
            return self.builder.const(constant)
        return self.builder.make("part", (kernel,), kernel.shape, index)
