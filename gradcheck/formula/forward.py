"""Float forward evaluation of a formula through the rule table's ``numpy`` column.

The numeric witness differentiates this by finite differences and sampling reads the
hazards (distances to kinks and singularities) it records, less those that are none
(:func:`counted_hazards`). It uses no derivative rule.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ..rules import COMPARISON, COMPOSITE, REDUCTION, RULES
from ..rules.activation.rows import STEPS
from .tree import Node, evaluate as walk_formula, planned, values_of, walk


def _apply(node: Node, args: list) -> np.ndarray:
    return _as_array(node)(node.call("numpy", args))


def _as_array(node: Node) -> Callable:
    """How a row's result becomes this forward's value: every value here is an array
    (a whole reduction gives a NumPy scalar), a reduction's or a composite row's float."""
    return _reduced if node.rule.family in (REDUCTION, COMPOSITE) else _array


def evaluate(root: Node, env: dict[str, np.ndarray],
             overrides: dict[str, np.ndarray] | None = None,
             on_node: Callable[[Node, list, np.ndarray], None] | None = None,
             lets: dict[str, np.ndarray] | None = None,
             merge: bool = False) -> np.ndarray:
    """The value of ``root`` with inputs from ``env`` (float64 arrays).

    ``overrides`` replaces input or ``let`` values; ``on_node(node, args, value)`` is
    called for every applied primitive (sampling uses it to read hazards); ``lets``, when
    given, receives the value of every ``let`` evaluated. ``merge``: a computation the
    formula writes twice is done once (:func:`gradcheck.formula.tree.twins`; the callbacks then
    see the first node of each pair only).
    """
    if on_node is None and lets is None:
        with np.errstate(all="ignore"):
            return program(root, frozenset(overrides or ()), merge)(env, overrides)
    on_let = None if lets is None else (lambda node, value: lets.__setitem__(node.name,
                                                                             value))
    with np.errstate(all="ignore"):
        return walk_formula(root, lambda node: env[node.name], _apply,
                            const=lambda node: np.asarray(node.const, dtype=float),
                            on_let=on_let, on_node=on_node, overrides=overrides,
                            merge=merge)


def _array(value) -> np.ndarray:
    return value if type(value) is np.ndarray else np.asarray(value)


def _reduced(value) -> np.ndarray:
    return np.asarray(value, dtype=float)


@functools.lru_cache(maxsize=256)
def program(root: Node, given: frozenset, merge: bool = False) -> Callable:
    """:func:`evaluate` without callbacks as one loop over precomputed steps, ``(env,
    overrides) -> value`` for overrides of the names or node ids ``given`` (NumPy's
    floating-point errors are the caller's to silence): the plan of
    :func:`gradcheck.formula.tree.fold` (the same nodes, the same ``numpy`` column calls in the
    same order, each value dropped after its last use) with each node's column,
    parameters and operands' slots looked up once. The numeric witness evaluates one
    formula dozens of times per point; the walk's per-node dispatch was a fifth of each
    evaluation."""
    slots: dict[int, int] = {}
    # (slot, kind, what, operand slots, slots whose last use this is); kind: "row"
    # (what: column, parameters, wrap), "given" (an override's key), "input" (its
    # name), "value" (a constant's array, or None: a let, its operand's value)
    steps = []
    for node, key, args, drops in planned(root, given, merge):
        slot = slots[id(node)] = len(slots)
        dropped = tuple(slots[d] for d in drops)
        operands = () if key is not None else tuple(slots[a] for a in args)
        if key is not None:
            kind, what = "given", key
        elif node.op == "input":
            kind, what = "input", node.name
        elif node.op in ("const", "let"):
            kind = "value"
            what = np.asarray(node.const, dtype=float) if node.op == "const" else None
        else:
            kind = "row"
            what = getattr(RULES[node.op], "numpy"), values_of(node), _as_array(node)
        steps.append((slot, kind, what, operands, dropped))
    size = len(slots)

    def forward(env, overrides):
        values: list = [None] * size
        for slot, kind, what, operands, dropped in steps:
            if kind == "row":
                fn, params, wrap = what
                values[slot] = wrap(fn(*[values[k] for k in operands], *params))
            elif kind == "given":
                values[slot] = overrides[what]
            elif kind == "input":
                values[slot] = env[what]
            else:
                values[slot] = what if what is not None else values[operands[0]]
            for k in dropped:
                values[k] = None
        return values[slot]

    return forward


def hazard_distances(root: Node, env: dict[str, np.ndarray], also=None
                     ) -> list[tuple[Node, np.ndarray]]:
    """For each primitive with a kink or singularity: its distance to it, elementwise.

    A non-finite value anywhere counts as distance 0 (the point left the domain).
    ``also(node, args, value)``: called at every node as well (another look at the same
    evaluation, where it would take a forward pass of its own).
    """
    found: list[tuple[Node, np.ndarray]] = []

    def on_node(node: Node, args: list, value: np.ndarray) -> None:
        if node.rule.hazard is not None:
            d = node.call("hazard", args)
            if d is not None:
                found.append((node, np.abs(np.asarray(d, dtype=float))))
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            found.append((node, np.where(np.isfinite(value), np.inf, 0.0)))
        if also is not None:
            also(node, args, value)

    evaluate(root, env, on_node=on_node)
    return found


def exact_nodes(root) -> set[int]:
    """The ids of the nodes below ``root`` whose value depends on no float input:
    constants, integer and boolean inputs, and what is computed from them alone. Such a
    value never moves (the numeric witness perturbs floats only, and integers are exact
    in every witness), so a kink there is none: ``where(idx > 2, a, b)`` switches at
    integers, exactly."""
    exact: set[int] = set()
    for node in walk(root):
        if node.op == "const" or (node.op == "input" and node.dtype is not None) or (
                node.op not in ("input", "const") and node.args
                and all(id(a) in exact for a in node.args)):
            exact.add(id(node))
    return exact


def steady_nodes(root, exact: set[int] | None = None) -> set[int]:
    """The ids of the nodes below ``root`` whose value is locally constant in the float
    inputs: the :func:`exact_nodes`, the results of the step rows (floor, round, sign...:
    ``rules.activations.STEPS``, kept off their jumps by their own hazards) and what is
    computed from such alone. A comparison of such values switches only where they
    jump, so its own hazard is waived: ``round(x) == 0`` holds on a whole interval, and
    points inside it check equality as it is."""
    steady = set(exact_nodes(root) if exact is None else exact)
    for node in walk(root):
        if node.op in STEPS or (node.op not in ("input", "const") and node.args
                                and all(id(a) in steady for a in node.args)):
            steady.add(id(node))
    return steady


def counted_hazards(body, values, also=None) -> list:
    """:func:`gradcheck.formula.forward.hazard_distances` (with ``also``) less the hazards that
    are none: of a node whose value depends on no float input (:func:`exact_nodes`) and
    of a comparison of locally constant values (:func:`steady_nodes`)."""
    found = hazard_distances(body, values, also)
    if not found:   # (most points of most formulas: no walk for what to leave out)
        return found
    exact = exact_nodes(body)
    steady = steady_nodes(body, exact)
    return [(node, d) for node, d in found if not (
        id(node) in exact or (node.rule.family == COMPARISON and id(node) in steady))]
