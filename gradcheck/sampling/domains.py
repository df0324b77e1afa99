"""The geometry of where sampling puts an input's elements (:mod:`gradcheck.sampling.points`):
the bulk's intervals (:data:`RANGES`), the extreme points' bands and rays (the rules are
above :func:`gradcheck.sampling.points.extreme`), and pulling a point in toward its domains'
centres (:func:`toward`, for a point whose formula passes the dtype's range).

A complex input (held as view_as_real holds it, (re, im) pairs on a last axis of 2) has
the float domains for each part, or a :class:`Modulus`: |z| uniform in [lo, hi] and its
phase uniform in [-π, π). Its geometry is the modulus's: the extreme points' bands run
along |z| as along an interval [lo, hi] (large magnitudes toward hi, small toward lo,
down to 0 where lo is 0), each phase drawn uniformly; pulling in moves |z| toward the
middle of [lo, hi], the phase kept; and every redraw (a kink, the domain) takes a whole
pair (:func:`pairs`), so that no part is drawn apart from the other."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .overflow import ceiling

RANGES = {"real": (-2.0, 2.0), "positive": (0.05, 3.0), "nonnegative": (0.0, 3.0),
           "unit": (-0.95, 0.95)}

REACH = 1e-4           # ρ is at most this: four decades below the bulk's scale
STRATIFIED = 1 << 16   # elements of an input up to which its extreme elements are
#                        dealt out to the rays and stratified along them (spread)
LARGE, SMALL = "large magnitudes", "small magnitudes"


@dataclass(frozen=True)
class Modulus:
    """A complex input's domain ``{ modulus = [lo, hi] }``: 0 <= lo < hi."""

    lo: float
    hi: float

    def __repr__(self) -> str:   # (as a message quotes a domain: as the file wrote it)
        return f"{{ modulus = [{self.lo:g}, {self.hi:g}] }}"


def modulus(x: np.ndarray) -> np.ndarray:
    """|z| of each (re, im) pair of ``x`` (the layout's last axis)."""
    x = np.asarray(x, dtype=float)
    return np.hypot(x[..., 0], x[..., 1])


def polar(r: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """The (re, im) pairs of r·e^(i·phase)."""
    return np.stack([r * np.cos(phase), r * np.sin(phase)], axis=-1)


def pairs(mask: np.ndarray, domain) -> np.ndarray:
    """``mask`` over a complex input's layout widened to whole (re, im) pairs where its
    domain is a :class:`Modulus` (a pair is redrawn whole, or |z| leaves it)."""
    if not isinstance(domain, Modulus):
        return mask
    return np.repeat(np.any(mask, axis=-1, keepdims=True), 2, axis=-1)


def draw_modulus(domain: Modulus, rng: np.random.Generator, shape) -> np.ndarray:
    """A bulk draw of a complex input of layout ``shape``: |z| uniform in [lo, hi], the
    phase uniform in [-π, π)."""
    r = rng.uniform(domain.lo, domain.hi, shape[:-1])
    return polar(r, rng.uniform(-np.pi, np.pi, shape[:-1]))


def reach(dtype: str) -> float:
    """ρ: small extreme magnitudes go down to s·ρ, s the bulk's scale."""
    from ..base.dtypes import eps

    return min(math.sqrt(eps(dtype)), REACH)


def largest_extreme(dtype: str) -> float:
    """L: large extreme magnitudes go up to ln √max of the dtype, float32's at most
    (44.4; float16: 5.5)."""
    return math.log(min(ceiling(dtype), ceiling("float32")))


@dataclass(frozen=True)
class Ray:
    """Extreme elements ``anchor + direction·d``, d log-uniform in [near, far]; pulling
    in by λ maps d to ``home·(d/home)^λ``."""

    anchor: float
    direction: float
    near: float
    far: float
    home: float


def rays(domain, band: str, rho: float, largest: float) -> tuple[Ray, ...]:
    """Where the extreme elements of an input with ``domain`` go in ``band``; no
    magnitude beyond ``largest``. A :class:`Modulus`'s: |z|'s, as an interval's."""
    if isinstance(domain, Modulus):
        domain = (domain.lo, domain.hi)
    if isinstance(domain, str) and domain != "unit":
        s = 2.0 if domain == "nonzero" else max(map(abs, RANGES[domain]))
        near, far = (s, largest) if band == LARGE else (s * rho, s / 10)
        directions = (1.0,) if domain in ("positive", "nonnegative") else (-1.0, 1.0)
        return tuple(Ray(0.0, d, near, far, s) for d in directions)
    lo, hi = (-1.0, 1.0) if domain == "unit" else domain
    if band == SMALL and lo < 0 < hi:
        m = min(-lo, hi)
        return tuple(Ray(0.0, d, rho * min(m, 2.0), m / 10, m / 2) for d in (-1.0, 1.0))
    ends = ((lo, 1.0), (hi, -1.0))
    pick = max if band == LARGE else min
    target = pick(abs(lo), abs(hi))
    w = hi - lo
    return tuple(Ray(a, d, w * rho, w / 10, w / 2) for a, d in ends if abs(a) == target)


def spread(rays: tuple[Ray, ...], rng: np.random.Generator, shape) -> tuple:
    """(ray index, position u in [0, 1) along the band's logarithm) per element. The
    elements are dealt out to the rays in turn (so both signs of x get their share) and
    each ray's positions stratified, one in each c-th of [0, 1) for c elements on it: an
    input of 8 elements has an element in the top quarter of the band on either side.

    An input of more than :data:`STRATIFIED` elements draws each element's ray and
    position independently: its elements cover the band densely anyway, and the
    permutation that deals them out cost 0.3 s a redraw at 2²² elements (a mixing
    formula's extreme point may redraw its inputs a dozen times)."""
    n, count = math.prod(shape), len(rays)
    if n > STRATIFIED:
        which = rng.integers(0, count, n)
        return which.reshape(shape), rng.uniform(0.0, 1.0, n).reshape(shape)
    rank = rng.permutation(n)
    which = rank % count
    on_ray = (n - which + count - 1) // count     # elements dealt to the same ray
    u = (rank // count + rng.uniform(0.0, 1.0, n)) / on_ray
    return which.reshape(shape), u.reshape(shape)


def placer(spec, rays: tuple[Ray, ...], rng: np.random.Generator):
    """``pull -> values``: ``spec``'s extreme elements dealt out to ``rays``
    (:func:`spread`) once, placed at λ = pull (:func:`place`); a :class:`Modulus`
    domain's |z| on the rays, each phase uniform in [-π, π)."""
    if isinstance(spec.domain, Modulus):
        which, u = spread(rays, rng, spec.shape[:-1])
        phase = rng.uniform(-np.pi, np.pi, spec.shape[:-1])
        return lambda pull: polar(place(rays, which, u, pull), phase)
    which, u = spread(rays, rng, spec.shape)
    return lambda pull: place(rays, which, u, pull)


def place(rays: tuple[Ray, ...], which: np.ndarray, u: np.ndarray,
           pull: float) -> np.ndarray:
    """The values at positions ``u`` on rays ``which``, pulled in by ``pull`` (λ)."""
    def col(field):   # (per ray: the logarithms are taken once a ray, not an element)
        return np.asarray([getattr(r, field) for r in rays])

    near, far, home = np.log(col("near")), np.log(col("far")), np.log(col("home"))
    log_d = near[which] + u * (far - near)[which]
    home = home[which]
    return col("anchor")[which] + col("direction")[which] * np.exp(
        home + pull * (log_d - home))


def toward(spec, x: np.ndarray, pull: float) -> np.ndarray:
    """``x`` pulled in toward the centre of ``spec``'s domain: each element's distance
    from it times λ = ``pull`` (nonzero: a magnitude's from 1.05, the middle of [0.1, 2],
    its sign kept); an integer input as it is."""
    if spec.integer:
        return x
    if isinstance(spec.domain, Modulus):   # |z| toward the middle, the phase kept
        middle = (spec.domain.lo + spec.domain.hi) / 2
        return polar(middle + pull * (modulus(x) - middle), np.arctan2(x[..., 1], x[..., 0]))
    if spec.domain == "nonzero":
        return np.sign(x) * (1.05 + pull * (np.abs(x) - 1.05))
    lo, hi = RANGES[spec.domain] if isinstance(spec.domain, str) else spec.domain
    centre = (lo + hi) / 2
    return centre + pull * (x - centre)


def in_domain(value: np.ndarray, domain: str | tuple[float, float],
              integer: bool = False) -> np.ndarray:
    """Elementwise: does ``value`` lie in ``domain``? ``integer``: the domain of an
    integer input, ``[lo, hi)`` (its upper bound exclusive, as ``range``'s)."""
    if integer:
        value = np.asarray(value)
        if value.dtype == bool or not isinstance(domain, tuple):
            return np.ones(value.shape, dtype=bool)
        return (domain[0] <= value) & (value < domain[1])
    if isinstance(domain, tuple):
        return (domain[0] <= value) & (value <= domain[1])
    if isinstance(domain, Modulus):   # (the pair's |z|, for both its parts)
        r = modulus(value)
        return np.repeat(((domain.lo <= r) & (r <= domain.hi))[..., None], 2, axis=-1)
    return {"real": lambda v: np.isfinite(v), "positive": lambda v: v > 0,
            "nonnegative": lambda v: v >= 0, "nonzero": lambda v: v != 0,
            "unit": lambda v: np.abs(v) < 1}[domain](value)
