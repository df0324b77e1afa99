"""What sampled points keep away from: the formulas whose kinks and singularities count
(:func:`bodies`), how close is too close (:data:`MARGIN`, :func:`too_close`), which input
elements are behind a hazard (:func:`culprits`), and the range a point keeps the formula
within (:func:`within`). Shared by :mod:`gradcheck.sampling.points` (which keeps points away)
and :mod:`gradcheck.sampling.kinks` (which puts elements near kinks, and keeps the rest away)."""

from __future__ import annotations

import numpy as np

from ..base.arrays import unbroadcast
from ..formula.forward import counted_hazards
from .overflow import limit as range_limit
from ..formula.tree import elementwise_split

MARGIN = 0.05      # distance kept from every kink and singularity


def within(case, dtype: str) -> float | None:
    """The range a point keeps the formula as written within (:mod:`gradcheck.sampling.overflow`):
    the dtype's, for a formula case in float32, float16 or bfloat16; None for float64
    and for an op case, whose reference is what the op must equal, not what it runs:
    an op gets no inf where the exact value is finite (softplus in float16 is right at
    x = 30, where log(1 + exp(x)) as written overflows; an op computing it so is not)."""
    return None if getattr(case, "op", None) is not None else range_limit(dtype)


def bodies(case) -> tuple[list, bool]:
    """The formulas whose kinks and singularities points keep away from: the case's
    output and a surrogate op's forward formulas (the op computes both); each one's
    elementwise body when all are elementwise (then True: hazards are fixed element by
    element), else the formulas themselves (False: the whole point is redrawn)."""
    formulas = [case.output, *getattr(case, "forward", ())]
    splits = [elementwise_split(r) for r in formulas]
    if all(split is not None for split in splits):
        return [split[0] for split in splits], True
    return formulas, False


def culprits(shape: tuple, body: tuple, near: np.ndarray) -> np.ndarray:
    """The elements of an input of ``shape`` behind the elements ``near`` of an
    elementwise body of shape ``body``: each body element depends on the input's
    element it is broadcast from (on all of them where the input is not broadcast to
    the body: a formula that does not use it)."""
    near = np.broadcast_to(near, body)
    if tuple(np.broadcast_shapes(shape, body)) != tuple(body):
        return np.full(shape, bool(near.any()))
    return unbroadcast(near, shape, np.any)


def too_close(body, values, also=None) -> list:
    """(node, mask) for every hazard closer than MARGIN somewhere (``also``: as for
    :func:`gradcheck.formula.forward.hazard_distances`)."""
    out = []
    for node, distance in counted_hazards(body, values, also):
        mask = distance < MARGIN
        if mask.any():
            out.append((node, mask))
    return out


def roots(case) -> tuple:
    """Every formula an extreme point must keep finite: the outputs (an op's reference,
    one per output) and a surrogate's forward formulas."""
    return (*(case.outputs or (case.output,)), *getattr(case, "forward", ()))
