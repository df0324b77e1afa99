"""A case's memory, estimated from its inputs, outputs, points and intermediates (the
formula DAG's node shapes) before any point is sampled, and refused over the budget
(:func:`check_case`; the budget and the bytes per element are
:mod:`gradcheck.process.budgets`')."""

from __future__ import annotations

import math

from ..formula.tree import walk
from ..process.budgets import (KEPT_BYTES, KEPT_POINTS, LARGEST_BYTES, POINT_BYTES, WORK_BYTES,
                               BudgetError, format_size, max_memory)


def intermediates(case) -> tuple[int, int]:
    """(elements of the largest intermediate, elements of every intermediate together)
    of ``case``'s formulas: one walk of the DAG, whose nodes know their shapes once
    parsed. An intermediate is a node that computes (not an input, a constant or a
    ``let``'s name; a node several parents share is counted once)."""
    roots = [*(case.outputs or (case.output,)), *case.forward]
    seen: set[int] = set()
    largest = total = 0
    for root in roots:
        for node in walk(root):
            if id(node) in seen or node.op in ("input", "const", "let"):
                continue
            seen.add(id(node))
            largest = max(largest, node.size)
            total += node.size
    return largest, total


def estimate(case) -> tuple[int, int, int]:
    """(estimated bytes, elements of inputs and outputs, points held at once) of
    checking ``case``: its inputs and outputs for each point held, plus its
    intermediates (:func:`intermediates`: the largest at :data:`LARGEST_BYTES` an
    element, all of them at :data:`KEPT_BYTES`)."""
    outputs = case.outputs or (case.output,)
    elements = (sum(math.prod(s.shape) for s in case.inputs)
                + sum(math.prod(o.shape) for o in outputs))
    sampled = any(s.value is None and not s.integer for s in case.inputs)
    points = min(case.points + (case.extreme_points if sampled else 0), KEPT_POINTS + 1)
    largest, total = intermediates(case)
    return (elements * (WORK_BYTES + POINT_BYTES * points) + largest * LARGEST_BYTES
            + total * KEPT_BYTES), elements, points


def check_case(case) -> None:
    """Refuse ``case`` when its estimated memory exceeds the budget.

    Raises:
        BudgetError: it does, with the estimate and how to lower it or raise the budget.
    """
    need, elements, points = estimate(case)
    budget = max_memory()
    if need <= budget:
        return
    largest, total = intermediates(case)
    plural = "" if points == 1 else "s"
    raise BudgetError(
        f"the case needs an estimated {format_size(need)} of memory ({elements:,} elements "
        f"in its inputs and outputs, {points} point{plural} held at once: {WORK_BYTES} "
        f"bytes per element and {POINT_BYTES} more for each point; {total:,} elements in "
        f"its intermediates, {KEPT_BYTES} bytes each, the largest {largest:,} elements "
        f"at {LARGEST_BYTES} more), over the budget of {format_size(budget)}: use "
        "smaller shapes, fewer points (points = N in the case, or --points), or raise "
        f"the budget with --max-memory SIZE (e.g. --max-memory "
        f"{max(1, math.ceil(need / 1024**3))}G)")
