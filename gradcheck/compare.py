"""Comparison of a witness with the symbolic reference: tolerances, error metrics and
the worst element.

Tolerances are one table, keyed by witness and dtype (section 6 of DESIGN.md). An element
passes when ``|obtained - expected| <= atol * scale + rtol * |expected|``, where
``scale = max(1, max |expected|)`` over that quantity, so elements that cancel to
near zero inside a large gradient are judged against the gradient's magnitude. A witness
that bounds its own error (finite differences) is allowed ``SAFETY`` times that bound
plus :data:`FLOOR` times ``scale``; a user's ``atol``/``rtol`` only ever loosen that.
"""

from __future__ import annotations

import numpy as np

from .evaluation import Evaluation
from .result import FAILED, PASSED, Worst, WitnessResult

#: (rtol, atol) by witness and dtype; float32 runs are compared with the float64
#: reference evaluated at the float32-rounded point, so only arithmetic error counts.
TOLERANCES: dict[tuple[str, str], tuple[float, float]] = {
    ("torch", "float64"): (1e-7, 1e-10),
    ("torch", "float32"): (1e-4, 1e-5),
    ("engine", "float64"): (1e-7, 1e-10),
    ("engine", "float32"): (1e-4, 1e-5),
    ("numeric", "float64"): (0.0, 0.0),
    ("numeric", "float32"): (0.0, 0.0),
}
SAFETY = 4.0
FLOOR = 1e-9
WORST_KEPT = 5     # worst elements a result keeps for its report


class Tally:
    """Accumulates one witness's comparisons over all points into a WitnessResult."""

    def __init__(self, witness: str, dtype: str, atol: float | None, rtol: float | None):
        self.witness = witness
        self.rtol, self.atol = TOLERANCES.get((witness, dtype), (1e-7, 1e-10))
        if rtol is not None:
            self.rtol = max(self.rtol, rtol) if witness == "numeric" else rtol
        if atol is not None:
            self.atol = max(self.atol, atol) if witness == "numeric" else atol
        self.max_abs = self.max_rel = 0.0
        self.checked = self.mismatched = 0
        self.top: list[tuple[float, Worst]] = []   # (|diff| / tol, element), worst first
        self.problems: list[str] = []
        self.grad_fn: tuple[str, ...] | None = None

    def add(self, got: Evaluation, ref: Evaluation, point: int) -> None:
        if got.grad_fn is not None and self.grad_fn is None:
            self.grad_fn = got.grad_fn
        self.add_quantities(got.quantities(), ref.quantities(), point, got.error)

    def add_quantities(self, obtained: dict, expected_all: dict, point: int,
                       bounds: dict | None = None) -> None:
        """Compare ``obtained`` with ``expected_all`` quantity by quantity (by name)."""
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
                          np.asarray(expected, dtype=float),
                          None if bounds is None else bounds.get(quantity), point)

    def _compare(self, quantity, value, expected, bound, point) -> None:
        if value.shape != expected.shape:
            self.mismatched += 1
            self.problems.append(f"{quantity} has shape {list(value.shape)}, expected "
                                 f"{list(expected.shape)}")
            return
        if expected.size == 0:
            return
        scale = max(1.0, float(np.max(np.abs(expected))))
        tol = self.atol * scale + self.rtol * np.abs(expected)
        if bound is not None:
            tol = tol + SAFETY * np.asarray(bound, dtype=float) + FLOOR * scale
        with np.errstate(all="ignore"):
            diff = np.abs(value - expected)
            diff = np.where(np.isnan(diff) & ~(np.isnan(value) & np.isnan(expected)),
                            np.inf, np.nan_to_num(diff, nan=0.0, posinf=np.inf))
            # Relative error where it means something: elements that are zero up to
            # rounding against the quantity's scale are judged by the absolute error.
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
