"""The driver of an op's checks: at each point it calls the op (forward, vᵀJ for a few
random v, the Function's own backward, a second forward, double backward), hands what it
did to the check functions (:mod:`~gradcheck.checking.opcheck.checks`,
:mod:`~gradcheck.checking.opcheck.shapes`, :mod:`~gradcheck.checking.opcheck.double`) and records their
outcomes in one :class:`~gradcheck.checking.compare.Tally` per check."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

import numpy as np

from ..approximate import JUDGED, LOOSE
from .loader import OpDtypeError, no_complex, wanted
from ..compare import Finding, Outcome, Tally
from ..diagnose import Kept, Sample, summarize
from ..diagnose.points import KEPT_ELEMENTS
from ..diagnose.structure import Jacobian
from ...base.dtypes import round_to
from ...base.result import FAILED, SKIPPED, WitnessResult
from ...sampling.points import case_points, case_rng
from .compiled import compiled, unavailable
from .checks import (backward, determinism, forward, inplace, jacobian, jacobian_checked,
                     jacobian_rows, layout, zero)
from .contract import contract
from .expanded import expanded
from .double import second
from .exact import (exact_rows, forward_references, forward_values, grad_quantities, one_hots,
                    references)
from .jvp import cotangent, jvp, sampled_hots
from .shapes import shapes
from .tolerances import OpTolerance
from .unchecked import why
from .vmap import BATCH, Element, registration, too_large, vmap
from ...cases.vocabulary import OP_CHECKS

COTANGENTS = 2             # random v per point
#: elements (inputs and outputs) up to which op.jvp's sampled rows of an op whose
#: Jacobian is not checked take their rounding bounds in one batched pass
BATCHED_ROWS = 1 << 16
CHECKS = OP_CHECKS         # (cases.vocabulary: the names a case may switch off too)
#: checks that compare against another call of the op, not the exact values: they allow
#: the case's nondet_tol and nothing else
_SELF_CONSISTENCY = ("determinism", "inplace")
#: checks whose failure is explained by the samples of every backward call
_DIAGNOSED = ("backward", "jacobian", "determinism")
#: points whose whole Jacobian (op.jacobian's rows) is kept for the diagnosis
JACOBIAN_POINTS = 3


class OpCheck:
    """All checks of one op case in one dtype; ``op``: the op's process, started (see
    :mod:`gradcheck.checking.opcheck.process`: the op is imported and called there, never here)."""

    def __init__(self, case, dtype: str, cache: dict, op):
        from ...witnesses.registry import skip_reason

        self.case, self.dtype, self.op = case, dtype, op
        # the op first: a refused or missing op is told before any reference is compiled
        reason = skip_reason("engine", dtype)
        if op.info.get("engine") and reason:
            raise OpDtypeError(f"op {op.info.get('name')} is a gradcheck.engine Function, "
                               f"and {reason}; check it in those, or write it as a "
                               f"torch.autograd.Function to check it in {dtype}")
        if op.info.get("engine") and any(s.complex for s in case.inputs):
            raise no_complex(op.info.get("name"))
        self.refs = references(case, cache)
        if case.order == 2 and not op.info.get("engine"):
            for ref in self.refs:   # a formula without exact second derivatives (or past
                ref.prepare_second()   # their budget) is refused before the op runs
        self.forward_refs = forward_references(case, cache)   # a surrogate's
        # the inputs whose gradients the op is checked for (not the reference-only ones)
        self.keep = set(wanted(case))
        self.tolerance = OpTolerance(case, dtype)
        # in float64, the same rules in float32, asked only where a check fails: an
        # approximation within float32's tolerance is no failure (gradcheck.checking.approximate)
        self.loose = OpTolerance(case, LOOSE) if dtype == JUDGED else None
        self.tallies = {
            c: Tally(f"op.{c}", dtype, *((case.nondet_tol, 0.0) if c in _SELF_CONSISTENCY
                                         else (case.atol, case.rtol)),
                     complex=case.complex_quantities)
            for c in CHECKS}
        # every backward call at every point and v, for the diagnosis (of a large
        # point, as Kept admits)
        self.samples: list[Sample] = []
        self.kept = Kept()
        self.jacobians: list[Jacobian] = []   # (gradcheck.checking.diagnose.structure)
        self.unsupported = False   # the op does not do forward mode (op.jvp's note)
        self.record("forward", [Finding(note=n) for n in _case_notes(case)])
        # op.vmap's batch: the first points' values, gathered as the loop passes them
        self.batch: list[Element] | None = None
        if self.on("vmap") and not op.info.get("engine"):
            why = op.info.get("no_vmap")
            why = f"vmap not supported: {why}" if why else too_large(case)
            self.batch = [] if why is None else None
            if why is not None:
                self.record("vmap", [Finding(note=str(why))])
        self.first: dict | None = None   # the first point (op.registration's)
        # why op.compile does not run (an engine op, no torch.compile, no compiler for
        # the case's backend): a note, the check reported as skipped with it
        self.no_compile = unavailable(case, op.info) if self.on("compile") else None
        if self.no_compile:
            self.record("compile", [Finding(note=self.no_compile)])

    def on(self, check: str) -> bool:
        """Whether ``check`` runs: not switched off by the case's skip_checks (which
        the run's --skip-check and [tool.gradcheck] skip-checks add to)."""
        return f"op.{check}" not in self.case.skip_checks

    @property
    def notes(self) -> dict[str, list[str]]:
        """What each check accepted but is worth knowing (op.shapes' notes)."""
        return {c: t.notes for c, t in self.tallies.items()}

    def record(self, check: str, outcomes: Iterable[Outcome]) -> None:
        self.tallies[check].record(outcomes)

    def vs(self, index: int, draw: int) -> list[np.ndarray]:
        rng = case_rng(self.case, self.dtype, index, f"op-v{draw}")
        return [round_to(rng.standard_normal(n.shape), self.dtype) for n in self.case.outputs]

    def run(self) -> list[WitnessResult]:
        for i, point in enumerate(case_points(self.case, self.dtype)):
            if i == 0:
                self.first = point.values
            kept, mismatched = len(self.samples), self._mismatched()
            self.point(i, point.values)
            # (each of the point's samples holds about as much as its first)
            if len(self.samples) > kept and not self.kept.admits(
                    self.samples[kept].elements, agreed=self._mismatched() == mismatched):
                del self.samples[kept:]
        self.paths()
        return self.results()

    def paths(self) -> None:
        """The checks of other paths through the op, once the points are done: op.vmap
        on the first points' batch, op.layout's expanded inputs and op.registration at
        the first point."""
        if self.batch:
            batch = [self.batch[j % len(self.batch)] for j in range(BATCH)]
            done = self.op.vmap([e.point for e in batch], [e.vs for e in batch])
            for tally in vmap(done, batch, lambda: self._tally("vmap")):
                self.tallies["vmap"].merge(tally)
            self.batch = None
        if self.first is not None and self.on("layout") and not self.op.info.get("engine"):
            # expanded inputs: a point of their own, taken once the points' arrays are
            # freed (at a layer's size they were the check's peak)
            self.record("layout", expanded(self, 0, self.vs(0, 0)))
        if (self.first is not None and self.op.info.get("library")
                and self.on("registration")):
            self.record("registration", registration(self.op.registration(self.first)))

    def _tally(self, check: str) -> Tally:
        return Tally(f"op.{check}", self.dtype, self.case.atol, self.case.rtol,
                     complex=self.case.complex_quantities)

    def _mismatched(self) -> int:
        return sum(t.mismatched for t in self.tallies.values())

    def point(self, i: int, point: dict) -> None:
        op = self.op
        self.tolerance.start_point()   # its forward passes are reused for every v here
        if self.loose is not None:
            self.loose.start_point()
        outs, leaves = op.forward(point)
        if len(outs) != len(self.refs):
            self.record("forward", [Finding(problem=f"the op returned {len(outs)} outputs; "
                                                    f"reference has {len(self.refs)}")])
            return
        draws = [self.vs(i, d) for d in range(COTANGENTS)]
        # the exact side of v = ones and of the drawn v, then the drawn v's tolerances,
        # each in one pass for all of them
        ones = [np.ones(n.shape) for n in self.case.outputs]
        exact_ones, *exacts = exact_rows(self.refs, point, [ones] + draws, self.keep)
        # what the outputs must equal: the forward formulas' values for a surrogate,
        # the reference's otherwise
        wanted = (forward_values(self.forward_refs, point) if self.forward_refs
                  else exact_ones.retained)
        # their forward passes are kept for the Jacobian's one-hot rows, where it is
        # checked; a larger op's are freed as the bounds' backward passes them
        quantities = [dict(wanted, **grad_quantities(ex.grads)) for ex in exacts]
        tolerances = self.tolerance.many(point, draws, quantities,
                                         keep=jacobian_checked(self.case.outputs))
        looser = self.looser(point, draws, quantities)
        values = {f"out{k}": y for k, y in enumerate(outs)}
        for draw, drawn in enumerate(zip(draws, exacts, tolerances, looser)):
            self.cotangent(i, draw, point, leaves, values, exact_ones, (*drawn, wanted))
        wanted_rows = self.on("jacobian") or self.on("jvp")
        hots, rows = self.rows(point) if wanted_rows else ([], None)
        if self.on("jacobian"):
            self.record("jacobian", jacobian(
                op.vjps, self.refs, self.case.outputs, point,
                i, self.tolerance.many, self.keep,
                loose=self.looser if self.loose is not None else None, rows=rows,
                seen=lambda got, want: self.keep_jacobian(i, point, got, want)))
        self.forward_mode(i, point, hots, rows)
        if self.on("zero"):
            zeros = [np.zeros(n.shape) for n in self.case.outputs]
            self.record("zero", zero(op.vjp(zeros), exact_ones.grads, self.case.input, i))

    def rows(self, point: dict) -> tuple[list, tuple | None]:
        """The one-hot cotangents of every output element and their exact rows and
        tolerances (:func:`~gradcheck.checking.opcheck.checks.jacobian_rows`), shared by
        op.jacobian and op.jvp; ``([], None)`` for an op whose Jacobian is not checked."""
        if not jacobian_checked(self.case.outputs):
            return [], None
        hots = list(one_hots(self.case.outputs))
        if not hots:
            return [], None
        return hots, jacobian_rows(self.refs, point, hots, self.tolerance.many, self.keep,
                                   self.looser if self.loose is not None else None)

    def keep_jacobian(self, i: int, point: dict, got: list[dict], want: list[dict]) -> None:
        """Point ``i``'s whole Jacobian, the op's rows (``got``) and the exact ones
        (``want``, quantities), as matrices per input, for the diagnosis's reading of the
        error's structure: at the first JACOBIAN_POINTS points, up to KEPT_ELEMENTS."""
        if len(self.jacobians) >= JACOBIAN_POINTS or not got:
            return
        names = [n for n in got[0] if want[0].get(f"{n}.grad") is not None]
        if sum(2 * len(got) * np.size(want[0][f"{n}.grad"]) for n in names) > KEPT_ELEMENTS:
            return
        obtained = {n: None if any(g.get(n) is None for g in got) else
                    np.stack([np.asarray(g[n], dtype=float).reshape(-1) for g in got])
                    for n in names}
        expected = {n: np.stack([np.asarray(w[f"{n}.grad"], dtype=float).reshape(-1)
                                 for w in want]) for n in names}
        self.jacobians.append(Jacobian(i, tuple(o.shape for o in self.case.outputs),
                                       obtained, expected, point))

    def forward_mode(self, i: int, point: dict, hots: list, rows: tuple | None) -> None:
        """op.jvp at point ``i`` (:mod:`~gradcheck.checking.opcheck.jvp`): every output
        element where the Jacobian's rows are at hand, else a sample of them at the first
        point; nothing more once the op was found not to do forward mode."""
        names = wanted(self.case)
        if (not self.on("jvp") or not names
                or self.unsupported):
            return
        if rows is None:
            if i != 0:
                return
            picks = sampled_hots(self.case.outputs)
            if not picks:
                return
            rows = self.sampled_rows(point, picks)
        else:
            picks = [(k, idx, int(np.argmax(vs[k].reshape(-1)))) for k, idx, vs in hots]
        found = jvp(self.op, self.case, self.dtype, point, i, names, picks, rows)
        self.unsupported = any(isinstance(f, Finding) and f.note for f in found)
        self.record("jvp", found)
        if self.case.order == 2 and i == 0 and not self.unsupported:
            # forward-over-reverse, where the op does forward mode: the first point's
            # first random cotangent (its exact side again: a small op's, once)
            self.record("jvp", second(self.op, self.refs, self.case, self.dtype, point,
                                      self.vs(i, 0), i, double=False,
                                      over_reverse=True)[1])

    def sampled_rows(self, point: dict, picks: list):
        """op.jvp's rows of the sampled output elements ``picks`` (``(k, index text,
        flat)``) of an op whose Jacobian is not checked: all at once, batched, up to
        BATCHED_ROWS elements; past that a function giving one row at a time, computed
        when asked, its forward passes freed as they go (16 rows of input-sized arrays
        held together were the peak of a large op's check)."""
        loose = self.looser if self.loose is not None else None
        outputs = self.case.outputs
        if _elements(self.case) <= BATCHED_ROWS:
            hots = [(k, idx, cotangent(outputs, k, flat)) for k, idx, flat in picks]
            return jacobian_rows(self.refs, point, hots, self.tolerance.many, self.keep,
                                 loose)

        def row(r: int) -> tuple:
            k, idx, flat = picks[r]
            expected, allowed, looser = jacobian_rows(
                self.refs, point, [(k, idx, cotangent(outputs, k, flat))],
                lambda p, rs, e: self.tolerance.many(p, rs, e, keep=False), self.keep,
                loose)
            return expected[0], allowed[0], looser[0]
        return row

    def cotangent(self, i: int, draw: int, point: dict, leaves: dict, values: dict,
                  exact_ones, drawn: tuple) -> None:
        """The checks at point ``i`` for its ``draw``-th random cotangent (``drawn``: the
        cotangents, their exact evaluation and tolerances); the first draw also runs the
        checks that need one v per point."""
        op, (vs, ex, tolerance, loose, wanted) = self.op, drawn
        expected = grad_quantities(ex.grads)
        if draw == 0:
            self.record("forward", forward(values, wanted, i, tolerance, loose, point))
        got = op.vjp(vs)
        self.record("backward", backward(got, expected, i, tolerance, loose, point))
        # Every call after the point's first goes through a graph that has been
        # backpropagated before: a repeat, which shows state a backward modifies.
        self.samples.append(Sample(i, draw, got, ex.grads, exact_ones.grads, point,
                                   repeat=draw > 0))
        if draw != 0:
            return
        # the repeat goes the way training does, through the output's own .backward(v):
        # a tensor subclass that answers torch.autograd.grad rightly and .backward()
        # wrongly is then held to the exact values as well
        again = op.vjp(vs, path="backward")
        if not _same(got, again):
            self.record("backward", backward(again, expected, i, tolerance, loose, point))
        self.samples.append(Sample(i, draw, again, ex.grads, exact_ones.grads, point,
                                   repeat=True))
        if self.on("determinism"):
            self.record("determinism", determinism(got, again, i))
        if self.on("shapes"):
            self.record("shapes", shapes(op.raw_backward(vs), op.info, self.case, leaves,
                                         ex.grads, self.dtype))
        if self.on("inplace"):
            self.record("inplace", inplace(op.inplace(point, vs), point, vs, values, i))
        if self.on("layout"):
            self.record("layout", layout(op.layouts(point, vs), values, got, i, tolerance,
                                         point))
        if i == 0 and self.on("contract"):   # (the first point only: a dozen calls)
            contract(self, i, point, vs, got, tolerance, exact_ones)
        if i == 0 and self.on("compile") and not self.no_compile:   # (a compile or two)
            compiled(self, i, point, vs, values, got, wanted, expected, tolerance, loose)
        if self.batch is not None and i < min(BATCH, self.case.points):
            self.batch.append(Element(i, point, vs, values, got, wanted, expected,
                                      tolerance, self._loose_at(point, vs, wanted, expected)))
        if self.case.order == 2 and self.on("double"):
            self.record("double", second(op, self.refs, self.case, self.dtype, point,
                                         vs, i)[0])

    def looser(self, point: dict, rows: list, exacts: list) -> list:
        """For each cotangent of ``rows`` (with its exact quantities), a function giving
        its tolerances in float32 (:attr:`loose`: the model and the peer in float32 at
        this point), all of them computed together at the first call; Nones outside
        float64, where a run has no looser tolerance to be judged by."""
        if self.loose is None:
            return [None] * len(rows)
        found: list = []

        def every() -> list[dict]:
            if not found:
                found.append(self.loose.many(point, rows, exacts,
                                             keep=jacobian_checked(self.case.outputs)))
            return found[0]

        return [_row(every, j) for j in range(len(rows))]

    def _loose_at(self, point: dict, vs: list, wanted: dict, expected: dict):
        """The float32 tolerances of the outputs and vᵀJ at ``point`` for ``vs``, asked
        after the loop has left it (a tolerance of its own: :attr:`loose` keeps the
        forward passes of the point it is at); None outside float64."""
        if self.loose is None:
            return None
        return lambda: OpTolerance(self.case, LOOSE)(point, vs, dict(wanted, **expected))

    def diagnosis(self) -> str:
        """What the wrong gradients look like (see :func:`gradcheck.checking.diagnose.summarize`)."""
        jacobian = self.tallies["jacobian"]
        return summarize(self.samples, self.dtype, reference=self.case.outputs,
                         jacobian_right=jacobian.checked > 0 and not jacobian.mismatched,
                         unkept=self.kept.unkept, unseen=self.kept.unseen,
                         jacobians=self.jacobians,
                         complex=self.case.complex_inputs)

    def results(self) -> list[WitnessResult]:
        out = []
        for check in CHECKS:
            tally = self.tallies[check]
            if self._silent(check):   # (said in unchecked())
                continue
            if tally.checked == 0 and not tally.mismatched:
                # a check the op does not support: why, as a skip
                out.append(dataclasses.replace(
                    tally.result(), status=SKIPPED, message="; ".join(tally.notes),
                    notes=()))
                continue
            result = tally.result()
            if result.status == FAILED and check in _DIAGNOSED:
                result = dataclasses.replace(result, diagnosis=self.diagnosis())
            out.append(result)
        return out

    def unchecked(self) -> tuple[tuple[str, str], ...]:
        """Each check that reported nothing in :meth:`results` (neither ran nor was
        skipped saying why), with why, in CHECKS order (``CaseResult.unchecked``)."""
        return tuple((f"op.{c}", why(c, self.case, self.op.info)) for c in CHECKS
                     if self._silent(c))

    def _silent(self, check: str) -> bool:
        """Whether ``check`` has nothing to report: it looked at nothing and noted
        nothing (a note alone is a skip saying why)."""
        tally = self.tallies[check]
        return tally.checked == 0 and not tally.mismatched and not tally.notes


def _elements(case) -> int:
    """The elements of the case's inputs and outputs together."""
    return sum(int(np.prod(n.shape, dtype=np.int64))
               for n in (*case.inputs, *case.outputs))


def _same(a: dict, b: dict) -> bool:
    """Whether two calls' gradients are the same to the bit (NaNs alike)."""
    return all((a[n] is None) == (b[n] is None)
               and (a[n] is None or np.array_equal(a[n], b[n], equal_nan=True))
               for n in a)


def _row(every: Callable[[], list], j: int) -> Callable[[], dict]:
    """The ``j``-th of what ``every()`` gives, when asked."""
    return lambda: every()[j]


def _case_notes(case) -> list[str]:
    """What the report says of how the case checks its op: a surrogate's two formulas,
    the inputs the op is not given."""
    notes = []   # (a check switched off says so itself: OpCheck.unchecked)
    if case.surrogate:
        notes.append(f"surrogate: op.forward checks the op's outputs against forward = "
                     f"{case.forward_expr!r}; every gradient check against the vᵀJ of "
                     f"reference = {case.expr!r}")
    for name in case.reference_only:
        graded = case.input[name].requires_grad
        notes.append(f"reference-only input {name}: the call does not pass it to the op"
                     + (", so the op's gradient for it is not checked" if graded else ""))
    return notes


def run_op_case(case, dtype: str,
                cache: dict) -> tuple[list[WitnessResult], tuple[tuple[str, str], ...], str]:
    """Every check of ``case`` (which has ``op``) in ``dtype``, the checks that did not
    run with why (:meth:`OpCheck.unchecked`), and what the op printed. Whatever the
    checks raise carries the op's output as ``output``."""
    from .process import OpProcess

    process = OpProcess(case, dtype)
    try:
        with process:
            check = OpCheck(case, dtype, cache, process)
            results = check.run()
            unchecked = check.unchecked()
    except BaseException as exc:
        exc.output = process.output
        raise
    return results, unchecked, process.output
