"""The parsed formula: a small DAG of nodes, each an input, a constant, a ``let`` name or
the application of one row of the rule table, with its shape known.

Every witness walks this same DAG with :func:`fold`: the symbolic reference lowers it to
SymPy through the table's ``sympy`` column, torch through the ``torch`` column, the
numeric witness through the ``numpy`` column. Keeping the user's operations (rather than
SymPy's canonical form, where ``a - b`` is ``a + (-1)*b``) is what lets torch see the
formula as the user wrote it: same ``grad_fn`` names, same float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from .rules import COMPARISON, ELEMENTWISE, LINALG, REDUCTION, RULES, sympy_scalar_constant


class ShapeError(ValueError):
    """Operands whose shapes do not fit the operation."""


@dataclass(frozen=True, eq=False)
class Node:
    """One node of a formula. Identity is by object: a ``let`` used twice is one node."""

    op: str                             # "input", "const", "let" or a rule name
    args: tuple["Node", ...] = ()
    shape: tuple[int, ...] = ()
    name: str = ""                      # input or let name
    exact: str | None = None            # const: its exact value as text ("0.1", "-pi")
    axis: tuple[int, ...] | None = None  # reductions: normalised, non-negative
    keepdims: bool = False
    const: float | None = None          # float value when no input is below this node

    @property
    def rule(self):
        return RULES[self.op]

    @property
    def value(self):
        """const: the exact SymPy number (SymPy is imported on first use, not by parsing)."""
        return None if self.exact is None else sympy_scalar_constant(self.exact)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:  # compact, for error messages and debugging
        if self.op in ("input", "let"):
            return self.name
        if self.op == "const":
            return self.exact
        return f"{self.op}({', '.join(map(repr, self.args))})"


def walk(root: Node) -> Iterator[Node]:
    """Every node below ``root`` once, children before parents (iterative)."""
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            yield node
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for child in reversed(node.args):
            if id(child) not in seen:
                stack.append((child, False))


def fold(root: Node, visit: Callable[[Node, list], Any],
         overrides: dict[str, Any] | None = None) -> Any:
    """Evaluate the DAG bottom-up: ``visit(node, child_values)`` for each node, once.

    ``overrides`` maps input or ``let`` names to values used instead of evaluating them
    (a ``let`` given here is a free variable of its own, as ``retain_grad`` needs).
    """
    overrides = overrides or {}
    # A value is dropped once its last parent has used it: a long formula on large
    # arrays then holds a few arrays at a time, not one per node.
    uses: dict[int, int] = {}
    for node in walk(root):
        for c in node.args:
            uses[id(c)] = uses.get(id(c), 0) + 1
    values: dict[int, Any] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in values:
            continue
        if node.op in ("input", "let") and node.name in overrides:
            values[key] = overrides[node.name]
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node.args) if id(c) not in values)
            continue
        values[key] = visit(node, [values[id(c)] for c in node.args])
        for c in node.args:
            uses[id(c)] -= 1
            if uses[id(c)] == 0 and c is not root:
                del values[id(c)]
    return values[id(root)]


# --------------------------------------------------------------------------- shapes

SLAB = 1 << 16  # elements per slab: bounds the temporaries of elementwise evaluations


def slabs(shape: tuple[int, ...], size: int = SLAB) -> list[tuple[int, slice, Any]]:
    """Cuts of ``shape`` along its largest axis into slabs of about ``size`` elements, as
    (axis, slice of that axis, index of the slab); one cut, the whole array (index
    ``...``), when it is small."""
    total = int(np.prod(shape, dtype=np.int64))
    if total <= size or not shape:
        return [(0, slice(None), ...)]
    axis = int(np.argmax(shape))
    step = max(1, size * shape[axis] // total)
    return [(axis, slice(lo, lo + step), (slice(None),) * axis + (slice(lo, lo + step),))
            for lo in range(0, shape[axis], step)]


def cut(a, ndim: int, axis: int, part: slice):
    """The part of ``a`` (broadcast against an array of ``ndim`` dimensions, NumPy's
    right-aligned rule) that lines up with ``part`` of that array's ``axis``."""
    a = np.asarray(a)
    k = axis - (ndim - a.ndim)
    if k < 0 or a.ndim == 0 or a.shape[k] == 1:
        return a
    return a[(slice(None),) * k + (part,)]


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError("shapes " + ", ".join(map(str, map(list, shapes)))
                         + " do not broadcast together") from None


def normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """``None``, an int or a tuple of ints -> sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"axis {a} is out of range for a tensor of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(f"axis {axis} repeats a dimension")
    return tuple(sorted(out))


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if not a or not b:
        raise ShapeError("@ needs tensors of at least one dimension")
    a2 = a if len(a) > 1 else (1,) + a
    b2 = b if len(b) > 1 else b + (1,)
    if a2[-1] != b2[-2]:
        raise ShapeError(f"@ of shapes {list(a)} and {list(b)}: inner sizes "
                         f"{a2[-1]} and {b2[-2]} differ")
    out = broadcast(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:  # drop the axes added above: a's row axis first, then b's column
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def result_shape(op: str, shapes: list[tuple[int, ...]], axis: tuple[int, ...] | None,
                 keepdims: bool) -> tuple[int, ...]:
    """The shape of ``op`` applied to operands of ``shapes``.

    Raises:
        ShapeError: the operands do not fit.
    """
    kind = RULES[op].kind
    if kind in (ELEMENTWISE, COMPARISON):
        return broadcast(*shapes)
    if kind == REDUCTION:
        (shape,) = shapes
        if keepdims:
            return tuple(1 if d in axis else n for d, n in enumerate(shape))
        return tuple(n for d, n in enumerate(shape) if d not in axis)
    assert kind == LINALG
    if op == "matmul":
        return _matmul_shape(*shapes)
    if op == "dot":
        a, b = shapes
        if len(a) != 1 or len(b) != 1 or a != b:
            raise ShapeError(f"dot needs two vectors of one length, got shapes {list(a)} "
                             f"and {list(b)}")
        return ()
    if op == "transpose":
        (a,) = shapes
        if len(a) < 2:
            raise ShapeError(f"transpose needs at least two dimensions, got shape {list(a)}")
        return a[:-2] + (a[-1], a[-2])
    raise AssertionError(op)



def differentiable_names(root: Node) -> set[str]:
    """Names of inputs and ``let``s with a differentiable path to ``root``.

    A path through the condition of ``where`` carries no gradient: PyTorch leaves the
    ``.grad`` of a tensor reached only that way ``None``, and so does the reference.
    """
    found: set[str] = set()
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen or (node.op in RULES and RULES[node.op].kind == COMPARISON):
            continue
        seen.add(id(node))
        if node.op in ("input", "let"):
            found.add(node.name)
        stack.extend(node.args)
    return found


def elementwise_split(root: Node) -> tuple[Node, Node | None] | None:
    """``(body, top)`` when the formula is elementwise, possibly under one final sum/mean.

    ``body`` is the elementwise part and ``top`` the final reduction (or ``None``). Such
    a formula has a diagonal Jacobian from the inputs to ``body``, so every witness can
    treat it as one scalar kernel applied to whole arrays: O(n), not O(n^2). Returns
    ``None`` for formulas that mix elements (matmul, inner reductions).
    """
    top = None
    body = root
    if root.op in ("sum", "mean"):
        top, body = root, root.args[0]
    for node in walk(body):
        if node.op in ("input", "const", "let"):
            continue
        if RULES[node.op].kind not in (ELEMENTWISE, COMPARISON):
            return None
    return body, top


def unbroadcast(array: np.ndarray, shape: tuple[int, ...], reduce=np.sum) -> np.ndarray:
    """Reduce ``array`` (of a shape ``shape`` broadcasts to) back to ``shape``.

    This is the one place broadcasting is undone: gradients are summed (``np.sum``),
    masks combined (``np.any``) over the broadcast axes.
    """
    array = np.asarray(array)
    lead = array.ndim - len(shape)
    if lead:
        array = reduce(array, axis=tuple(range(lead)))
    axes = tuple(d for d, n in enumerate(shape) if n == 1 and array.shape[d] != 1)
    if axes:
        array = reduce(array, axis=axes, keepdims=True)
    return np.broadcast_to(array, shape) if array.shape != shape else array


def top_cotangent(top: Node | None, v: np.ndarray, body_shape: tuple[int, ...]) -> np.ndarray:
    """Pull the output cotangent ``v`` back through the final sum/mean of an elementwise
    formula (see :func:`elementwise_split`): the cotangent of every body element."""
    v = np.asarray(v, dtype=float)
    if top is not None:
        if not top.keepdims:
            v = np.expand_dims(v, top.axis)
        if top.op == "mean":
            v = v / int(np.prod([body_shape[d] for d in top.axis], dtype=np.int64))
    return np.broadcast_to(v, body_shape)
