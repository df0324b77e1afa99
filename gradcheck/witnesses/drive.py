"""Driving an autograd library the way a user does: the formula rebuilt on its tensors,
``retain_grad()`` on the retained lets, ``backward``, and the ``grad_fn`` graph read back
(the torch and engine witnesses share this)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..base.evaluation import Evaluation
from ..formula.tree import evaluate


def grad_fns(y) -> list:
    """The nodes of ``y``'s backward graph, each once, depth first from ``y.grad_fn``,
    following ``next_functions`` (PyTorch's graph and the engine's alike)."""
    nodes: list = []
    seen: set[int] = set()
    stack = [y.grad_fn] if getattr(y, "grad_fn", None) is not None else []
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        nodes.append(fn)
        stack.extend(f for f, _ in reversed(fn.next_functions) if f is not None)
    return nodes


def grad_fn_chain(y) -> tuple[str, ...]:
    """Class names of :func:`grad_fns`' nodes, in its order."""
    return tuple(type(fn).__name__ for fn in grad_fns(y))


def rebuild(root, leaves: dict, apply: Callable, on_let: Callable | None = None):
    """The formula below ``root`` on an autograd library's tensors: ``leaves`` for the
    inputs, constants as Python numbers, ``apply(node, args)`` for each primitive;
    ``on_let(node, value)`` sees the value of every ``let``."""
    return evaluate(root, lambda node: leaves[node.name], apply, on_let=on_let)


def drive(case, leaves: dict, apply: Callable, tensor: Callable, v: np.ndarray,
          to_numpy: Callable, *, order: Callable | None = None,
          pins: dict | None = None):
    """Rebuild the formula on an autograd library and run its backward, the way a user
    would: ``retain_grad()`` on the retained lets, ``y.backward()`` for a scalar case,
    ``y.backward(v)`` otherwise. Shared by the torch and engine witnesses.

    Args:
        leaves: input name -> leaf tensor of the library.
        apply: ``(node, args) -> tensor`` for a primitive (the library's table column).
        tensor: ``array -> tensor`` of the library, in the run's dtype and device.
        to_numpy: ``tensor or None -> float64 array or None``.
        order: ``(node, tensor) -> positions``: the permutation the library's sort
            or topk takes; given, the deciding rows' arguments are recorded as the
            library computed them (``Evaluation.decisions``, see
            :mod:`gradcheck.checking.decisions`).
        pins: node id -> arguments: those rows see these values instead of their own,
            their derivative flowing to their arguments as before (the branch a witness
            took, judged by another library).
    """
    retained: dict[str, Any] = {}
    recorder = None
    if pins:
        apply = _pinned(apply, pins, tensor, to_numpy)
    if order is not None:
        from .recorder import Recorder

        recorder = Recorder(to_numpy, order)
        apply = recorder.wrap(apply)

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
        decisions=recorder,
    )


def _pinned(apply: Callable, pins: dict, tensor: Callable, to_numpy: Callable) -> Callable:
    """``apply`` where each pinned row's float arguments take the pinned values:
    ``(a - ā) + w``, ā a constant of a's own value (no gradient), so the derivative still
    flows to ``a`` (∂/∂a = 1) and the value is w to the bit: a - ā is an exact 0 (finite
    a; the judge runs in float64, where ā holds a exactly) and 0 + w is w. Not
    ``a + (w - a)``: that rounds twice at a's scale, and a sort's tie-break, a few
    spacings of w (:func:`gradcheck.checking.decisions._tie_broken`), is lost where
    |a| ≫ |w| (keys rounded to 0 in float32, a ≈ 1e-11: both pinned to 0, a tie
    again, which the judge's own sort then orders)."""
    def pinned(node, args):
        given = pins.get(id(node))
        if given is not None:
            args = [(a - tensor(to_numpy(a))) + tensor(w) if _float_tensor(a)
                    and isinstance(w, np.ndarray) else a for a, w in zip(args, given)]
        return apply(node, args)

    return pinned


def _float_tensor(a) -> bool:
    if hasattr(a, "is_floating_point"):   # a torch tensor
        return a.is_floating_point()
    return hasattr(a, "grad_fn") and np.dtype(getattr(a, "dtype", "O")).kind == "f"
