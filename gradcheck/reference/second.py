"""Second order at tensor level: the exact Hessian-vector product and Jacobian-vector
product of a formula that mixes elements, for ``order = 2``, at any size the tensor
reference handles (no element-by-element expansion).

The tensor reference's gradients are themselves a program of tensors over the inputs
and the cotangent leaf ḡ. Reverse mode over that program (reverse over reverse, as
double backward does) from s = Σₓ ⟨uₓ, x.grad⟩ gives ∂s/∂x = Σⱼ uⱼ ∂²(ḡᵀy)/∂xⱼ∂x, the
Hessian-vector product, and ∂s/∂ḡ = J u. Each operation of the gradient program has its
adjoint here: products and sums, reshapes and broadcasts (sums back), the rows' own
tensor columns (a matmul's adjoint is a matmul again), a fused kernel's value through
its partials and a kernel's partial through its second partials (SymPy differentiates
the region's expression once more, compiled like the kernel itself), an elementwise row
a tensor column used (logsumexp's softmax) through a kernel of its own. So no row is a
special case here: a row's node takes the row's own tensor column (its VJP, which is
the adjoint of a linear row: a structural row's double backward is its adjoint again),
and a NumPy function a tensor column applies takes its own ``adjoint`` (the rows'
families define them: the convolutions' in :mod:`gradcheck.rules.conv.tensor`, the
scatters' in :mod:`~gradcheck.rules.structure.take`, sort's, topk's and cumprod's in
:mod:`~gradcheck.rules.composite.tensor`). A selection (max, min, sort, topk: its mask
or its order) is constant where the pick is, so it is linear in what it picks;
comparisons and integers are constants. prod's product of the others has the adjoint
:func:`others_adjoint` (prefix and suffix products: no division, exact at zeros, linear
in the size). What has no adjoint here raises :class:`~gradcheck.base.errors.
UnsupportedOpError` naming the row whose tensor column made it (the builder's
``origin``); the caller decides what stands in (see
:meth:`gradcheck.reference.tensor.TensorReference._second`).

:func:`evaluate_sizes` evaluates such a program with every term by its magnitude (a
kernel's outputs by :func:`~gradcheck.reference.derivatives.magnitude`, a product of
magnitudes, a sum of them, a structural row applied to them, a selection's those of
the elements it picks), the size the rounding errors of a double backward scale with
(1 - tanh² counts as 1 + tanh²).
"""

from __future__ import annotations

import numpy as np
import sympy

from ..base.errors import UnsupportedOpError
from ..rules import ELEMENTWISE, RULES
from ..formula.tree import Node
from .adjoint import inline
from .derivatives import MODULES, compile, magnitude
from .texpr import Builder, T, _apply, _schedule, evaluate, leaf, order

DIRECTION = "u:"     # the leaf of input x's direction is "u:x"


class SecondKernel:
    """The second partial derivatives of a fused kernel's partials: ``pairs[(p, k)]`` is
    the index in :attr:`outputs` (or the number) of ∂(output p)/∂(boundary k), for each
    partial output p of the kernel that depends on boundary argument k."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.pairs: dict[tuple[int, int], int | float] = {}
        self.outputs: list = []
        program = kernel.program
        for p, expr in enumerate(kernel.outputs):
            if p == 0:
                continue
            # inlined unevaluated: SymPy's evaluation folds where(c, f(where(c, d, 1)),
            # b) into where(c, f(d), b), and f's derivative at d outside c (1/sqrt(d) at
            # d < 0) then is NaN times the zero of the condition's branch
            with sympy.core.parameters.evaluate(False):
                full = inline(program, sympy.sympify(expr))
            grads = program.gradient(full, kernel.symbols)
            for k, s in enumerate(kernel.symbols):
                d = grads.get(s)
                if d is None:
                    continue
                if not sympy.sympify(d).free_symbols:
                    self.pairs[p, k] = float(d)
                else:
                    self.pairs[p, k] = len(self.outputs)
                    self.outputs.append(d)
        self.fn = (program.lambdify(kernel.symbols, self.outputs, modules=MODULES)
                   if self.outputs else None)
        self._sizes = None

    def run(self, args: list[np.ndarray]) -> list[np.ndarray]:
        from ..base.arrays import run_kernel

        return run_kernel(self.fn, [np.asarray(a, dtype=float) for a in args],
                          self.kernel.shape)

    def sizes(self, args: list[np.ndarray]) -> list[np.ndarray]:
        """Each output with every term by its magnitude (compiled on first use)."""
        if self._sizes is None:
            program = self.kernel.program
            self._sizes = compile(self.kernel.symbols, [
                magnitude(inline(program, sympy.sympify(e))) for e in self.outputs])
        from ..base.arrays import run_kernel

        return run_kernel(self._sizes, [np.asarray(a, dtype=float) for a in args],
                          self.kernel.shape)


def _kernel_sizes(kernel):
    """A fused kernel's value and partials with every term by its magnitude."""
    if getattr(kernel, "_second_sizes", None) is None:
        kernel._second_sizes = compile(kernel.symbols, [
            magnitude(inline(kernel.program, sympy.sympify(e))) for e in kernel.outputs])
    return kernel._second_sizes


class Hessian:
    """The Hessian-vector and Jacobian-vector products of a
    :class:`~gradcheck.reference.tensor.TensorReference` as tensor programs:
    ``hvp[x]`` (one per input of ``wrt``) and ``jvp``, over the inputs, ḡ and the
    direction leaves ``u:x``.

    Raises:
        UnsupportedOpError: an operation of the gradient program has no adjoint here.
    """

    def __init__(self, ref, cotangent: str):
        self.ref = ref
        self.b = ref.forward.builder
        self._seconds: dict[int, T] = {}      # a kernel's second-partials kernel
        forward = ref.forward
        g = leaf(cotangent, ref.case.output.shape)
        self.cotangent = g
        seeds = {id(ref.gradients[n]): [leaf(DIRECTION + n, ref.gradients[n].shape)]
                 for n in ref.wrt}
        roots = [ref.gradients[n] for n in ref.wrt]
        targets = [forward.inputs[n] for n in ref.wrt]
        # the gradients' ḡ is the program's own leaf of that name (made by the builder)
        leaves = {t.data: t for t in order(roots) if t.op == "leaf"}
        g = leaves.get(cotangent, g)
        totals = self._reverse(roots, seeds, targets + [g])
        zero = self.b.const(0.0)
        self.hvp = {n: totals.get(id(t), self.b.broadcast(zero, t.shape))
                    for n, t in zip(ref.wrt, targets)}
        self.jvp = totals.get(id(g), self.b.broadcast(zero, ref.case.output.shape))

    def _reverse(self, roots: list[T], seeds: dict, targets: list[T]) -> dict[int, T]:
        """Reverse mode over the program below ``roots`` from the cotangents ``seeds``
        (by node id): the total cotangent of each node that leads to a target."""
        b = self.b
        nodes = order(roots)
        wanted = {id(t) for t in targets}
        needs: set[int] = set()
        for node in nodes:
            if id(node) in wanted or any(id(a) in needs for a in node.args):
                needs.add(id(node))
        pending = {k: list(v) for k, v in seeds.items()}
        totals: dict[int, T] = {}
        for node in reversed(nodes):
            parts = pending.pop(id(node), None)
            if not parts or id(node) not in needs:
                continue
            g = totals[id(node)] = b.add(parts)
            for arg, contribution in self._adjoints(node, g):
                if id(arg) in needs:
                    pending.setdefault(id(arg), []).append(b.sum_to(contribution, arg.shape))
        return totals

    # long: one adjoint per operation of the tensor program, a table read top to bottom
    def _adjoints(self, node: T, g: T):
        """(argument, its cotangent contribution) for each argument of ``node``."""
        b, op = self.b, node.op
        if op == "mul":
            x, y = node.args
            yield x, b.mul(g, y)
            yield y, b.mul(g, x)
        elif op == "add":
            for a in node.args:
                yield a, g
        elif op == "reshape":
            yield node.args[0], b.reshape(g, node.args[0].shape)
        elif op == "broadcast":
            yield node.args[0], g            # summed back to its shape by the caller
        elif op == "sum_to":
            yield node.args[0], b.broadcast(g, node.args[0].shape)
        elif op == "part":
            yield from self._part(node, g)
        elif op == "row":
            yield from self._row(node, g)
        elif op == "apply":
            yield from self._applied(node, g)
        elif op == "embed":                  # zeros with x at key: its adjoint takes key
            yield node.args[0], b.row("index", g, key=node.data)
        elif op == "others":                 # prod's: ∂(∏_{j≠i} x_j)/∂x_k
            x = node.args[0]
            yield x, b.apply(others_adjoint, g, x, shape=x.shape, axis=node.data)
        elif op in ("select", "const", "leaf", "kernel"):
            return                           # constant where the pick is; no operands
        else:
            raise self._unsupported(node, f"the operation {op!r}")

    def _unsupported(self, node: T, what: str) -> UnsupportedOpError:
        """The error for an operation without an adjoint here, naming the row whose
        tensor column made it."""
        row = self.b.origin.get(id(node))
        where = f"the row {row} has" if row else "the formula's gradient program has"
        return UnsupportedOpError(
            f"{where} no tensor-level second derivative: {what} has no adjoint for double "
            "backward")

    def _applied(self, node: T, g: T):
        """A named function's adjoints (its ``adjoint``: a convolution's input gradient
        is bilinear in the cotangent and the weight, its adjoints a convolution and a
        weight gradient)."""
        fn, params = node.data
        adjoint = getattr(fn, "adjoint", None)
        if adjoint is None:
            raise self._unsupported(node, f"its tensor column's function {fn.__name__}")
        yield from adjoint(self.b, g, *node.args, shape=node.shape, **dict(params))

    def _part(self, node: T, g: T):
        """A kernel's output: its value through the partials, a partial through the
        second partials."""
        b = self.b
        kernel = node.args[0]
        fused = kernel.data
        if node.data == 0:
            for j, (i, _, _) in enumerate(fused.partials):
                yield kernel.args[i], b.mul(g, self.ref.forward.partial(kernel, j))
            return
        second = self._second(kernel)
        for (p, k), where in second.data.pairs.items():
            if p != node.data:
                continue
            d = b.const(where) if isinstance(where, float) else b.make(
                "part", (second,), kernel.shape, where)
            yield kernel.args[k], b.mul(g, d)

    def _second(self, kernel: T) -> T:
        if id(kernel) not in self._seconds:
            self._seconds[id(kernel)] = self.b.make(
                "kernel", kernel.args, kernel.shape, SecondKernel(kernel.data))
        return self._seconds[id(kernel)]

    def _row(self, node: T, g: T):
        b = self.b
        name, params = node.data
        rule = RULES[name]
        if rule.family == ELEMENTWISE or rule.tensor is None:
            if rule.family != ELEMENTWISE:
                raise self._unsupported(node, f"the row {name}, without a tensor column,")
            yield from self._elementwise_row(node, g)
            return
        for k, arg in enumerate(node.args):   # (None: no derivative, an index)
            contribution = rule.tensor_vjp(k, b, g, node, node.args, params)
            if contribution is not None:
                yield arg, contribution

    def _elementwise_row(self, node: T, g: T):
        """An elementwise row inside a tensor column (logsumexp's exp(x - lse)): its
        partials from a kernel of its own, SymPy's derivative of the row's meaning."""
        from .regions import Kernel

        name, params = node.data
        cuts = [Node("input", shape=a.shape, name=f"a{k}") for k, a in enumerate(node.args)]
        root = Node(name, tuple(cuts), node.shape, params=params)
        kernel = self.b.make("kernel", node.args, node.shape, Kernel(root, cuts, node.shape))
        for j, (i, _, _) in enumerate(kernel.data.partials):
            yield node.args[i], self.b.mul(g, self.ref.forward.partial(kernel, j))


def others_adjoint(g, x, *, shape, axis):
    """The adjoint of the product of the others along ``axis`` (o_i = ∏_{j≠i} x_j) for
    the cotangent ``g``: Σ_{i≠k} g_i ∏_{j∉{i,k}} x_j for each k. Along each slice, with
    L_k = ∏_{j<k} x_j and R_k = ∏_{j>k} x_j, it is A_k R_k + L_k B_k where A_k =
    Σ_{i<k} g_i L_i ∏_{i<j<k} x_j and B_k its mirror, each one running sum (no division:
    exact at zeros, and linear in the slice's length where expanding it is quadratic)."""
    axis = tuple(axis)
    x = np.asarray(x, dtype=float)
    moved = [d for d in range(x.ndim) if d not in axis] + list(axis)
    xs = np.transpose(x, moved)
    lead = xs.shape[: x.ndim - len(axis)]
    xf = xs.reshape(lead + (-1,))
    gf = np.transpose(np.broadcast_to(g, x.shape), moved).reshape(xf.shape)
    ones = np.ones(lead + (1,))
    left = np.cumprod(np.concatenate([ones, xf[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, xf[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    a, c = np.zeros(xf.shape), np.zeros(xf.shape)
    n = xf.shape[-1]
    for k in range(1, n):
        a[..., k] = a[..., k - 1] * xf[..., k - 1] + gf[..., k - 1] * left[..., k - 1]
        j = n - 1 - k
        c[..., j] = c[..., j + 1] * xf[..., j + 1] + gf[..., j + 1] * right[..., j + 1]
    out = (a * right + left * c).reshape(xs.shape)
    return np.transpose(out, np.argsort(moved)).reshape(shape)


# ---------------------------------------------------------------------- sizes
def _size(node: T, args: list, sizes: list, env: dict):
    """The magnitude of ``node``'s value from its arguments' values and magnitudes."""
    op = node.op
    if op == "leaf":
        return np.abs(env[node.data])
    if op == "const":
        return np.float64(abs(node.data))
    if op == "kernel":
        fused = node.data
        if isinstance(fused, SecondKernel):
            return fused.sizes(args)
        from ..base.arrays import run_kernel

        return run_kernel(_kernel_sizes(fused), [np.asarray(a, dtype=float) for a in args],
                          fused.shape)
    if op == "part":
        return sizes[0][node.data]
    if op == "row":
        name, params = node.data
        if RULES[name].family == ELEMENTWISE:   # a function's value: its own size
            return np.abs(_apply(node, args, env))
        picked = _picked_sizes(node, args, sizes)
        if picked is not None:
            return picked
        # a structural row (sum, matmul, max, logsumexp...) on magnitudes bounds the
        # magnitude of its terms (indices, integers, as they are: x[idx], gather)
        sizes = [a if np.asarray(a).dtype.kind in "biu" else z for a, z in zip(args, sizes)]
        return np.asarray(RULES[name].call("numpy", sizes, params), dtype=float)
    if op in ("select", "others"):
        return np.abs(_apply(node, args, env))
    if op == "apply":   # on the magnitudes of what it is linear in, the others' values
        linear = getattr(node.data[0], "linear_in", range(len(args)))
        return np.abs(_apply(node, [sizes[i] if i in linear else a
                                    for i, a in enumerate(args)], env))
    if op == "mul":
        return sizes[0] * sizes[1]
    if op == "add":
        total = sizes[0]
        for s in sizes[1:]:
            total = total + s
        return total
    return _apply(node, sizes, env)      # reshape, broadcast, sum_to: as the values


def _picked_sizes(node: T, args: list, sizes: list):
    """A selection row's magnitudes (max, min, sort, topk: a ``selector`` row whose VJP
    at the point sends each output's cotangent to one element it took, each element at
    most once): for each output, the magnitude of the element it took, found by sending
    the outputs' positions back through the row's own tensor column (O(n), no
    permutation matrix). None where the VJP is no such map (norm, max pooling's
    overlapping windows): the row on the magnitudes bounds its terms there."""
    name, params = node.data
    rule = RULES[name]
    if rule.selector is None or len(node.args) != 1:
        return None
    x = np.asarray(args[0], dtype=float)

    def back(g):
        b = Builder()
        y, xs = leaf("y", node.shape), leaf("x", x.shape)
        out = rule.tensor_vjp(0, b, leaf("g", node.shape), y, [xs], params)
        env = {"g": g, "x": x, "y": np.asarray(RULES[name].call("numpy", [x], params))}
        return np.broadcast_to(evaluate([out], env)[0], x.shape)

    hits = back(np.ones(node.shape))
    if not np.all((hits == 0) | (hits == 1)):
        return None
    codes = back(np.arange(1.0, node.size + 1).reshape(node.shape))
    taken = hits == 1
    out = np.zeros(node.size)
    out[codes[taken].astype(np.int64) - 1] = np.broadcast_to(sizes[0], x.shape)[taken]
    return out.reshape(node.shape)


def evaluate_sizes(outputs: list[T], env: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The magnitudes of ``outputs`` (see the module docstring) with the leaves from
    ``env``: each node's value and magnitude computed once, dropped after last use."""
    values: dict[int, object] = {}
    sizes: dict[int, object] = {}
    for node, done in _schedule(outputs):
        args = [values[id(a)] for a in node.args]
        values[id(node)] = _apply(node, args, env)
        sizes[id(node)] = _size(node, args, [sizes[id(a)] for a in node.args], env)
        for a in done:
            del values[id(a)], sizes[id(a)]
    return [np.array(np.broadcast_to(sizes[id(o)], o.shape), dtype=float) for o in outputs]
