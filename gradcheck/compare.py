"""Comparison of a witness with the symbolic reference: tolerances, error metrics and
the worst element.

Every compared element gets its own tolerance, derived from what a *correct*
computation can err by (:mod:`gradcheck.rounding`): E, the running rounding-error bound
of the formula's forward and backward in the witness's dtype, evaluated at the point.
There is no per-tensor scale: a small element is judged by its own bound, so an error
that is large relative to it fails however large the rest of the gradient is. The
table, one place:

================  ==========================================================
check             an element passes when |obtained − expected| <= ...
================  ==========================================================
torch, engine     K·(E_dtype + E_float64)  (the float64 reference errs too)
numeric           SAFETY·(its own error estimate) + K·E_float64
op.forward,       max(K·(E_dtype + E_float64), PEER·|peer − exact| + u·|exact|):
op.backward,      the peer is PyTorch's autograd of the reference formula in the
op.jacobian       same dtype (FlashAttention's rule: an op may err twice as much
                  as the standard composition, plus rounding at its magnitude);
                  gradients also + nondet_tol
op.double         max(4K·u·(|exact| + magnitude), PEER·|peer − exact| + u·|exact|)
                  (second order: the magnitude is the same sum with |terms|, the
                  peer torch's double backward of the formula)
op.zero           0: a zero grad_output must give exact zeros
op.determinism,   nondet_tol
op.inplace        0 for inputs and grad_outputs; nondet_tol for a second forward
================  ==========================================================

with K = :data:`BOUND_FACTOR`, PEER = :data:`PEER_FACTOR`, u the dtype's unit
roundoff. A user's ``atol``/``rtol`` add ``atol + rtol·|expected|``: they only loosen.
"""

from __future__ import annotations

import numpy as np

from .dtypes import max_finite, unit_roundoff
from .evaluation import Evaluation
from .result import FAILED, PASSED, Worst, WitnessResult

BOUND_FACTOR = 4.0   # K: margin over the first-order bound (its O(u²) terms, libm ulps)
PEER_FACTOR = 2.0    # an op may err this many times PyTorch's own composition
SAFETY = 4.0         # finite differences: times their own error estimate
WORST_KEPT = 5       # worst elements a result keeps for its report


def model_tolerance(bounds: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """K·(E_dtype + E_float64) per quantity, from the bounds of
    :func:`gradcheck.rounding.error_bounds` in ``dtype`` (the float64 reference's own
    rounding is the same bound at float64's unit roundoff)."""
    factor = BOUND_FACTOR * (1.0 + unit_roundoff("float64") / unit_roundoff(dtype))
    return {q: factor * b for q, b in bounds.items()}


def witness_tolerance(dtype: str, bounds, own_error: dict | None) -> dict:
    """The allowed error per quantity of a formula witness (torch, engine, numeric).

    Args:
        bounds: ``dtype -> error bounds`` at this point (:func:`gradcheck.rounding.
            error_bounds`), called for the dtypes needed.
        own_error: a witness's bound on its own error (finite differences), or None.
    """
    if own_error is None:
        return model_tolerance(bounds(dtype), dtype)
    f64 = model_tolerance(bounds("float64"), "float64")
    return {q: SAFETY * np.asarray(own_error.get(q, 0.0)) + f64.get(q, 0.0)
            for q in set(f64) | set(own_error)}


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


class Tally:
    """Accumulates one witness's comparisons over all points into a WitnessResult."""

    def __init__(self, witness: str, dtype: str, atol: float | None = None,
                 rtol: float | None = None):
        self.witness, self.dtype = witness, dtype
        self.atol, self.rtol = atol or 0.0, rtol or 0.0
        self.max_abs = self.max_rel = 0.0
        self.checked = self.mismatched = 0
        self.top: list[tuple[float, Worst]] = []   # (|diff| / tol, element), worst first
        self.problems: list[str] = []
        self.grad_fn: tuple[str, ...] | None = None

    def add(self, got: Evaluation, ref: Evaluation, point: int,
            tolerance: dict[str, np.ndarray]) -> None:
        if got.grad_fn is not None and self.grad_fn is None:
            self.grad_fn = got.grad_fn
        self.add_quantities(got.quantities(), ref.quantities(), point, tolerance)

    def add_quantities(self, obtained: dict, expected_all: dict, point: int,
                       tolerance: dict | None = None) -> None:
        """Compare ``obtained`` with ``expected_all`` quantity by quantity (by name),
        each element allowed ``tolerance[quantity]`` (absolute, per element; 0 where
        absent) plus the user's ``atol + rtol·|expected|``."""
        tolerance = tolerance or {}
        for quantity, expected in expected_all.items():
            value = obtained.get(quantity)
            if expected is None:  # no differentiable path: .grad must stay None
                if value is not None:
                    self.mismatched += 1
                    self.problems.append(f"{quantity} should be None: no differentiable "
                                         "path reaches the output")
                continue
            if value is None:
                if quantity != "value":
                    self.mismatched += 1
                    self.problems.append(f"{quantity} is None")
                continue
            self._compare(quantity, np.asarray(value, dtype=float),
                          np.asarray(expected, dtype=float), tolerance.get(quantity, 0.0),
                          point)

    def _compare(self, quantity, value, expected, allowed, point) -> None:
        if value.shape != expected.shape:
            self.mismatched += 1
            self.problems.append(f"{quantity} has shape {list(value.shape)}, expected "
                                 f"{list(expected.shape)}")
            return
        if expected.size == 0:
            return
        tol = np.asarray(allowed, dtype=float) + self.atol + self.rtol * np.abs(expected)
        with np.errstate(all="ignore"):
            diff = np.abs(value - expected)
            diff = np.where(np.isnan(diff) & ~(np.isnan(value) & np.isnan(expected)),
                            np.inf, np.nan_to_num(diff, nan=0.0, posinf=np.inf))
            # An exact value beyond the dtype's range is computed as inf of its sign:
            # that is the right answer in that dtype, not a mismatch.
            beyond = np.abs(expected) > max_finite(self.dtype)
            diff = np.where(beyond & (value == np.sign(expected) * np.inf), 0.0, diff)
            # The reported relative error (a statistic, not the verdict) skips elements
            # that are zero up to rounding against the quantity's largest.
            scale = max(1.0, float(np.max(np.abs(expected))))
            meaningful = np.abs(expected) > 1e-12 * scale
            rel = np.where(meaningful, diff / np.where(meaningful, np.abs(expected), 1), 0.0)
            ratio = np.where(tol > 0, diff / tol, np.where(diff > 0, np.inf, 0.0))
        bad = ratio > 1
        self.checked += expected.size
        self.mismatched += int(bad.sum())
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.max_rel = max(self.max_rel, float(rel.max()))
        tol = np.broadcast_to(tol, expected.shape)
        flat = ratio.reshape(-1)
        top = np.argsort(-flat, kind="stable")[:WORST_KEPT]
        for k in top:
            idx = tuple(int(i) for i in np.unravel_index(int(k), expected.shape))
            self.top.append((float(flat[k]), Worst(quantity, idx, float(value.flat[k]),
                                                   float(expected.flat[k]),
                                                   float(tol.flat[k]), point)))
        self.top.sort(key=lambda pair: -pair[0])
        del self.top[WORST_KEPT:]

    @property
    def worst(self) -> Worst | None:
        return self.top[0][1] if self.top else None

    def result(self) -> WitnessResult:
        status = FAILED if self.mismatched else PASSED
        message = "; ".join(dict.fromkeys(self.problems))
        if self.mismatched and not message:
            w = self.worst
            message = (f"{self.mismatched} / {self.checked} elements differ; worst "
                       f"{w.quantity}[{','.join(map(str, w.index))}] at point {w.point}: "
                       f"got {w.obtained:.10g}, expected {w.expected:.10g} "
                       f"(|diff| {abs(w.obtained - w.expected):.3g} > tol {w.tolerance:.3g})")
        return WitnessResult(self.witness, status, self.max_abs, self.max_rel, self.worst,
                             self.checked, self.mismatched, self.grad_fn, message,
                             worst_elements=tuple(w for _, w in self.top))
