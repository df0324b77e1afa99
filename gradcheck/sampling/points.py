"""Input points: drawn inside each input's domain, away from the formula's kinks and
singularities, seeded and repeatable.

The rule table's ``hazard`` column says how far each primitive's arguments are from its
kink or singularity (``abs`` at 0, a zero denominator, the edge of ``log``'s domain, a
tie in ``max``, the switch of a ``where``...). Points closer than :data:`MARGIN` are
redrawn: element by element for elementwise formulas (each output element depends on one
element per input, so the culprit is known), the whole point otherwise, but where a
structural row's hazard is shaped like its argument and that argument is elementwise in
the inputs (max_pool2d's ties, per pixel): there, the elements behind it. A pinned
``value`` is never redrawn.

A case's points (:func:`case_points`, what the runner and the op checks iterate) are its
``points`` bulk points, drawn uniformly in each domain's bulk (real: [-2, 2]), then its
``extreme_points`` (default 2) extreme points, numbered after them: large magnitudes
(real: |x| from 2 up to ln √max, 44 in float32 and float64) and small ones (|x| down to
2·1e-4, float64: 3e-8), log-spread, toward an interval's ends and toward 0 inside it,
kept where every value of the formula stays below √max of the dtype (see the rules
above :func:`extreme`). Each extreme point's note says what it sampled. The bulk points
do not depend on the extreme ones: ``extreme_points = 0`` gives exactly the bulk.

In float32, float16 and bfloat16 a formula case's points keep the formula as written
within the dtype's range (:mod:`gradcheck.sampling.overflow`): a value that would be inf there is
a hazard too, redrawn, and a point redrawing does not bring within range is pulled in
toward its domains' centres (:func:`_pull_to_range`); one that stays beyond it carries
what passes it (:attr:`Point.overflow`) and is checked by no witness of the dtype. The
points of a formula that never passes the range are drawn exactly as without the rule.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator

import numpy as np

from ..formula.forward import evaluate
from ..process.heap import HEAP_ELEMENTS, reused_allocations
from . import kinks
# (REACH, STRATIFIED, EXPONENTIAL, PERIODIC, PERIODIC_REACH: named here as well, where
# they were defined before domains.py and overflow.py held them)
from .domains import (LARGE, RANGES, REACH, SMALL, STRATIFIED, largest_extreme, pairs,
                      placer as _placer, rays as _rays, reach, toward as _toward)
from .overflow import (EXPONENTIAL, PERIODIC, PERIODIC_REACH, beyond as _beyond, ceiling, first,
                       fits_range, largest, limit as range_limit, out_of_range, over as _over)
# (Point, case_rng, _draw and _round: defined here before draws.py held them)
from .draws import Point, case_rng, draw as _draw, rounded as _round
from .notes import extreme_note, hopeless_note
# (MARGIN and the helpers below were defined here before kinks.py needed them too)
from .margins import (MARGIN, bodies as _bodies, culprits as _culprits, roots as _roots,
                      too_close as _too_close, within as _within)
from ..rules import COMPARISON, ELEMENTWISE
from ..formula.tree import walk

MAX_ROUNDS = 60    # redraws before giving up (the result then says so)
RANGE_ROUNDS = 8   # redraws of a whole point beyond the dtype's range before pulling in
EXTREME_ROUNDS = 8     # redraws inside the band before an element is drawn from the bulk
#: redraws of a whole point (a formula that mixes elements) past the ceiling of its
#: extreme values, with no kink near: the band's rounds, then one of the bulk's. The
#: ceiling is the band's (it keeps an extreme draw's gradient finite); a draw from the
#: bulk is what a bulk point is, and a bulk point keeps no ceiling, so a second bulk
#: draw is no better than the first (a transformer block's softmax logits pass 355 at
#: any draw: its two extreme points took 60 forward passes each, 20 s for nothing). A
#: point that has not settled by then stays as it is, noted.
CEILING_ROUNDS = EXTREME_ROUNDS + 1
#: a point pulled in toward the range keeps its values below this fraction of the
#: dtype's largest (exp's arguments ln 2 below its overflow): room for the dtype's
#: rounding of what the float64 evaluation computes exactly
RANGE_ROOM = 0.5


def sample(case, dtype: str, index: int,
           rng: np.random.Generator | None = None) -> Point:
    """Point number ``index`` of ``case`` for a run in ``dtype`` (drawn by ``rng``: a
    kink point's base draws with a generator of its own)."""
    rng = case_rng(case, dtype, index) if rng is None else rng
    values = {}
    free = []
    for spec in case.inputs:
        if spec.value is not None:
            values[spec.name] = _round(spec.value, dtype, spec)
        else:
            values[spec.name] = _round(_draw(spec, rng, spec.shape), dtype, spec)
            free.append(spec)
    within, passing = _within(case, dtype), []
    bad = settle(case, values, free, rng, dtype, within=within, overflow=passing)
    notes = set()
    if passing:   # redrawing did not bring it within range: the whole point is pulled in
        bad, passing, pulled = _pull_to_range(case, values, free, rng, dtype, within, index,
                                              passing)
        notes |= {pulled} - {""}
    notes |= {f"point {index} stays within {MARGIN} of a kink or singularity of {node.op} "
              f"({node!r})" for node, _ in bad}
    return Point(values, tuple(sorted(notes)), tuple(sorted({node.op for node, _ in bad})),
                 overflow=first(passing).text() if passing else "")


# long: one loop of redraws, its hazards (kinks, the ceiling, the range) read in one pass
def settle(case, values: dict, free: list, rng: np.random.Generator, dtype: str, *,
           draw: Callable | None = None, limit: float | None = None,
           within: float | None = None, overflow: list | None = None,
           seen: dict | None = None) -> list:
    """Redraw the elements of the ``free`` inputs (in place in ``values``) that sit within
    MARGIN of a kink or singularity, or outside their domain after rounding; returns the
    hazards still too close after MAX_ROUNDS as (node, mask) pairs.

    ``draw(spec, round)`` makes the fresh values (default: the bulk draw); with ``limit``,
    a value of the formula beyond it (or not finite) is a hazard too (extreme points).
    With ``within`` (the dtype's range, :func:`gradcheck.sampling.overflow.limit`), so is a value
    of the formula as written that reaches it (but the output's own, and a constant
    written beyond it: :func:`gradcheck.sampling.overflow.out_of_range`); those left at the end
    go to ``overflow`` as (node, mask, peak), not to the result. A formula that mixes
    elements stops redrawing for them after :data:`RANGE_ROUNDS` (the caller pulls the
    point in), and for the ceiling alone, no kink near, after :data:`CEILING_ROUNDS`
    rounds that redrew something.

    ``seen``: a ceiling and a range (``seen["limit"]``, ``seen["within"]``, either None)
    each pass also looks for without redrawing for them; what the last pass found, at
    the values settle leaves, is put in it: ``"kinks"`` (node, mask), ``"beyond"``
    (node, mask) past its limit, ``"passing"`` its range's (node, mask, peak) (each
    over the bodies: the roots themselves where the formula mixes elements).
    ``seen["from_bulk"]``, set by ``draw``: its draws are the bulk's already, so that
    the ceiling alone ends the redraws at once, as after :data:`CEILING_ROUNDS`."""
    from .domains import in_domain

    bodies, elementwise = _bodies(case)
    roots = _roots(case)   # (whose own values are compared, and may pass the range)
    seen = {} if seen is None else seen
    look = (limit if limit is not None else seen.get("limit"),
            within if within is not None else seen.get("within"))

    def hazards() -> tuple[list, list, bool]:
        """(kinks and the ceiling, the range, whether any kink is near): one pass."""
        found, ranged, near_kink = [], [], False
        seen.update(kinks=[], beyond=[], passing=[])
        for b in bodies:
            beyond, passing = [], []
            close = _too_close(b, values, _both(
                None if look[0] is None else _over(look[0], beyond),
                None if look[1] is None else out_of_range(look[1], passing, roots)))
            found += [(b, node, near) for node, near in
                      close + (beyond if limit is not None else [])]
            near_kink = near_kink or bool(close)
            if within is not None:   # (node, mask, peak[, where])
                ranged += [(b, *found_) for found_ in passing]
            for key, got in zip(("kinks", "beyond", "passing"), (close, beyond, passing)):
                seen[key] += got
        return found, ranged, near_kink

    moved = 0   # (the rounds that redrew something)
    bad, ranged, near_kink = hazards()
    for round_ in range(MAX_ROUNDS):
        outside = {s.name: ~in_domain(values[s.name], s.domain, s.integer) for s in free}
        if not free or (not bad and not ranged and not any(m.any() for m in
                                                            outside.values())):
            break
        # a formula that mixes elements redraws whole inputs: past the range, or past
        # the ceiling with no kink near, a few rounds decide (the caller pulls in; the
        # point keeps a note that says what stays beyond)
        if ranged and not elementwise and round_ >= RANGE_ROUNDS:
            break
        if bad and not near_kink and not elementwise and (
                moved >= CEILING_ROUNDS or seen.get("from_bulk")):
            break
        changed = False
        for spec in free:
            mask = np.zeros(spec.shape, dtype=bool)
            for b, node, near, *_ in bad + ranged:
                mask |= (_culprits(spec.shape, b.shape, near) if elementwise
                         else _blamed(spec, node, near))
            mask = pairs(mask | outside[spec.name], spec.domain)
            if mask.any():
                fresh = _draw(spec, rng, spec.shape) if draw is None else draw(spec, round_)
                now = np.where(mask, _round(fresh, dtype, spec), values[spec.name])
                changed |= not np.array_equal(now, values[spec.name])
                values[spec.name] = now
        if changed:   # (a redraw that moved no value would find what the last pass found)
            bad, ranged, near_kink = hazards()
            moved += 1
    if overflow is not None:
        overflow[:] = [found_ for _b, *found_ in ranged]
    return [(node, near) for _b, node, near in bad]


def _both(one: Callable | None, other: Callable | None) -> Callable | None:
    """One visitor of a forward pass calling both (either may be None)."""
    if one is None or other is None:
        return one or other

    def on_node(node, args, value) -> None:
        one(node, args, value)
        other(node, args, value)

    return on_node


def _pull_to_range(case, values: dict, free: list, rng, dtype: str, within: float,
                   index: int, passing: list) -> tuple[list, list, str]:
    """A point whose formula as written stays beyond ``dtype``'s range after its redraws
    (``passing``: what passes it, as settle's ``overflow``), pulled in toward its domains'
    centres (in place in ``values``) by the largest λ that keeps the extreme points'
    ceiling (√max, room for the gradient), else the range alone, then settled again with
    its fresh draws pulled in as much. Returns settle's hazards, what is still beyond
    the range and the point's note ("" for a point beyond the range even at the
    centres, which stays as it was)."""
    roots, start = _roots(case), {s.name: values[s.name] for s in free}
    why, cap = first(passing).text(), ceiling(dtype)

    def at(pull: float) -> dict:
        return {**values, **{s.name: _round(_toward(s, start[s.name], pull), dtype, s)
                             for s in free}}

    def kept(pull: float) -> bool:
        return not any(_beyond(r, at(pull), cap) for r in roots)

    def fits(pull: float, room: float = 1.0) -> bool:
        return fits_range(roots, at(pull), within * room)

    if not fits(0.0):   # (the point's note that it is not checked says it all)
        return [], passing, ""
    # the bisection finds the edge of the range as evaluated in float64; the witnesses
    # round every value on the way in the dtype (float16's matmul to 11.09375 where
    # float64 has 11.0878, and exp of that is inf): the range's edge is kept at RANGE_ROOM
    pull = largest(kept) if kept(0.0) else largest(lambda p: fits(p, RANGE_ROOM))
    values.update(at(pull))
    bad = settle(case, values, free, rng, dtype, within=within, overflow=passing,
                 draw=lambda spec, _round_: _toward(spec, _draw(spec, rng, spec.shape),
                                                    pull))
    return bad, passing, (f"point {index} is pulled in toward the centre of its inputs' "
                        f"domains (λ = {pull:.3g}): as drawn, the formula as written "
                        f"overflows {dtype} ({why})")


def _blamed(spec, node, near: np.ndarray):
    """The elements of input ``spec`` behind a hazard ``near`` of ``node`` in a formula
    that mixes elements: the whole input (True), but for a structural row whose hazard
    is shaped like its argument (max_pool2d's ties, per element of its input) on an
    argument elementwise in the inputs, where only the elements it is broadcast from
    can move it (an image's pixels in the windows near a tie)."""
    arg = node.args[0] if node.args else None
    if (arg is None or node.rule.family in (ELEMENTWISE, COMPARISON) or len(node.args) > 1
            or np.shape(near) != arg.shape or any(
                n.op not in ("input", "const", "let") and n.rule.family not in
                (ELEMENTWISE, COMPARISON) for n in walk(arg))):
        return bool(np.any(near))
    if spec.name not in {n.name for n in walk(arg) if n.op == "input"}:
        return False
    return _culprits(spec.shape, arg.shape, near)


# --------------------------------------------------------------------------- extremes
#
# Besides its bulk points, a case gets ``extreme_points`` points at large and small
# magnitudes, where overflow guards, saturated tanh/sigmoid and expm1/log1p-style
# branches live. The rules:
#
# - reach: magnitudes are log-uniform over a band. Large: from s, the scale of the bulk
#   draw (2 for real and nonzero, 3 for positive and nonnegative), up to L = ln √max of
#   the dtype, and float32's at most: 44.4 (float16: 5.5). e^L = √max, so exp of an
#   input, and the exp inside sigmoid, softplus, logsumexp, cosh, stays finite, squared
#   too. Not beyond 44 in float64 (where L is 354): the numeric witness's relative step
#   1e-3·|x| is then no longer small on the scale on which exp and its products vary,
#   and the guards worth reaching (softplus's at 20, tanh saturating at 8-16, softmax
#   logits at 30, float32's exp overflow at 88) lie below. Small: from s·ρ to s/10,
#   with ρ = min(√eps, 1e-4): below √eps, x² vanishes next to 1 (1 + x² == 1 in the
#   dtype), where expm1/log1p-style branches take over; √eps is coarse in the narrow
#   dtypes (float32 3.5e-4, bfloat16 0.09), so at least four decades.
# - ceiling: every value of the formula (every node, evaluated in float64 at the
#   dtype-rounded point) stays below √max of the run's dtype, every argument of an
#   EXPONENTIAL row below ln √max, of a PERIODIC one below PERIODIC_REACH. A gradient
#   is a sum of products of the cotangent and local partials, and an elementary
#   function's partial is at most its value times a modest factor (exp' = exp,
#   (1/x)' = -(1/x)², (xⁿ)' = n·xⁿ/x, sinh' ≈ sinh), so a value below √max leaves √max
#   of headroom for its gradient: exp(x) in float32 goes up to x ≈ 44, not 88.7 where
#   exp itself overflows. sigmoid, softplus and logsumexp have bounded values, but the
#   reference writes them through exp of their argument (its derivative of sigmoid(x)
#   holds exp(-x)/(1 + exp(-x))²), hence the rule on arguments.
# - bands: extreme point j samples large magnitudes for even j and small ones for odd j.
#   An input's elements are dealt out in turn to the band's directions (both signs of
#   a real input, both ends of an interval) and stratified over the band's logarithm:
#   c elements in one direction put one in each c-th of it, so the band is spanned.
# - domains: an interval [lo, hi] (and unit, (-1, 1)) has no large magnitudes: there
#   the large band goes toward its end(s) of largest magnitude and the small band toward
#   0 if 0 lies inside (else toward the end nearest 0), at distances from w·ρ to w/10
#   (w = hi - lo; toward 0: from ρ·min(m, 2) to m/10, m the distance of 0 to the nearer
#   end). positive and nonnegative draw positive magnitudes only.
# - kinks: :func:`settle` keeps the MARGIN from kinks and singularities and enforces the
#   ceiling element by element (elementwise formulas) or for the whole point, redrawing
#   inside the band for EXTREME_ROUNDS rounds, then from the bulk. A formula that mixes
#   elements (matmul, softmax) is first pulled in as a whole: every distance d from the
#   anchor becomes home·(d/home)^λ with the largest λ in [0, 1] that keeps the ceiling
#   (bisection), home being the bulk's scale (an interval's half width). Where even
#   λ = 0 passes it, no draw of the band can keep it: the point is drawn from the bulk
#   at once, its kinks kept away, the ceiling not (a bulk point keeps none). Its
#   ceiling stops its whole redraws after CEILING_ROUNDS (the band's, then one bulk's).
# - range: a point whose ceiling could not be kept, and which passes the dtype's range
#   as written (gradcheck.sampling.overflow), is pulled in toward its domains' centres as a bulk
#   point is (:func:`_pull_to_range`).
# - pinned ``value`` inputs stay as they are; a case whose inputs are all pinned has no
#   extreme points. The generator depends on (seed, case, dtype, j), not on ``points``.

def _pulled_in(case, values: dict, placed: dict, limit: float) -> float | None:
    """The largest λ (to 2^-PULL_STEPS) at which no value of any output of ``case``
    passes ``limit``; None when even λ = 0 does. ``placed[name](λ)`` are the values."""
    roots = _roots(case)

    def fits(pull: float) -> bool:
        env = {**values, **{n: f(pull) for n, f in placed.items()}}
        return not any(_beyond(r, env, limit) for r in roots)

    return largest(fits, none_fits=True)


def extreme(case, dtype: str, number: int, index: int) -> Point:
    """Extreme point ``number`` (0, 1, ...) of ``case`` in ``dtype``, reported as point
    ``index``: large magnitudes for even ``number``, small ones for odd (see the rules
    above this function)."""
    rng = case_rng(case, dtype, number, "extreme")
    band = LARGE if number % 2 == 0 else SMALL
    rho, limit = reach(dtype), ceiling(dtype)
    values, free, rays, placed = {}, [], {}, {}
    for spec in case.inputs:
        if spec.value is not None:
            values[spec.name] = _round(spec.value, dtype, spec)
            continue
        if spec.integer:   # integers have no magnitudes to reach: uniform, as in the bulk
            values[spec.name] = _round(_draw(spec, rng, spec.shape), dtype, spec)
            free.append(spec)
            continue
        rays[spec.name] = r = _rays(spec.domain, band, rho, largest_extreme(dtype))
        placed[spec.name] = lambda p, f=_placer(spec, r, rng): _round(f(p), dtype)
        free.append(spec)
    # an elementwise formula is fixed element by element in settle; one that mixes
    # elements is pulled in as a whole first, or nearly every redraw would overflow
    bodies, elementwise = _bodies(case)
    pull = 1.0 if elementwise else _pulled_in(case, values, placed, limit)
    hopeless, pull = pull is None, pull or 0.0   # (hopeless: see .notes.hopeless_note)
    values.update({s.name: _round(_draw(s, rng, s.shape), dtype, s) for s in free
                   if s.name in placed} if hopeless else
                  {n: f(pull) for n, f in placed.items()})

    within = _within(case, dtype)
    seen = {"limit": limit, "within": within}
    banded = _band_rounds(seen, elementwise)

    def redraw(spec, round_: int) -> np.ndarray:
        if spec.integer or hopeless or not banded(round_):
            return _draw(spec, rng, spec.shape)
        return _placer(spec, rays[spec.name], rng)(pull)

    settle(case, values, free, rng, dtype, draw=redraw, limit=None if hopeless else limit,
           seen=seen)
    found, passing, kinks, notes = _left(case, bodies, values, free, rng, dtype, index,
                                         seen)
    over = [n for n, _ in found]
    notes |= {hopeless_note(index, limit)} if hopeless else set()
    notes |= {f"point {index} stays within {MARGIN} of a kink or singularity of {node.op} "
              f"({node!r})" for node, _ in kinks}
    notes |= {f"point {index} keeps a value beyond {limit:.2g} (√ of {dtype}'s largest) "
              f"or an exponential's argument beyond {math.log(limit):.3g} at {node.op} "
              f"({node!r})" for node in over}
    summary = extreme_note(index, band, dtype, limit, pull, values, free, rays)
    return Point(values, (summary, *sorted(notes)),
                 tuple(sorted({node.op for node, _ in kinks})),
                 overflow=first(passing).text() if passing else "")


def _band_rounds(seen: dict, elementwise: bool) -> Callable[[int], bool]:
    """Whether settle's round ``round_`` of an extreme point still redraws inside the
    band: for :data:`EXTREME_ROUNDS` rounds, but in a formula that mixes elements not
    once a kink was near at every element of one node in two passes in a row, a draw
    of the band between them (``seen["kinks"]``, settle's last pass). Such a hazard is
    the band's, not a draw's: small inputs give a layer norm's every row a variance
    within MARGIN of sqrt's 0, and the band's eight whole redraws of a transformer
    block were eight forward passes for nothing (the bulk's first draw settles it)."""
    state = {"round": -1, "full": set(), "bulk": False}

    def banded(round_: int) -> bool:
        if round_ >= EXTREME_ROUNDS:
            return False
        if not elementwise and round_ != state["round"]:   # (a new pass was made)
            full = {id(node) for node, near in seen.get("kinks", ()) if near.all()}
            state.update(bulk=state["bulk"] or bool(full & state["full"]), full=full,
                         round=round_)
            seen["from_bulk"] = state["bulk"]   # (settle's ceiling then stops at once)
        return not state["bulk"]

    return banded


def _left(case, bodies: list, values: dict, free: list, rng, dtype: str, index: int,
          seen: dict):
    """What settle could not fix at an extreme point, told apart: (the ceiling's (node,
    mask) in every output, the dtype's range's, the kinks in settle's ``bodies``, the
    notes of a point pulled in toward the range, which it then is). Read from settle's
    own last pass (``seen``) where its bodies are the outputs, a formula that mixes
    elements: two forward passes of a layer fewer."""
    roots = _roots(case)
    limit, within, notes = seen["limit"], seen["within"], set()
    if [id(b) for b in bodies] == [id(r) for r in roots]:
        found, passing, kinks = seen["beyond"], seen["passing"], seen["kinks"]
    else:
        found, passing, kinks = [], [], None
        for r in roots:
            evaluate(r, values, on_node=_both(_over(limit, found), None if within is None
                                              else out_of_range(within, passing, roots)))
    if passing:   # beyond the range: the point is pulled in
        _, passing, pulled = _pull_to_range(case, values, free, rng, dtype, within, index,
                                            passing)
        notes |= {pulled} - {""}
        found, kinks = [f for r in roots for f in _beyond(r, values, limit)], None
    if kinks is None:
        kinks = [k for b in bodies for k in _too_close(b, values)]
    return found, passing, kinks, notes


def case_points(case, dtype: str) -> Iterator[Point]:
    """Every point of ``case`` in ``dtype``, in order: ``case.points`` bulk points
    (numbered 0, 1, ...), then ``case.extreme_points`` extreme ones numbered after them,
    then up to ``case.kink_points`` kink points where the formula has a kink
    (:mod:`gradcheck.sampling.kinks`). The bulk points do not depend on the extreme ones (nor the
    extreme on ``points``), nor either on the kink points.

    A large formula's points are drawn with their temporaries served from the heap
    (:func:`for_formula`): an extreme point redraws and evaluates arrays
    of the same sizes over and over (a layer norm over [4096, 1024]: 1.6 -> 0.8 s for
    its large extreme point). The caller's work on a point is not."""
    heap = for_formula(*_roots(case))
    for i in range(case.points):
        with heap():
            point = sample(case, dtype, i)
        yield point
    if any(spec.value is None and not spec.integer for spec in case.inputs):
        for j in range(case.extreme_points):
            with heap():
                point = extreme(case, dtype, j, case.points + j)
            yield point
        index = case.points + case.extreme_points
        for k in range(kinks.count(case)):
            with heap():
                point = _kink_point(case, dtype, k, index)
            if point is not None:   # (numbered in turn: a row no element reached is none)
                index += 1
                yield point


def _kink_point(case, dtype: str, k: int, index: int) -> Point | None:
    """Kink point ``k`` of ``case`` as point ``index`` (:mod:`gradcheck.sampling.kinks`): its base
    is a bulk point drawn with a generator of its own, so no other point moves."""
    base = sample(case, dtype, index, rng=case_rng(case, dtype, k, "kink"))
    if base.overflow or base.near:   # (a base must be clean: kinks come near on purpose)
        return None
    found = kinks.kink_point(case, dtype, k, index, base.values,
                             case_rng(case, dtype, k, "kink-distances"))
    if found is None:
        return None
    values, notes, near = found
    return Point(values, (*base.notes, *notes), near)


def for_formula(*roots):
    """:func:`reused_allocations` for a formula under ``roots`` with an array of
    :data:`gradcheck.process.heap.HEAP_ELEMENTS` or more, else a context that does nothing."""
    if max((node.size for root in roots for node in walk(root)), default=0) >= HEAP_ELEMENTS:
        return reused_allocations
    return contextlib.nullcontext
