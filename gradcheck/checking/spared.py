"""Finite differences where they are needed. The numeric witness is the one that uses no
derivative rule, and the dearest: dozens of forward evaluations of the formula per
point (two thirds of a large check's time). On a large case it runs at a point only
where the witnesses that differentiate exactly, the engine (the rule table's own
backward) and torch (PyTorch's autograd, written apart from the table), have not both
agreed with the exact reference at every element far inside their tolerances: within
:data:`AGREED` of them. Two derivatives computed independently that match the symbolic
one to a small fraction of their rounding bounds leave finite differences, whose own
error bound is far wider, nothing to add; where either witness differs anywhere, was not
run, or raised, finite differences are measured at every point as before, and they
help tell a wrong reference from a wrong witness.

A case that names its witnesses (``witnesses = [...]``) runs each at every point, and a
case under :data:`LARGE` elements always runs finite differences (they cost little
there, and the differential tests run them at every point)."""

from __future__ import annotations

import math

NUMERIC = "numeric"
#: the witnesses whose agreement spares finite differences
EXACT = ("engine", "torch")
#: gradient elements (the inputs' that require grad) from which a case spares them
LARGE = 1 << 16
#: the largest |diff| / tolerance of every element of both exact witnesses at a point
AGREED = 0.125


def spared(check, i: int) -> bool:
    """Whether the numeric witness is spared at point ``i`` (``check``: the case's
    :class:`~gradcheck.checking.case._FormulaCheck`, the exact witnesses compared at
    ``i`` already)."""
    case = check.case
    if case.witnesses_named or size(case) < LARGE:
        return False
    for w in EXACT:
        if w not in check.names or w in check.errors or w in check.skipped:
            return False
        tally = check.tallies[w]
        worst = tally.point_worst.get(i)
        if tally.mismatched or tally.problems or worst is None or not worst <= AGREED:
            return False
    return True


def size(case) -> int:
    """The gradient elements of the case: its inputs' that require grad."""
    return sum(math.prod(s.shape) for s in case.inputs if s.requires_grad)


def reason(case, points: list[int], checked: int) -> str:
    """Why the numeric witness was spared at ``points`` (of ``checked`` points)."""
    where = ("at every point" if len(points) == checked
             else f"at point{'s' * (len(points) > 1)} {', '.join(map(str, points))}")
    return (f"finite differences not measured {where}: the engine and torch agree with "
            f"the exact gradient there within {AGREED:g} of their tolerances at every "
            f"element (a case of {size(case):,} gradient elements runs them only where "
            "that is not so; witnesses = [...] in the case runs every witness named at "
            "every point)")
