"""Float forward evaluation of a formula through the rule table's ``numpy`` column.

The numeric witness differentiates this by finite differences and sampling reads the
hazards (distances to kinks and singularities) it records. It uses no derivative rule.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .rules import REDUCTION
from .tree import Node, evaluate as walk_formula


def _apply(node: Node, args: list) -> np.ndarray:
    value = node.call("numpy", args)
    # a whole reduction gives a NumPy scalar: every value here is an array, reductions'
    # float
    if node.rule.kind == REDUCTION:
        return np.asarray(value, dtype=float)
    return value if type(value) is np.ndarray else np.asarray(value)


def evaluate(root: Node, env: dict[str, np.ndarray],
             overrides: dict[str, np.ndarray] | None = None,
             on_node: Callable[[Node, list, np.ndarray], None] | None = None,
             lets: dict[str, np.ndarray] | None = None,
             merge: bool = False) -> np.ndarray:
    """The value of ``root`` with inputs from ``env`` (float64 arrays).

    ``overrides`` replaces input or ``let`` values; ``on_node(node, args, value)`` is
    called for every applied primitive (sampling uses it to read hazards); ``lets``, when
    given, receives the value of every ``let`` evaluated. ``merge``: a computation the
    formula writes twice is done once (:func:`gradcheck.tree.twins`; the callbacks then
    see the first node of each pair only).
    """
    on_let = None if lets is None else (lambda node, value: lets.__setitem__(node.name,
                                                                             value))
    with np.errstate(all="ignore"):
        return walk_formula(root, lambda node: env[node.name], _apply,
                            const=lambda node: np.asarray(node.const, dtype=float),
                            on_let=on_let, on_node=on_node, overrides=overrides,
                            merge=merge)


def hazard_distances(root: Node, env: dict[str, np.ndarray]) -> list[tuple[Node, np.ndarray]]:
    """For each primitive with a kink or singularity: its distance to it, elementwise.

    A non-finite value anywhere counts as distance 0 (the point left the domain).
    """
    found: list[tuple[Node, np.ndarray]] = []

    def on_node(node: Node, args: list, value: np.ndarray) -> None:
        if node.rule.hazard is not None:
            d = node.call("hazard", args)
            if d is not None:
                found.append((node, np.abs(np.asarray(d, dtype=float))))
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            found.append((node, np.where(np.isfinite(value), np.inf, 0.0)))

    evaluate(root, env, on_node=on_node)
    return found
