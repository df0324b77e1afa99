"""The symbolic reference: the formula as a SymPy tree, differentiated exactly by reverse
mode over its DAG (:mod:`gradcheck.adjoint`, linear in the formula's size where
``sympy.diff`` swells exponentially on nested formulas), compiled once per case with
``lambdify``.

Two shapes of formula:

- **elementwise** (possibly under one final ``sum``/``mean``): every input is a single
  scalar symbol and the formula one scalar SymPy expression. Its partial derivatives are
  the Jacobian's diagonal; the compiled kernel runs on whole arrays, so a check is O(n)
  and works for millions of elements.
- **expanded** (matmul, inner reductions, ...): every input element is its own symbol
  and the formula an array of scalar expressions. One reverse sweep per output element
  gives its derivatives with respect to exactly the symbols it depends on (the
  Jacobian's sparsity), which is the exact Jacobian; vᵀJ is then a sum over its entries.

A ``let`` name listed in ``retain_grad`` becomes a symbol of its own (the other paths
from the inputs stay as they are), which is exactly what PyTorch's ``h.grad`` means.
"""

from __future__ import annotations

import numpy as np
import sympy

from .adjoint import Program
from .errors import UnsupportedOpError
from .evaluation import Evaluation
from .forward import evaluate
from .rules import REDUCTION, RULES
from .tree import (SLAB, Node, cut, differentiable_names, elementwise_split, fold, slabs,
                   top_cotangent, unbroadcast)

EXPANSION_LIMIT = 4096  # input elements a formula that mixes elements may have

def _select(condlist, choicelist, default=0.0):
    # SymPy folds a comparison against a Piecewise into a boolean-valued Piecewise;
    # np.select then returns floats, which must be read back as truth values here.
    return np.select([np.asarray(c).astype(bool) for c in condlist], choicelist, default)


_MODULES = [{"sign": np.sign, "Heaviside": lambda x, h=0.5: np.heaviside(x, h),
             "select": _select}, "scipy", "numpy"]


def _lower(root: Node, symbols: dict[str, object], scalar: bool,
           selectors: dict | None = None, evaluated: bool = False) -> object:
    """Build the SymPy meaning of ``root`` through the table's ``sympy`` column.

    ``symbols`` maps input (and retained ``let``) names to a scalar symbol (``scalar``)
    or to an object array of element symbols. ``selectors`` collects, for each
    max/min reduction, the one-hot symbols that stand for its pick (see rules.py).
    """

    def visit(node: Node, args: list):
        if node.op == "input":
            return symbols[node.name]
        if node.op == "const":
            return node.value if scalar else np.asarray(node.value, dtype=object)
        if node.op == "let":
            return args[0]
        rule = RULES[node.op]
        if scalar:
            return rule.sympy(*args)
        if rule.selector is not None:
            if id(node) not in selectors:
                selectors[id(node)] = (node, _element_symbols(f"{len(selectors)}pick",
                                                              node.args[0].shape))
            onehot = selectors[id(node)][1]
            return np.asarray(rule.sympy(args[0], node.axis, node.keepdims, onehot),
                              dtype=object)
        if rule.kind == REDUCTION:
            return np.asarray(rule.sympy(args[0], node.axis, node.keepdims), dtype=object)
        if rule.kind in ("elementwise", "comparison"):
            return np.asarray(np.frompyfunc(rule.sympy, rule.arity, 1)(*args), dtype=object)
        return np.asarray(rule.sympy(*args), dtype=object)

    # Unevaluated first: SymPy's automatic simplification asks assumption queries that
    # cost milliseconds per node (tanh of a sum of products: 3 ms) and changes no value.
    # Some constructions need it, though (a Piecewise nested in a condition is rewritten
    # through simplify(), which fails on unevaluated sums): those are lowered evaluated.
    # ``evaluated``: for SymPy's own diff and cse (hvp, the bench's baseline): cse
    # mistranslates unevaluated products such as x*x.
    if evaluated:
        return fold(root, visit, symbols)
    try:
        with sympy.core.parameters.evaluate(False):
            return fold(root, visit, symbols)
    except Exception:
        if selectors is not None:
            selectors.clear()
        return fold(root, visit, symbols)


def _is_step_derivative(e) -> bool:
    return isinstance(e, sympy.Derivative) and isinstance(e.expr, (sympy.sign,
                                                                    sympy.Heaviside))


def _clean(expr: sympy.Expr) -> sympy.Expr:
    # Away from kinks the derivative of sign/Heaviside is 0. SymPy says DiracDelta, or
    # leaves Derivative(sign(f), x) unevaluated when it cannot tell that f is real.
    if expr.has(sympy.DiracDelta):
        expr = expr.replace(sympy.DiracDelta, lambda *a: sympy.S.Zero)
    if expr.has(sympy.Derivative):
        expr = expr.replace(_is_step_derivative, lambda e: sympy.S.Zero)
    return expr


def _compile(args, exprs):
    return sympy.lambdify(args, exprs, modules=_MODULES, cse=True)


class Reference:
    """The compiled symbolic reference of one case.

    Raises:
        UnsupportedOpError: the formula mixes elements and is too large to expand.
    """

    def __init__(self, case):
        self.case = case
        reach = differentiable_names(case.output)
        self.wrt = [s.name for s in case.inputs if s.requires_grad and s.name in reach]
        # PyTorch leaves .grad None for an input no differentiable path reaches.
        self.unreached = [s.name for s in case.inputs
                          if s.requires_grad and s.name not in reach]
        split = elementwise_split(case.output)
        if split is not None:
            self.mode = "elementwise"
            self.body, self.top = split
            self._build_elementwise()
        else:
            self.mode = "expanded"
            size = sum(int(np.prod(s.shape, dtype=np.int64)) for s in case.inputs)
            if size > EXPANSION_LIMIT:
                raise UnsupportedOpError(
                    f"the formula mixes elements (matmul or an inner reduction) and its "
                    f"inputs have {size} elements; the symbolic reference expands such "
                    f"formulas element by element up to {EXPANSION_LIMIT} elements. "
                    "Use smaller shapes, or write it elementwise under a final sum/mean.")
            self._build_expanded()

    # ------------------------------------------------------------------ elementwise
    def _build_elementwise(self) -> None:
        case = self.case
        syms = {s.name: _symbol(s.name) for s in case.inputs}
        args = [syms[s.name] for s in case.inputs]
        body = _lower(self.body, syms, scalar=True)
        program = Program(_clean)
        grads = program.gradient(body, [syms[n] for n in self.wrt])
        exprs = [program.value(body)] + [grads.get(syms[n], 0) for n in self.wrt]
        for name in case.retain_grad:
            h = _symbol(name)
            program.define(h, _lower(case.nodes[name].args[0], syms, True))
            body_h = _lower(self.body, dict(syms, **{name: h}), scalar=True)
            exprs.append(program.gradient(body_h, [h]).get(h, 0))
        self._kernel = program.lambdify(args, exprs, modules=_MODULES)

    def _kernel_args(self, point) -> list[np.ndarray]:
        # Every argument at least 1-D and of the body's rank: NumPy then returns arrays
        # (never bare scalars) everywhere, which np.select in Piecewise code requires.
        ndim = max(1, len(self.body.shape))
        return [np.reshape(point[s.name], (1,) * (ndim - len(s.shape)) + s.shape)
                for s in self.case.inputs]

    def _padded(self) -> tuple[int, ...]:
        shape = self.body.shape
        return (1,) * (max(1, len(shape)) - len(shape)) + shape

    def _run_kernel(self, args: list[np.ndarray], padded: tuple) -> list[np.ndarray]:
        """The kernel's outputs at the shape ``padded``, computed slab by slab, so that
        each of the program's intermediate arrays stays small (a million-element case
        would otherwise hold dozens of full-size temporaries at once)."""
        pieces = slabs(padded)
        if len(pieces) == 1:
            return [np.broadcast_to(np.asarray(r, dtype=float), padded)
                    for r in self._kernel(*args)]
        outs = None
        for axis, part, where in pieces:
            results = self._kernel(*[cut(a, len(padded), axis, part) for a in args])
            if outs is None:
                outs = [np.empty(padded) for _ in results]
            for o, r in zip(outs, results):
                o[where] = r
        return outs

    def _evaluations_elementwise(self, points: list, vs: list):
        """One kernel call for all the points when they are small together (the call's
        fixed cost then dominates), one per point otherwise."""
        padded = self._padded()
        size = int(np.prod(padded, dtype=np.int64))
        if len(points) > 1 and size * len(points) <= SLAB:
            stacked = [np.stack(a) for a in zip(*(self._kernel_args(p) for p in points))]
            outs = self._run_kernel(stacked, (len(points),) + padded)
            for i, (p, v) in enumerate(zip(points, vs)):
                yield self._evaluate_elementwise(p, v, [o[i] for o in outs])
        else:
            for p, v in zip(points, vs):
                yield self._evaluate_elementwise(p, v)

    def _evaluate_elementwise(self, point, v, kernel_out=None) -> Evaluation:
        case = self.case
        shape = self.body.shape
        args = self._kernel_args(point)
        padded = self._padded()
        if kernel_out is None:
            kernel_out = self._run_kernel(args, padded)
        out = [r.reshape(shape) for r in kernel_out]
        body_value, partials = out[0], out[1:]
        top = self.top
        value = np.array(body_value) if top is None else np.asarray(
            RULES[top.op].numpy(body_value, top.axis, top.keepdims))
        v_body = top_cotangent(top, v, shape)
        grads = {n: unbroadcast(v_body * d, case.input[n].shape)
                 for n, d in zip(self.wrt, partials)}
        retained = {n: unbroadcast(v_body * d, case.nodes[n].shape)
                    for n, d in zip(case.retain_grad, partials[len(self.wrt):])}
        return Evaluation(value, grads, retained)

    # ------------------------------------------------------------------ expanded
    def _build_expanded(self) -> None:
        case = self.case
        self.symbols = {s.name: _element_symbols(s.name, s.shape) for s in case.inputs}
        self.index = {sym: (name, k) for name, arr in self.symbols.items()
                      for k, sym in enumerate(arr.flat)}
        self.selectors: dict = {}
        out = _lower(case.output, self.symbols, False, self.selectors)
        self.args = [list(self.symbols[s.name].flat) for s in case.inputs] + [
            list(sym.flat) for _, sym in self.selectors.values()]
        wrt = {s for n in self.wrt for s in self.symbols[n].flat}
        self._program = Program(_clean)
        self._forward = self._program.lambdify(
            self.args, self._program.values(list(out.flat)), modules=_MODULES)
        self._jac = self._jacobian(out, wrt, self.args)
        self._retained = []
        for name in case.retain_grad:
            let = case.nodes[name]
            h = _element_symbols(name, let.shape)
            local = dict(self.symbols, **{name: h})
            out_h = _lower(case.output, local, False, self.selectors)
            h_value = _lower(let.args[0], self.symbols, False, self.selectors)
            args = self.args + [list(h.flat)]
            h_fn = self._program.lambdify(
                self.args, self._program.values(list(h_value.flat)), modules=_MODULES)
            self._retained.append((name, h_fn,
                                   self._jacobian(out_h, set(h.flat), args, h)))

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
        fn = self._program.lambdify(args, exprs, modules=_MODULES) if exprs else None
        return (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64),
                np.array(names, dtype=object), fn)

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

    def _evaluate_expanded(self, point, v) -> Evaluation:
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

    # ------------------------------------------------------------------ public
    @property
    def sparsity(self) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
        """The Jacobian's structural non-zeros by input (and retained ``let``) name, as
        flat (output row, input element) index arrays; None for an elementwise formula
        (its Jacobian is diagonal up to broadcasting)."""
        if self.mode != "expanded":
            return None
        rows, cols, names, _ = self._jac
        out = {n: (rows[names == n], cols[names == n]) for n in self.wrt}
        for name, _, (r, c, _, _) in self._retained:
            out[name] = (r, c)
        return out

    def evaluate(self, point: dict[str, np.ndarray], v: np.ndarray) -> Evaluation:
        """Output value and exact vᵀJ at ``point`` (float64 arrays by input name)."""
        return next(self.evaluations([point], [v]))

    def evaluations(self, points: list[dict[str, np.ndarray]], vs: list[np.ndarray]):
        """:meth:`evaluate` at each point with its v, in order (a generator); small
        elementwise formulas are evaluated at all the points in one vectorized call."""
        vs = [np.asarray(v, dtype=float) for v in vs]
        if self.mode == "elementwise":
            results = self._evaluations_elementwise(points, vs)
        else:
            results = (self._evaluate_expanded(p, v) for p, v in zip(points, vs))
        while True:
            with np.errstate(all="ignore"):
                out = next(results, None)
            if out is None:
                return
            out.grads.update(dict.fromkeys(self.unreached))
            yield out

    def hvp(self, point: dict[str, np.ndarray], v: np.ndarray,
            u: dict[str, np.ndarray], absolute: bool = False) -> dict[str, np.ndarray]:
        """Exact Hessian-vector product of vᵀy: for each input x_i,
        Σ_j ∂²(vᵀy)/∂x_i∂x_j · u_j (what double backward computes).

        ``absolute``: the same sum of magnitudes (|v|, |u| and, elementwise, |∂²|), the
        size its rounding errors scale with."""
        if absolute:
            v, u = np.abs(v), {n: np.abs(a) for n, a in u.items()}
        if self.mode != "elementwise":
            out = self._hvp_expanded(point, v, u)
            return {n: np.abs(h) for n, h in out.items()} if absolute else out
        case, shape = self.case, self.body.shape
        pairs = [(a, b) for a in self.wrt for b in self.wrt]
        values = self._second_kernels(point, "magnitude" if absolute else "second")
        v_body = top_cotangent(self.top, np.asarray(v, dtype=float), shape)
        out = {n: np.zeros(shape) for n in self.wrt}
        for (a, b), d2 in zip(pairs, values):
            out[a] = out[a] + d2 * np.broadcast_to(u[b], shape)
        return {n: unbroadcast(v_body * out[n], case.input[n].shape) for n in self.wrt}

    def _second_kernels(self, point, which: str) -> list[np.ndarray]:
        """Elementwise kernels for double backward, compiled on first use, at ``point``
        (arrays of the body's shape): ``second``, ∂²/∂a∂b for every pair of inputs;
        ``magnitude``, the same with every term's size kept (:func:`_magnitude`);
        ``first``, ∂/∂a with every term's size kept (the size of J u's terms)."""
        case, shape = self.case, self.body.shape
        if not hasattr(self, "_double"):
            syms = {s.name: _symbol(s.name) for s in case.inputs}
            body = _lower(self.body, syms, scalar=True, evaluated=True)
            args = [syms[s.name] for s in case.inputs]
            second = [_clean(sympy.diff(body, syms[a], syms[b]))
                      for a in self.wrt for b in self.wrt]
            first = [_clean(sympy.diff(body, syms[a])) for a in self.wrt]
            self._double = {"second": second, "magnitude": [_magnitude(e) for e in second],
                            "first": [_magnitude(e) for e in first], "args": args}
        if not callable(self._double.get(f"{which}_fn")):
            self._double[f"{which}_fn"] = _compile(self._double["args"],
                                                   self._double[which])
        ndim = max(1, len(shape))
        padded = (1,) * (ndim - len(shape)) + shape
        args = [np.reshape(point[s.name], (1,) * (ndim - len(s.shape)) + s.shape)
                for s in case.inputs]
        with np.errstate(all="ignore"):
            return [np.broadcast_to(np.asarray(r, dtype=float), padded).reshape(shape)
                    for r in self._double[f"{which}_fn"](*args)]


    def jvp(self, point: dict[str, np.ndarray], u: dict[str, np.ndarray],
            absolute: bool = False) -> np.ndarray:
        """Exact J u: the derivative of the output along u (arrays by input name), which
        is what double backward gives for the gradient with respect to grad_output.
        ``absolute``: |J|·|u| instead, the size its rounding errors scale with."""
        case = self.case
        if absolute:
            u = {n: np.abs(a) for n, a in u.items()}
        if self.mode == "elementwise":
            shape = self.body.shape
            if absolute:   # the partials with their terms' sizes (1 - y² as 1 + y²)
                partials = self._second_kernels(point, "first")
            else:
                with np.errstate(all="ignore"):
                    out = self._run_kernel(self._kernel_args(point), self._padded())
                partials = out[1:1 + len(self.wrt)]
            body = np.zeros(shape)
            for n, d in zip(self.wrt, partials):
                body = body + d.reshape(shape) * np.broadcast_to(u[n], shape)
            top = self.top
            return body if top is None else np.asarray(
                RULES[top.op].numpy(body, top.axis, top.keepdims))
        rows, cols, names, fn = self._jac
        out = np.zeros(case.output.size)
        if fn is not None:
            with np.errstate(all="ignore"):
                values = np.asarray(fn(*self._expanded_args(point)), dtype=float).reshape(-1)
            values = np.abs(values) if absolute else values
            for n in self.wrt:
                mask = names == n
                np.add.at(out, rows[mask],
                          values[mask] * np.asarray(u[n], dtype=float).reshape(-1)[cols[mask]])
        return out.reshape(case.output.shape)

    def _expanded_args(self, point) -> list[np.ndarray]:
        """The compiled expanded program's arguments: every input element, then the
        one-hot pick of each max/min at this point."""
        args = [np.asarray(point[s.name], dtype=float).reshape(-1) for s in self.case.inputs]
        for node, _ in self.selectors.values():
            picked = evaluate(node.args[0], point)
            args.append(RULES[node.op].selector(picked, node.axis).reshape(-1))
        return args

    def _hvp_expanded(self, point, v, u) -> dict[str, np.ndarray]:
        """The Hessian-vector product of an expanded formula: SymPy differentiates
        s = Σ_j u_j ∂(vᵀy)/∂x_j once more, with v and u as symbols, compiled once."""
        case = self.case
        if not hasattr(self, "_second"):
            out = _lower(case.output, self.symbols, False, self.selectors, evaluated=True)
            vsyms = [sympy.Symbol(f"_0v{r}", real=True) for r in range(out.size)]
            xs = [x for n in self.wrt for x in self.symbols[n].flat]
            usyms = [sympy.Symbol(f"_0u{j}", real=True) for j in range(len(xs))]
            total = sympy.Add(*[a * b for a, b in zip(vsyms, out.flat)])
            direction = sympy.Add(*[b * sympy.diff(total, x) for x, b in zip(xs, usyms)])
            second = [_clean(sympy.diff(direction, x)) for x in xs]
            self._second = _compile(self.args + [vsyms, usyms], second)
        flat_u = np.concatenate([np.asarray(u[n], dtype=float).reshape(-1) for n in self.wrt]
                                ) if self.wrt else np.zeros(0)
        with np.errstate(all="ignore"):
            values = np.asarray(self._second(*self._expanded_args(point),
                                             np.broadcast_to(v, case.output.shape).reshape(-1),
                                             flat_u), dtype=float).reshape(-1)
        result, start = {}, 0
        for n in self.wrt:
            shape = case.input[n].shape
            size = int(np.prod(shape, dtype=np.int64))
            result[n] = values[start:start + size].reshape(shape)
            start += size
        return result


def _magnitude(e):
    """An upper bound of |e| that keeps the size of every term: |a| + |b| for a + b,
    |a|·|b| for a·b, M(b)^p for b^p (p > 0): the size rounding errors in computing e
    scale with, which |e| misses where terms cancel (1 - tanh(x)² is tiny where both
    terms are 1). Other subexpressions (a function's value, b^-1) count as |e|."""
    if e.is_Number:
        return abs(e)
    if isinstance(e, sympy.Add):
        return sympy.Add(*[_magnitude(a) for a in e.args])
    if isinstance(e, sympy.Mul):
        return sympy.Mul(*[_magnitude(a) for a in e.args])
    if isinstance(e, sympy.Pow) and e.exp.is_number and e.exp.is_positive:
        return sympy.Pow(_magnitude(e.base), e.exp)
    if isinstance(e, sympy.Piecewise):
        return sympy.Piecewise(*[(_magnitude(x), c) for x, c in e.args])
    return sympy.Abs(e)


def _symbol(name: str) -> sympy.Symbol:
    """The scalar symbol of an input or ``let``. The leading underscore keeps it apart
    from every name in lambdify's namespace (an input may be called ``e`` or ``nan``)."""
    return sympy.Symbol(f"_{name}", real=True)


def _element_symbols(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """One symbol per element, ``_{name}_{flat index}``: unique (names are unique and
    the index is all digits) and a valid identifier, so lambdify need not dummify them,
    which costs more than the whole rest of the compile on large formulas."""
    out = np.empty(shape, dtype=object)
    for k, idx in enumerate(np.ndindex(*shape)):
        out[idx] = sympy.Symbol(f"_{name}_{k}", real=True)
    return out
