"""What a wrong gradient looks like: short explanations of simple error shapes.

:func:`diagnose` compares the gradient an op returned for each input (its vector-Jacobian
product) with the exact one and names the pattern the error follows, when one does: a
flipped sign, a constant factor (a mean for a sum, an FFT's normalisation), the gradient
of another input, a transpose, broadcasting not summed back, ``grad_output`` ignored,
``None`` where a gradient is needed (or the reverse), and of a complex input (its
gradient in the view_as_real layout, a last axis of (re, im)) a missing conjugate or one
part alone. :func:`diagnose_points` looks across all the :class:`Sample` s of a check
(points, cotangents, repeated backward calls) for what the errors have in common: only
repeated calls wrong, NaN/inf where the exact gradient is finite, a right Jacobian but a
wrong dense vᵀJ, the same few indices wrong at every point, a small constant relative
error, the wrong elements exactly one side of a branch condition of the reference, or
exactly beyond a magnitude of an input; failing all, how much is right.
:func:`summarize` combines the two for a report.

Elements are compared as in :mod:`gradcheck.checking.compare`: ``|o - e| <= atol * scale + rtol *
|e|`` with ``scale = max(1, max |e|)`` and (rtol, atol) from
:data:`gradcheck.bounds.tolerance.PATTERN_TOLERANCES`. A pattern is reported only when it holds
for every element and is distinguishable from the exact gradient: the sign of a zero
gradient, the transpose of a symmetric matrix or the swap of two equal gradients are not
errors. Across samples, an element counts as evidence that a gradient is right only where
the exact gradient is clearly non-zero (any wrong factor matches a zero).

The package: :mod:`~gradcheck.checking.diagnose.gradient` (one point; its complex
readings in :mod:`~gradcheck.checking.diagnose.parts`),
:mod:`~gradcheck.checking.diagnose.points` (across samples), :mod:`~gradcheck.checking.diagnose.summary`
(the two for a report) and :mod:`~gradcheck.checking.diagnose.elements` (what they share).
"""

from __future__ import annotations

from .gradient import PATTERNS, diagnose
from .points import KEPT_POINTS, POINT_PATTERNS, Kept, Sample, allowed, diagnose_points
from .summary import TOLERANCES, summarize

__all__ = ["KEPT_POINTS", "Kept", "PATTERNS", "POINT_PATTERNS", "Sample", "TOLERANCES",
           "allowed", "diagnose", "diagnose_points", "summarize"]
