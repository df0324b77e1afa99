"""Comparison of a witness with the symbolic reference: error metrics and the worst
element, accumulated per witness (or op check) by :class:`Tally`.

What each element may err by comes with it (the tolerances of
:mod:`gradcheck.bounds.tolerance`, the one table); a user's ``atol``/``rtol`` add ``atol +
rtol·|expected|`` on top, which only loosens.

In a float64 run an element outside its tolerance is judged again against the
tolerance the same check has in float32 (``loose``, a function asked only then): a check
whose every mismatch lies within it is ``approximate`` (:mod:`gradcheck.checking.approximate`,
which also names the likely cause), one with a mismatch beyond it, or a problem that is
no element's (a :class:`Finding`), failed.

A tally takes two kinds of outcome (:meth:`Tally.record`): a :class:`Comparison` of
quantities element by element, and a :class:`Finding`, a verdict that is no element
comparison (an input modified in place, what a Function's backward returned).

An exact quantity that is NaN or infinite is no verdict at all: nothing can be checked
against it, so it raises :class:`NotFiniteReference` (the case's error), whatever the
witness holds there. Two NaNs never agree, nor two infinities; an exact value beyond the
dtype's range but finite, computed as inf of its sign, is the right answer in that
dtype. A comparison of an op with itself (``exact=False``: the same backward twice)
takes NaN for NaN and inf for the same inf: the op repeated what it did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Union

import numpy as np

from .approximate import JUDGED, Near, Rejudge
from ..base.arrays import slabs
from ..base.dtypes import max_finite
from .errormap import MAPS_KEPT, MapAccumulator, jacobian_key, view
from ..base.errors import GradcheckError
from ..base.evaluation import Evaluation
from ..report.mismatch import witness_message
from ..bounds.tolerance import with_projection_rounding
from ..base.result import APPROXIMATE, FAILED, PASSED, Worst, WitnessResult
from .worst import WORST_KEPT, kth_best, top_indices

COMPARED = 1 << 16   # elements compared at a time (see Tally._compare)


@dataclass(frozen=True)
class Comparison:
    """Quantities obtained against the exact ones at one point (by quantity name), each
    element allowed ``tolerance[quantity]`` (absolute, per element; 0 where absent)."""

    obtained: dict
    expected: dict
    point: int
    tolerance: dict | None = None
    #: what a mismatch here means, said when the tally has no other problem to say
    hint: str = ""
    #: ``expected`` is the exact reference (False: the op's own earlier result, which
    #: may be NaN where the op repeats it)
    exact: bool = True
    #: ``() -> {quantity: allowed error}``: the tolerance the same check has in float32,
    #: asked only where an element of a float64 run is outside ``tolerance`` (None: the
    #: check has none, and such an element fails)
    loose: Callable[[], dict] | None = None
    #: the point's inputs (name -> value): where a mismatch lies, for naming the cause
    #: of an approximation ("errors only where x > 20")
    values: dict | None = None


@dataclass(frozen=True)
class Finding:
    """A verdict that is no element comparison: ``checked`` items looked at (elements of
    an input, one backward's return), ``problem`` what was wrong (None: nothing),
    ``note`` what is worth knowing but no failure, ``diagnosis`` what a failure looks
    like, ``contract`` a note that only restates PyTorch's contract (shown with -v)."""

    checked: int = 0
    problem: str | None = None
    note: str | None = None
    diagnosis: str | None = None
    contract: str | None = None   # (trailing Nones, a sum back over broadcast axes)


Outcome = Union[Comparison, Finding]


class NotFiniteReference(GradcheckError):
    """The exact reference is NaN or infinite at a sampled point: no witness can be
    checked there. An error of the case (its formula, its domains, its pinned values),
    never a pass, nor a failure of a witness the reference cannot vouch against."""


def _require_finite(quantity: str, expected: np.ndarray, point: int, complex=False) -> None:
    """Raise :class:`NotFiniteReference` where ``expected`` is not finite (``complex``:
    a quantity in the view_as_real layout, its element named by index and part)."""
    # NaN and inf reach the extremes: two passes, no temporary of a layer's size
    if np.isfinite(np.min(expected)) and np.isfinite(np.max(expected)):
        return
    idx = tuple(int(i) for i in np.argwhere(~np.isfinite(expected))[0])
    element = (Worst(quantity, idx, 0.0, 0.0, 0.0, point).in_parts().label if complex
               else quantity + (f"[{', '.join(map(str, idx))}]" if idx else ""))
    raise NotFiniteReference(
        f"the reference is not finite at point {point}: the exact {element} is "
        f"{float(expected[idx])}, so no witness can be checked against it there (this is "
        "no pass). Sampling redraws points where the formula's values are not finite but "
        "could not avoid this one: give the inputs domains (or pinned values) where the "
        "formula and its gradient are finite")


class Tally:
    """Accumulates one witness's comparisons over all points into a WitnessResult.

    Read-only from outside: ``checked``, ``mismatched``, ``problems``, ``notes``,
    ``worst``, ``maps`` (the error maps being built, :mod:`gradcheck.checking.errormap`; set it
    to None to build none); outcomes come in through :meth:`add`, :meth:`add_quantities` and
    :meth:`record`."""

    def __init__(self, witness: str, dtype: str, atol: float | None = None,
                 rtol: float | None = None, *, complex: Iterable[str] = ()):
        self.witness, self.dtype = witness, dtype
        # the quantities held in the view_as_real layout (a complex input's gradient):
        # their worst elements are named by complex index and part (Worst.in_parts), at
        # result(), whichever tally (a trial merged in) found them
        self.complex = frozenset(complex)
        self.atol, self.rtol = atol or 0.0, rtol or 0.0
        self._max_finite = max_finite(dtype)
        self.max_abs = self.max_rel = 0.0
        self.checked = self.mismatched = 0
        # mismatches beyond float32's tolerance too (or that no tolerance judges: a
        # shape, a None), and, in a float64 run, what the others were (None elsewhere:
        # a run in float32 or below judges by float32's tolerance or a wider one)
        self.beyond = 0
        self.near = Near() if dtype == JUDGED else None
        # the WORST_KEPT elements furthest past their tolerance: (|diff| / tol, element),
        # worst first
        self.worst_kept: list[tuple[float, Worst]] = []
        self.problems: list[str] = []
        self.notes: list[str] = []   # (and the contract's, apart)
        self.contract_notes: list[str] = []
        self.diagnoses: list[str] = []
        self.grad_fn: tuple[str, ...] | None = None
        # the error maps being built, by quantity (None: build none)
        self.maps: dict[str, MapAccumulator] | None = {}
        # each point's largest |diff| / tolerance over every gradient element compared
        # there (inf for NaN): how far inside their tolerances the exact witnesses agree
        self.point_worst: dict[int, float] = {}
        # a Jacobian's rows that agreed at the current point, by map, before any row
        # differed: (point, [row, ...]), mapped only once one of that point does
        self._pending: dict[str, tuple[int, list]] = {}

    def fresh(self) -> "Tally":
        """An empty tally of the same witness, dtype, tolerances and complex quantities."""
        return Tally(self.witness, self.dtype, self.atol, self.rtol, complex=self.complex)

    def add(self, got: Evaluation, ref: Evaluation, point: int,
            tolerance: dict[str, np.ndarray], *, loose: Callable[[], dict] | None = None,
            values: dict | None = None) -> None:
        """Compare ``got`` with the exact ``ref``: element by element, or for a quantity
        ``got`` measured along directions (:attr:`Evaluation.directions`), the
        projections of ``ref``'s on them (``W.grad·u``, one element per direction), each
        allowed the rounding of that projection on top of ``tolerance`` (whose entries
        are already the projections' own). ``got``'s notes become the tally's.
        ``loose`` and ``values``: as :class:`Comparison`'s (``loose`` gets the same
        projection rounding)."""
        if got.grad_fn is not None and self.grad_fn is None:
            self.grad_fn = got.grad_fn
        self.notes.extend(got.notes)
        exact = ref.quantities()
        if loose is not None and got.directions:
            unprojected = loose
            loose = lambda: with_projection_rounding(unprojected(), got, exact)  # noqa: E731
        self.add_quantities(got.quantities(), got.project(exact), point,
                            with_projection_rounding(tolerance, got, exact), loose=loose,
                            values=values)

    def record(self, outcomes: Iterable[Outcome]) -> None:
        """Take each :class:`Comparison` and :class:`Finding`, in order."""
        for o in outcomes:
            if isinstance(o, Comparison):
                self.add_quantities(o.obtained, o.expected, o.point, o.tolerance,
                                    exact=o.exact, loose=o.loose, values=o.values)
                if o.hint and self.mismatched and not self.problems:
                    self.problems.append(o.hint)
                continue
            self.checked += o.checked
            if o.problem is not None:
                self._problem(o.problem)
            for kept, said in ((self.notes, o.note), (self.contract_notes, o.contract)):
                if said is not None:
                    kept.append(said)
            if o.diagnosis is not None:
                self.diagnoses.append(o.diagnosis)

    def merge(self, other: "Tally") -> None:
        """Take ``other``'s outcomes (a tally of the same witness) as this one's own."""
        self.checked += other.checked
        self.mismatched += other.mismatched
        self.beyond += other.beyond
        if self.near is not None and other.near is not None:
            self.near.merge(other.near)
        self.max_abs, self.max_rel = (max(self.max_abs, other.max_abs),
                                      max(self.max_rel, other.max_rel))
        self.worst_kept = sorted(self.worst_kept + other.worst_kept,
                                 key=lambda pair: -pair[0])[:WORST_KEPT]
        for point, worst in other.point_worst.items():
            self.point_worst[point] = max(self.point_worst.get(point, 0.0), worst)
        self.problems += other.problems
        self.notes += other.notes
        self.contract_notes += other.contract_notes
        self.diagnoses += other.diagnoses
        self.grad_fn = self.grad_fn or other.grad_fn
        if self.maps is not None:
            for key, acc in (other.maps or {}).items():
                if key in self.maps:
                    self.maps[key].merge(acc)
                else:
                    self.maps[key] = acc

    def _problem(self, message: str) -> None:
        self.mismatched += 1
        self.beyond += 1   # (no tolerance makes it right)
        if self.near is not None:
            self.near.lost = True
        self.problems.append(message)

    def add_quantities(self, obtained: dict, expected_all: dict, point: int,
                       tolerance: dict | None = None, *, exact: bool = True,
                       loose: Callable[[], dict] | None = None,
                       values: dict | None = None) -> None:
        """Compare ``obtained`` with ``expected_all`` quantity by quantity (by name),
        each element allowed ``tolerance[quantity]`` (absolute, per element; 0 where
        absent) plus the user's ``atol + rtol·|expected|``; ``loose`` and ``values`` as
        :class:`Comparison`'s (``loose`` asked at most once).

        Raises:
            NotFiniteReference: ``exact`` and an expected element is NaN or infinite.
        """
        tolerance = tolerance or {}
        if loose is not None:
            loose = _once(loose)
        for quantity, expected in expected_all.items():
            value = obtained.get(quantity)
            if expected is None:  # no differentiable path: .grad must stay None
                if value is not None:
                    self._problem(f"{quantity} should be None: no differentiable "
                                  "path reaches the output")
                continue
            if value is None:
                if quantity != "value":
                    self._problem(f"{quantity} is None")
                continue
            self._compare(quantity, np.asarray(value, dtype=float),
                          np.asarray(expected, dtype=float), tolerance.get(quantity, 0.0),
                          point, exact, loose, values)

    def _compare(self, quantity, value, expected, allowed, point, exact=True, loose=None,
                 values=None) -> None:
        if value.shape != expected.shape:
            self._problem(f"{quantity} has shape {list(value.shape)}, expected "
                          f"{list(expected.shape)}")
            return
        if expected.size == 0:
            return
        # max |expected| from the extremes: two passes and no temporary of a layer's size
        # (NaN in either extreme is NaN in both; inf is caught just below)
        lo, hi = float(expected.min()), float(expected.max())
        if exact and not (math.isfinite(lo) and math.isfinite(hi)):
            _require_finite(quantity, expected, point, quantity in self.complex)
        largest = max(abs(lo), abs(hi))
        allowed = np.asarray(allowed, dtype=float)
        if allowed.shape != expected.shape:
            allowed = np.broadcast_to(allowed, expected.shape)
        # a layer's quantities have millions of elements: compared slab by slab, so
        # that the temporaries below are a slab's, not six arrays of the layer's size
        cuts = slabs(expected.shape, COMPARED)
        candidates = []     # (ratio, flat index) of each slab's worst elements
        floor = self._floor()
        near = (Rejudge(self.near, quantity, expected, loose, values, self.atol, self.rtol)
                if exact and self.near is not None else None)
        for j, (axis, part, where) in enumerate(cuts):
            diff, rel, ratio, worst_diff = self._errors(value[where], expected[where],
                                                        allowed[where], largest)
            local = ratio.reshape(-1)
            most = float(local.max())   # (NaN where any ratio is)
            if quantity != "value":
                self.point_worst[point] = max(self.point_worst.get(point, 0.0),
                                              most if most == most else math.inf)
            bad = 0 if most <= 1 else int(np.count_nonzero(ratio > 1))
            self.mismatched += bad
            if near is None:
                self.beyond += bad
            else:
                self.beyond += near.slab(where, value, diff, ratio if bad else None)
            if self.maps is not None:
                self._map(quantity, value, expected, allowed, largest, cuts, j, ratio, bad,
                          point)
            self.max_abs = max(self.max_abs, worst_diff)
            self.max_rel = max(self.max_rel, rel)
            if floor is not None and most <= floor:
                continue   # below every worst element kept already (NaN is never below)
            bar = kth_best(candidates) if len(candidates) >= WORST_KEPT else -np.inf
            if most < bar:
                continue   # nothing here is among the worst (NaN, never below, is kept)
            # (an element below the k-th worst candidate, or at or below the floor, is
            # cut when they are merged: only those at or above both are looked for)
            for k in top_indices(local, WORST_KEPT, most,
                                 at_least=max(bar, -np.inf if floor is None else floor)):
                flat = int(k)
                if where is not ...:   # the slab's index, as an index of the whole
                    idx = _unravel(flat, ratio.shape)
                    idx = idx[:axis] + (idx[axis] + (part.start or 0),) + idx[axis + 1:]
                    flat = int(np.ravel_multi_index(idx, expected.shape))
                candidates.append((float(local[k]), flat))
        self.checked += expected.size
        self._keep_worst(quantity, candidates, value, expected, allowed, point)

    def _floor(self) -> float | None:
        """The least ratio of a full list of worst elements (None: not full, or holding
        a NaN, which sorts unpredictably): an element at or below it would be sorted
        after the list's own and cut."""
        ratios = [r for r, _ in self.worst_kept]
        if len(ratios) < WORST_KEPT or not all(r == r for r in ratios):
            return None
        return min(ratios)

    def _keep_worst(self, quantity, candidates, value, expected, allowed, point) -> None:
        """Merge a quantity's worst elements, ``candidates`` (ratio, flat index), into
        the tally's :data:`WORST_KEPT` worst."""
        # worst first, NaN last, ties in index order: as one stable sort of every
        # element would give
        candidates.sort(key=lambda c: (-c[0] if c[0] == c[0] else np.inf, c[1]))
        floor = self._floor()
        for r, k in candidates[:WORST_KEPT]:
            if floor is not None and r == r and r <= floor:
                break   # (sorted: the rest are no larger)
            idx = _unravel(k, expected.shape)
            # (Python floats: 0 · inf, where an op repeats an inf, is NaN without a
            # warning)
            tol = float(allowed[idx]) + self.atol + self.rtol * abs(float(expected[idx]))
            self.worst_kept.append((r, Worst(quantity, idx, float(value[idx]),
                                      float(expected[idx]), tol, point)))
        self.worst_kept.sort(key=lambda pair: -pair[0])
        del self.worst_kept[WORST_KEPT:]

    def _map(self, quantity, value, expected, allowed, largest, cuts, j, ratio, bad,
             point):
        """Add slab ``j`` of ``cuts`` (its ``ratio``, ``bad`` elements outside) to the
        quantity's error map, once the quantity differs: from the point where it first
        does, the slabs before that one looked at again (and a Jacobian's rows of that
        point that agreed before it), so that comparisons that pass, the nearly every
        one of a run, cost nothing here."""
        key = jacobian_key(quantity)
        name = key[0] if key else quantity
        if name not in self.maps:
            if key and len(cuts) > 1:   # a Jacobian map of a large input: not drawn
                return
            if not bad:
                if key:   # kept aside: a later row of this point may differ
                    kept = self._pending.get(name)
                    if kept is None or kept[0] != point:
                        kept = self._pending[name] = (point, [])
                    kept[1].append((quantity, value, expected, ratio))
                return
            self.maps[name] = MapAccumulator(name, expected.shape,
                                             "jacobian" if key else "gradient")
            kept = self._pending.pop(name, None)
            for row, v, e, r in (kept[1] if kept and kept[0] == point else ()):
                self._map_slab(self.maps[name], jacobian_key(row), e.shape,
                               (0, slice(None), ...), v, e, r)
            for axis, part, where in cuts[:j]:
                again = self._errors(value[where], expected[where], allowed[where],
                                     largest)[2]
                self._map_slab(self.maps[name], key, expected.shape, (axis, part, where),
                               value[where], expected[where], again)
        self._map_slab(self.maps[name], key, expected.shape, cuts[j], value[cuts[j][2]],
                       expected[cuts[j][2]], ratio)

    @staticmethod
    def _map_slab(acc, key, shape, cut, value, expected, ratio) -> None:
        with np.errstate(invalid="ignore"):
            signed = np.copysign(ratio, value - expected)
        if key is None and cut[2] is ...:     # the whole quantity
            acc.add(signed.reshape(acc.rows, acc.cols))
        elif key is None:
            rows, cols = _view_indices(shape, *cut, signed.shape)
            acc.add(signed.reshape(len(rows), len(cols)), rows, cols)
        elif acc.kind == "jacobian" and acc.shape == tuple(shape):
            row = acc.jacobian_row(key[1])
            if row is not None:
                acc.add(signed.reshape(1, -1), np.array([row]), np.arange(signed.size))

    def _errors(self, value, expected, allowed, largest: float):
        """|value - expected|, the largest relative error (a statistic, not the verdict),
        the ratio to the tolerance, elementwise, and the largest |value - expected|;
        ``largest``: the quantity's largest |expected| (of every slab)."""
        # (each step skipped where it would change nothing: nearly every element is
        # finite and nowhere near the dtype's range, and atol = rtol = 0)
        size = np.abs(expected)
        tol = allowed + self.atol + self.rtol * size if self.atol or self.rtol else allowed
        with np.errstate(all="ignore"):
            diff = np.abs(value - expected)
            worst = float(diff.max())
            if not math.isfinite(worst):   # (max is NaN where any element is)
                diff = np.where(np.isnan(diff) & ~(np.isnan(value) & np.isnan(expected)),
                                np.inf, np.nan_to_num(diff, nan=0.0, posinf=np.inf))
                worst = float(diff.max())
            # An exact value beyond the dtype's range is computed as inf of its sign:
            # that is the right answer in that dtype, not a mismatch.
            if not largest <= self._max_finite:
                beyond = size > self._max_finite
                diff = np.where(beyond & (value == np.sign(expected) * np.inf), 0.0, diff)
                worst = float(diff.max())
            # The reported relative error skips elements that are zero up to rounding
            # against the quantity's largest.
            meaningful = size > 1e-12 * max(1.0, largest)
            quotient = diff / size
            rel = float(quotient.max() if meaningful.all()
                        else np.max(quotient, where=meaningful, initial=0.0))
            if tol.min() > 0:
                ratio = diff / tol
            else:
                ratio = np.where(tol > 0, diff / tol, np.where(diff > 0, np.inf, 0.0))
        return diff, rel, ratio, worst

    @property
    def worst(self) -> Worst | None:
        return self._named(self.worst_kept[0][1]) if self.worst_kept else None

    def _named(self, worst: Worst) -> Worst:
        return worst.in_parts() if worst.quantity in self.complex else worst

    def error_maps(self) -> tuple:
        """The maps of the quantities that differ (the first MAPS_KEPT)."""
        maps = [a.result() for a in (self.maps or {}).values() if a.mismatched]
        return tuple(maps[:MAPS_KEPT])

    @property
    def approximate(self) -> bool:
        """Every mismatch lies within the tolerance the check has in float32."""
        return (bool(self.mismatched) and not self.beyond and self.near is not None
                and not self.near.lost)

    def result(self) -> WitnessResult:
        status = (APPROXIMATE if self.approximate else FAILED if self.mismatched
                  else PASSED)
        message = "; ".join(dict.fromkeys(self.problems))
        if self.mismatched and not message:
            message = witness_message(self.worst, self.mismatched, self.checked,
                                      self.dtype)
        diagnosis = "; ".join(dict.fromkeys(self.diagnoses)) if self.mismatched else ""
        if status == APPROXIMATE:   # what it is within, and the likely cause
            diagnosis = self.near.text()
        return WitnessResult(self.witness, status, self.max_abs, self.max_rel, self.worst,
                             self.checked, self.mismatched, self.grad_fn, message,
                             diagnosis=diagnosis,
                             worst_elements=tuple(self._named(w) for _, w in self.worst_kept),
                             notes=tuple(dict.fromkeys(self.notes)),
                             contract_notes=tuple(dict.fromkeys(self.contract_notes)),
                             error_maps=self.error_maps() if self.mismatched else ())


def _once(fn: Callable[[], dict]) -> Callable[[], dict]:
    """``fn``, called at most once (its result kept)."""
    memo: list = []

    def get() -> dict:
        if not memo:
            memo.append(fn())
        return memo[0]

    return get


def _unravel(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of flat position ``k`` in a C-ordered array of ``shape``
    (``np.unravel_index`` for one position, in Python: a handful per comparison)."""
    idx = []
    for n in reversed(shape):
        k, i = divmod(k, n)
        idx.append(i)
    return tuple(reversed(idx))


def _view_indices(shape, axis, part, where, slab_shape):
    """The rows and columns of the 2-D view of ``shape`` (:func:`gradcheck.checking.errormap.
    view`) that a slab (``axis``, ``part``, ``where``: a cut of :func:`slabs`) of
    ``slab_shape`` covers, ascending: its elements are those rows × columns."""
    n, whole = len(shape), where is ...
    lo = 0 if whole else (part.start or 0)
    if n <= 1:
        return np.zeros(1, dtype=np.int64), np.arange(lo, lo + (slab_shape[0] if n else 1))
    last = not whole and axis == n - 1
    cols = np.arange(lo, lo + slab_shape[-1]) if last else np.arange(shape[-1])
    if whole or last:
        return np.arange(view(shape)[0]), cols
    idx = np.indices(slab_shape[:-1]).reshape(n - 1, -1)
    idx[axis] += lo
    return np.ravel_multi_index(tuple(idx), shape[:-1]), cols
