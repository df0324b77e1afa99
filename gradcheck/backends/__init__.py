"""Witnesses: each computes the output and vᵀJ of a case at a point, its own way.

Every witness is a function ``(case, point, v, dtype) -> Evaluation``; the symbolic
reference (:mod:`gradcheck.symbolic`) is compared against each of them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


#: The dtypes a witness runs in, where it does not run in every dtype (float16 and
#: bfloat16 are then skipped with the reason, never failed). The engine's kernels are
#: NumPy code written and tested in float64 and float32 only. The numeric witness
#: differentiates the float64 forward at the rounded point whatever the run's dtype:
#: in a float16 or bfloat16 run it would check no arithmetic in that dtype, only the
#: formula again, so it is kept to the dtypes it has been validated in rather than
#: reported as if it had checked the low dtype.
RUNS_IN: dict[str, tuple[str, ...]] = {"engine": ("float64", "float32"),
                                       "numeric": ("float64", "float32")}


def skip_reason(name: str, dtype: str) -> str | None:
    """Why the witness ``name`` does not run in ``dtype``, or None when it does; the
    runner reports such a witness as skipped with this reason, which fails no case."""
    dtypes = RUNS_IN.get(name)
    if dtypes is None or dtype in dtypes:
        return None
    return f"the {name} witness runs in {' and '.join(dtypes)} only"


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


def rebuild(root, leaves: dict, apply: Callable, on_let: Callable | None = None):
    """The formula below ``root`` on an autograd library's tensors: ``leaves`` for the
    inputs, constants as Python numbers, ``apply(node, args)`` for each primitive;
    ``on_let(node, value)`` sees the value of every ``let``."""
    from ..tree import evaluate

    return evaluate(root, lambda node: leaves[node.name], apply, on_let=on_let)


def drive(case, leaves: dict, apply: Callable, tensor: Callable, v: np.ndarray,
          to_numpy: Callable):
    """Rebuild the formula on an autograd library and run its backward, the way a user
    would: ``retain_grad()`` on the retained lets, ``y.backward()`` for a scalar case,
    ``y.backward(v)`` otherwise. Shared by the torch and engine witnesses.

    Args:
        leaves: input name -> leaf tensor of the library.
        apply: ``(node, args) -> tensor`` for a primitive (the library's table column).
        tensor: ``array -> tensor`` of the library, in the run's dtype and device.
        to_numpy: ``tensor or None -> float64 array or None``.
    """
    from ..evaluation import Evaluation

    retained: dict[str, Any] = {}

    def on_let(node, value) -> None:
        if node.name in case.retain_grad:
            if getattr(value, "requires_grad", False):
                value.retain_grad()
            retained[node.name] = value

    y = rebuild(case.output, leaves, apply, on_let)
    if isinstance(case.gradient, str) and case.gradient == "scalar":
        y.backward()
    else:
        y.backward(tensor(v))
    return Evaluation(
        value=to_numpy(y),
        grads={s.name: to_numpy(leaves[s.name].grad) for s in case.inputs
               if s.requires_grad},
        retained={n: to_numpy(getattr(retained[n], "grad", None))
                  for n in case.retain_grad},
        grad_fn=grad_fn_chain(y),
    )
