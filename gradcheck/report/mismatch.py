"""The one description of a witness that did not pass: :func:`describe` turns a
:class:`~gradcheck.base.result.WitnessResult` into a :class:`Mismatch` (its worst element,
obtained against expected within what tolerance, the counts, the message and the
diagnosis), and every report renders that: the text report and the GitHub annotations
(:meth:`Element.line`), the Markdown table (the same line, in a cell), the JUnit body and
the pytest plugin (:meth:`Mismatch.lines`), the assertion of :mod:`gradcheck.testing`
(:meth:`Mismatch.summary` and :func:`table`) and a tally's own message
(:func:`witness_message`).

Everything here returns raw text (names and messages as the case file wrote them); each
renderer escapes for its own format (:mod:`gradcheck.report.scrub` for control
characters). Nothing here imports the rest of the package beyond the result types and
the scrubber's :func:`~gradcheck.report.scrub.split_lines` (what a line is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..base.dtypes import info
from ..base.result import (APPROXIMATE, ERROR, FAILED, INCONCLUSIVE, PASSED, SKIPPED,
                           element_name)
from .scrub import split_lines

#: what follows the error/tolerance of a witness that failed, in every report
FAILED_MARK = "✗"
#: and of one that is approximate (within float32's tolerance, not float64's)
APPROX_MARK = "≈"


def element_error(obtained: float, expected: float) -> float:
    """|obtained - expected| as the comparison counts it: no difference where they are
    equal (the same infinity) or both NaN, an infinite one where only one is NaN."""
    if obtained == expected or (obtained != obtained and expected != expected):
        return 0.0
    diff = abs(obtained - expected)
    return diff if diff == diff else math.inf


def tolerances_off(obtained: float, expected: float, tolerance: float) -> float:
    """How many tolerances ``obtained`` is from ``expected`` (:func:`element_error` over
    ``tolerance``; a zero tolerance: infinite unless the two agree)."""
    err = element_error(obtained, expected)
    return err / tolerance if tolerance > 0 else (math.inf if err else 0.0)


def shown_error(w) -> str:
    """A witness's verdict in a report's error column, the same in every report: its
    worst element's error against that element's tolerance, ``3.6e-07/1.0e-06`` (the
    element furthest outside, or closest to, its tolerance: the verdict's element, not
    the largest relative error, which a tolerance of its own may allow), with
    :data:`FAILED_MARK` after it when the witness failed (``3.1e-05/1.2e-07 ✗``),
    :data:`APPROX_MARK` when it is approximate (``7.2e-12/4.6e-14 ≈``: float64's
    tolerance exceeded, float32's not). Otherwise ``error``, ``skip`` (did not run in
    this dtype), ``✗`` (failed on no element: a shape, a None gradient) or ``-``
    (nothing compared)."""
    if w.status == ERROR:
        return "error"
    if w.status == SKIPPED:
        return "skip"
    if w.status == INCONCLUSIVE:   # measured, but could not settle: fails nothing
        return "inconclusive"
    mark = (f" {FAILED_MARK}" if w.status == FAILED else
            f" {APPROX_MARK}" if w.status == APPROXIMATE else "")
    if w.worst is None:
        return FAILED_MARK if w.status == FAILED else "-"
    err = element_error(w.worst.obtained, w.worst.expected)
    return f"{err:.1e}/{w.worst.tolerance:.1e}{mark}"


@dataclass(frozen=True)
class Element:
    """One compared element, furthest outside (or closest to) its tolerance."""

    quantity: str
    index: tuple[int, ...]
    point: int
    obtained: float
    expected: float
    tolerance: float
    part: str | None = None        # of a complex quantity: "real" or "imaginary"

    @classmethod
    def of(cls, worst) -> "Element | None":
        """From a :class:`~gradcheck.base.result.Worst` (None stays None)."""
        if worst is None:
            return None
        return cls(worst.quantity, tuple(worst.index), worst.point, worst.obtained,
                   worst.expected, worst.tolerance, worst.part)

    @property
    def label(self) -> str:
        """As every report names an element (:func:`~gradcheck.base.result.element_name`)."""
        return element_name(self.quantity, self.index, self.part)

    @property
    def error(self) -> float:
        """|obtained - expected| (:func:`element_error`)."""
        return element_error(self.obtained, self.expected)

    @property
    def outside(self) -> bool:
        """Beyond its tolerance: a mismatch, not merely the closest call."""
        return self.error > self.tolerance

    def line(self) -> str:
        """``x.grad[1,2] at point 2: obtained 0.5, expected -0.5, tolerance 1e-07``."""
        return (f"{self.label} at point {self.point}: obtained {self.obtained:.10g}, "
                f"expected {self.expected:.10g}, tolerance {self.tolerance:.3g}")

    def block(self) -> list[str]:
        """The element one fact a line, every digit of the values (for CI logs)."""
        return [f"  worst element: {self.label}",
                f"    quantity:  {self.quantity}",
                f"    index:     [{', '.join(map(str, self.index))}]",
                *([f"    part:      {self.part}"] if self.part else []),
                f"    point:     {self.point}",
                f"    obtained:  {self.obtained:.17g}",
                f"    expected:  {self.expected:.17g}",
                f"    error:     {self.error:.3g}",
                f"    tolerance: {self.tolerance:.3g}"]

    def row(self, witness: str) -> tuple[str, ...]:
        """A row of :func:`table`."""
        return (self.label, f"{self.obtained:.10g}", f"{self.expected:.10g}", witness,
                str(self.point))


@dataclass(frozen=True)
class Mismatch:
    """What a report says about one witness that did not pass."""

    witness: str
    status: str
    message: str
    diagnosis: str
    worst: Element | None
    elements: tuple[Element, ...]        # the worst few, worst first
    checked: int
    mismatched: int
    max_abs_err: float
    max_rel_err: float
    grad_fn: tuple[str, ...] | None

    @property
    def worst_line(self) -> str:
        """:meth:`Element.line` of the worst element, ``""`` when there is none."""
        return self.worst.line() if self.worst is not None else ""

    @property
    def outside(self) -> tuple[Element, ...]:
        """The worst elements that are mismatches."""
        return tuple(e for e in self.elements if e.outside)

    def explanation(self) -> str:
        """The message and the diagnosis, one a line (either may be absent)."""
        return "\n".join(filter(None, [self.message, self.diagnosis]))

    def summary(self) -> list[str]:
        """pytest-approx's account, indented under the failure's title: the mismatched
        elements and the largest differences (or the message when no element was
        compared wrong), then the diagnosis."""
        if self.mismatched and self.checked:
            out = [f"  {self.witness}: Mismatched elements: {self.mismatched} / "
                   f"{self.checked}",
                   f"    Max absolute difference: {self.max_abs_err:.6g}",
                   f"    Max relative difference: {self.max_rel_err:.6g}"]
        else:
            out = [f"  {self.witness}: {self.message or self.status}"]
        if self.diagnosis:
            out.append(f"    diagnosis: {self.diagnosis}")
        return out

    def lines(self) -> list[str]:
        """Everything known about the witness, one item a line (a CI log's body)."""
        out = [f"witness {self.witness}: {self.status}"]
        out += _hanging("  message: ", self.message)
        if self.worst is not None:
            out += self.worst.block()
        if self.checked:
            out.append(f"  mismatched: {self.mismatched} / {self.checked} elements; "
                       f"max abs err {self.max_abs_err:.3g}, max rel err "
                       f"{self.max_rel_err:.3g}")
        out += _hanging("  diagnosis: ", self.diagnosis)
        if self.grad_fn is not None:
            out.append(f"  grad_fn: {chain(self.grad_fn)}")
        return out


def describe(w) -> Mismatch:
    """The :class:`Mismatch` of a :class:`~gradcheck.base.result.WitnessResult`."""
    return Mismatch(w.witness, w.status, str(w.message or ""), str(w.diagnosis or ""),
                    Element.of(w.worst),
                    tuple(Element.of(e) for e in w.worst_elements), w.checked,
                    w.mismatched, w.max_abs_err, w.max_rel_err, w.grad_fn)


def failing(witnesses) -> list[Mismatch]:
    """The :class:`Mismatch` of every witness that failed or errored (a skipped one did
    not run: not a problem)."""
    return [describe(w) for w in witnesses
            if w.status not in (PASSED, SKIPPED, INCONCLUSIVE)]


def table(mismatches) -> list[str]:
    """An aligned table of every worst element outside its tolerance, across
    ``mismatches``: Index | Obtained | Expected | Witness | Point (no lines when none)."""
    rows = [e.row(m.witness) for m in mismatches for e in m.outside]
    if not rows:
        return []
    head = ("Index", "Obtained", "Expected", "Witness", "Point")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    return ["  " + " | ".join(c.ljust(n) for c, n in zip(r, widths))
            for r in [head, *rows]]


def witness_message(worst, mismatched: int, checked: int, dtype: str = "") -> str:
    """A tally's message when elements differ and nothing else was wrong (in a low
    precision, with :func:`margin`)."""
    e = Element.of(worst)
    return (f"{mismatched} / {checked} elements differ; worst {e.label} at point "
            f"{e.point}: got {e.obtained:.10g}, expected {e.expected:.10g} "
            f"(|diff| {abs(e.obtained - e.expected):.3g} > tol {e.tolerance:.3g})"
            + (f"; {margin(e, dtype)}" if margin(e, dtype) else ""))


#: the dtypes whose worst element near its tolerance is said with its margin
LOW_PRECISION = ("float16", "bfloat16")
NEAR = 16.0   # tolerances within which an element counts as near its tolerance
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def margin(e: Element | None, dtype: str) -> str:
    """How far past its tolerance a low-precision element caught near it is, and the
    tolerance in units of the dtype's rounding of the expected value: ``1.4× the
    tolerance; the tolerance there is 23·u·|expected|, u = 2⁻⁸ (bfloat16's unit
    roundoff)``; "" elsewhere. (The tolerance is a correct computation's rounding-error
    bound at that element: many u·|expected| where many terms are summed, or terms
    larger than their sum.)"""
    if e is None or dtype not in LOW_PRECISION:
        return ""
    off = tolerances_off(e.obtained, e.expected, e.tolerance)
    if not 1.0 < off <= NEAR:
        return ""
    p = info(dtype).precision
    text = f"{off:.2g}× the tolerance"
    if e.expected and math.isfinite(e.expected):
        units = e.tolerance / (math.ldexp(1.0, -p) * abs(e.expected))
        text += (f"; the tolerance there is {units:.3g}·u·|expected|, u = 2"
                 f"{str(-p).translate(_SUPERSCRIPT)} ({dtype}'s unit roundoff)")
        if units > 100:
            text += (": the terms that make it up are far larger than it, or many "
                     "(cancellation, a long sum)")
    return text


def chain(names) -> str:
    """A grad_fn graph's node names, depth first, as one line."""
    return " <- ".join(names) if names else "-"


def _hanging(head: str, text: str) -> list[str]:
    """``text`` under ``head``, its later lines indented to line up with the first."""
    return [(head if i == 0 else " " * len(head)) + line
            for i, line in enumerate(split_lines(text))] if text else []
