"""Every tolerance gradcheck judges with, in one place: what a *correct* computation may
err by, per element, for each check; and the looser (rtol, atol) by dtype with which a
diagnosis decides that a pattern fits a wrong gradient.

Every compared element gets its own tolerance, derived from the running rounding-error
analysis (:mod:`gradcheck.bounds.model`): E, the bound of the formula's forward and backward
in the witness's dtype, evaluated at the point. There is no per-tensor scale: a small
element is judged by its own bound, so an error that is large relative to it fails
however large the rest of the gradient is. The table:

================  ==========================================================
check             an element passes when |obtained − expected| <= ...
================  ==========================================================
torch, engine     K·(E_dtype + E_float64)  (the float64 reference errs too)
numeric           SAFETY·(its own error estimate) + K·E_float64
numeric, along    SAFETY·(its own error estimate of uᵀ(vᵀJ)) + K·Σ|u|·E_float64
directions u      + (γ(n) + 1)·u₆₄·Σ|u|·|exact| (the projection of the
                  exact gradient is itself computed in float64)
op.forward,       max(K·(E_dtype + E_float64), PEER·|peer − exact| + u·|exact|):
op.backward,      the peer is PyTorch's autograd of the reference formula in the
op.jacobian       same dtype (FlashAttention's rule: an op may err twice as much
                  as the standard composition, plus rounding at its magnitude);
                  gradients also + nondet_tol
op.double         max(SECOND·K·u·(|exact| + magnitude), PEER·|peer − exact| +
                  u·|exact|) (second order: the magnitude is the same sum with
                  |terms|, the peer torch's double backward of the formula)
op.zero           0: a zero grad_output must give exact zeros
op.determinism,   nondet_tol
op.inplace        0 for inputs and grad_outputs; nondet_tol for a second forward
================  ==========================================================

with K = :data:`BOUND_FACTOR`, PEER = :data:`PEER_FACTOR`, SECOND =
:data:`SECOND_ORDER_FACTOR`, u the dtype's unit roundoff. The numeric witness's own
error estimate counts the rounding of each evaluation of the formula as
:data:`FORWARD_MARGIN` times the forward's running bound taken once for the points
nearby (:mod:`gradcheck.witnesses.numeric`). A user's ``atol``/``rtol``
add ``atol + rtol·|expected|``: they only loosen (:class:`gradcheck.checking.compare.Tally`).

Diagnoses (:mod:`gradcheck.checking.diagnose`) judge "this wrong gradient is minus the exact
one" with :data:`PATTERN_TOLERANCES`: |o − e| <= atol·max(1, max|e|) + rtol·|e|, about
100 units of the dtype's epsilon (float32 arithmetic is off by more than float64's 1e-6
relative where terms cancel), a field of each dtype's record
(:attr:`gradcheck.base.dtypes.Format.pattern`). An approximate float64 result
(:mod:`gradcheck.checking.approximate`) is said to come from a rounded constant where
its errors are at most :data:`CONSTANT_WITHIN` of float32's tolerance and at least
:data:`CONSTANT_BEYOND` times float64's somewhere. They never decide a verdict, only
how it is explained.
"""

from __future__ import annotations

import math

import numpy as np

from ..base.dtypes import FORMATS, info, unit_roundoff
from ..base.evaluation import PROJECTED
from .summation import accumulation

BOUND_FACTOR = 4.0   # K: margin over the first-order bound (its O(u²) terms, libm ulps)
PEER_FACTOR = 2.0    # an op may err this many times PyTorch's own composition
SAFETY = 4.0         # finite differences: times their own error estimate
# Second derivatives are computed through the first ones: sums whose terms are as large
# as the magnitudes, each rounded at the op's dtype, a few roundings deep.
SECOND_ORDER_FACTOR = 4.0
# the numeric witness: a running bound of the forward taken once (at a segment's ends,
# or at the point for its directions) stands for the points nearby
FORWARD_MARGIN = 2.0
# a rounded constant (approximate.py): errors at most this of float32's tolerance...
CONSTANT_WITHIN = 1 / 64
# ...and at least this of float64's somewhere (an error just past float64's tolerance
# is no constant's: the bound is close)
CONSTANT_BEYOND = 16

#: (rtol, atol) with which a diagnosis pattern is said to fit, by the dtype the
#: gradients came in (see the module docstring): read off the dtypes' records.
PATTERN_TOLERANCES = {name: f.pattern for name, f in FORMATS.items()}
PATTERN_RTOL, PATTERN_ATOL = PATTERN_TOLERANCES["float64"]


def pattern_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) of :data:`PATTERN_TOLERANCES` for ``dtype``.

    Raises:
        ValueError: ``dtype`` is not a dtype's name (:func:`gradcheck.base.dtypes.info`).
    """
    return info(dtype).pattern


def model_tolerance(bounds: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """K·(E_dtype + E_float64) per quantity, from the bounds of
    :func:`gradcheck.bounds.model.error_bounds` in ``dtype`` (the float64 reference's own
    rounding is the same bound at float64's unit roundoff)."""
    factor = BOUND_FACTOR * (1.0 + unit_roundoff("float64") / unit_roundoff(dtype))
    return {q: factor * b for q, b in bounds.items()}


def witness_tolerance(dtype: str, bounds, own_error: dict | None) -> dict:
    """The allowed error per quantity of a formula witness (torch, engine, numeric).

    Args:
        bounds: ``dtype -> error bounds`` at this point (:func:`gradcheck.bounds.model.
            error_bounds`), called for the dtypes needed.
        own_error: a witness's bound on its own error (finite differences), or None.
    """
    if own_error is None:
        return model_tolerance(bounds(dtype), dtype)
    f64 = model_tolerance(bounds("float64"), "float64")
    return {q: SAFETY * np.asarray(own_error.get(q, 0.0)) + f64.get(q, 0.0)
            for q in set(f64) | set(own_error)}


def with_projection_rounding(tolerance: dict, got, exact: dict) -> dict:
    """``tolerance`` with, for every quantity ``got`` (an :class:`gradcheck.base.evaluation.
    Evaluation`) measured along directions, the float64 rounding of projecting the
    ``exact`` one on them: each contraction Σᵢ uᵢ·gᵢ of n products errs by at most
    (γ(n) + 1)·u·Σ|uᵢ|·|gᵢ| (one rounding per product, then the blocked sum)."""
    if not got.directions:
        return tolerance
    u = unit_roundoff("float64")
    size = got.project({q: exact[q] for q in got.directions if q in exact}, absolute=True)
    out = dict(tolerance)
    for q, s in size.items():
        if s is None:
            continue
        n = math.prod(got.directions[q.removesuffix(PROJECTED)].shape[1:])
        s = np.asarray(s, dtype=float)
        if not np.isfinite(s).all():   # (|U|·|exact| of a finite reference: finite)
            s = np.nan_to_num(s, nan=0.0, posinf=0.0)
        out[q] = out.get(q, 0.0) + (accumulation(n) + 1.0) * u * s
    return out


def with_nondeterminism(model: dict, nondet_tol: float) -> dict:
    """``model`` with every gradient (``*.grad``) loosened by ``nondet_tol``: a backward
    allowed to differ from itself by that much (atomics, reduction order) may differ
    from the exact one by as much as well."""
    return {q: b + (nondet_tol if q.endswith(".grad") else 0.0) for q, b in model.items()}


def peer_tolerance(model: dict, peer: dict, exact: dict, dtype: str) -> dict:
    """max(model, PEER·|peer − exact| + u·|exact|) per quantity (op.forward/backward)."""
    u = unit_roundoff(dtype)
    out = dict(model)
    for q, e in exact.items():
        p = peer.get(q)
        if e is None or p is None or np.shape(p) != np.shape(e):
            continue
        with np.errstate(all="ignore"):
            e = np.asarray(e, dtype=float)
            rule = np.nan_to_num(PEER_FACTOR * np.abs(np.asarray(p, dtype=float) - e)
                                 + u * np.abs(e), nan=0.0, posinf=0.0)
        out[q] = np.maximum(out[q], rule) if q in out else rule
    return out


def second_order_tolerance(expected: dict, magnitude: dict, dtype: str) -> dict:
    """SECOND·K·u·(|exact| + magnitude) per quantity of op.double, ``magnitude`` being
    the same second derivatives with every term taken by its absolute value."""
    u = unit_roundoff(dtype)
    return {q: BOUND_FACTOR * SECOND_ORDER_FACTOR * u * (np.abs(e) + magnitude[q])
            for q, e in expected.items()}
