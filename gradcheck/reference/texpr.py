"""Tensor expressions: the program the tensor-level reference evaluates, one node per
tensor (never per element), and the builder the rule table's tensor column writes
adjoints with.

A :class:`T` is an input (``leaf``), a number (``const``), a fused elementwise kernel
(``kernel``, whose outputs are its value and its partial derivatives, each a ``part``),
the float64 forward of a row (``row``: matmul, a reduction, exp...), the selection mask
of max/min (``select``), the product of the others along axes (``others``), a named
NumPy function of tensors (``apply``: an exact adjoint no row computes, a convolution's
in its input), or a
structural step: ``mul`` (elementwise product), ``add``, ``reshape``, ``broadcast``,
``sum_to`` (the sum over broadcast axes, broadcasting's adjoint) and ``embed`` (zeros with
a tensor written where a subscript took its elements, indexing's adjoint). :func:`evaluate` runs
a set of them on NumPy arrays, each node once, dropping a value after its last use;
:func:`show` prints them as formulas.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.arrays import unbroadcast
from ..rules import RULES
from ..rules.keys import numpy_key
from ..rules.vjps import others_product


@dataclass(frozen=True, eq=False)
class T:
    """One tensor of the program; identity is by object (a shared tensor is one node)."""

    op: str
    args: tuple["T", ...] = ()
    shape: tuple[int, ...] = ()
    data: Any = None        # leaf: name; const: float; part: index; row/select: (name,
                            # params); others: axes; kernel: the Kernel; embed: the key; apply: (the
                            # function, its parameters as sorted (name, value) pairs)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def leaf(name: str, shape: tuple[int, ...]) -> T:
    return T("leaf", (), tuple(shape), name)


class Builder:
    """Makes tensor expressions, simplifying the identities (a broadcast or sum to the
    same shape, a product with 1) so that printed formulas stay short. The rule table's
    tensor column receives one (see :class:`gradcheck.rules.row.TensorRule`)."""

    def __init__(self):
        self._made: dict[tuple, T] = {}
        #: the row whose tensor column made each node (by id), for what double backward
        #: says of a node it has no adjoint for
        self.origin: dict[int, str] = {}
        self._within: str | None = None

    @contextlib.contextmanager
    def within(self, row: str):
        """The nodes made inside the block are ``row``'s (:attr:`origin`)."""
        outer, self._within = self._within, row
        try:
            yield
        finally:
            self._within = outer

    def make(self, op: str, args: tuple, shape, data=None) -> T:
        """The node ``op(args)``, one per distinct (op, arguments, shape, data): a
        product both a kernel's cotangent and a bias's sum need is computed once."""
        key = (op, tuple(id(a) for a in args), tuple(shape), data)
        if key not in self._made:
            made = self._made[key] = T(op, tuple(args), tuple(shape), data)
            if self._within is not None:
                self.origin[id(made)] = self._within
        return self._made[key]

    def const(self, value: float) -> T:
        return self.make("const", (), (), float(value))

    def reshape(self, x: T, shape) -> T:
        shape = tuple(shape)
        return x if x.shape == shape else self.make("reshape", (x,), shape)

    def broadcast(self, x: T, shape) -> T:
        shape = tuple(shape)
        if x.op == "reshape" and _only_leading_ones(x.args[0].shape, x.shape):
            x = x.args[0]      # broadcasting aligns shapes on the right: same result
        return x if x.shape == shape else self.make("broadcast", (x,), shape)

    def sum_to(self, x: T, shape) -> T:
        """``x`` summed back to ``shape`` over the axes broadcasting added."""
        shape = tuple(shape)
        return x if x.shape == shape else self.make("sum_to", (x,), shape)

    def mul(self, x: T, y: T) -> T:
        shape = x.shape if x.shape == y.shape else tuple(np.broadcast_shapes(x.shape,
                                                                             y.shape))
        if _is_const(x, 1.0):
            return self.broadcast(y, shape)
        if _is_const(y, 1.0):
            return self.broadcast(x, shape)
        # the product broadcasts by itself: an operand's own broadcast is not needed
        x, y = _unbroadcast_operand(x, y, shape), _unbroadcast_operand(y, x, shape)
        return self.make("mul", (x, y), shape)

    def scale(self, x: T, c: float) -> T:
        return self.mul(x, self.const(c))

    def add(self, parts: list[T]) -> T:
        return parts[0] if len(parts) == 1 else self.make("add", tuple(parts),
                                                          parts[0].shape)

    def row(self, name: str, *args: T, **given) -> T:
        """A row's float64 forward (its ``numpy`` column) on tensors."""
        rule = RULES[name]
        shapes = [a.shape for a in args]
        params = rule.bind(shapes, given)
        if name == "transpose" and args[0].op == "row" and args[0].data == (name, params):
            return args[0].args[0]          # (xᵀ)ᵀ = x: a swap of the same two axes
        return self.make("row", args, rule.result_shape(shapes, params), (name, params))

    def embed(self, x: T, shape, key) -> T:
        """Zeros of ``shape`` with ``x`` where a tensor of that shape's ``[key]`` takes
        its elements: the adjoint of basic indexing (which takes each element once)."""
        return self.make("embed", (x,), tuple(shape), key)

    def select(self, name: str, x: T, **given) -> T:
        """The one-hot mask of the element a max/min row picks (its ``selector``)."""
        rule = RULES[name]
        return self.make("select", (x,), x.shape, (name, rule.bind([x.shape], given)))

    def apply(self, fn, *args: T, shape, **params) -> T:
        """``fn(*args, shape=shape, **params)``, a named module-level NumPy function of
        the arguments' arrays whose result has ``shape``: an exact adjoint that no row's
        forward computes (:func:`gradcheck.rules.conv.tensor.conv_input_grad`). The
        parameters must be hashable (ints, tuples)."""
        shape = tuple(shape)
        return self.make("apply", args, shape, (fn, tuple(sorted(params.items()))))

    def others_product(self, x: T, axis) -> T:
        return self.make("others", (x,), x.shape, tuple(axis))

    def value(self, kernel: T) -> T:
        """The value of a fused kernel (its output 0; its partials follow)."""
        return self.make("part", (kernel,), kernel.shape, 0)


def _only_leading_ones(inner: tuple, outer: tuple) -> bool:
    lead = len(outer) - len(inner)
    return lead >= 0 and outer[lead:] == inner and all(n == 1 for n in outer[:lead])


def _unbroadcast_operand(x: T, other: T, shape: tuple) -> T:
    if x.op == "broadcast" and tuple(np.broadcast_shapes(x.args[0].shape, other.shape)) \
            == shape:
        return x.args[0]
    return x


def _is_const(x: T, value: float) -> bool:
    return x.op == "const" and x.data == value


# ---------------------------------------------------------------------- evaluation
def _apply(node: T, args: list, env: dict):
    op = node.op
    if op == "leaf":
        return env[node.data]
    if op == "const":
        return np.float64(node.data)
    if op == "kernel":
        return node.data.run(args)
    if op == "part":
        return args[0][node.data]
    if op == "row":
        name, params = node.data
        return np.asarray(RULES[name].call("numpy", args, params), dtype=float)
    if op == "select":
        name, params = node.data
        return RULES[name].call("selector", args, params)
    if op == "others":
        return others_product(args[0], node.data)
    if op == "apply":
        fn, params = node.data
        return fn(*args, shape=node.shape, **dict(params))
    if op == "mul":
        return args[0] * args[1]
    if op == "add":
        total = args[0]
        for a in args[1:]:
            total = total + a
        return total
    if op == "reshape":
        return np.reshape(args[0], node.shape)
    if op == "broadcast":
        return np.broadcast_to(args[0], node.shape)
    if op == "sum_to":
        return unbroadcast(args[0], node.shape)
    if op == "embed":
        out = np.zeros(node.shape)
        out[numpy_key(node.data)] = args[0]
        return out
    raise ValueError(f"unknown tensor operation {op!r}")


def order(outputs: list[T], known: frozenset = frozenset()) -> list[T]:
    """Every node the ``outputs`` need, children before parents (iterative); a node
    whose id is in ``known`` is taken as given: listed, but not what it needs."""
    seen: set[int] = set()
    out: list[T] = []
    stack = [(o, False) for o in reversed(outputs)]
    while stack:
        node, ready = stack.pop()
        if ready:
            out.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if id(node) not in known:
            stack.extend((a, False) for a in reversed(node.args) if id(a) not in seen)
    return out


def depending(outputs: list[T], name: str) -> set[int]:
    """The ids of the nodes the ``outputs`` need that depend on the leaf ``name``."""
    out: set[int] = set()
    for node in order(outputs):
        if (node.op == "leaf" and node.data == name) or any(id(a) in out
                                                            for a in node.args):
            out.add(id(node))
    return out


def _schedule(outputs: list[T], known: frozenset = frozenset()):
    """Every node the ``outputs`` need, children first, each with the arguments whose
    last use it is (to be dropped after it, unless they are outputs); the nodes in
    ``known`` are given, not computed."""
    nodes = order(outputs, known)
    uses: dict[int, int] = {}
    for node in nodes:
        for a in (() if id(node) in known else node.args):
            uses[id(a)] = uses.get(id(a), 0) + 1
    keep = {id(o) for o in outputs}
    for node in nodes:
        done = []
        for a in (() if id(node) in known else node.args):
            uses[id(a)] -= 1
            if uses[id(a)] == 0 and id(a) not in keep:
                done.append(a)
        yield node, done


def evaluate(outputs: list[T], env: dict[str, np.ndarray],
             known: dict[int, Any] | None = None) -> list[np.ndarray]:
    """The values of ``outputs`` (float64 arrays of their shapes) with the leaves from
    ``env``; each node is computed once, and dropped after its last use, so the memory
    held is what the live tensors need. ``known``: values of nodes, by id, taken as
    they are (:func:`run` of them at the same leaves), with nothing they need."""
    values = run(outputs, env, known)
    return [np.array(np.broadcast_to(values[id(o)], o.shape), dtype=float)
            for o in outputs]


def run(outputs: list[T], env: dict[str, np.ndarray],
        known: dict[int, Any] | None = None) -> dict[int, Any]:
    """:func:`evaluate`'s values of ``outputs`` by id, as the nodes compute them (a
    broadcast view, a scalar)."""
    known = known or {}
    values: dict[int, Any] = {}
    for node, done in _schedule(outputs, frozenset(known)):
        values[id(node)] = known[id(node)] if id(node) in known else _apply(
            node, [values[id(a)] for a in node.args], env)
        for a in done:
            del values[id(a)]
    return {id(o): values[id(o)] for o in outputs}


def peak_bytes(outputs: list[T]) -> int:
    """The most bytes :func:`evaluate` holds at once for ``outputs``, beyond the inputs:
    the same schedule, with each node's size in place of its array (views, such as a
    broadcast or a kernel's parts, cost nothing)."""
    held: dict[int, int] = {}
    live = peak = 0
    for node, done in _schedule(outputs):
        held[id(node)] = 0 if node.op in _VIEWS else 8 * node.size * (
            len(node.data.outputs) if node.op == "kernel" else 1)
        live += held[id(node)]
        peak = max(peak, live)
        live -= sum(held[id(a)] for a in done)
    return peak


_VIEWS = ("leaf", "const", "part", "broadcast", "reshape")
