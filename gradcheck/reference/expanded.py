"""The reference of a formula that mixes elements (matmul, inner reductions, ...): every
input element is its own symbol and the formula an array of scalar expressions. One
reverse sweep per output element gives its derivatives with respect to exactly the
symbols it depends on (the Jacobian's sparsity), which is the exact Jacobian; vᵀJ is
then a sum over its entries."""

from __future__ import annotations

import numpy as np
import sympy

from ..base.errors import UnsupportedOpError
from ..base.evaluation import Evaluation
from ..formula.forward import evaluate
from .lowering import element_symbols, lower
from .adjoint import Program
from .base import Reference
from .derivatives import MODULES, clean, compile, magnitude

EXPANSION_LIMIT = 4096  # input elements a formula that mixes elements may have
#: the compiled second-order programs: H u, and the magnitudes of H u's and J u's terms
SECOND_PROGRAMS = ("hvp", "hvp size", "jvp size")


class ExpandedReference(Reference):
    """Attributes (beside :class:`Reference`'s): ``symbols``, each input's array of
    element symbols; ``index``, each element symbol's (input name, flat index);
    ``selectors``, each max/min reduction's node and one-hot pick symbols; ``args``, the
    compiled program's arguments (every element symbol, then the picks)."""

    mode = "expanded"

    def __init__(self, case):
        super().__init__(case)
        size = sum(int(np.prod(s.shape, dtype=np.int64)) for s in case.inputs)
        if size > EXPANSION_LIMIT:
            raise UnsupportedOpError(
                f"the formula mixes elements (matmul or an inner reduction) and its "
                f"inputs have {size} elements; the symbolic reference expands such "
                f"formulas element by element up to {EXPANSION_LIMIT} elements. "
                "Use smaller shapes, or write it elementwise under a final sum/mean.")
        self._second = None   # the Hessian-vector product's program, on first use
        self.symbols = {s.name: element_symbols(s.name, s.shape) for s in case.inputs}
        self.index = {sym: (name, k) for name, arr in self.symbols.items()
                      for k, sym in enumerate(arr.flat)}
        self.selectors: dict = {}
        out = lower(case.output, self.symbols, False, self.selectors)
        self.args = [list(self.symbols[s.name].flat) for s in case.inputs] + [
            list(sym.flat) for _, sym in self.selectors.values()]
        wrt = {s for n in self.wrt for s in self.symbols[n].flat}
        self._program = Program(clean)
        self._forward = self._program.lambdify(
            self.args, self._program.values(list(out.flat)), modules=MODULES)
        self._jac = self._jacobian(out, wrt, self.args)
        self._retained = [self._retained_jacobian(name) for name in case.retain_grad]

    def _retained_jacobian(self, name: str) -> tuple:
        """``(name, the let's value as a compiled function, the output's Jacobian with
        respect to the let's own symbols)`` for a retained ``let``."""
        let = self.case.nodes[name]
        h = element_symbols(name, let.shape)
        local = dict(self.symbols, **{name: h})
        out_h = lower(self.case.output, local, False, self.selectors)
        h_value = lower(let.args[0], self.symbols, False, self.selectors)
        args = self.args + [list(h.flat)]
        h_fn = self._program.lambdify(
            self.args, self._program.values(list(h_value.flat)), modules=MODULES)
        return name, h_fn, self._jacobian(out_h, set(h.flat), args, h)

    def _jacobian(self, out: np.ndarray, wrt: set, args: list, target=None):
        """Compiled non-zero Jacobian entries of ``out`` w.r.t. the symbols ``wrt``."""
        index = self.index if target is None else {
            s: (None, k) for k, s in enumerate(target.flat)}
        rows, cols, names, exprs = [], [], [], []
        for k, y in enumerate(out.flat):
            grads = self._program.gradient(y, wrt)
            for sym in sorted(grads, key=lambda s: index[s][1]):
                name, j = index[sym]
                rows.append(k)
                cols.append(j)
                names.append(name)
                exprs.append(grads[sym])
        fn = self._program.lambdify(args, exprs, modules=MODULES) if exprs else None
        return (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64),
                np.array(names, dtype=object), fn)

    def _expanded_args(self, point) -> list[np.ndarray]:
        """The compiled expanded program's arguments: every input element, then the
        one-hot pick of each max/min at this point."""
        args = [np.asarray(point[s.name], dtype=float).reshape(-1) for s in self.case.inputs]
        for node, _ in self.selectors.values():
            picked = evaluate(node.args[0], point)
            args.append(node.call("selector", [picked]).reshape(-1))
        return args

    @property
    def sparsity(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        rows, cols, names, _ = self._jac
        out = {n: (rows[names == n], cols[names == n]) for n in self.wrt}
        for name, _, (r, c, _, _) in self._retained:
            out[name] = (r, c)
        return out

    # ------------------------------------------------------------------ vᵀJ
    @staticmethod
    def _vjp(jac, args, v_flat, sizes: dict) -> dict:
        """vᵀJ by input name from the non-zero entries."""
        rows, cols, names, fn = jac
        out = {name: np.zeros(size) for name, size in sizes.items()}
        if fn is None:
            return out
        values = np.asarray(fn(*args), dtype=float).reshape(-1)
        for name in out:
            mask = names == name
            np.add.at(out[name], cols[mask], v_flat[rows[mask]] * values[mask])
        return out

    def _evaluations(self, points: list, vs: list):
        return (self._evaluate_one(p, v) for p, v in zip(points, vs))

    def _evaluate_one(self, point, v) -> Evaluation:
        case = self.case
        args = self._expanded_args(point)
        value = np.asarray(self._forward(*args), dtype=float).reshape(case.output.shape)
        v_flat = np.broadcast_to(v, case.output.shape).reshape(-1)
        sizes = {n: case.input[n].shape for n in self.wrt}
        flat = self._vjp(self._jac, args, v_flat,
                         {n: int(np.prod(s, dtype=np.int64)) for n, s in sizes.items()})
        grads = {n: flat[n].reshape(sizes[n]) for n in self.wrt}
        retained = {}
        for name, h_fn, jac in self._retained:
            shape = case.nodes[name].shape
            h_args = args + [np.asarray(h_fn(*args), dtype=float).reshape(-1)]
            size = int(np.prod(shape, dtype=np.int64))
            retained[name] = self._vjp(jac, h_args, v_flat, {None: size})[None].reshape(shape)
        return Evaluation(value, grads, retained)

    # ------------------------------------------------------------------ double backward
    def _jvp(self, point, u, absolute: bool) -> np.ndarray:
        case = self.case
        if absolute:   # the size of J u's terms (1 - tanh² as 1 + tanh²)
            return self._second_values(point, np.zeros(case.output.size), u,
                                       "jvp size").reshape(case.output.shape)
        rows, cols, names, fn = self._jac
        out = np.zeros(case.output.size)
        if fn is not None:
            with np.errstate(all="ignore"):
                values = np.asarray(fn(*self._expanded_args(point)), dtype=float).reshape(-1)
            for n in self.wrt:
                mask = names == n
                np.add.at(out, rows[mask],
                          values[mask] * np.asarray(u[n], dtype=float).reshape(-1)[cols[mask]])
        return out.reshape(case.output.shape)

    def _hvp(self, point, v, u, absolute: bool) -> dict[str, np.ndarray]:
        """The Hessian-vector product of an expanded formula: SymPy differentiates
        s = Σ_j u_j ∂(vᵀy)/∂x_j once more, with v and u as symbols, compiled once;
        ``absolute``: the same sum with every term by its magnitude, at |v|, |u|."""
        case = self.case
        values = self._second_values(point, np.broadcast_to(v, case.output.shape)
                                     .reshape(-1), u, "hvp size" if absolute else "hvp")
        result, start = {}, 0
        for n in self.wrt:
            shape = case.input[n].shape
            size = int(np.prod(shape, dtype=np.int64))
            result[n] = values[start:start + size].reshape(shape)
            start += size
        return result

    def prepare_second(self) -> None:
        """Build and compile the second-order programs (:meth:`_second_programs`) now,
        within SymPy's budget (:func:`gradcheck.process.budgets.sympy_work`), for a check
        (op.double); a test's ground truth builds them on first use, unbudgeted.

        Raises:
            BudgetError: SymPy's work on them ran past the budget.
        """
        from ..process.budgets import sympy_work

        if self._second is not None and all(w in self._second for w in SECOND_PROGRAMS):
            return
        with sympy_work("the element-expanded reference's second derivatives "
                        "(order = 2)"):
            for which in SECOND_PROGRAMS:
                self._compiled(which)

    def _compiled(self, which: str):
        """One of the second-order programs, built and compiled on first use."""
        if self._second is None:
            self._second = self._second_programs()
        if which not in self._second:
            args, exprs = self._second["args"], self._second["exprs"][which]
            self._second[which] = compile(args, exprs if "size" not in which
                                          else [magnitude(e) for e in exprs])
        return self._second[which]

    def _second_values(self, point, v_flat, u, which: str) -> np.ndarray:
        """One of the second-order programs (:meth:`_second_programs`) at ``point``."""
        program = self._compiled(which)
        flat_u = np.concatenate([np.asarray(u[n], dtype=float).reshape(-1) for n in self.wrt]
                                ) if self.wrt else np.zeros(0)
        with np.errstate(all="ignore"):
            return np.asarray(program(*self._expanded_args(point), v_flat, flat_u),
                              dtype=float).reshape(-1)

    def _second_programs(self) -> dict:
        """The second derivatives as SymPy expressions over the element symbols, v and u
        (compiled on first use, each kind): ∂s/∂x (the Hessian-vector product) and
        ∂s/∂v (J u), s = Σ_j u_j ∂(vᵀy)/∂x_j."""
        out = lower(self.case.output, self.symbols, False, self.selectors, evaluated=True)
        vsyms = [sympy.Symbol(f"_0v{r}", real=True) for r in range(out.size)]
        xs = [x for n in self.wrt for x in self.symbols[n].flat]
        usyms = [sympy.Symbol(f"_0u{j}", real=True) for j in range(len(xs))]
        total = sympy.Add(*[a * b for a, b in zip(vsyms, out.flat)])
        direction = sympy.Add(*[b * sympy.diff(total, x) for x, b in zip(xs, usyms)])
        hvp = [clean(sympy.diff(direction, x)) for x in xs]
        jvp = [clean(sympy.diff(direction, w)) for w in vsyms]
        return {"args": self.args + [vsyms, usyms],
                "exprs": {"hvp": hvp, "hvp size": hvp, "jvp size": jvp}}
