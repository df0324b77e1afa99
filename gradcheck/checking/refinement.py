"""Finite differences measured again where they disagree, and *inconclusive* where they
cannot settle.

The numeric witness's error estimate (Richardson's |R(h) − R(2h)| plus the rounding
bound over the step, :mod:`gradcheck.witnesses.numeric`) assumes f is smooth on the scale
of its steps. Where it is not (a kink or a tie within reach of a step of 0.1% of
max(1, |x|), a sort over many keys whose order a direction's step reshuffles, exp of a
large argument oscillating faster than the step: sin(44)·44), the estimate can be wrong
by more than it says, and a right gradient would fail against it.

So a point where the numeric witness disagrees is measured again at relative steps
``STEP / 4`` and ``STEP / 16``:

- where a finer measurement agrees with the reference (within its own error bound),
  the witness agrees at that point: the default step could not resolve it, a finer one
  did (a note says so);
- where the three measurements agree with one another within their bounds, and not with
  the reference, the disagreement stands: finite differences are telling the same thing
  at every scale (a wrong forward, a wrong reference);
- otherwise the measurements do not settle (they move beyond their own bounds as the
  step shrinks) and the point is *inconclusive* for this witness: not counted, with a
  note naming the quantities. A witness inconclusive at every point it measured has
  the status ``inconclusive``, which, like ``skipped``, fails no case: a case whose only
  disagreeing witness is inconclusive passes on the others.
"""

from __future__ import annotations

import numpy as np

#: the finer relative steps tried, as divisors of the default one
FINER = (4, 16)


def _settled(runs: list, wrong: dict) -> bool:
    """Whether the measurements ``runs`` (Evaluations at ever finer steps) agree with one
    another within their own error bounds at the elements ``wrong`` (quantity -> mask
    of the elements that disagreed with the reference)."""
    for a, b in zip(runs, runs[1:]):
        qa, qb = a.quantities(), b.quantities()
        for q, mask in wrong.items():
            x, y = qa.get(q), qb.get(q)
            if x is None or y is None:
                continue
            ea = np.asarray((a.error or {}).get(q, 0.0), dtype=float)
            eb = np.asarray((b.error or {}).get(q, 0.0), dtype=float)
            with np.errstate(all="ignore"):
                off = ~(np.abs(np.asarray(x, float) - np.asarray(y, float)) <= ea + eb)
            if np.any(np.broadcast_to(off, np.shape(mask)) & mask):
                return False
    return True


def refine(measure, agrees, wrong: dict, got, reached) -> tuple[str, object | None]:
    """Judge a numeric measurement ``got`` that disagreed with the reference at the
    elements ``wrong`` (quantity -> mask).

    ``measure(step)`` measures the point again at a relative step; ``agrees(evaluation)``
    whether an evaluation agrees with the reference everywhere; ``reached(step)`` the
    kinks and ties the steps of that relative size can reach (a difference straddling
    one is steady at every step and measures no derivative). Returns ``("agreed",
    evaluation)`` (a finer step agrees: count that one), ``("disagreed", None)`` (the
    measurements agree with one another there, not with the reference, and no kink is
    within the finest steps' reach) or ``("unsettled", rows)``."""
    from ..witnesses.numeric import STEP

    runs = [got]
    for k in FINER:
        finer = measure(STEP / k)
        if agrees(finer):
            return "agreed", finer
        runs.append(finer)
    if not _settled(runs, wrong):
        return "unsettled", None
    rows = reached(STEP / FINER[-1])
    return ("unsettled", rows) if rows else ("disagreed", None)


def refined(measure, tolerance, case, values: dict, trial, got, expected, i: int,
            tol: dict) -> tuple:
    """A numeric witness's disagreement at point ``i`` (``trial``, its tally there),
    judged by :func:`refine`: ``(tally, note)``, the tally to count (a finer step's
    agreement, or the disagreement every step confirms), None where the measurements do
    not settle (the point inconclusive); ``measure(step)`` measures again,
    ``tolerance(evaluation)`` its tolerances; ``tol`` those of ``got``."""
    from .decisions import within_steps

    found: dict = {}

    def agrees(finer) -> bool:
        again = trial.fresh()
        again.add(finer, expected, i, tolerance(finer))
        found["tally"] = again
        return not again.mismatched

    exact = got.project(expected.quantities())
    wrong = {}
    with np.errstate(all="ignore"):
        for q, g in got.quantities().items():
            if g is not None and exact.get(q) is not None:
                wrong[q] = ~(np.abs(np.asarray(g, float) - np.asarray(exact[q], float))
                             <= np.asarray(tol.get(q, 0.0)))
    verdict, rows = refine(measure, agrees, wrong, got,
                           lambda step: within_steps(case, values, step))
    w = trial.witness
    if verdict == "agreed":
        return found["tally"], (f"{w}'s finite differences at the default step could "
                                "not resolve the derivative there; at a finer step they "
                                "agree")
    if verdict == "disagreed":
        return trial, None
    why = ("steps 1e-3, 2.5e-4 and 6.25e-5 relative move them beyond their own error "
           "bounds: a kink, a tie or an oscillation within reach" if not rows else
           "even the finest steps reach a switch of " + ", ".join(
               f"{node.op} ({count} element{'s' * (count != 1)}, exact margin "
               f"{margin:.3g})" for node, count, margin in rows))
    worst = trial.worst
    return None, (f"{w}'s finite differences do not settle there ({why}), so the point "
                  f"is inconclusive for {w} and not counted (worst {worst.label}: got "
                  f"{worst.obtained:.6g}, expected {worst.expected:.6g})")
