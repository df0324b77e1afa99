"""The reference of an elementwise formula (possibly under one final ``sum``/``mean``):
every input is a single scalar symbol and the formula one scalar SymPy expression. Its
partial derivatives are the Jacobian's diagonal; the compiled kernel runs on whole
arrays, so a check is O(n) and works for millions of elements."""

from __future__ import annotations

import numpy as np
import sympy

from ..base.evaluation import Evaluation
from .lowering import lower, symbol
from ..base.arrays import SLAB, run_kernel, body_cotangent, unbroadcast
from .kernelcache import cached_lambdify, enabled
from ..formula.tree import canonical, elementwise_split
from .adjoint import Program
from .base import Reference
from .derivatives import MODULES, clean, compile, magnitude, own_meanings


class ElementwiseReference(Reference):
    """Attributes (beside :class:`Reference`'s): ``body``, the elementwise part of the
    formula, and ``reduction``, the final sum/mean node over it or None."""

    mode = "elementwise"

    def __init__(self, case):
        super().__init__(case)
        self.body, self.reduction = elementwise_split(case.output)
        self._double: dict | None = None   # double backward's derivatives, on first use
        self._second: dict = {}            # and their kernels, by kind
        # A kernel this process compiled already: no SymPy work at all: lowering and differentiation are in _build
        self._kernel = cached_lambdify(self._key("main"), self._build, modules=MODULES)

    def _key(self, kind: str) -> str | None:
        """The cache key of one kernel: everything its generated code depends on (the
        scalar kernel does not depend on shapes). None: not to be memoised (a row's
        meaning patched, or the memo off)."""
        case = self.case
        lets = [case.nodes[n] for n in case.retain_grad]
        if not enabled() or not own_meanings(self.body, *lets):
            return None
        return "\n".join([f"elementwise {kind}", f"inputs {[s.name for s in case.inputs]!r}",
                          f"wrt {self.wrt!r}", f"retain_grad {list(case.retain_grad)!r}",
                          canonical(self.body, shapes=False)]
                         + [canonical(node, shapes=False) for node in lets])

    def _build(self):
        """The kernel: the body's value, its partials w.r.t. ``wrt``, then those w.r.t.
        each retained ``let``."""
        case = self.case
        syms = {s.name: symbol(s.name) for s in case.inputs}
        args = [syms[s.name] for s in case.inputs]
        program = Program(clean)
        lets = {name: symbol(name) for name in case.retain_grad}
        # The lowerings and the program's assignments are built unevaluated: in one
        # context (entering or leaving one clears SymPy's cache)
        with sympy.core.parameters.evaluate(False):
            body = lower(self.body, syms, scalar=True)
            program.value(body)
            defined = {name: (lower(case.nodes[name].args[0], syms, True),
                              lower(self.body, dict(syms, **{name: h}), scalar=True))
                       for name, h in lets.items()}
        grads = program.gradient(body, [syms[n] for n in self.wrt])
        exprs = [program.value(body)] + [grads.get(syms[n], 0) for n in self.wrt]
        for name, h in lets.items():
            definition, body_h = defined[name]
            program.define(h, definition)
            exprs.append(program.gradient(body_h, [h]).get(h, 0))
        return program.lambdify(args, exprs, modules=MODULES)

    @property
    def sparsity(self) -> None:
        return None

    # ------------------------------------------------------------------ the kernel
    def _kernel_args(self, point) -> list[np.ndarray]:
        # Every argument at least 1-D and of the body's rank: NumPy then returns arrays
        # (never bare scalars) everywhere, which np.select in Piecewise code requires.
        # (an integer or boolean input as a float64 number: the kernel's arithmetic is
        # float, and NumPy refuses an integer to a negative integer power)
        ndim = max(1, len(self.body.shape))
        return [np.reshape(np.asarray(point[s.name], dtype=float),
                           (1,) * (ndim - len(s.shape)) + s.shape)
                for s in self.case.inputs]

    def _padded(self) -> tuple[int, ...]:
        shape = self.body.shape
        return (1,) * (max(1, len(shape)) - len(shape)) + shape

    # ------------------------------------------------------------------ vᵀJ
    def _evaluations(self, points: list, vs: list):
        """One kernel call for all the points when they are small together (the call's
        fixed cost then dominates), one per point otherwise."""
        padded = self._padded()
        size = int(np.prod(padded, dtype=np.int64))
        if len(points) > 1 and size * len(points) <= SLAB:
            stacked = [np.stack(a) for a in zip(*(self._kernel_args(p) for p in points))]
            outs = run_kernel(self._kernel, stacked, (len(points),) + padded)
            for i, (p, v) in enumerate(zip(points, vs)):
                yield self._evaluate_one(p, v, [o[i] for o in outs])
        else:
            for p, v in zip(points, vs):
                yield self._evaluate_one(p, v)

    def _evaluate_one(self, point, v, kernel_out=None) -> Evaluation:
        case = self.case
        shape = self.body.shape
        if kernel_out is None:
            kernel_out = run_kernel(self._kernel, self._kernel_args(point), self._padded())
        out = [r.reshape(shape) for r in kernel_out]
        body_value, partials = out[0], out[1:]
        reduction = self.reduction
        value = np.array(body_value) if reduction is None else np.asarray(
            reduction.call("numpy", [body_value]))
        v_body = body_cotangent(reduction, v, shape)
        grads = {n: unbroadcast(v_body * d, case.input[n].shape)
                 for n, d in zip(self.wrt, partials)}
        retained = {n: unbroadcast(v_body * d, case.nodes[n].shape)
                    for n, d in zip(case.retain_grad, partials[len(self.wrt):])}
        return Evaluation(value, grads, retained)

    # ------------------------------------------------------------------ double backward
    def _hvp(self, point, v, u, absolute: bool) -> dict[str, np.ndarray]:
        case, shape = self.case, self.body.shape
        pairs = [(a, b) for a in self.wrt for b in self.wrt]
        values = self._second_kernels(point, "magnitude" if absolute else "second")
        v_body = body_cotangent(self.reduction, np.asarray(v, dtype=float), shape)
        out = {n: np.zeros(shape) for n in self.wrt}
        for (a, b), d2 in zip(pairs, values):
            out[a] = out[a] + d2 * np.broadcast_to(u[b], shape)
        return {n: unbroadcast(v_body * out[n], case.input[n].shape) for n in self.wrt}

    def _jvp(self, point, u, absolute: bool) -> np.ndarray:
        shape = self.body.shape
        if absolute:   # the partials with their terms' sizes (1 - y² as 1 + y²)
            partials = self._second_kernels(point, "first")
        else:
            with np.errstate(all="ignore"):
                out = run_kernel(self._kernel, self._kernel_args(point), self._padded())
            partials = out[1:1 + len(self.wrt)]
        body = np.zeros(shape)
        for n, d in zip(self.wrt, partials):
            body = body + d.reshape(shape) * np.broadcast_to(u[n], shape)
        reduction = self.reduction
        return body if reduction is None else np.asarray(
            reduction.call("numpy", [body]))

    def _second_kernels(self, point, which: str) -> list[np.ndarray]:
        """Elementwise kernels for double backward, compiled on first use, at ``point``
        (arrays of the body's shape): ``second``, ∂²/∂a∂b for every pair of inputs;
        ``magnitude``, the same with every term's size kept (:func:`magnitude`);
        ``first``, ∂/∂a with every term's size kept (the size of J u's terms)."""
        if which not in self._second:
            self._second[which] = cached_lambdify(
                self._key(which), lambda: self._compile_second(which), modules=MODULES)
        shape = self.body.shape
        with np.errstate(all="ignore"):
            return [np.broadcast_to(np.asarray(r, dtype=float), self._padded()).reshape(shape)
                    for r in self._second[which](*self._kernel_args(point))]

    def _compile_second(self, which: str):
        if self._double is None:
            self._double = self._second_derivatives()
        return compile(self._double["args"], self._double[which])

    def _second_derivatives(self) -> dict:
        # SymPy's own diff and cse, so the evaluated lowering (see lower)
        case = self.case
        syms = {s.name: symbol(s.name) for s in case.inputs}
        body = lower(self.body, syms, scalar=True, evaluated=True)
        second = [clean(sympy.diff(body, syms[a], syms[b]))
                  for a in self.wrt for b in self.wrt]
        first = [clean(sympy.diff(body, syms[a])) for a in self.wrt]
        return {"second": second, "magnitude": [magnitude(e) for e in second],
                "first": [magnitude(e) for e in first],
                "args": [syms[s.name] for s in case.inputs]}
