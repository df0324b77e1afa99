"""Witnesses: each computes the output and vᵀJ of a case at a point, its own way.

Every witness is a function ``(case, point, v, dtype) -> Evaluation``; the symbolic
reference (:mod:`gradcheck.symbolic`) is compared against each of them.
"""

from __future__ import annotations

from typing import Callable


def witness(name: str) -> Callable:
    """The run function of the witness ``name`` (imported on first use)."""
    if name == "torch":
        from .torch import run
    elif name == "numeric":
        from .numeric import run
    else:
        raise KeyError(name)
    return run
