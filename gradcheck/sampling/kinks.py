"""Kink points: points whose elements sit close to a kink of the formula, on both sides.

The bulk and extreme points keep every element at least :data:`gradcheck.sampling.margins.MARGIN`
(0.05) away from every kink, so a backward wrong only on (0, 0.04) of a relu passes them
all. A case whose formula reaches a kink row (:data:`KINKS`: relu, abs, clamp, hardtanh,
leaky_relu, elu, maximum/minimum ties, where's comparisons, the steps) through an argument
that is elementwise in one of its free float inputs gets ``kink_points`` (default 2) more
points, numbered after the extreme ones, where the elements of that input are placed at
small distances from the kink:

- the base is a bulk point drawn with a generator of its own (salt ``"kink"``), kept off
  every kink and singularity as the bulk is; the existing points do not move;
- for each element, Newton's method on the row's hazard (its distance to the kink, the
  rule table's ``hazard`` column) along that input's element finds where the kink lies
  in the input (x*): a kink of an elementwise affine function of the input is found in
  one step, a smooth monotone one in a few, and an element whose distance does not go
  to zero, or whose kink lies outside the bulk's interval (real: [-2, 2]), is left at
  its base value;
- the element is put at x* ± δ/slope, the distance δ in the row's argument log-spread
  from ``max(1e-6·s, 256 ulps)`` up to ``max(1e-3·s, 4× that)``, at most MARGIN / 2
  (s = max(1, the argument's scale at the kink), an ulp the run's dtype's spacing
  there: well above a witness's rounding of the argument; see :func:`_band`); its side
  (above x*, below) alternates element by element and between the two kink points, so
  a scalar input gets both sides;
- the point is rounded to the dtype, and an element is kept only where the exact distance
  at the rounded point is what the kink's place and slope predict, on the intended side,
  inside its domain, away from every singularity (a log, a division) and, in the narrow
  dtypes, with the formula as written within range; the others go back to their base.

At such a point the exact reference's derivative is the one-sided derivative on each
element's side: the ordinary derivative at that point. Finite differences straddle the
kink there: the point's ``near`` names the rows, so that the numeric witness's
disagreements there are notes, not mismatches (:func:`gradcheck.checking.case._add_near_kink`).
The torch and engine witnesses are judged by the branch they took where their rounding
flips a decision (:mod:`gradcheck.checking.decisions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..formula.forward import evaluate, exact_nodes, steady_nodes
from .domains import Modulus
from .margins import MARGIN, bodies, culprits, roots, too_close, within
from ..rules import COMPARISON, ELEMENTWISE
from ..formula.tree import Node, walk

#: the rows whose hazard is a kink (a switch of the derivative or of the value), not a
#: singularity: their distance is continuous through the kink and grows on both sides
KINKS = frozenset({"abs", "sign", "relu", "clamp", "hardtanh", "leaky_relu", "elu",
                   "maximum", "minimum", "lt", "le", "gt", "ge",
                   "floor", "ceil", "round", "trunc"})
KINK_POINTS = 2     # kink points per case (where the formula has a kink)
NEAREST = 1e-6      # the nearest distance from a kink, relative to max(1, |x*|)
FARTHEST = 1e-3     # the farthest
ULPS = 256          # and at least this many of the dtype's ulps at x*
FEWEST_ULPS = 2     # an element where MARGIN / 2 holds fewer is not placed
NEWTON = 12         # Newton steps toward a kink
SETTLED = 1e-13     # a kink is found where the distance is below this, relative

#: the convention at a kink itself, named in the report (a pinned value can sit there)
CONVENTION = ("kink points approach each kink from both sides, so the derivative checked "
              "there is the one-sided derivative on each element's side; at a kink "
              "itself gradcheck follows PyTorch's subgradient for relu, abs, sign, the "
              "steps and where's conditions (relu'(0) = 0, abs'(0) = 0; maximum and "
              "minimum split a tie), and takes the mean of the one-sided derivatives for "
              "clamp, hardtanh, leaky_relu and elu")


@dataclass(frozen=True)
class Target:
    """A kink row (``node``) whose elements one free float input (``spec``) places, one
    element each: ``node``'s arguments are elementwise in the inputs, and ``spec`` is
    shaped like ``node`` (leading 1s aside)."""

    node: Node
    spec: object


def _elementwise(node: Node) -> bool:
    return all(n.op in ("input", "const", "let") or n.rule.family in (ELEMENTWISE, COMPARISON)
               for a in node.args for n in walk(a))


def _kinked(node: Node, root: Node, exact: set, steady: set) -> bool:
    """Whether ``node`` is a kink row that moves with the float inputs (a comparison of
    steps or of integers switches at no float: its hazard is waived, as sampling's)."""
    if node.op not in KINKS or id(node) in exact:
        return False
    if node.rule.family == COMPARISON and id(node) in steady:
        return False
    # elu with alpha = 1 has a continuous derivative: no kink of the gradient
    return not (node.op == "elu" and node.param("alpha", 1.0) == 1.0)


def targets(case) -> list[list[Target]]:
    """Per kink row of the case's reference formulas (the formula; an op's outputs'),
    the inputs that can place its elements; rows no input places are left out. A
    surrogate's forward formulas are not approached: their jumps (a straight-through
    sign) are no kink of the gradient checked, and sampling keeps points off them."""
    roots = list(getattr(case, "outputs", ()) or (case.output,))
    # (a complex input drawn by modulus moves whole pairs: no kink places one part)
    free = [s for s in case.inputs if s.value is None and not s.integer
            and not isinstance(s.domain, Modulus)]
    out, seen = [], set()
    for root in roots:
        exact = exact_nodes(root)
        steady = steady_nodes(root, exact)
        for node in walk(root):
            if id(node) in seen or not _kinked(node, root, exact, steady):
                continue
            seen.add(id(node))
            if not _elementwise(node):
                continue
            names = {n.name for a in node.args for n in walk(a) if n.op == "input"}
            specs = [Target(node, s) for s in free if s.name in names and _aligned(s, node)]
            if specs:
                out.append(specs)
    return out


def _aligned(spec, node: Node) -> bool:
    """Whether each element of ``node`` is reached by its own element of ``spec``."""
    try:
        same = tuple(np.broadcast_shapes(tuple(spec.shape), node.shape)) == node.shape
    except ValueError:
        return False
    return same and math.prod(spec.shape) == node.size


def count(case) -> int:
    """How many kink points ``case`` gets at most (0 where no kink is reachable)."""
    return case.kink_points if case.kink_points and targets(case) else 0


def _distance(node: Node, spec, values: dict):
    """``x -> (hazard of node, its arguments)``, flat, with ``spec``'s input at ``x``."""
    def at(x: np.ndarray):
        seen = {}

        def on_node(n, args, value) -> None:
            if n is node:
                seen["args"] = args
        env = {**values, spec.name: x.reshape(spec.shape)}
        with np.errstate(all="ignore"):
            evaluate(node, env, on_node=on_node)
            d = np.abs(np.asarray(node.call("hazard", seen["args"]), dtype=float))
        return np.broadcast_to(d, node.shape).reshape(-1), seen["args"]

    return at


def _kink(hazard, x0: np.ndarray, active: np.ndarray) -> tuple:
    """Newton's method on the distance to the kink along each element of the input, from
    ``x0``: ``(x*, slope at x*, found)``. The distance is smooth on either side and its
    slope is the argument's times ±1, so a step lands on the kink of an affine argument
    exactly; each slope is measured by a central difference narrower than a quarter of
    the distance left, so it never straddles the kink."""
    x = x0.copy()
    d = hazard(x)[0]
    slope = np.full(x.shape, np.inf)
    for _ in range(NEWTON):
        scale = np.maximum(1.0, np.abs(x))
        going = active & (d > SETTLED * scale)
        if not going.any():
            break
        with np.errstate(all="ignore"):
            h = np.minimum(1e-7 * scale, 0.25 * d / np.abs(slope))
            h = np.where(going & (h > 0), h, 1e-7 * scale)
            s = (hazard(x + h)[0] - hazard(x - h)[0]) / (2 * h)
            step = np.where(going & np.isfinite(s) & (s != 0), -d / s, 0.0)
        slope = np.where(going, s, slope)
        x = x + step
        d = hazard(x)[0]
    scale = np.maximum(1.0, np.abs(x))
    found = active & np.isfinite(x) & (d <= SETTLED * scale) & np.isfinite(slope) & (
        slope != 0)
    return x, np.abs(slope), found


def _band(dtype: str, star: np.ndarray, slope: np.ndarray, size: np.ndarray) -> tuple:
    """``(lo, hi, usable)`` per element: the distances from the kink to place elements
    at, in the row's argument (its hazard's units), ``size`` the argument's scale at the
    kink (the larger of its magnitude and the input's share of it, |slope·x*|: the terms
    a witness rounds). From max(1e-6·s, 256 ulps) up to max(1e-3·s, 4× that), at most
    MARGIN / 2 (s = max(1, size), an ulp the dtype's spacing at that scale); where MARGIN
    / 2 holds fewer than 256 ulps, from a quarter of it; never nearer than 2 ulps of the
    argument, nor than 2 of the input at x* (usable: where that leaves a band)."""
    from ..base.dtypes import eps, smallest_normal

    tiny, e = smallest_normal(dtype), eps(dtype)
    ulp = e * np.maximum(size, tiny)
    scale = np.maximum(1.0, size)
    lo = np.maximum.reduce([NEAREST * scale, ULPS * ulp, np.full(star.shape, 4 * tiny)])
    hi = np.minimum(np.maximum(FARTHEST * scale, 4 * lo), MARGIN / 2)
    floor = FEWEST_ULPS * np.maximum(ulp, e * np.abs(star) * slope)
    lo = np.maximum(np.minimum(lo, hi / 4), floor)
    return lo, hi, lo <= hi


def _in_bulk(spec, star: np.ndarray) -> np.ndarray:
    """Whether each kink's place lies where the bulk draws ``spec``'s elements (real:
    [-2, 2]): round(x·y) with y = 5e-4 has a jump at x = 944, where sigmoid of it is no
    longer finite in the reference's derivative; the bulk's interval is checked ground."""
    from .domains import RANGES

    domain = spec.domain
    lo, hi = ((-2.0, 2.0) if domain == "nonzero" else
              RANGES[domain] if isinstance(domain, str) else domain)
    return (lo <= star) & (star <= hi)


def _scale(args: list, shape: tuple) -> np.ndarray:
    """The largest magnitude among a row's float arguments, per element (flat)."""
    out = np.zeros(shape)
    for a in args:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            out = np.maximum(out, np.abs(np.broadcast_to(a, shape)))
    return out.reshape(-1)


def _place(target: Target, values: dict, free: np.ndarray, dtype: str, k: int,
           rng: np.random.Generator) -> tuple:
    """Move the elements ``free`` (flat) of ``target``'s input next to ``target``'s kink
    (in place in ``values``); returns the mask of the elements moved and where the kink
    lies for each (x*, flat)."""
    from .domains import in_domain
    from ..base.dtypes import round_to

    spec = target.spec
    hazard = _distance(target.node, spec, values)
    x0 = np.asarray(values[spec.name], dtype=float).reshape(-1)
    star, slope, found = _kink(hazard, x0, free)
    found &= _in_bulk(spec, star)
    at_kink = _scale(hazard(star)[1], target.node.shape)
    lo, hi, usable = _band(dtype, star, slope, np.maximum(at_kink, slope * np.abs(star)))
    chosen = found & usable
    n = int(chosen.sum())
    if not n:
        return chosen, star
    rank = np.zeros(x0.shape, dtype=int)
    rank[chosen] = rng.permutation(n)
    u = (rank + rng.uniform(0.0, 1.0, x0.shape)) / n   # stratified over the band
    with np.errstate(all="ignore"):
        # (the distance in the argument, and so much in the input: d / slope)
        delta = np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo))) / slope
        side = np.where((np.cumsum(chosen) + k) % 2 == 1, 1.0, -1.0)   # alternating
        placed = np.where(chosen, round_to(star + side * delta, dtype), x0)
        d = hazard(placed)[0]
        off = placed - star
        kept = (chosen & (d > 0) & (d < MARGIN) & (np.sign(off) == side)
                & (np.abs(d - slope * np.abs(off)) <= 0.25 * d)
                & in_domain(placed, spec.domain).reshape(-1))
    values[spec.name] = np.where(kept, placed, x0).reshape(spec.shape)
    return kept, star


# long: one pass over the rows, each placing its share of its input's elements
def kink_point(case, dtype: str, k: int, index: int, base: dict,
               rng: np.random.Generator) -> tuple | None:
    """Kink point ``k`` (0, 1, ...) of ``case`` in ``dtype``, reported as point
    ``index``, from the clean point ``base`` (a bulk point of its own), its distances
    drawn by ``rng``: ``(values, notes, near)``, or None where the formula has no kink
    an input places, or none could be placed (see the module's docstring)."""
    found = targets(case)
    if not found:
        return None
    values = dict(base)
    chosen = [row[(k // 2) % len(row)] for row in found]
    sharing: dict[str, list] = {}
    for t in chosen:
        sharing.setdefault(t.spec.name, []).append(t)
    moved: dict[str, np.ndarray] = {}
    placed = []
    for t in chosen:
        name, peers = t.spec.name, sharing[t.spec.name]
        size = math.prod(t.spec.shape)
        # rows on one input share its elements, in turn (and in turn across points)
        share = (np.arange(size) + k // 2) % len(peers) == peers.index(t)
        taken = moved.get(name, np.zeros(size, dtype=bool))
        kept, star = _place(t, values, share & ~taken, dtype, k, rng)
        if kept.any():
            moved[name] = taken | kept
            placed.append((t, star, kept))
    if not placed or not _clean(case, dtype, values, base, moved):
        return None
    notes = [_described(t, star, values, kept & moved[t.spec.name], index)
             for t, star, kept in placed]
    notes = [n for n in notes if n]
    if not notes:
        return None
    return values, (*notes, CONVENTION), _near(case, values)


def _clean(case, dtype: str, values: dict, base: dict, moved: dict) -> bool:
    """Put back at their base the moved elements behind a singularity within MARGIN (a
    log, a division: only kinks may be near) or, in the narrow dtypes, behind a value of
    the formula as written beyond the range (in place in ``values`` and ``moved``);
    False where that cannot be told element by element (a formula that mixes elements:
    the point is given up)."""
    from .overflow import out_of_range

    formulas, elementwise = bodies(case)
    limit = within(case, dtype)
    for _ in range(3):
        bad = []
        for b in formulas:
            passing: list = []
            seen = None if limit is None else out_of_range(limit, passing, roots(case))
            bad += [(b, near) for node, near in too_close(b, values, seen)
                    if node.op not in KINKS]
            bad += [(b, mask) for _node, mask, *_ in passing]
        if not bad:
            return True
        if not elementwise:
            return False
        for spec in case.inputs:
            if spec.name not in moved:
                continue
            back = np.zeros(spec.shape, dtype=bool)
            for b, near in bad:
                back |= culprits(spec.shape, b.shape, near)
            values[spec.name] = np.where(back, base[spec.name], values[spec.name])
            moved[spec.name] = moved[spec.name] & ~back.reshape(-1)
    return False


def _near(case, values: dict) -> tuple[str, ...]:
    """The kink rows within MARGIN at the point: finite differences there are notes."""
    return tuple(sorted({node.op for b in bodies(case)[0]
                         for node, _ in too_close(b, values) if node.op in KINKS}))


def _described(t: Target, star: np.ndarray, values: dict, moved: np.ndarray,
               index: int) -> str:
    """The note of a row's placed elements: how many, how far (in the row's argument),
    on which sides (of the kink's place x* in the input)."""
    name = t.spec.name
    x = np.asarray(values[name], dtype=float).reshape(-1)
    moved = moved & (x != star)
    if not moved.any():
        return ""
    d = _distance(t.node, t.spec, values)(x)[0][moved]
    off = (x - star)[moved]
    below, above = int((off < 0).sum()), int((off > 0).sum())
    return (f"point {index} is a kink point: {off.size} element{'s' * (off.size != 1)} "
            f"of {name} where {t.node!r} is {d.min():.2g} to {d.max():.2g} from its kink "
            f"({below} below it in {name}, {above} above)")
