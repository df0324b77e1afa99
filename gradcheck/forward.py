"""Float forward evaluation of a formula through the rule table's ``numpy`` column.

The numeric witness differentiates this by finite differences and sampling reads the
hazards (distances to kinks and singularities) it records. It uses no derivative rule.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .rules import REDUCTION, RULES
from .tree import Node, fold


def _apply(node: Node, args: list) -> np.ndarray:
    rule = RULES[node.op]
    if rule.kind == REDUCTION:
        return np.asarray(rule.numpy(args[0], node.axis, node.keepdims), dtype=float)
    return np.asarray(rule.numpy(*args))


def evaluate(root: Node, env: dict[str, np.ndarray],
             overrides: dict[str, np.ndarray] | None = None,
             on_node: Callable[[Node, list, np.ndarray], None] | None = None,
             lets: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The value of ``root`` with inputs from ``env`` (float64 arrays).

    ``overrides`` replaces input or ``let`` values; ``on_node(node, args, value)`` is
    called for every applied primitive (sampling uses it to read hazards); ``lets``, when
    given, receives the value of every ``let`` evaluated.
    """

    def visit(node: Node, args: list) -> np.ndarray:
        if node.op == "input":
            return env[node.name]
        if node.op == "const":
            return np.asarray(node.const, dtype=float)
        if node.op == "let":
            if lets is not None:
                lets[node.name] = args[0]
            return args[0]
        value = _apply(node, args)
        if on_node is not None:
            on_node(node, args, value)
        return value

    with np.errstate(all="ignore"):
        return fold(root, visit, overrides)


def hazard_distances(root: Node, env: dict[str, np.ndarray]) -> list[tuple[Node, np.ndarray]]:
    """For each primitive with a kink or singularity: its distance to it, elementwise.

    A non-finite value anywhere counts as distance 0 (the point left the domain).
    """
    found: list[tuple[Node, np.ndarray]] = []

    def on_node(node: Node, args: list, value: np.ndarray) -> None:
        rule = RULES[node.op]
        if rule.hazard is not None:
            if rule.kind == REDUCTION:
                d = rule.hazard(args[0], node.axis, node.keepdims)
            else:
                d = rule.hazard(*args)
            if d is not None:
                found.append((node, np.abs(np.asarray(d, dtype=float))))
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            found.append((node, np.where(np.isfinite(value), np.inf, 0.0)))

    evaluate(root, env, on_node=on_node)
    return found
