"""Input points: drawn inside each input's domain, away from the formula's kinks and
singularities, seeded and repeatable.

The rule table's ``hazard`` column says how far each primitive's arguments are from its
kink or singularity (``abs`` at 0, a zero denominator, the edge of ``log``'s domain, a
tie in ``max``, the switch of a ``where``...). Points closer than :data:`MARGIN` are
redrawn: element by element for elementwise formulas (each output element depends on one
element per input, so the culprit is known), the whole point otherwise. A pinned
``value`` is never redrawn.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .forward import hazard_distances
from .tree import elementwise_split, unbroadcast

MARGIN = 0.05      # distance kept from every kink and singularity
MAX_ROUNDS = 60    # redraws before giving up (the result then says so)

_RANGES = {"real": (-2.0, 2.0), "positive": (0.05, 3.0), "nonnegative": (0.0, 3.0),
           "unit": (-0.95, 0.95)}


@dataclass(frozen=True)
class Point:
    """One sampled point: float64 arrays already rounded to the run's dtype."""

    values: dict[str, np.ndarray]
    notes: tuple[str, ...] = ()


def case_rng(case, dtype: str, index: int, salt: str = "point") -> np.random.Generator:
    """A generator that depends only on (seed, case name, dtype, index, salt).

    Filtering cases with ``-k`` or reordering files never changes a case's points.
    """
    key = f"{case.name}\0{dtype}\0{index}\0{salt}".encode()
    digest = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
    return np.random.default_rng([case.seed, digest])


def _draw(spec, rng: np.random.Generator, shape) -> np.ndarray:
    domain = spec.domain
    if domain == "nonzero":
        return rng.uniform(0.1, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    lo, hi = _RANGES[domain] if isinstance(domain, str) else domain
    return rng.uniform(lo, hi, shape)


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    # float64 values the run's dtype holds exactly (bfloat16 through ml_dtypes)
    from .dtypes import round_to

    return round_to(x, dtype)


def sample(case, dtype: str, index: int) -> Point:
    """Point number ``index`` of ``case`` for a run in ``dtype``."""
    rng = case_rng(case, dtype, index)
    values = {}
    free = []
    for spec in case.inputs:
        if spec.value is not None:
            values[spec.name] = _round(spec.value, dtype)
        else:
            values[spec.name] = _round(_draw(spec, rng, spec.shape), dtype)
            free.append(spec)
    bad = settle(case, values, free, rng, dtype)
    notes = tuple(sorted({f"point {index} stays within {MARGIN} of a kink or singularity "
                          f"of {node.op} ({node!r})" for node, _ in bad}))
    return Point(values, notes)


def settle(case, values: dict, free: list, rng: np.random.Generator, dtype: str) -> list:
    """Redraw the elements of the ``free`` inputs (in place in ``values``) that sit within
    MARGIN of a kink or singularity, or outside their domain after rounding; returns the
    hazards still too close after MAX_ROUNDS as (node, mask) pairs."""
    from .cases import in_domain

    split = elementwise_split(case.output)
    body = split[0] if split else case.output
    bad = _too_close(body, values)
    for _ in range(MAX_ROUNDS):
        outside = {s.name: ~in_domain(values[s.name], s.domain) for s in free}
        if not free or (not bad and not any(m.any() for m in outside.values())):
            break
        for spec in free:
            if split is not None:
                mask = np.zeros(body.shape, dtype=bool)
                for _node, near in bad:
                    mask |= np.broadcast_to(near, body.shape)
                mask = unbroadcast(mask, spec.shape, np.any)
            else:
                mask = np.full(spec.shape, bool(bad))
            mask = mask | outside[spec.name]
            if mask.any():
                fresh = _round(_draw(spec, rng, spec.shape), dtype)
                values[spec.name] = np.where(mask, fresh, values[spec.name])
        bad = _too_close(body, values)
    return bad


def _too_close(body, values) -> list:
    """(node, mask) for every hazard closer than MARGIN somewhere."""
    out = []
    for node, distance in hazard_distances(body, values):
        mask = distance < MARGIN
        if mask.any():
            out.append((node, mask))
    return out
