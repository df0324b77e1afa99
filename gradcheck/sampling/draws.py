"""A sampled point (:class:`Point`), the generator each point is drawn with
(:func:`case_rng`), the bulk's draw of an input (:func:`draw`) and the rounding of what
is drawn into the run's dtype (:func:`rounded`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .domains import RANGES, Modulus, draw_modulus


@dataclass(frozen=True)
class Point:
    """One sampled point: float64 arrays already rounded to the run's dtype."""

    values: dict[str, np.ndarray]
    notes: tuple[str, ...] = ()
    #: the ops whose kinks or singularities the point stays within MARGIN of (sampling
    #: could not keep away: a sort of a thousand elements has neighbours 0.004 apart)
    near: tuple[str, ...] = ()
    #: what of the formula as written passes the dtype's range at the point, after its
    #: redraws and pulling in ("" where nothing does): no witness of the dtype is
    #: checked there (gradcheck.sampling.overflow)
    overflow: str = ""


def case_rng(case, dtype: str, index: int, salt: str = "point") -> np.random.Generator:
    """A generator that depends only on (seed, case name, dtype, index, salt).

    Filtering cases with ``-k`` or reordering files never changes a case's points.
    """
    key = f"{case.name}\0{dtype}\0{index}\0{salt}".encode()
    digest = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
    return np.random.default_rng([case.seed, digest])


def draw(spec, rng: np.random.Generator, shape) -> np.ndarray:
    """Fresh values of input ``spec`` from the bulk: uniform over its domain (an integer
    input's [lo, hi), a boolean's {0, 1})."""
    domain = spec.domain
    if spec.dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if spec.dtype is not None:    # an integer input: uniform in [lo, hi)
        return rng.integers(domain[0], domain[1], shape, dtype=np.dtype(spec.dtype))
    if domain == "nonzero":
        return rng.uniform(0.1, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    if isinstance(domain, Modulus):
        return draw_modulus(domain, rng, shape)
    lo, hi = RANGES[domain] if isinstance(domain, str) else domain
    return rng.uniform(lo, hi, shape)


def rounded(x: np.ndarray, dtype: str, spec=None) -> np.ndarray:
    """``x`` as a point holds it."""
    # float64 values the run's dtype holds exactly (bfloat16 through ml_dtypes); an
    # integer or boolean input keeps its own dtype: it is exact as it is
    from ..base.dtypes import round_to

    if spec is not None and spec.dtype is not None:
        return np.asarray(x, dtype=np.dtype(spec.dtype))
    return round_to(x, dtype)
