"""The approximate verdict: a float64 check whose mismatched elements all lie within the
tolerance the same check has in float32 is ``approximate``, not failed
(docs/tolerances.md). The float32 tolerance is the check's own rule with float32's rounding
bounds at the same point (:func:`gradcheck.bounds.tolerance.witness_tolerance` in float32; an
op's model and its peer, PyTorch's autograd of the formula, in float32), taken only once
an element fails float64's, so that a check that passes pays nothing for it; a check
with one element beyond float32's tolerance too is a failure, and stops asking.

:class:`Near` is what one check (one :class:`~gradcheck.checking.compare.Tally`) found, and the
evidence for the likely cause, named only where it fits every wrong element:

- a threshold ("errors only where x > 20"): every wrong element beyond a magnitude T > 0
  of an input it lines up with (the same shape: an elementwise op's values and
  gradients, a Jacobian row), tried as |x| > T, x > T and x < -T; every right element
  whose exact value is not zero within it (zero matches any relative error: no
  evidence); at least 3 of each;
- a rounded constant: one relative error (o - e) / e across the wrong elements (each
  within a quarter of their median), or errors everywhere far below float32's own
  rounding (at most 1/64 of its tolerance, relative errors far below 2^-24) and well
  beyond float64's (16 times its tolerance somewhere): a constant written to 10 digits
  errs by about 1e-11;
- float32 arithmetic inside: relative errors of about float32's unit roundoff (their
  median at least 2^-24 / 16), as a computation rounded to 24 bits leaves them.

Every cause needs at least 3 wrong elements. Only float64 runs are judged so
(:data:`JUDGED`): in float32 and below a run's own tolerance is float32's or wider, and
a failure stays a failure.
"""

from __future__ import annotations

import math

import numpy as np

from ..base.dtypes import unit_roundoff
from ..bounds.tolerance import CONSTANT_BEYOND, CONSTANT_WITHIN

__all__ = ["JUDGED", "LOOSE", "Near", "Rejudge", "within_text"]

#: the dtype whose runs can be approximate, and the dtype whose tolerance they get
JUDGED, LOOSE = "float64", "float32"
U32 = unit_roundoff(LOOSE)

CAUSE_MIN = 3                 # wrong elements any cause needs (fewer show no pattern)
THRESHOLD_MIN = 3             # right elements a threshold needs (a few line up by chance)
CONSTANT_SPREAD = 0.25        # a constant relative error: each within this of the median
FLOAT32_MEDIAN = U32 / 16     # float32 arithmetic: the median |relative error| at least
RELATIVE_KEPT = 4096          # relative errors kept for their median

# the forms a threshold on an input takes: (text, f) with "f(x) > T"
_FORMS = (("|{}| >", np.abs), ("{} >", lambda a: a), ("{} <", np.negative))


def within_text(worst: float, worst64: float) -> str:
    """How a result says it is approximate: ``worst`` is the largest |diff| over
    float32's tolerance among the wrong elements, ``worst64`` over float64's."""
    return (f"beyond float64's tolerance (up to {worst64:.3g} times it), within "
            f"float32's (up to {worst:.2g} of it)")


def _extremes(x: np.ndarray) -> tuple[float, float]:
    return float(np.min(x)), float(np.max(x))


class Near:
    """A float64 check's mismatches re-judged against float32's tolerance: ``within``
    counts those inside it, ``lost`` says one was beyond (the check fails; no more
    evidence is gathered), and the rest is the evidence for :meth:`cause`."""

    def __init__(self):
        self.within = 0
        self.lost = False
        self.worst = 0.0                    # largest |diff| / float32 tolerance, within
        self.worst64 = 0.0                  # and over float64's
        self.rel_lo, self.rel_hi = math.inf, -math.inf   # signed (o - e) / e, e != 0
        self.rel_n = 0
        self.rels: list[np.ndarray] = []    # the first RELATIVE_KEPT of them
        self.kept = 0
        self.aligned: dict[str, int] = {}   # input -> wrong elements lined up with it
        # (input, form) -> the least f(x) of a wrong element, the largest of a right one
        self.wrong_lo: dict[tuple[str, int], float] = {}
        self.right_hi: dict[tuple[str, int], float] = {}
        self.right_n: dict[str, int] = {}   # input -> right elements that are evidence

    # ------------------------------------------------------------------ evidence
    def judge(self, value: np.ndarray, expected: np.ndarray, diff: np.ndarray,
              ratio: np.ndarray, loose: np.ndarray | None, inputs: dict) -> int:
        """Re-judge one slab's mismatched elements (``ratio``, |diff| over float64's
        tolerance, above 1) against ``loose``, float32's tolerance there (None: the
        check has none, so each is beyond it); returns how many lie beyond. The right
        elements of the slab (its others) are evidence too. ``inputs``: the slab of
        each input it lines up with."""
        bad = ratio > 1
        if self.lost:
            return int(np.count_nonzero(bad))
        d = diff[bad]
        with np.errstate(all="ignore"):
            r = (d / loose[bad]) if loose is not None else np.full(d.shape, np.inf)
        beyond = int(np.count_nonzero(~(r <= 1)))   # NaN, inf: beyond
        if beyond:
            self.lost = True
            self._forget()
            return beyond
        self.within += d.size
        self.worst = max(self.worst, float(np.max(r, initial=0.0)))
        self.worst64 = max(self.worst64, float(np.max(ratio[bad], initial=0.0)))
        e, o = expected[bad], value[bad]
        nonzero = e != 0
        with np.errstate(all="ignore"):
            rel = (o[nonzero] - e[nonzero]) / e[nonzero]
        if rel.size:
            lo, hi = _extremes(rel)
            self.rel_lo, self.rel_hi = min(self.rel_lo, lo), max(self.rel_hi, hi)
            self.rel_n += rel.size
            if self.kept < RELATIVE_KEPT:
                take = rel[:RELATIVE_KEPT - self.kept]
                self.rels.append(take)
                self.kept += take.size
        for name, x in inputs.items():
            xs = x[bad]
            self.aligned[name] = self.aligned.get(name, 0) + xs.size
            for k, (_, f) in enumerate(_FORMS):
                key = (name, k)
                self.wrong_lo[key] = min(self.wrong_lo.get(key, math.inf),
                                         float(np.min(f(xs))))
        self.right(expected, ~bad, inputs)
        return 0

    def right(self, expected: np.ndarray, ok: np.ndarray | None, inputs: dict) -> None:
        """Right elements of a slab (``ok``: a mask; None: every element) as evidence
        of where the errors are not: those with a non-zero exact value."""
        if self.lost or not inputs:
            return
        mask = expected != 0
        if ok is not None:
            mask &= ok
        n = mask.size if mask.all() else int(np.count_nonzero(mask))
        if not n:
            return
        every = n == mask.size
        for name, x in inputs.items():
            self.right_n[name] = self.right_n.get(name, 0) + n
            lo, hi = _extremes(x if every else x[mask])
            for k, top in enumerate((max(hi, -lo), hi, -lo)):
                key = (name, k)
                self.right_hi[key] = max(self.right_hi.get(key, -math.inf), top)

    def merge(self, other: "Near") -> None:
        """Take ``other``'s evidence (a check of the same kind) as this one's own."""
        if other.lost:
            self.lost = True
        if self.lost:
            self._forget()
            return
        self.within += other.within
        self.worst = max(self.worst, other.worst)
        self.worst64 = max(self.worst64, other.worst64)
        self.rel_lo, self.rel_hi = (min(self.rel_lo, other.rel_lo),
                                    max(self.rel_hi, other.rel_hi))
        self.rel_n += other.rel_n
        self.rels += other.rels
        self.kept += other.kept
        for name, n in other.aligned.items():
            self.aligned[name] = self.aligned.get(name, 0) + n
        for key, v in other.wrong_lo.items():
            self.wrong_lo[key] = min(self.wrong_lo.get(key, math.inf), v)
        for key, v in other.right_hi.items():
            self.right_hi[key] = max(self.right_hi.get(key, -math.inf), v)
        for name, n in other.right_n.items():
            self.right_n[name] = self.right_n.get(name, 0) + n

    def _forget(self) -> None:
        self.rels, self.aligned, self.wrong_lo, self.right_hi = [], {}, {}, {}
        self.right_n = {}

    # ------------------------------------------------------------------ the cause
    def threshold(self) -> str | None:
        """``"x > 20"`` where the wrong elements are exactly those beyond it, or None."""
        from .diagnose.elements import round_between

        if self.within < THRESHOLD_MIN:
            return None
        for name, count in self.aligned.items():
            # every wrong element lines up with it, and enough right ones are evidence
            if count != self.within or self.right_n.get(name, 0) < THRESHOLD_MIN:
                continue
            for k, (form, _) in enumerate(_FORMS):
                bad, good = self.wrong_lo.get((name, k)), self.right_hi.get((name, k))
                if bad is None or good is None or not bad > max(good, 0.0):
                    continue   # (a magnitude: beyond some T > 0)
                t = round_between(max(good, 0.0), bad)
                if not t > 0:
                    continue
                t = -t + 0.0 if form.endswith("<") else t   # -x > t is x < -t
                return f"{form.format(name)} {t:.12g}"
        return None

    def cause(self) -> str:
        """The likely cause, where one fits every wrong element; else "" (also where
        fewer than :data:`CAUSE_MIN` elements are wrong: no pattern)."""
        if self.within < CAUSE_MIN:
            return ""
        beyond = self.threshold()
        if beyond:
            return f"a threshold (errors only where {beyond})?"
        if self.rel_n < CAUSE_MIN:
            return ""
        rels = np.concatenate(self.rels)
        mid = float(np.median(rels))
        spread = max(abs(self.rel_hi - mid), abs(self.rel_lo - mid))
        if mid != 0 and spread <= CONSTANT_SPREAD * abs(mid):
            return f"a rounded constant? (a constant relative error of {mid:.2g})"
        typical = float(np.median(np.abs(rels)))
        if typical >= FLOAT32_MEDIAN:
            return ("float32 arithmetic inside? (relative errors of about float32's unit "
                    f"roundoff, 2^-24 ≈ 6e-08: {typical:.2g} typically)")
        if self.worst <= CONSTANT_WITHIN and self.worst64 >= CONSTANT_BEYOND:
            return (f"a rounded constant? (relative errors of {typical:.2g} typically, "
                    "far below float32's unit roundoff)")
        return ""

    def text(self) -> str:
        """What the result says: within float32's tolerance, and the likely cause."""
        cause = self.cause()
        return within_text(self.worst, self.worst64) + (f": {cause}" if cause else "")


class Rejudge:
    """One quantity's mismatches in a float64 run judged against float32's tolerance
    (asked at the first of them: ``loose() -> {quantity: allowed}``, None: none), slab by
    slab (:class:`gradcheck.checking.compare.Tally`'s), into ``near``; the right elements of each
    slab are evidence of where the errors are not, with the inputs (``values``) that
    line up with the quantity (its shape). ``atol``, ``rtol``: the user's, added to
    float32's tolerance as to float64's."""

    def __init__(self, near: Near, quantity: str, expected: np.ndarray, loose, values,
                 atol: float = 0.0, rtol: float = 0.0):
        self.near, self.quantity, self.expected = near, quantity, expected
        self.loose, self.allowed = loose, None
        self.atol, self.rtol = atol, rtol
        self.inputs = {n: x for n, x in (values or {}).items()
                       if np.shape(x) == expected.shape
                       and np.asarray(x).dtype.kind == "f"}

    def slab(self, where, value: np.ndarray, diff: np.ndarray, ratio) -> int:
        """Slab ``where`` of the quantity (``value`` the whole obtained one, ``diff``
        the slab's |value - expected|, ``ratio`` its ratio to float64's tolerance, None
        where no element is outside it): how many elements lie beyond float32's
        tolerance too."""
        near, inputs = self.near, {n: np.asarray(x)[where] for n, x in self.inputs.items()}
        if ratio is None:
            near.right(self.expected[where], None, inputs)
            return 0
        if not near.lost and self.allowed is None and self.loose is not None:
            self.allowed = self._float32()
        loose = None if self.allowed is None else self.allowed[where]
        return near.judge(value[where], self.expected[where], diff, ratio, loose, inputs)

    def _float32(self) -> np.ndarray | None:
        """float32's tolerance of the whole quantity, with the user's atol and rtol."""
        expected = self.expected
        allowed = self.loose().get(self.quantity)
        if allowed is None:
            return None
        allowed = np.broadcast_to(np.asarray(allowed, dtype=float), expected.shape)
        if self.atol or self.rtol:
            allowed = allowed + self.atol + self.rtol * np.abs(expected)
        return allowed
