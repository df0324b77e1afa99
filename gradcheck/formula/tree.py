"""The parsed formula: a small DAG of nodes, each an input, a constant, a ``let`` name or
the application of one row of the rule table (with its parameters), its shape known.

Every witness walks this same DAG: :func:`evaluate` applies one column of the rule table
at each node (the symbolic reference the ``sympy`` column, torch the ``torch`` column,
the numeric witness the ``numpy`` column), over :func:`fold`. Keeping the user's
operations (rather than SymPy's canonical form, where ``a - b`` is ``a + (-1)*b``) is
what lets torch see the formula as the user wrote it: same ``grad_fn`` names, same
float rounding.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..rules import COMPARISON, ELEMENTWISE, RULES, param_values, sympy_scalar_constant


@dataclass(frozen=True, eq=False)
class Node:
    """One node of a formula. Identity is by object: a ``let`` used twice is one node."""

    op: str                             # "input", "const", "let" or a rule name
    args: tuple["Node", ...] = ()
    shape: tuple[int, ...] = ()
    name: str = ""                      # input or let name
    exact: str | None = None            # const: its exact value as text ("0.1", "-pi")
    params: tuple[tuple[str, Any], ...] = ()   # the row's parameters (Rule.bind)
    const: float | None = None          # float value when no input is below this node
    # an input's (or a let of it) integer or boolean dtype ("int64", "int32", "bool"):
    # an exact constant of the formula; None: the case's float dtype
    dtype: str | None = None
    # a complex value, held as torch.view_as_real holds it: ``shape`` ends in the axis of
    # length 2 (real, imaginary); its complex shape is ``shape[:-1]``. Every row sees
    # real arrays: a complex operation is lowered to real rows (gradcheck.rules.complex)
    complex: bool = False

    @property
    def rule(self):
        return RULES[self.op]

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)

    @property
    def axis(self) -> tuple[int, ...] | None:
        """A reduction's axes (normalised, non-negative); None for other nodes."""
        return self.param("axis")

    @property
    def keepdims(self) -> bool:
        return bool(self.param("keepdims", False))

    @property
    def value(self):
        """const: the exact SymPy number (SymPy is imported on first use, not by parsing)."""
        return None if self.exact is None else sympy_scalar_constant(self.exact)

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    def call(self, column: str, args, *extra):
        """This node's row's ``column`` applied to ``args`` and the node's parameters
        (``Rule.call``, the parameters' values read once per node: :func:`values_of`)."""
        return getattr(RULES[self.op], column)(*args, *values_of(self), *extra)

    def __repr__(self) -> str:  # compact, for error messages and debugging
        if self.op in ("input", "let"):
            return self.name
        if self.op == "const":
            return self.exact
        return f"{self.op}({', '.join(map(repr, self.args))})"


@functools.lru_cache(maxsize=4096)
def values_of(node: Node) -> tuple:
    """The values of ``node``'s parameters, in its row's order: what the row's columns
    take after the operands, read once per node rather than at every call (finite
    differences and the rounding bound apply a formula's rows thousands of times)."""
    return param_values(node.params)


def walk(root: Node, stop: Callable[[Node], bool] | None = None) -> Iterator[Node]:
    """Every node below ``root`` once, children before parents (iterative); below a
    node for which ``stop`` is true, nothing."""
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
        if stop is not None and stop(node):
            continue
        for child in reversed(node.args):
            if id(child) not in seen:
                stack.append((child, False))


def fold(root: Node, visit: Callable[[Node, list], Any],
         overrides: dict[str, Any] | None = None, merge: bool = False) -> Any:
    """Evaluate the DAG bottom-up: ``visit(node, child_values)`` for each node, once.

    ``overrides`` maps input or ``let`` names (or any node's ``id``) to values used
    instead of evaluating them
    (a ``let`` given here is a free variable of its own, as ``retain_grad`` needs).
    ``merge``: nodes that compute the same thing (:func:`twins`: ``x - mu`` written
    twice) are visited once, for a ``visit`` that is a deterministic function of its
    node's computation (a float forward: the copies' values are bit-identical).
    """
    overrides = overrides or {}
    values: dict[int, Any] = {}
    for node, given, args, drops in planned(root, frozenset(overrides), merge):
        if given is not None:
            values[id(node)] = overrides[given]
            continue
        values[id(node)] = visit(node, [values[a] for a in args])
        for key in drops:
            del values[key]
    return values[id(node)]   # (the plan's last node is the root, or its merged twin)


@functools.lru_cache(maxsize=1024)
def planned(root: Node, given: frozenset, merge: bool = False
            ) -> tuple[tuple[Node, Any, tuple, tuple], ...]:
    """What :func:`fold` does (see :func:`_plan`), ``merge`` resolved: with twins, the
    plan of the merged DAG (:func:`_merged`), each override still under the caller's
    key (a node id of ``root``'s DAG, or a name)."""
    if not (merge and twins(root)):
        return _plan(root, given)
    merged, built = _merged(root)
    back = {id(built[k]): k for k in given if isinstance(k, int) and k in built}
    names = frozenset(k for k in given if not isinstance(k, int) or k not in built)
    return tuple((node, back.get(key, key), args, drops)
                 for node, key, args, drops in _plan(merged, names | frozenset(back)))


@functools.lru_cache(maxsize=1024)
def _plan(root: Node, given: frozenset) -> tuple[tuple[Node, Any, tuple, tuple], ...]:
    """What :func:`fold` does below ``root`` when the names or node ids ``given`` are
    overridden (nothing below those), children first: for each node, the override that
    gives its value (its id or name; None: it is visited), its operands' ids, and the
    ids of the operands whose last use it is. A value is dropped then, so a long
    formula on large arrays holds a few arrays at a time, not one per node. Kept per
    formula and overrides: the numeric witness folds the same formula dozens of times
    per point, so the walk's bookkeeping is done once."""
    def override(node: Node):
        if id(node) in given:
            return id(node)
        return node.name if node.op in ("input", "let") and node.name in given else None

    order = tuple(walk(root, stop=lambda node: override(node) is not None))
    last: dict[int, int] = {}   # operand id -> position of the last node that reads it
    for k, node in enumerate(order):
        if override(node) is None:
            for c in node.args:
                last[id(c)] = k
    drops: list[list[int]] = [[] for _ in order]
    for key, k in last.items():
        if key != id(root):
            drops[k].append(key)
    return tuple((node, override(node), tuple(id(c) for c in node.args), tuple(drop))
                 for node, drop in zip(order, drops))


def evaluate(root: Node, leaf: Callable[[Node], Any], apply: Callable[[Node, list], Any],
             *, const: Callable[[Node], Any] = lambda node: node.const,
             on_let: Callable[[Node, Any], None] | None = None,
             on_node: Callable[[Node, list, Any], None] | None = None,
             overrides: dict[str, Any] | None = None, merge: bool = False) -> Any:
    """The formula below ``root`` computed one way: ``leaf(node)`` for an input,
    ``const(node)`` for a constant (its float by default), ``apply(node, args)`` for
    each primitive (a column of the rule table, usually ``node.call(column, args)``).

    ``on_let(node, value)`` sees the value of every ``let``; ``on_node(node, args,
    value)`` every primitive applied; ``overrides`` as in :func:`fold`. This is the one
    walk every witness, the reference and sampling use.
    """

    def visit(node: Node, args: list):
        if node.op == "input":
            return leaf(node)
        if node.op == "const":
            return const(node)
        if node.op == "let":
            if on_let is not None:
                on_let(node, args[0])
            return args[0]
        value = apply(node, args)
        if on_node is not None:
            on_node(node, args, value)
        return value

    return fold(root, visit, overrides, merge)


@functools.lru_cache(maxsize=256)
def twins(root: Node) -> dict[int, Node]:
    """The nodes below ``root`` that compute what an earlier node computes (same op,
    input or ``let`` name, constant, parameters, dtype and operands, the operands
    compared the same way), each mapped to that first node, by ``id``. A formula that
    writes ``x - mu`` twice (layer norm's variance and normalisation) has one twin."""
    first: dict[tuple, Node] = {}
    rep: dict[int, Node] = {}
    out: dict[int, Node] = {}
    for node in ordered(root):
        key = (node.op, node.name, node.exact, node.params, node.dtype, node.shape,
               tuple(id(rep[id(c)]) for c in node.args))
        found = first.setdefault(key, node)
        rep[id(node)] = found
        if found is not node:
            out[id(node)] = found
    return out


@functools.lru_cache(maxsize=1024)
def ordered(root: Node) -> tuple[Node, ...]:
    """:func:`walk`'s order, kept per formula (a node hashes by identity, and the cache
    holds it): the numeric witness and the rounding model walk one formula at every
    finite-difference step."""
    return tuple(walk(root))


@functools.lru_cache(maxsize=256)
def _merged(root: Node) -> tuple[Node, dict[int, Node]]:
    """The DAG below ``root`` with every twin replaced by its first node (what
    ``fold(merge=True)`` walks), and each original node's counterpart in it, by ``id``."""
    same = twins(root)
    built: dict[int, Node] = {}
    for node in ordered(root):
        node2 = same.get(id(node), node)
        if id(node2) in built:
            built[id(node)] = built[id(node2)]
            continue
        args = tuple(built[id(c)] for c in node2.args)
        new = node2 if all(a is c for a, c in zip(args, node2.args)) else \
            dataclasses.replace(node2, args=args)
        built[id(node)] = built[id(node2)] = new
    return built[id(root)], built


def float_operands(node: Node) -> tuple[bool, ...]:
    """Per argument of ``node``'s row: whether it is a float operand, one the row
    differentiates (its engine VJP is not None). An integer or boolean input there takes
    part as the run's float dtype, as PyTorch promotes ``x * idx``; an operand the row
    does not differentiate (the condition of ``where``, an index, a comparison's
    operands, a layout row's over such a tensor: mask[:, None]) keeps its own dtype."""
    if node.dtype is not None:   # a layout row over an integer or boolean operand
        return (False,) * len(node.args)
    vjps = node.rule.engine.vjps if node.rule.engine is not None else ()
    return tuple((vjps[k] if k < len(vjps) else vjps[-1] if vjps else None) is not None
                 for k in range(len(node.args)))


def differentiable_names(root: Node) -> set[str]:
    """Names of inputs and ``let``s with a differentiable path to ``root``.

    A path through the condition of ``where`` (or a ``detach``: a row PyTorch records no
    node for) carries no gradient: PyTorch leaves the ``.grad`` of a tensor reached only
    that way ``None``, and so does the reference.
    """
    found: set[str] = set()
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen or (node.op in RULES and not RULES[node.op].differentiable):
            continue
        seen.add(id(node))
        if node.op in ("input", "let"):
            found.add(node.name)
        stack.extend(node.args)
    return found


def elementwise_split(root: Node) -> tuple[Node, Node | None] | None:
    """``(body, reduction)`` when the formula is elementwise, possibly under one final
    sum/mean.

    ``body`` is the elementwise part and ``reduction`` the final sum/mean node (or
    ``None``). Such
    a formula has a diagonal Jacobian from the inputs to ``body``, so every witness can
    treat it as one scalar kernel applied to whole arrays: O(n), not O(n^2). Returns
    ``None`` for formulas that mix elements (matmul, inner reductions).
    """
    reduction = None
    body = root
    if root.op in ("sum", "mean"):
        reduction, body = root, root.args[0]
    for node in walk(body):
        if node.op in ("input", "const", "let"):
            continue
        if RULES[node.op].family not in (ELEMENTWISE, COMPARISON):
            return None
    return body, reduction


def canonical(root: Node, stops: dict[int, str] | None = None, *,
              shapes: bool = True) -> str:
    """A text that names the formula below ``root`` exactly: equal texts mean the same
    computation, whatever object identities (a key for a cache of compiled kernels).

    One line per distinct node, numbered in post-order (``%k``, children first): its op,
    then its input or ``let`` name, a constant's exact text, the row's parameters, its
    shape (when ``shapes``: an elementwise kernel does not depend on them, an expanded
    one does) and its operands' numbers. A shared node is one line, so the text grows
    with the DAG, never with the tree it unfolds to. ``stops`` maps ``id(node)`` to a
    placeholder name: such a node is an opaque input (``stop``), its operands unread.
    """
    stops = stops or {}
    number: dict[int, int] = {}
    lines: list[str] = []
    for node in walk(root, stop=lambda n: id(n) in stops):
        if id(node) in stops:
            fields = ["stop", repr(stops[id(node)])]
        else:
            fields = [node.op] + ([repr(node.name)] if node.name else []) + (
                [repr(node.exact)] if node.exact is not None else []) + (
                [repr(node.params)] if node.params else []) + (
                [node.dtype] if node.dtype else [])
            fields += [f"%{number[id(c)]}" for c in node.args]
        if shapes:
            fields.append(repr(tuple(node.shape)))
        number[id(node)] = len(lines)
        lines.append(f"%{len(lines)} = " + " ".join(fields))
    return "\n".join(lines)
