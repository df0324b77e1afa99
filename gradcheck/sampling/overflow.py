"""Points within range as written: where a formula, evaluated in the run's dtype as it is
written, stays finite.

A witness in float32, float16 or bfloat16 computes every value of the formula (every
node), every cotangent of its backward and the gradients in that dtype. Where one of
them passes the dtype's largest value (float16's 65504: ``exp`` of 11.1, a cube of 40),
it gets inf or NaN where the float64 reference is finite: no wrong gradient, a point the
dtype cannot hold the formula at. A point is *within range* in a dtype when

- every value of the formula, evaluated in float64 at the dtype-rounded point (the
  rule table's ``numpy`` column, :mod:`gradcheck.formula.forward`), stays below
  :func:`gradcheck.base.dtypes.overflow_threshold` (the smallest magnitude that rounds to
  inf): sampling reads it in the forward pass it already makes for kinks, and redraws
  and pulls in points beyond it (:func:`gradcheck.sampling.points.sample`);
- and every cotangent and VJP of the backward as autograd forms it, and the gradients,
  stay below it too: the rounding model's backward (:mod:`gradcheck.bounds.model`, PyTorch's
  own backward formulas in float64) runs at every checked point anyway, and a
  :class:`Watch` reads its arrays as they come.

A point that is not is checked in no witness of that dtype (a note says so); a case
none of whose points is, is skipped with the reason (:func:`every_point`), never failed.
float64 is the reference's own dtype: a value not finite there is the reference's
problem (an error of the case), as before.

The extreme points' ceiling lives here as well (:func:`ceiling`, :func:`over`; the rules
are above :func:`gradcheck.sampling.points.extreme`): values below √max, so that a gradient,
about a value times a modest factor, has √max of headroom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..formula.forward import evaluate
from ..rules import RULES

#: Rows whose symbolic form goes through exp(±argument) (the row's ``exponential``;
#: tests/test_sampling_extremes.py checks this against the SymPy column). sigmoid,
#: softplus and logsumexp have bounded values where that exp overflows, so the value
#: ceiling alone does not see it: their arguments are bounded by ln(limit) instead.
EXPONENTIAL = frozenset(name for name, rule in RULES.items() if rule.exponential)
#: Periodic rows (the row's ``periodic``), and how far from 0 their arguments go at
#: extreme points: a periodic function has no hard region far out, only worse
#: conditioning (float32's rounding of the argument alone errs by u·|arg|) and finite
#: differences whose relative step (1e-3·|x|) moves an argument of degree k in the
#: inputs by about 1e-3·k·|arg|: within 100, a fraction of a radian.
PERIODIC = frozenset(name for name, rule in RULES.items() if rule.periodic)
PERIODIC_REACH = 100.0
#: bisection steps for a pull-in exponent or factor λ (2^-12 precision)
PULL_STEPS = 12
#: where the exp inside an INSIDE row overflows as torch computes it outside
#: float64: in float32, which it also computes float16 and bfloat16 in (silu(-100) is
#: x / (1 + exp(100)) = -0 where the exact value is -3.7e-42)
EXP_REACH = math.log(float(np.finfo(np.float32).max))


#: rows whose torch kernel divides by an exp that overflows while the value stays
#: finite (SiLU's x / (1 + exp(-x)): -0 for x < -88.7 in float32); sigmoid's 1 / (1 +
#: exp(-x)) is 0 there, off by less than its rounding allows, and softmax, logsumexp,
#: softplus and mish keep their exp in range (a max subtracted, a threshold)
INSIDE = frozenset({"silu"})


def _exp_far(node, args) -> np.ndarray | None:
    """Where the exp inside an :data:`INSIDE` row overflows as written (its argument
    beyond :data:`EXP_REACH`); None elsewhere."""
    if node.op not in INSIDE or not args:
        return None
    far = np.abs(np.asarray(args[0], dtype=float)) >= EXP_REACH
    return far if far.any() else None


def ceiling(dtype: str) -> float:
    """The largest magnitude a value of the formula may take at an extreme point: √max."""
    from ..base.dtypes import max_finite

    return math.sqrt(max_finite(dtype))


def limit(dtype: str) -> float | None:
    """The magnitude from which a value is inf in ``dtype``; None in float64 (nothing to
    keep there beyond finiteness, which sampling keeps as a hazard)."""
    from ..base.dtypes import overflow_threshold

    found = overflow_threshold(dtype)
    return None if math.isinf(found) else found


def beyond(root, values, ceiling_: float | None) -> list:
    """(node, mask) for every value of the formula under ``root`` that is not finite or
    exceeds ``ceiling_`` in magnitude somewhere, every argument of an :data:`EXPONENTIAL`
    row beyond ln(ceiling_) and of a :data:`PERIODIC` one beyond :data:`PERIODIC_REACH`
    (nothing when ``ceiling_`` is None)."""
    if ceiling_ is None:
        return []
    out: list = []
    evaluate(root, values, on_node=over(ceiling_, out))
    return out


def over(ceiling_: float, out: list):
    """The visitor of a forward pass that appends :func:`beyond`'s (node, mask) pairs
    to ``out``."""
    def on_node(node, args, value) -> None:
        if value.dtype.kind == "f":
            mask = ~(np.abs(value) <= ceiling_)     # NaN and inf count as beyond
            bound = (math.log(ceiling_) if node.op in EXPONENTIAL  # exp(arg) <= ceiling
                     else PERIODIC_REACH if node.op in PERIODIC else None)
            if bound is not None:
                far = ~(np.abs(np.asarray(args[0], dtype=float)) <= bound)
                if node.op == "logsumexp":       # a reduction: over the reduced axes
                    far = np.any(far, axis=node.axis, keepdims=node.keepdims)
                mask = mask | far
            if mask.any():
                out.append((node, mask))

    return on_node


def _peak(value: np.ndarray) -> float:
    """The largest magnitude of ``value``, read with two reductions and no temporary
    array (NaN where it holds one)."""
    if value.size == 0:
        return 0.0
    return float(max(np.max(value), -np.min(value)))


@dataclass(frozen=True)
class Overflow:
    """A quantity of the formula as written that passes a dtype's range."""

    node: object
    peak: float            # its largest magnitude, in float64
    # "value", "argument" (of the exp inside a row), "cotangent" (the node's) or
    # "backward" (a VJP's)
    where: str = "value"

    def text(self) -> str:
        op, what = self.node.op, repr(self.node)
        what = what if len(what) <= 60 else what[:57] + "..."
        if self.where == "value" and op in ("exp", "expm1") and self.peak > 0:
            return f"{op}'s argument reaches {math.log(self.peak):.3g} ({what})"
        if self.where == "argument":
            return (f"the exp inside {op} overflows: its argument reaches "
                    f"{self.peak:.3g} ({what})")
        if self.where == "value":
            return f"{op} reaches {self.peak:.3g} ({what})"
        if self.where == "cotangent":
            return f"the cotangent of {op} reaches {self.peak:.3g} ({what})"
        return f"{op}'s backward reaches {self.peak:.3g} ({what})"


def _written(roots, limit_: float) -> np.ndarray:
    """The magnitudes of the constants of the formulas ``roots`` (computations of
    constants included) that reach ``limit_``: written beyond the dtype's range (a
    mask's -1e9), they are ±inf in it as their author meant, and a value that passes
    one on unchanged (``where(mask, s, -1e9)``) is not counted."""
    from ..formula.tree import walk

    return np.asarray(sorted({abs(float(n.const)) for r in roots for n in walk(r)
                              if n.const is not None and abs(float(n.const)) >= limit_}),
                      dtype=float)


def _passing(value: np.ndarray, limit_: float, written: np.ndarray) -> np.ndarray:
    """Where ``value`` is finite in float64 and reaches ``limit_``, but for the elements
    that are a constant written beyond the range."""
    size = np.abs(value)
    mask = np.isfinite(size) & (size >= limit_)
    if written.size:
        mask &= ~np.isin(size, written)
    return mask


def out_of_range(limit_: float, out: list, outputs=()):
    """The visitor of a forward pass that appends (node, mask, peak) to ``out`` for every
    value finite in float64 whose magnitude reaches ``limit_`` somewhere (a value not
    finite in float64 is a hazard of its own, :func:`gradcheck.formula.forward.hazard_distances`),
    but the values of the nodes ``outputs``, the formulas' roots: what a witness is
    compared on may pass the range, as inf of its sign is the right answer there
    (:mod:`gradcheck.checking.compare`); nor a constant written beyond it (:func:`_written`).
    Each value is read with two reductions; a mask is made only where one passes."""
    exempt, written = {id(n) for n in outputs}, []

    def on_node(node, args, value) -> None:
        if value.dtype.kind != "f":
            return
        # (an output's too: its value is then 0 where it should be tiny, not ±inf)
        far = _exp_far(node, args)
        if far is not None:
            out.append((node, far, float(np.max(np.abs(np.asarray(args[0])))), "argument"))
            return
        if id(node) in exempt or not _peak(value) >= limit_:   # (NaN: no verdict)
            return
        if not written:
            written.append(_written(outputs, limit_))
        mask = _passing(value, limit_, written[0])
        if mask.any():
            out.append((node, mask, float(np.max(np.abs(value)[mask]))))

    return on_node


def fits_range(roots, values: dict, limit_: float) -> bool:
    """Whether every value of the formulas ``roots`` at ``values`` but their own (and
    constants written beyond the range) stays below ``limit_`` in magnitude and is
    finite in float64."""
    ok, exempt, written = [True], {id(r) for r in roots}, _written(roots, limit_)

    def on_node(node, args, value) -> None:
        if ok[0] and value.dtype.kind == "f" and _exp_far(node, args) is not None:
            ok[0] = False
        if (ok[0] and value.dtype.kind == "f" and id(node) not in exempt
                and not _peak(value) < limit_):
            ok[0] = bool(np.all(np.isfinite(value))) and not _passing(
                value, limit_, written).any()

    for root in roots:
        evaluate(root, values, on_node=on_node)
        if not ok[0]:
            return False
    return True


def first(found: list) -> Overflow | None:
    """The first of :func:`out_of_range`'s findings in the order of evaluation (where
    the overflow starts: exp, not the 1 + exp above it), as an :class:`Overflow`."""
    if not found:
        return None
    node, _mask, peak, *where = found[0]   # (where: "argument", an exp's inside a row)
    return Overflow(node, peak, *where)


class Watch:
    """What the rounding model's backward (:meth:`gradcheck.bounds.model.RoundingModel.backward`)
    forms beyond the range of ``dtype``: every node's cotangent and every VJP's result
    before it is summed back to its argument's shape, where finite in float64 (a value
    not finite there is the reference's problem, as at sampling); but the gradients
    themselves, compared as the outputs' values are (inf of its sign is right beyond
    the range): an input's cotangent, and a VJP's into an input of its own shape. The
    rounding model calls :meth:`see` with what counts. :attr:`found` is the largest, or
    None (always None in float64)."""

    def __init__(self, dtype: str):
        self.dtype, self.limit = dtype, limit(dtype)
        self.found: Overflow | None = None

    def see(self, node, array, where: str = "cotangent") -> None:
        if self.limit is None or array is None:
            return
        value = np.asarray(array)
        if value.dtype.kind != "f":
            return
        peak = _peak(value)
        if not math.isfinite(peak):   # (not finite in float64: the reference's problem)
            peak = _peak(value[np.isfinite(value)])
        if not peak >= self.limit:
            return
        if self.found is None or peak > self.found.peak:
            self.found = Overflow(node, peak, where)


def largest(fits, none_fits: bool = False) -> float | None:
    """The largest λ in [0, 1] (to 2^-PULL_STEPS) with ``fits(λ)``, by bisection (1 where
    ``fits(1)``; 0 where nothing larger fits, ``fits(0)`` not asked, but with
    ``none_fits``: then None where not even ``fits(0)``, one pass, not PULL_STEPS)."""
    if fits(1.0):
        return 1.0
    if none_fits and not fits(0.0):
        return None
    lo, hi = 0.0, 1.0
    for _ in range(PULL_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def skipped_note(index: int, dtype: str, text: str) -> str:
    """The note of a point no witness of ``dtype`` is checked at."""
    return (f"point {index} is not checked in {dtype}: as written, the formula overflows "
            f"{dtype} there ({text})")


def every_point(dtype: str, found: dict[int, str]) -> str:
    """Why a witness (an op check) of ``dtype`` checked nothing: ``found`` holds, by
    point, what passes the range there."""
    first = min(found)
    return (f"as written, the formula overflows {dtype} at every point drawn "
            f"({len(found)} of {len(found)}; at point {first}: {found[first]})")
