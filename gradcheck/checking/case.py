"""Checking one case in one dtype: samples its points, evaluates the symbolic reference
and every witness of the registry (:mod:`gradcheck.witnesses.registry`), and tallies the
comparisons into a :class:`~gradcheck.base.result.CaseResult`. A case that raises becomes an
``error`` result (or, for an op that raised, that op's failure); nothing here raises for
a case's sake.

This is the one definition of how a case is run: a serial run, the worker processes of
``--jobs``, Dask workers and the pytest plugin all call :func:`run_case`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback
from pathlib import Path

import numpy as np

from ..cases.memory import check_case
from ..process.budgets import exhausted
from ..project.imports import OpImportError
from ..cases import Case
from .compare import Tally
from .spared import NUMERIC, reason as spared_reason, spared
from .diagnose import Kept, Sample, allowed
from ..base.dtypes import round_to
from ..base.errors import CaseFileError, GradcheckError, describe_exception, exception_text
from .approximate import JUDGED, LOOSE
from ..base.result import ERROR, FAILED, INCONCLUSIVE, PASSED, SKIPPED, CaseResult, WitnessResult
from ..sampling.points import case_points, case_rng, for_formula
from ..process.timelimit import DEFAULT_TIMEOUT, CaseTimeout, time_limit
from .verdicts import grad_fn_parity, strictly, verdict
from ..witnesses.registry import REFERENCE, entry, skip_reason, witness

__all__ = ["run_case", "op_failure", "file_error", "cotangent", "case_base",
           "OP_RAISED", "OP_CRASHED", "TIMEOUT", "DEFAULT_TIMEOUT"]

# CaseResult.error_kind beyond "case" (a bad case file or op import) and "internal" (a
# bug in gradcheck): an op that raised is a failure of that op, as a wrong gradient is
# (status failed, or caught for expect = "fail"); a case past its time limit is an error
# of its own kind, neither the case file's fault nor gradcheck's.
OP_RAISED, OP_CRASHED, TIMEOUT = "op raised", "op crashed", "timeout"

def case_base(case: Case, dtype: str) -> dict:
    """The fields every result of ``case`` in ``dtype`` starts from."""
    return dict(name=case.name, file=case.file, line=case.line, dtype=dtype,
                expect=case.expect, points=case.points, seed=case.seed)


def cotangent(case: Case, dtype: str, index: int) -> np.ndarray:
    """The v of ``y.backward(v)`` at point ``index`` (1 for a scalar case)."""
    shape = case.output.shape
    if isinstance(case.gradient, np.ndarray):
        v = case.gradient
    elif case.gradient == "random":
        v = case_rng(case, dtype, index, "gradient").standard_normal(shape)
    else:  # "scalar" or "ones"
        v = np.ones(shape)
    return round_to(v, dtype)   # the v the witness's tensor holds, exactly


def _bounds_at(case: Case, point: dict, v: np.ndarray, heap, at, watch=None):
    """``dtype -> rounding-error bounds`` at one point, each computed once (inside
    ``heap``, a context of :func:`_heap`); ``at``: the point's
    :class:`gradcheck.bounds.point.PointBounds`, which keeps the forward bound for a
    witness that reads it; ``watch`` (a :class:`gradcheck.sampling.overflow.Watch`)
    sees the backward of its own dtype's."""
    from ..bounds.point import error_bounds

    found: dict = {}

    def bounds(dtype: str) -> dict:
        if dtype not in found:
            seen = watch if watch is not None and watch.dtype == dtype else None
            with heap():
                found[dtype] = error_bounds(case, point, v, dtype, watch=seen, at=at)
        return found[dtype]

    return bounds


def _projected(bounds, got):
    """``dtype -> bounds`` of the quantities as ``got`` compares them: a projection
    Σ uᵢ·gᵢ errs by at most Σ |uᵢ|·Eᵢ (:meth:`gradcheck.base.evaluation.Evaluation.project`)."""
    return lambda dtype: got.project(bounds(dtype), absolute=True)


def _reference(case: Case, cache: dict):
    from ..reference import Reference

    if id(case) not in cache:
        cache[id(case)] = Reference(case)
    return cache[id(case)]


#: Half precisions, where a case with a complex input is skipped, and why.
HALF = ("float16", "bfloat16")
COMPLEX_HALF = ("skipped in half precision: the case has a complex input, and torch's "
                "complex32 has no autograd coverage to compare with (float32 checks "
                "complex64, float64 complex128)")


def run_case(case: Case, dtype: str, *, cache: dict | None = None,
             timeout: float | None = DEFAULT_TIMEOUT, formulas: bool = True) -> CaseResult:
    """Check ``case`` in ``dtype``: every witness against the symbolic reference.

    ``cache`` keeps each case's reference (by the case object's identity) for its other
    dtypes; ``timeout`` (seconds, None: none) bounds the whole check. ``formulas``: the
    result holds the exact gradients as formulas (:attr:`CaseResult.gradients`) even
    where the case passed; a case that did not pass holds them always. Printing them is
    a twentieth of a small layer's check, and only the text report with -v and the JSON
    report show them for a case that passed."""
    start = time.perf_counter()
    base = case_base(case, dtype)
    cache = {} if cache is None else cache
    if case.device != "cpu" and not _device_present(case.device):
        return CaseResult(**base, status=SKIPPED, seconds=time.perf_counter() - start,
                          message=f"device = {case.device!r}, but no such device is "
                                  "present here")
    if dtype in HALF and any(spec.complex for spec in case.inputs):
        return CaseResult(**base, status=SKIPPED, seconds=time.perf_counter() - start,
                          message=COMPLEX_HALF)
    check = _FormulaCheck(case, dtype)
    if case.op is not None:   # (torch.compile's first compile, once per judge: no case's
        from .opcheck.compiled import warm   # time, so before the limit starts)
        warm(case)
    try:
        with time_limit(timeout):
            check_case(case)   # its memory budget, before any point is sampled
            if case.op is not None:
                return _op_result(case, dtype, cache, base, start)
            ref = _reference(case, cache)
            check.run(ref)
    except Exception as exc:
        return _raised(*_at_op(case, base, exc), start)
    results = check.results()
    status, message, kind = verdict(case, results)
    results = strictly(case, results)
    shown = formulas or status != PASSED
    return CaseResult(**base, status=status, witnesses=tuple(results), message=message,
                      seconds=time.perf_counter() - start, mode=ref.mode,
                      gradients=tuple(ref.formulas().items()) if shown else (),
                      notes=tuple(dict.fromkeys(check.notes)), error_kind=kind)


def preflight(case: Case, dtype: str) -> CaseResult | None:
    """The result of ``case`` when what it asks can be refused without running anything
    of it (its memory budget, an op module it may not import), else None: the parent of
    a run answers these itself, before any worker process starts (seconds of imports).
    :func:`run_case` makes the same checks, in the same words."""
    start = time.perf_counter()
    try:
        check_case(case)
        if case.op is not None:
            from .opcheck.loader import refuse

            refuse(case.op, case.file, case.allow_op_modules)
    except GradcheckError as exc:
        return _raised(*_at_op(case, case_base(case, dtype), exc), start)
    return None


def _at_op(case: Case, base: dict, exc: Exception) -> tuple[dict, Exception]:
    """An op that cannot be imported: a case file error at its ``op =`` line."""
    if not isinstance(exc, OpImportError) or case.op_line is None:
        return base, exc
    return dict(base, line=case.op_line), CaseFileError(
        exception_text(exc), file=case.file, case=case.name, line=case.op_line)


def _raised(base: dict, exc: Exception, start: float) -> CaseResult:
    """The result of a check that raised ``exc`` (called while it is being handled):
    a time-out, a problem of the case (a bad case, an op that cannot be imported), or
    gradcheck's own bug, with the end of its traceback."""
    seconds = time.perf_counter() - start
    if isinstance(exc, CaseTimeout):
        return CaseResult(**base, status=ERROR, message=str(exc), error_kind=TIMEOUT,
                          seconds=seconds)
    if isinstance(exc, GradcheckError):
        return CaseResult(**base, status=ERROR, message=exception_text(exc),
                          error_kind="case", seconds=seconds)
    why = exhausted(exc)   # out of memory, or too deep for Python: the case's error
    if why:
        return CaseResult(**base, status=ERROR, message=why, error_kind="case",
                          seconds=seconds)
    tb = traceback.format_exc(limit=-3)
    return CaseResult(**base, status=ERROR, error_kind="internal",
                      message=f"{describe_exception(exc)}\n{tb}", seconds=seconds)


class _FormulaCheck:
    """The formula witnesses of one case in one dtype: a tally each, the error of a
    witness that raised (it stops there), the reason of one that does not run in the
    dtype, and the samples a failure's diagnosis reads."""

    def __init__(self, case: Case, dtype: str):
        self.case, self.dtype = case, dtype
        self.names = [w for w in case.witnesses if w != REFERENCE]
        self.heap = for_formula(case.output)
        self.tallies = {w: Tally(w, dtype, case.atol, case.rtol,
                                  complex=case.complex_quantities) for w in self.names}
        self.errors: dict[str, str] = {}
        # witnesses that do not run in this dtype: reported as skipped, with the reason
        self.skipped = {w: r for w in self.names
                        if (r := skip_reason(w, dtype)) is not None}
        self.notes: list[str] = []
        self.samples: dict[str, list] = {w: [] for w in self.names}
        self.kept = {w: Kept() for w in self.names}   # which points' samples
        # witnesses whose disagreement at a point near a kink was noted, not counted
        self.waived: set[str] = set()
        # witnesses whose finite differences did not settle at some point (inconclusive)
        self.unsettled: set[str] = set()
        # the points the formula as written passes the dtype's range at (what passes
        # it), which no witness is checked at, and how many points were checked
        self.beyond: dict[int, str] = {}
        self.checked_points = 0
        # the points finite differences were not needed at (:mod:`.spared`)
        self.spared: list[int] = []

    def run(self, ref) -> None:
        """Every point (the bulk's, then the extremes), every witness that still runs."""
        from ..bounds.point import PointBounds
        from ..sampling.overflow import Watch

        case, dtype = self.case, self.dtype
        for i, (point, v, exact) in enumerate(_pointwise(case, dtype, ref)):
            self.notes.extend(point.notes)
            if point.overflow:
                self._out_of_range(i, point.overflow)
                continue
            watch = Watch(dtype)
            at = PointBounds()   # (this point's: dropped with it)
            bounds = _bounds_at(case, point.values, v, self.heap, at, watch)
            if any(w not in self.errors and w not in self.skipped for w in self.names):
                # computed before the point's exact gradients and any witness, so that
                # no other arrays of the point are alive beside the bounds' (at a
                # layer's size, the peak of the check)
                bounds(dtype)
            if watch.found is not None:   # its backward as written passes the range
                self._out_of_range(i, watch.found.text())
                continue
            self.checked_points += 1
            expected = exact()
            for w in self.names:
                if w not in self.errors and w not in self.skipped:
                    if w == NUMERIC and spared(self, i):
                        self.spared.append(i)
                        continue
                    self._compare(w, i, point, v, expected, bounds, ref, at)
            del point, v, expected, bounds, at   # before the next point is drawn

    def _out_of_range(self, i: int, why: str) -> None:
        """Point ``i`` is checked in no witness: the formula as written passes the
        dtype's range there (``why``: what does)."""
        from ..sampling.overflow import skipped_note

        self.beyond[i] = why
        self.notes.append(skipped_note(i, self.dtype, why))

    def _compare(self, w: str, i: int, point, v, expected, bounds, ref, at) -> None:
        values = point.values
        # (the point's PointBounds, to a witness that reads the forward bound)
        options = {"at": at} if entry(w).reads_bounds else {}
        try:
            # finite differences evaluate the formula dozens of times: the same sizes
            # allocated and freed, served from the heap (the exact witnesses' one pass
            # keeps what it allocates, and is left as it is)
            with self.heap() if entry(w).perturbs else contextlib.nullcontext():
                got = witness(w)(self.case, values, v, self.dtype, reference=ref,
                                 **options)
        except CaseTimeout:
            raise
        except Exception as exc:  # a witness that raises is that witness's error
            if exhausted(exc):   # memory or recursion ran out: the case's error
                raise
            self.errors[w] = describe_exception(exc)
            return
        if got.directions:   # the bounds of the projections it measured
            bounds = _projected(bounds, got)
        tolerance = entry(w).tolerance(self.dtype, bounds, got.error)
        # in float64, the same rule with float32's bounds: asked only where an element
        # fails (an approximation within float32's tolerance is no failure)
        loose = (None if self.dtype != JUDGED else
                 lambda: entry(w).tolerance(LOOSE, bounds, got.error))
        tally = self.tallies[w]
        before = tally.mismatched
        if point.near and entry(w).perturbs:
            if not _add_near_kink(tally, got, expected, i, tolerance, point.near, loose):
                self.waived.add(w)
        else:
            self._add(tally, w, got, expected, i, tolerance, values, v, bounds, ref,
                      loose, options)
        got.decisions = None   # what the witness decided on: read, and dropped
        self.notes.extend(got.notes)
        # a diagnosis reads gradients element by element: projections are left out, and
        # a sample of projections alone is not kept (it would hold the point for nothing)
        along = {q.removesuffix(".grad") for q in got.directions or ()}
        sample = Sample(i, 0, {n: g for n, g in got.grads.items() if n not in along},
                        {n: g for n, g in expected.grads.items() if n not in along},
                        values=values)
        if sample.obtained and self.kept[w].admits(sample.elements,
                                                   agreed=tally.mismatched == before):
            # (the tolerance per element: made for a kept sample alone, as a large
            # point that agreed keeps none)
            self.samples[w].append(dataclasses.replace(sample, tolerance=allowed(
                tolerance, expected, along, self.case.atol, self.case.rtol)))

    def _add(self, tally: Tally, w: str, got, expected, i: int, tolerance, values,
             v, bounds, ref, loose, options: dict) -> None:
        """Compare ``got`` at point ``i``. Where it disagrees: finite differences are
        measured again at finer steps (:mod:`gradcheck.checking.refinement`: None where they do
        not settle, the point inconclusive for them); a witness whose decisions lay
        within its rounding of a switch is judged by the branch it took
        (:mod:`gradcheck.checking.decisions`). Each says so in a note. ``options``: the
        keywords the witness was run with at this point (its PointBounds), given again
        at the finer steps."""
        refines = entry(w).refines
        if not refines and (got.decisions is None or not got.decisions.args):
            tally.add(got, expected, i, tolerance, loose=loose, values=values)
            return
        trial = tally.fresh()
        trial.add(got, expected, i, tolerance, loose=loose, values=values)
        note = None
        if trial.mismatched and refines:
            from .refinement import refined

            trial, note = refined(
                lambda step: witness(w)(self.case, values, v, self.dtype, reference=ref,
                                        step=step, **options),
                lambda e: entry(w).tolerance(self.dtype, bounds, e.error),
                self.case, values, trial, got, expected, i, tolerance)
            if trial is None:
                self.unsettled.add(w)
        elif trial.mismatched:
            from .decisions import rejudged

            trial, note = rejudged(self.case, values, v, self.dtype, w, trial, got, i,
                                   witness, lambda b: entry(w).tolerance(self.dtype, b,
                                                                         None))
        if note:
            self.notes.append(f"point {i}: {note}")
        if trial is not None:
            tally.merge(trial)

    def results(self) -> list[WitnessResult]:
        out = []
        for w in self.names:
            r = self.tallies[w].result()
            if w == NUMERIC and self.spared:
                why = spared_reason(self.case, self.spared, self.checked_points)
                if len(self.spared) == self.checked_points:
                    self.skipped[w] = why
                else:
                    r = dataclasses.replace(r, notes=(*r.notes, why))
            if w in self.skipped:
                r = dataclasses.replace(r, status=SKIPPED, message=self.skipped[w])
            elif w in self.errors:
                r = dataclasses.replace(r, status=ERROR, message=self.errors[w])
            elif self.beyond and not self.checked_points:
                from ..sampling.overflow import every_point

                r = dataclasses.replace(r, status=SKIPPED,
                                        message=every_point(self.dtype, self.beyond))
            elif r.checked == 0 and w in self.waived:
                # every point stayed near a kink: it checked nothing, which is no pass
                r = dataclasses.replace(r, status=SKIPPED, message=NEAR_KINKS)
            elif r.checked == 0 and w in self.unsettled:
                r = dataclasses.replace(r, status=INCONCLUSIVE, message=UNSETTLED)
            elif r.status == FAILED:
                from .diagnose import summarize

                r = dataclasses.replace(r, diagnosis=summarize(
                    self.samples[w], self.dtype, reference=(self.case.output,),
                    unkept=self.kept[w].unkept, unseen=self.kept[w].unseen,
                    complex=self.case.complex_inputs))
            out.append(r)
        return grad_fn_parity(out)


def _pointwise(case: Case, dtype: str, ref):
    """``(point, v, exact)`` for each point of ``case`` in order, ``exact()`` giving its
    reference evaluation. Small formulas' points are drawn together, so that the
    reference evaluates them in one vectorized call (:meth:`~gradcheck.reference.base.
    Reference.evaluations`); a larger one's are drawn, evaluated and dropped one at a
    time: each point holds arrays of the inputs' and the output's sizes, and holding
    them all would add them to the peak of the check for every point."""
    from ..base.arrays import SLAB
    from ..formula.tree import walk

    count = case.points + case.extreme_points
    if max(node.size for node in walk(case.output)) * count > SLAB:
        for i, point in enumerate(case_points(case, dtype)):
            v = cotangent(case, dtype, i)
            yield point, v, lambda point=point, v=v: ref.evaluate(point.values, v)
        return
    points = list(case_points(case, dtype))
    vs = [cotangent(case, dtype, i) for i in range(len(points))]
    exact = ref.evaluations([p.values for p in points], vs)
    taken = [0]   # (a point not checked leaves its evaluation untaken: skipped here)

    def upto(i: int):
        while taken[0] < i:
            next(exact)
            taken[0] += 1
        taken[0] += 1
        return next(exact)

    for i, (point, v) in enumerate(zip(points, vs)):
        yield point, v, lambda i=i: upto(i)


UNSETTLED = ("finite differences did not settle at any point (see the notes): "
             "inconclusive, which fails no case")

NEAR_KINKS = ("every point stays near a kink, where finite differences measure no "
              "derivative (see the notes)")


def _add_near_kink(tally: Tally, got, expected, i: int, tolerance, near,
                   loose=None) -> bool:
    """Compare a witness that perturbs the point (finite differences) at point ``i``,
    which stays within the sampling margin of the kinks of ``near``: its differences may
    cross them, so a disagreement there is a note, not a mismatch; an agreement counts
    (True). The exact witnesses (engine, torch) are compared at the point itself, as
    anywhere."""
    trial = tally.fresh()
    trial.add(got, expected, i, tolerance, loose=loose)
    if not trial.mismatched:
        tally.merge(trial)
        return True
    worst = trial.worst
    tally.grad_fn = tally.grad_fn or trial.grad_fn
    tally.notes += trial.notes
    tally.notes.append(
        f"point {i} stays near a kink of {', '.join(near)}: {tally.witness}'s finite "
        f"differences disagree there ({trial.mismatched} of {trial.checked} elements; "
        f"worst {worst.label}: got {worst.obtained:.6g}, expected "
        f"{worst.expected:.6g}), which is not counted: a difference across a kink "
        "measures no derivative")
    return False


def _device_present(device: str) -> bool:
    import torch

    return device == "cuda" and torch.cuda.is_available()


def _op_result(case: Case, dtype: str, cache: dict, base: dict, start: float) -> CaseResult:
    from .opcheck.loader import OpDtypeError
    from ..sampling.kinks import CONVENTION, count
    from .opcheck import run_op_case
    from .opcheck.process import OpRaised

    try:
        results, unchecked, output = run_op_case(case, dtype, cache)
    except OpDtypeError as exc:   # an engine op in float16/bfloat16: as its witness is
        # (decided by the judge, from what the op is: an op raising this is no skip)
        return CaseResult(**base, status=SKIPPED, message=str(exc), mode="op",
                          seconds=time.perf_counter() - start,
                          output=getattr(exc, "output", ""))
    except OpRaised as exc:   # whatever the op's process raised or however it ended
        if exc.memory:
            return CaseResult(**base, status=ERROR, message=str(exc), error_kind="case",
                              seconds=time.perf_counter() - start, output=exc.output)
        return op_failure(case, base, str(exc), OP_CRASHED if exc.crashed else OP_RAISED,
                          seconds=time.perf_counter() - start,
                          output=getattr(exc, "output", ""))
    status, message, kind = verdict(case, results)
    results = strictly(case, results)
    # (an op's checks keep no point's notes; the convention at kinks is the case's)
    convention = (CONVENTION,) if count(case) else ()
    return CaseResult(**base, status=status, witnesses=tuple(results), message=message,
                      seconds=time.perf_counter() - start, mode="op", error_kind=kind,
                      notes=tuple(dict.fromkeys([*(n for r in results for n in r.notes),
                                                 *convention])),
                      contract_notes=tuple(dict.fromkeys(n for r in results
                                                         for n in r.contract_notes)),
                      output=output, unchecked=unchecked)


def op_failure(case: Case, base: dict, message: str, kind: str,
               seconds: float = 0.0, output: str = "") -> CaseResult:
    """The result of an op that raised (or crashed its process): the op's failure, or
    what ``expect = "fail"`` asked for."""
    if case.expect == "fail":
        return CaseResult(**base, status=PASSED, mode="op", error_kind=kind,
                          seconds=seconds, message=f"caught as expected: {message}",
                          output=output)
    return CaseResult(**base, status=FAILED, mode="op", error_kind=kind, seconds=seconds,
                      message=message, output=output)


def file_error(exc: CaseFileError) -> CaseResult:
    """A case-file problem as a result, so the report keeps it."""
    return CaseResult(name=exc.case or Path(exc.file or "?").name, file=exc.file or "",
                      line=exc.line, dtype="-", status=ERROR, message=str(exc),
                      error_kind="case")
