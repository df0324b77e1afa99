"""The rounding model (:class:`gradcheck.bounds.model.RoundingModel`) run at one point:
the bounds of a case's value and vᵀJ (:func:`error_bounds`), of a formula's forward
(:func:`forward_bound`), and what one computation of them leaves for another at the
same point (:class:`PointBounds`), handed from one to the other: no state is kept
between calls.
"""

from __future__ import annotations

import numpy as np

from ..formula.tree import Node, walk
from .blocks import finite
from .model import RoundingModel
from .slab import slab_error_bounds, slabbed


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _point_key(root: Node, env: dict, dtype: str) -> tuple:
    return (id(root), dtype, tuple(sorted((name, id(a)) for name, a in env.items())))


class PointBounds:
    """What the rounding model computed at one point that another reader at the same
    point needs: the root's value and forward bound of the last :func:`error_bounds`
    given this object, which :func:`forward_bound` given it returns instead of running
    the forward again (the numeric witness asks for the float64 forward at the point
    the tolerance took: a full forward of the running bound, at a layer's size
    hundreds of MB and a second). One per point: made where the point is checked
    (:mod:`gradcheck.checking.case`), handed to both, and dropped with the point.

    It holds the formula and the point's arrays, so that their identities, which say
    whether a question is about the same point, cannot be reused while it lives."""

    def __init__(self):
        self._kept: tuple | None = None   # (key, value, bound, (root, point))

    def keep(self, root: Node, point: dict, dtype: str, value, bound: np.ndarray) -> None:
        """Keep ``root``'s ``value`` and its forward ``bound`` in ``dtype`` at ``point``
        (the last one only: at a layer's size these are the root's arrays). ``bound``
        is made read-only: the caller's result shares it."""
        bound.flags.writeable = False
        self._kept = (_point_key(root, point, dtype), value, bound, (root, dict(point)))

    def get(self, root: Node, env: dict, dtype: str) -> tuple | None:
        """(value, bound) of ``root`` in ``dtype`` at ``env`` where kept, else None."""
        if self._kept is None or self._kept[0] != _point_key(root, env, dtype):
            return None
        return self._kept[1], self._kept[2]


def forward_bound(root: Node, env: dict[str, np.ndarray],
                  overrides: dict[str, np.ndarray] | None = None,
                  dtype: str = "float64", at: PointBounds | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The value of ``root`` (as :func:`gradcheck.formula.forward.evaluate` computes it)
    and a bound on its rounding error in ``dtype``, per element: what finite differences
    of the float64 forward are allowed for rounding (log(cosh(x)) near 0 errs by u, not
    u·|value|). ``at``: the point's :class:`PointBounds`, whose kept forward is returned
    where it is this one (no ``overrides``)."""
    if not overrides and at is not None:
        found = at.get(root, env, dtype)
        if found is not None:
            return found
    b = RoundingModel(dtype)
    with np.errstate(all="ignore"):
        b.forward(root, env, overrides)
    return b.val[id(root)], finite(np.array(b.err[id(root)], dtype=float))


def error_bounds(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str,
                 forward: dict | None = None, batch: bool = False, watch=None,
                 pins: dict | None = None, *, at: PointBounds | None = None,
                 slabs: bool = True, skip_unread: bool = True) -> dict[str, np.ndarray]:
    """Per-element bounds on the rounding error of a correct computation in ``dtype`` of
    the value and of vᵀJ (``"value"``, ``"x.grad"`` for every input, ``"h.grad"`` for
    every retained ``let``), absolute, at ``point``. Non-finite bounds (an overflow in
    the probe) count as 0: the comparison is then strict rather than blind.

    ``forward``: a dict the caller keeps for one point, where the forward pass is kept
    and reused for every v (the Jacobian's one-hot cotangents). ``batch``: ``v`` holds
    many cotangents along its first axis (the Jacobian's one-hots), bounded in one
    backward pass; each gradient's bound then has that axis in front, the value's not.
    ``watch`` (a :class:`gradcheck.sampling.overflow.Watch`) sees every cotangent and
    VJP of the backward, which is autograd's as written: what passes the dtype's range.
    ``pins``: node id -> arguments as a witness held them: the bounds of the branch it
    took (:mod:`gradcheck.checking.decisions`); nothing of it is kept in ``at``.
    ``at``: the point's :class:`PointBounds`, which keeps the root's value and forward
    bound for :func:`forward_bound`. ``slabs``: a large elementwise formula is bounded
    by slabs of rows (:mod:`gradcheck.bounds.slab`); ``skip_unread``: see
    :class:`gradcheck.bounds.model.RoundingModel` (both on but where a test compares
    the two ways: the same numbers)."""
    root = case.output
    device = getattr(case, "device", "cpu")
    split = None if not slabs or forward is not None or batch or pins else slabbed(root)
    if split is not None:   # a large elementwise formula: by slabs, the same numbers
        with np.errstate(all="ignore"):
            out, value = slab_error_bounds(
                lambda: RoundingModel(dtype, device, watch, skip_unread=skip_unread),
                case, split, point, v)
        out = {k: finite(_arr(e)) for k, e in out.items()}   # (fresh arrays already)
        if at is not None:
            at.keep(root, point, dtype, value, out["value"])
        return out
    b = None if forward is None else forward.get(key := (id(root), dtype))
    fresh = b is None
    with np.errstate(all="ignore"):
        if fresh:
            b = RoundingModel(dtype, device, skip_unread=skip_unread)
            b.pins = dict(pins or {})
            b.forward(root, point)
            if forward is not None:
                forward[key] = b
        b.watch = watch
        grad, gerr = b.backward(root, v, batch, release=forward is None)
    out = {"value": b.err[id(root)]}
    nodes = {n.name: n for n in walk(root) if n.op in ("input", "let")}
    for spec in case.inputs:
        node = nodes.get(spec.name)
        out[f"{spec.name}.grad"] = (np.zeros(b.lead + tuple(spec.shape)) if node is None
                                    or id(node) not in gerr else gerr[id(node)])
    out.update({f"{n}.grad": gerr[id(nodes[n])] for n in getattr(case, "retain_grad", ())
                if n in nodes and id(nodes[n]) in gerr})
    # fresh arrays, as the caller may keep them (the value's bound is kept per point)
    out = {k: finite(np.array(e, dtype=float)) for k, e in out.items()}
    if fresh and not pins and at is not None:   # (after the backward: not beside its peak)
        at.keep(root, point, dtype, b.val[id(root)], out["value"])
    return out
