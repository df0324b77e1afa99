"""One text for a failing check (:func:`summarize`): the single-point pattern of
:mod:`gradcheck.checking.diagnose.gradient` where the same one fits every first backward call,
else what :mod:`gradcheck.checking.diagnose.points` finds across the samples."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ...bounds.tolerance import PATTERN_TOLERANCES, pattern_tolerance
from .elements import array, matches
from .gradient import diagnose, fft_lengths
from .points import Sample, diagnose_points

#: (rtol, atol) by dtype for deciding that a pattern fits: the table is
#: :data:`gradcheck.bounds.tolerance.PATTERN_TOLERANCES` (kept under this name for callers).
TOLERANCES = PATTERN_TOLERANCES


def _names(note: str, name: str) -> bool:
    """``note`` is about ``name``'s gradient."""
    return re.search(rf"(?<![\w.]){re.escape(name)}\.grad\b", note) is not None


def _wrong(s: Sample, name: str, rtol: float, atol: float) -> bool:
    o, e = array(s.obtained.get(name)), array(s.expected.get(name))
    if e is None or o is None:
        return (e is None) != (o is None)
    return o.shape != e.shape or not bool(np.all(matches(o, e, rtol, atol)))


def _shape_of(note: str) -> str:
    """A note with its numbers left out: an arbitrary factor found at two points differs
    in its last digits."""
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", note)


def summarize(samples: list[Sample], dtype: str = "float64", *, reference=(),
              jacobian_right: bool = False, rtol: float | None = None,
              atol: float | None = None, unkept: int = 0, unseen: int = 0,
              jacobians=(), complex=()) -> str:
    """One text for a failing check: for each input, the single-sample pattern
    (:func:`diagnose`) when the same one fits at every first backward call where that
    input is wrong, else :func:`diagnose_points` over all samples (the diagonal of a
    transposed gradient is right, which is no partial error).

    Args:
        samples: one :class:`Sample` per point, v and backward call.
        dtype: the dtype of the obtained gradients, which sets the tolerances (unless
            ``rtol`` and ``atol`` are given).
        reference, jacobian_right, unkept, unseen, jacobians: as for
            :func:`diagnose_points`.
        complex: the names of complex inputs (their gradients in the view_as_real
            layout): read for a missing conjugate or a lost part, their elements named
            by complex index and part.
    """
    d_rtol, d_atol = pattern_tolerance(dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    first = [s for s in samples if not s.repeat]
    ffts = fft_lengths(reference)
    per_sample = [diagnose(s.obtained, {n: e for n, e in s.expected.items() if e is not None},
                           ones_vjp=s.ones, rtol=rtol, atol=atol, complex=complex,
                           ffts=ffts)
                  for s in first]
    names = list(dict.fromkeys(n for s in samples for n in (*s.expected, *s.obtained)))
    accepted: set[str] = set()
    explained: set[str] = set()
    for name in names:
        # A pattern seen at one point only (a guard branch taken everywhere at one
        # extreme point looks like "zero") would not say what is true of the others.
        found = [next((m for m in notes if _names(m, name)), None)
                 for s, notes in zip(first, per_sample) if _wrong(s, name, rtol, atol)]
        if found and found[0] and all(m and _shape_of(m) == _shape_of(found[0])
                                      for m in found):
            accepted.add(found[0])
            explained.add(name)
    notes = [m for m in dict.fromkeys(m for ms in per_sample for m in ms) if m in accepted]
    notes += diagnose_points(
        [dataclasses.replace(s, expected={n: e for n, e in s.expected.items()
                                          if n not in explained}) for s in samples],
        rtol=rtol, atol=atol, reference=reference, jacobian_right=jacobian_right,
        unkept=unkept, unseen=unseen, jacobians=jacobians, complex=complex)
    return "; ".join(dict.fromkeys(notes))
