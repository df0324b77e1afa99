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
    elif name == "engine":
        from .engine import run
    elif name == "numeric":
        from .numeric import run
    else:
        raise KeyError(name)
    return run


def grad_fn_chain(y) -> tuple[str, ...]:
    """Class names of the nodes of ``y``'s backward graph, depth first from ``y.grad_fn``,
    following ``next_functions`` (PyTorch's graph and the engine's alike)."""
    names: list[str] = []
    seen: set[int] = set()
    stack = [y.grad_fn] if getattr(y, "grad_fn", None) is not None else []
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        names.append(type(fn).__name__)
        stack.extend(f for f, _ in reversed(fn.next_functions) if f is not None)
    return tuple(names)
