"""op.contract's calls, run in the op's own process (:meth:`gradcheck.checking.opcheck.
server.Server.call_contract`; judged by :mod:`gradcheck.checking.opcheck.contract`): the
op's vᵀJ along the other paths autograd takes through a backward, each on a graph of its
own (a fresh forward), so that state a backward keeps in its graph does not show here:

- ``grad_output``: the cotangents laid out otherwise, the same values: ``strided``
  (every other element of a longer buffer), ``transposed`` (a transposed view; outputs
  of two axes or more), ``expanded`` (one value broadcast with stride 0: ones, beside
  the op's vᵀJ for a contiguous tensor of ones);
- ``subsets``: only some of the inputs requiring grad (``ctx.needs_input_grad`` False
  for the others), their gradients;
- ``pair``: one tensor passed in two argument slots (x as both x and y), and the same
  values as two separate tensors.

Each path's result is ``{"grads": ...}`` (by input name) or ``{"error": message}``
where the op raised on it."""

from __future__ import annotations

import numpy as np

from .calls import _arranged
from .storage import plain

#: the layouts of grad_output op.contract gives the op, besides the contiguous one
GRAD_OUTPUT_LAYOUTS = ("strided", "transposed", "expanded")


def contract(runner, point: dict, vs: list, plan: dict) -> dict:
    """Every path of ``plan`` (:func:`gradcheck.checking.opcheck.contract.plan`: the
    grad_output layouts, the subsets and the pair to take; the layouts for a torch op
    only, where they change a cotangent's layout)."""
    layouts = {}
    if not runner.kind.engine:   # (an engine tensor has no strides)
        for layout in plan.get("layouts", ()):
            if layout not in GRAD_OUTPUT_LAYOUTS:
                continue
            got = _attempt(_grad_output, runner, point, vs, layout)
            if got is not None:
                layouts[layout] = got
    pair = plan.get("pair")
    return {"grad_output": layouts,
            "subsets": [_attempt(_subset, runner, point, vs, list(names))
                        for names in plan.get("subsets", ())],
            "pair": None if not pair else _attempt(_shared, runner, point, vs, *pair)}


def _attempt(fn, *args) -> dict | None:
    """``fn(*args)``, or where the op raised, ``{"error": what}``: the path's failure."""
    from ...base.errors import describe_exception

    try:
        return fn(*args)
    except Exception as exc:   # the op's failure on this path, not the case's
        return {"error": describe_exception(exc)[:2000]}


def _grads(runner, leaves: dict, outs: tuple, tensors: list, names: list) -> dict:
    """vᵀJ for the inputs ``names``, as plain arrays (None where no gradient flows)."""
    got = runner.vjp(leaves, outs, None, tensors=tensors, names=names)
    return {n: plain(g) for n, g in got.items()}


def _grad_output(runner, point: dict, vs: list, layout: str) -> dict | None:
    """vᵀJ with every cotangent in ``layout`` (None: it changes none of them)."""
    if layout == "expanded":
        vs = [np.ones(np.shape(v)) for v in vs]
    tensors = runner.cotangents(vs)
    arranged = [_laid_out(t, layout) for t in tensors]
    if all(a.is_contiguous() for a in arranged):
        return None
    leaves = runner.leaves(point)
    got = {"grads": _grads(runner, leaves, runner.forward(leaves), arranged,
                           runner.wanted)}
    if layout == "expanded":   # what it is held to: ones, contiguous, on a graph of its own
        leaves = runner.leaves(point)
        got["contiguous"] = _grads(runner, leaves, runner.forward(leaves), tensors,
                                   runner.wanted)
    return got


def _laid_out(t, layout: str):
    """The cotangent ``t`` (contiguous) in ``layout``, the same values."""
    if layout == "expanded":   # (t is ones: one element of a storage of its own,
        # broadcast, as the backward of a sum hands it on)
        return t.reshape(-1)[0].clone().expand(t.shape) if t.numel() > 1 else t
    return _arranged(t, layout)


def _subset(runner, point: dict, vs: list, names: list) -> dict:
    """vᵀJ for ``names`` where only they of the inputs require grad."""
    leaves = runner.leaves(point)
    for n in runner.wanted:
        if n not in names:
            leaves[n].requires_grad_(False)
    tensors = runner.cotangents(vs)
    return {"grads": _grads(runner, leaves, runner.forward(leaves), tensors, names)}


def _shared(runner, point: dict, vs: list, first: str, second: str) -> dict:
    """``first``'s tensor passed for ``second`` too: the gradients of every input but
    ``second`` (``first``'s sums both slots', as autograd accumulates them), and, with
    ``second`` a separate tensor of ``first``'s values, every input's (as
    :func:`gradcheck.checking.opcheck.contract.shared_point`)."""
    point = {**point, second: point[first]}
    tensors = runner.cotangents(vs)
    leaves = runner.leaves(point)
    leaves[second] = leaves[first]
    names = [n for n in runner.wanted if n != second]
    shared = _grads(runner, leaves, runner.forward(leaves), tensors, names)
    leaves = runner.leaves(point)
    separate = _grads(runner, leaves, runner.forward(leaves), tensors, runner.wanted)
    return {"shared": shared, "separate": separate}
