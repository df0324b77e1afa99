"""The tensor-level reference of a formula that mixes elements (matmul, reductions over
an axis, transpose), at real layer sizes: the formula as a program of tensors
(:mod:`.regions`: fused elementwise kernels differentiated by SymPy, structural rows),
differentiated by reverse mode over that program with the rule table's exact tensor
adjoints (its ``tensor`` column: Ā = Ḡ Bᵀ for a matmul, a broadcast for a sum), and
evaluated in float64 at the cost of a forward and a backward. Each gradient is a tensor
formula (:meth:`TensorReference.formulas`), never a sum over Jacobian entries.

Its Jacobian is never formed, so it has no sparsity pattern (the numeric witness then
measures directional derivatives). Double backward (``hvp``, ``jvp``) is reverse mode
over the gradients' own tensor program (:mod:`.second`); the element-expanded
reference's only where a case asks for it or, lacking a row's tensor-level second
derivative, its inputs are tiny (:meth:`TensorReference._second`).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..process.budgets import EXPANDED_SECOND_ELEMENTS, BudgetError, sympy_work
from ..base.errors import UnsupportedOpError
from ..base.evaluation import Evaluation
from ..rules import RULES
from .base import Reference
from .formulas import show
from .regions import Forward
from .texpr import T, depending, evaluate, leaf, order, peak_bytes, run

COTANGENT = "ḡ"   # the leaf that holds v, the output's cotangent
#: the most elements of values a point's several cotangents share (see _unmoved)
SHARED_ELEMENTS = 1 << 22


def _env(point: dict) -> dict:
    """A point's inputs as float64 arrays (integer ones as they are: a row may take them
    as indices)."""
    return {n: (np.asarray(a) if np.asarray(a).dtype.kind in "biu"
                else np.asarray(a, dtype=float)) for n, a in point.items()}


class TensorReference(Reference):
    """Attributes (beside :class:`Reference`'s): ``forward`` (the program of the value),
    ``gradients`` (the tensor of each gradient, by input or retained ``let`` name)."""

    mode = "tensor"

    def __init__(self, case):
        super().__init__(case)
        self.forward = Forward(case)
        self._expanded = None
        seed = leaf(COTANGENT, case.output.shape)
        totals = self._backward(seed)
        b = self.forward.builder
        # an input or let reached only through a zero partial (x * 0) has none: zeros
        tensors = [(n, self.forward.inputs[n]) for n in self.wrt] + list(
            self.forward.retained.items())
        self.gradients: dict[str, T] = {
            n: totals[id(t)] if id(t) in totals else b.broadcast(b.const(0.0), t.shape)
            for n, t in tensors}
        self._shown: dict[str, str] | None = None
        self._outputs = [self.forward.output] + list(self.gradients.values())
        self._frontier: list[T] | None = None   # (see _unmoved)
        _check_memory(self._outputs, case)

    def _backward(self, seed: T) -> dict[int, T]:
        """Reverse mode over the forward program: the total cotangent of every tensor
        that leads to an input in ``wrt`` or a retained ``let``, by tensor identity."""
        b, forward = self.forward.builder, self.forward
        targets = {id(forward.inputs[n]) for n in self.wrt} | {
            id(h) for h in forward.retained.values()}
        nodes = order([forward.output])
        needs: set[int] = set()
        for node in nodes:
            if id(node) in targets or any(id(a) in needs for a in node.args):
                needs.add(id(node))
        pending: dict[int, list[T]] = {id(forward.output): [seed]}
        totals: dict[int, T] = {}
        for node in reversed(nodes):
            parts = pending.pop(id(node), None)
            if not parts:
                continue
            g = totals[id(node)] = b.add(parts)
            for arg, contribution in self._vjps(node, g):
                if id(arg) in needs:
                    pending.setdefault(id(arg), []).append(b.sum_to(contribution, arg.shape))
        return totals

    def _vjps(self, node: T, g: T):
        """(argument, its cotangent contribution) for each argument of ``node``."""
        b = self.forward.builder
        if node.op == "part":              # a kernel's value: its partials
            kernel = node.args[0]
            for j, (i, _, _) in enumerate(kernel.data.partials):
                yield kernel.args[i], b.mul(g, self.forward.partial(kernel, j))
        elif node.op == "row":
            name, params = node.data
            rule = RULES[name]
            for k, arg in enumerate(node.args):   # (None: no derivative, an index)
                with b.within(name):
                    contribution = rule.tensor_vjp(k, b, g, node, node.args, params)
                if contribution is not None:
                    yield arg, contribution

    @property
    def sparsity(self) -> None:
        return None

    def formulas(self) -> dict[str, str]:
        """Each gradient as a tensor formula (``W.grad = xᵀ @ (ḡ ⊙ ...)``), by quantity
        name, shared subexpressions named ``t1``, ``t2``... first (key ``""``)."""
        if self._shown is None:   # printed once, for every dtype the case runs in
            self._shown = show({f"{n}.grad": t for n, t in self.gradients.items()})
        return self._shown

    # ------------------------------------------------------------------ vᵀJ
    def _evaluations(self, points: list, vs: list):
        """Each point with its v; where a point comes several times in a row (an op's
        Jacobian, one one-hot v per output element), what does not depend on v (the
        forward, and what the backward reads of it) is computed once for them all."""
        env, known = None, None
        for k, (p, v) in enumerate(zip(points, vs)):
            if k == 0 or p is not points[k - 1]:
                env = _env(p)
                again = k + 1 < len(points) and points[k + 1] is p
                known = self._unmoved(env) if again else None
            yield self._evaluate_one(dict(env), v, known)

    def _unmoved(self, env: dict) -> dict | None:
        """The values at ``env`` of the nodes that do not depend on v but that the
        outputs read where they do (and of the outputs that do not), by id; None where
        they would hold more than :data:`SHARED_ELEMENTS`."""
        if self._frontier is None:
            moved = depending(self._outputs, COTANGENT)
            edge = {id(a): a for node in order(self._outputs) if id(node) in moved
                    for a in node.args if id(a) not in moved and a.op != "leaf"}
            edge.update({id(o): o for o in self._outputs if id(o) not in moved})
            self._frontier = list(edge.values())
        if sum(n.size for n in self._frontier) > SHARED_ELEMENTS:
            return None
        return run(self._frontier, env)

    def _evaluate_one(self, env: dict, v, known: dict | None = None) -> Evaluation:
        case = self.case
        env[COTANGENT] = np.broadcast_to(np.asarray(v, dtype=float), case.output.shape)
        values = evaluate(self._outputs, env, known)
        names = list(self.gradients)
        grads = dict(zip(names, values[1:]))
        return Evaluation(values[0], {n: grads[n] for n in self.wrt},
                          {n: grads[n] for n in case.retain_grad})

    # ------------------------------------------------------------------ double backward
    def prepare_second(self) -> None:
        self._second()

    def _second(self):
        """What double backward is evaluated with, built on first use: the tensor-level
        second order (:class:`~gradcheck.reference.second.Hessian`); the element-expanded
        reference where the case asks for it (``second_order = "expanded"``), or where
        the tensor level has no second derivative for a row of the formula and the
        inputs are tiny (:data:`~gradcheck.process.budgets.EXPANDED_SECOND_ELEMENTS`); else the
        case's error, never a silent expansion of a large formula.

        Raises:
            UnsupportedOpError: no tensor-level second derivative, and too many elements
                to expand; or the second program would not fit in memory.
            BudgetError: the expanded reference's SymPy work ran past its budget.
        """
        if self._expanded is None:
            from .second import Hessian

            if getattr(self.case, "second_order", "tensor") == "expanded":
                self._expanded = self._expanded_reference(
                    "as the case asks, second_order = \"expanded\"",
                    "leave second_order out to check it at tensor level")
                return self._expanded
            try:
                second = Hessian(self, COTANGENT)
            except UnsupportedOpError as exc:
                elements = sum(math.prod(s.shape) for s in self.case.inputs)
                if elements > EXPANDED_SECOND_ELEMENTS:
                    raise UnsupportedOpError(
                        f"order = 2: {exc}. The element-expanded reference stands in only "
                        f"for inputs of up to {EXPANDED_SECOND_ELEMENTS} elements (these "
                        f"have {elements}), or where the case asks for it with "
                        "second_order = \"expanded\"") from None
                self._expanded = self._expanded_reference(
                    f"for tiny inputs, as {exc}", "use smaller shapes")
                return self._expanded
            _check_memory([second.jvp, *second.hvp.values()], self.case, "double backward")
            self._expanded = second
        return self._expanded

    def _expanded_reference(self, why: str, advice: str):
        """The element-expanded reference's second order, built within SymPy's budget."""
        what = f"order = 2 by the element-expanded reference ({why})"
        try:   # the kind registered as "expanded" (importing it here is a cycle)
            with sympy_work(what):   # its first derivatives and its second, together
                expanded = Reference.kinds["expanded"](self.case)
                expanded.prepare_second()
        except UnsupportedOpError as exc:
            raise UnsupportedOpError(f"{what}: {exc}") from None
        except BudgetError as exc:
            raise BudgetError(f"{exc}: {advice}") from None
        return expanded

    def _env(self, point, v, u) -> dict:
        from .second import DIRECTION

        env = _env(point)
        env[COTANGENT] = np.broadcast_to(np.asarray(v, dtype=float), self.case.output.shape)
        env.update({DIRECTION + n: np.asarray(u[n], dtype=float) for n in self.wrt})
        return env

    def _hvp(self, point, v, u, absolute: bool) -> dict[str, np.ndarray]:
        from .second import Hessian, evaluate_sizes

        second = self._second()
        if not isinstance(second, Hessian):
            return second._hvp(point, v, u, absolute)

        compute = evaluate_sizes if absolute else evaluate
        outs = compute([second.hvp[n] for n in self.wrt], self._env(point, v, u))
        return dict(zip(self.wrt, outs))

    def _jvp(self, point, u, absolute: bool) -> np.ndarray:
        from .second import Hessian, evaluate_sizes

        second = self._second()
        if not isinstance(second, Hessian):
            return second._jvp(point, u, absolute)

        compute = evaluate_sizes if absolute else evaluate
        v = np.zeros(self.case.output.shape)   # J u does not depend on ḡ
        return compute([second.jvp], self._env(point, v, u))[0]


def _available_memory() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(outputs: list[T], case, what: str = "") -> None:
    """Refuse, with the numbers, a program whose tensors could not all fit in memory
    (the only size limit of this reference)."""
    need, free = peak_bytes(outputs), _available_memory()
    if free is not None and need > free:
        raise UnsupportedOpError(
            f"the tensor-level reference of this formula{' (' + what + ')' if what else ''}"
            f" holds up to {need / 2**30:.1f} GiB of float64 intermediates at once, and "
            f"{free / 2**30:.1f} GiB of memory is free; use smaller shapes")
