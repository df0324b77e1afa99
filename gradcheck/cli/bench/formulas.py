"""The random formulas of section (c): over ``x0..x7`` (scalars), nesting an exact depth
of :data:`~gradcheck.cli.bench.config.TEMPLATES`, picked by their size in parsed nodes."""

from __future__ import annotations

import random

from .config import FORMULA_INPUTS, TEMPLATES


def random_formula(depth: int, seed: int, inputs: int = FORMULA_INPUTS) -> str:
    """A random formula over ``x0..x{inputs-1}`` nesting exactly ``depth`` levels of
    :data:`TEMPLATES` (``+ * sin tanh``, ``exp(a/(1+a**2))``, ``log(1+a**2)``); the
    operands of ``+`` and ``*`` are both ``depth - 1`` deep."""
    rng = random.Random(seed)

    def draw(d: int) -> str:
        if d == 0:
            return f"x{rng.randrange(inputs)}"
        op = rng.choice(list(TEMPLATES))
        a = draw(d - 1)
        return TEMPLATES[op].format(a=a, b=draw(d - 1) if op in "+*" else "")

    return draw(depth)


def formula_case(expr: str):
    """The case of a formula over x0..x7: one point, no extreme points."""
    from ...cases import case_from_dict

    return case_from_dict({"name": "formula", "expr": expr, "points": 1,
                           "extreme_points": 0, "inputs": {
                               f"x{i}": {"shape": []} for i in range(FORMULA_INPUTS)}})


def formula_point(seed: int = 0) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {f"x{i}": np.asarray(rng.uniform(-2, 2)) for i in range(FORMULA_INPUTS)}


def count_ops(expr: str) -> int:
    """Parsed nodes of a formula over x0..x7 (inputs once each, every constant)."""
    from ...formula.tree import walk

    return sum(1 for _ in walk(formula_case(expr).output))


def size_goal(depth: int) -> int:
    """Parsed nodes aimed at for a depth: 8 at depth 2, ×1.7 a level (190 at depth 8)."""
    return round(8 * 1.696 ** (depth - 2))


def formula_of_size(depth: int, ops: int, tolerance: float = 0.2) -> tuple[str, int, int]:
    """The first seed's formula of ``depth`` within ``tolerance`` of ``ops`` parsed nodes
    (random formulas of one depth vary 20-fold in size); ``(expr, ops, seed)``."""
    best = None
    for seed in range(2000):
        expr = random_formula(depth, seed)
        count = count_ops(expr)
        if abs(count - ops) <= tolerance * ops:
            return expr, count, seed
        if best is None or abs(count - ops) < abs(best[1] - ops):
            best = (expr, count, seed)
    return best


def depth_for(ops: int) -> int:
    """The deepest depth whose size goal is at most ``ops``."""
    depth = 2
    while size_goal(depth + 1) <= ops:
        depth += 1
    return depth
