"""Results are data: frozen dataclasses with ``to_dict()``, and ``from_dict()`` for a
result that comes back as its dict (from an xdist worker, a subprocess or a JSON
report), so that every renderer and the pytest plugin see one type. Renderers turn them
into text, JSON and the other formats; nothing here prints."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
# a witness that measured but could not settle (finite differences): fails no case
INCONCLUSIVE = "inconclusive"
#: a float64 check whose deviations exceed float64's tolerance but all lie within the
#: tolerance the same check has in float32 (:mod:`gradcheck.checking.approximate`): no failure
#: (exit 0) unless the case is strict, where it is one
APPROXIMATE = "approximate"
#: every status, in the order summaries count them
STATUSES = (PASSED, APPROXIMATE, FAILED, ERROR, SKIPPED)
#: the outcome of an ``expect = "fail"`` case, pytest's words for it (:attr:`CaseResult.
#: outcome`): caught as expected (status passed), or expected to fail but every witness
#: agreed (status failed: it fails the run, as pytest's strict xfail does)
XFAIL, XPASS = "xfail", "xpass"
#: every outcome, in the order summaries count them: the statuses, the expected failures'
#: apart (the key of each count in :attr:`RunResult.summary`)
OUTCOMES = {PASSED: "passed", APPROXIMATE: "approximate", FAILED: "failed",
            ERROR: "errored", SKIPPED: "skipped", XFAIL: "xfailed", XPASS: "xpassed"}
#: the checks of an op case, in the order reports show them (witness ``op.<name>``);
#: here, below the case files (:mod:`gradcheck.cases.vocabulary` names them for
#: ``skip_checks``) and the renderers, which lay out an op case's checks in this order
OP_CHECKS = ("forward", "backward", "jacobian", "zero", "determinism", "shapes", "inplace",
             "layout", "double", "jvp", "vmap", "contract", "registration", "compile")


def _plain(x: Any) -> Any:
    """JSON-safe: tuples to lists, non-finite floats to strings."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _float(x: Any) -> float:
    """A float of a ``to_dict()``: :func:`_plain` wrote the non-finite ones as text."""
    return float(x)


#: the parts of a complex element, by its index on the layout's last axis (the layout
#: torch.view_as_real gives: real part, imaginary part)
PARTS = ("real", "imaginary")


def element_name(quantity: str, index, part: str | None = None) -> str:
    """How every report names an element: ``x.grad[1,2]`` (``value[]`` for a scalar);
    an element of a complex quantity by its complex index and its part,
    ``z.grad[2,1] (imaginary part)``, never by the layout's ``z.grad[2,1,1]``."""
    name = f"{quantity}[{','.join(map(str, index))}]"
    return f"{name} ({part} part)" if part else name


@dataclass(frozen=True)
class Worst:
    """The element that is furthest outside its tolerance (or closest to it). ``part``:
    of a complex quantity (held in the view_as_real layout), which part it is
    ("real" or "imaginary"), ``index`` then its complex index (:meth:`in_parts`)."""

    quantity: str                  # "value", "x.grad", "h.grad"
    index: tuple[int, ...]
    obtained: float
    expected: float
    tolerance: float
    point: int                     # which sampled point
    part: str | None = None

    @property
    def label(self) -> str:
        return element_name(self.quantity, self.index, self.part)

    def in_parts(self) -> "Worst":
        """The same element of a complex quantity, its layout index (last axis: real,
        imaginary) told as the complex index and the part."""
        if self.part is not None or not self.index:
            return self
        return replace(self, index=tuple(self.index[:-1]), part=PARTS[self.index[-1]])

    def to_dict(self) -> dict:
        data = _plain(self.__dict__.copy())
        if self.part is None:   # (a real element's record stays as it was)
            del data["part"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Worst":
        """The inverse of :meth:`to_dict`."""
        return cls(quantity=data["quantity"], index=tuple(data["index"]),
                   obtained=_float(data["obtained"]), expected=_float(data["expected"]),
                   tolerance=_float(data["tolerance"]), point=data["point"],
                   part=data.get("part"))


#: The histogram bins of an :class:`ErrorMap`, as powers of ten of |obtained - expected|
#: / tolerance, half a decade apart from 1e-6 to 1e6: ``counts[0]`` the elements at or
#: below 1e-6 (the exact ones among them), ``counts[i]`` those in (edge[i-1], edge[i]],
#: the last those above 1e6 (infinite and NaN ones among them). Above 1 is a mismatch.
HIST_EXPONENTS = tuple(k / 2 for k in range(-12, 13))


@dataclass(frozen=True)
class ErrorMap:
    """Where one quantity of a witness that did not pass differs
    (:mod:`gradcheck.checking.errormap` builds it; the HTML report draws it).

    ``grid`` holds, per cell of ``cell`` rows × columns of the quantity's 2-D ``view``,
    the signed (obtained - expected) / tolerance of the element of largest magnitude
    there (over the points; None: no element seen, nor any but NaN); ``counts`` the histogram of
    |obtained - expected| / tolerance over :data:`HIST_EXPONENTS`; ``mismatched`` of
    ``total`` elements compared were outside their tolerance."""

    quantity: str                  # "x.grad"; "d out0 / d W" for a Jacobian
    shape: tuple[int, ...]         # the quantity's (a Jacobian's: output elements first)
    view: tuple[int, int]          # the 2-D view the cells cut
    cell: tuple[int, int]          # rows and columns of the view per cell
    grid: tuple[tuple[float | None, ...], ...]
    counts: tuple[int, ...]
    mismatched: int
    total: int
    kind: str = "gradient"         # or "jacobian"

    def to_dict(self) -> dict:
        return _plain(self.__dict__.copy())

    @classmethod
    def from_dict(cls, data: dict) -> "ErrorMap":
        """The inverse of :meth:`to_dict`."""
        return cls(quantity=data["quantity"], shape=tuple(data["shape"]),
                   view=tuple(data["view"]), cell=tuple(data["cell"]),
                   grid=tuple(tuple(None if x is None else _float(x) for x in row)
                              for row in data["grid"]),
                   counts=tuple(data["counts"]), mismatched=data["mismatched"],
                   total=data["total"], kind=data.get("kind", "gradient"))


@dataclass(frozen=True)
class WitnessResult:
    """How one witness compared with the symbolic reference over all points."""

    witness: str
    status: str
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    worst: Worst | None = None
    checked: int = 0               # elements compared
    mismatched: int = 0            # elements outside tolerance
    grad_fn: tuple[str, ...] | None = None
    message: str = ""
    diagnosis: str = ""            # what a wrong gradient looks like (sign, factor, ...)
    worst_elements: tuple[Worst, ...] = ()   # the few furthest outside tolerance
    notes: tuple[str, ...] = ()    # what is worth knowing but no failure (op.shapes)
    # what PyTorch's contract for a backward accepts as it is (trailing Nones, a
    # gradient summed back over broadcast axes): kept, and shown where asked (-v)
    contract_notes: tuple[str, ...] = ()
    # where each quantity differs: only for a witness that did not pass
    error_maps: tuple[ErrorMap, ...] = ()

    @property
    def worst_index(self) -> str | None:
        if self.worst is None:
            return None
        return self.worst.label

    def to_dict(self) -> dict:
        return _plain({
            "status": self.status, "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err, "worst_index": self.worst_index,
            "worst": self.worst.to_dict() if self.worst else None,
            "checked": self.checked, "mismatched": self.mismatched,
            "grad_fn": list(self.grad_fn) if self.grad_fn is not None else None,
            "message": self.message, "diagnosis": self.diagnosis,
            "worst_elements": [w.to_dict() for w in self.worst_elements],
            "notes": list(self.notes),
            **({"contract_notes": list(self.contract_notes)} if self.contract_notes else {}),
            # only where there are maps: a passing run's report stays as it was
            **({"error_maps": [m.to_dict() for m in self.error_maps]}
               if self.error_maps else {}),
        })

    @classmethod
    def from_dict(cls, witness: str, data: dict) -> "WitnessResult":
        """The inverse of :meth:`to_dict` (which leaves the witness's name to its key)."""
        worst = data.get("worst")
        grad_fn = data.get("grad_fn")
        return cls(witness=witness, status=data["status"],
                   max_abs_err=_float(data.get("max_abs_err", 0.0)),
                   max_rel_err=_float(data.get("max_rel_err", 0.0)),
                   worst=Worst.from_dict(worst) if worst else None,
                   checked=data.get("checked", 0), mismatched=data.get("mismatched", 0),
                   grad_fn=tuple(grad_fn) if grad_fn is not None else None,
                   message=data.get("message", ""), diagnosis=data.get("diagnosis", ""),
                   worst_elements=tuple(Worst.from_dict(w)
                                        for w in data.get("worst_elements", ())),
                   notes=tuple(data.get("notes", ())),
                   contract_notes=tuple(data.get("contract_notes", ())),
                   error_maps=tuple(ErrorMap.from_dict(m)
                                    for m in data.get("error_maps", ())))


@dataclass(frozen=True)
class CaseResult:
    """One case in one dtype."""

    name: str
    file: str
    line: int | None
    dtype: str
    status: str
    witnesses: tuple[WitnessResult, ...] = ()
    message: str = ""
    seconds: float = 0.0
    expect: str = "pass"
    mode: str = ""                 # the reference's kind: "elementwise", "tensor", "expanded"
    # the exact gradients as formulas, (quantity, formula) pairs (the tensor-level
    # reference's; "" names the shared subexpressions the formulas refer to)
    gradients: tuple[tuple[str, str], ...] = ()
    points: int = 0
    seed: int = 0
    notes: tuple[str, ...] = ()
    # for errors: "case" (bad input, an op that cannot be imported), "internal" (a bug in
    # gradcheck), "timeout"; for an op's failure (or catch): "op raised", "op crashed"
    error_kind: str = ""
    # bytes the case's process's resident set rose above what it held when the case
    # began, at its peak (a worker's case process on Linux; None elsewhere, or in the
    # caller's process); a measurement, not an outcome: not compared
    peak_memory: int | None = field(default=None, compare=False)
    # what the case's op printed in its own process (stdout and stderr, its children's
    # too), kept for the report, which shows it scrubbed as every text; never printed
    # as it came
    output: str = ""
    # an op case's checks (OP_CHECKS) that did not run, each (``op.<name>``, why: not
    # asked of this op, switched off by skip_checks), in OP_CHECKS order; a check that
    # ran, or that the op does not support (a skipped witness saying why), is a witness
    unchecked: tuple[tuple[str, str], ...] = ()
    # what PyTorch's contract for a backward accepts as it is (as a witness's): what the
    # reports leave to -v, where ``notes`` inform
    contract_notes: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        """The status as reports name it: :data:`XFAIL` for an ``expect = "fail"`` case
        that was caught, :data:`XPASS` for one that was not, else the status."""
        if self.expect == "fail" and self.status in (PASSED, FAILED):
            return XFAIL if self.status == PASSED else XPASS
        return self.status

    def witness(self, name: str) -> WitnessResult | None:
        return next((w for w in self.witnesses if w.witness == name), None)

    @property
    def passed(self) -> bool:
        """What a test asserts: the case passed (an ``expect = "fail"`` case caught) or
        is approximate (which passes, with a warning, unless strict)."""
        return self.status in (PASSED, APPROXIMATE)

    def to_dict(self) -> dict:
        return _plain({
            "name": self.name, "file": self.file, "line": self.line, "dtype": self.dtype,
            "status": self.status, "outcome": self.outcome, "expect": self.expect,
            "mode": self.mode,
            "points": self.points, "seed": self.seed, "seconds": round(self.seconds, 6),
            "witnesses": {w.witness: w.to_dict() for w in self.witnesses},
            "message": self.message, "notes": list(self.notes),
            "error_kind": self.error_kind or None, "peak_memory": self.peak_memory,
            **({"gradients": dict(self.gradients)} if self.gradients else {}),
            **({"output": self.output} if self.output else {}),
            # (only where some are: a formula case's report stays as it was)
            **({"unchecked": dict(self.unchecked)} if self.unchecked else {}),
            **({"contract_notes": list(self.contract_notes)} if self.contract_notes else {}),
        })

    @classmethod
    def from_dict(cls, data: dict) -> "CaseResult":
        """The inverse of :meth:`to_dict`: ``from_dict(r.to_dict()).to_dict() ==
        r.to_dict()`` (durations as to_dict rounds them)."""
        return cls(name=data["name"], file=data["file"], line=data.get("line"),
                   dtype=data["dtype"], status=data["status"],
                   witnesses=tuple(WitnessResult.from_dict(name, w)
                                   for name, w in data.get("witnesses", {}).items()),
                   message=data.get("message", ""), seconds=_float(data.get("seconds", 0.0)),
                   expect=data.get("expect", "pass"), mode=data.get("mode", ""),
                   points=data.get("points", 0), seed=data.get("seed", 0),
                   notes=tuple(data.get("notes", ())),
                   error_kind=data.get("error_kind") or "",
                   gradients=tuple(data.get("gradients", {}).items()),
                   peak_memory=data.get("peak_memory"), output=data.get("output", ""),
                   unchecked=tuple(data.get("unchecked", {}).items()),
                   contract_notes=tuple(data.get("contract_notes", ())))


@dataclass(frozen=True)
class RunResult:
    """A whole run: every case result, in the order the cases were found.

    A run stopped by a signal is ``incomplete``: ``interrupted`` names the signal
    ("SIGINT", "SIGTERM") and ``not_run`` counts the (case, dtype) runs that did not
    finish; ``cases`` holds only those that did (none is made up for the others)."""

    cases: tuple[CaseResult, ...] = ()
    seconds: float = 0.0
    interrupted: str = ""
    not_run: int = 0
    # when the run began, seconds since the epoch (0: unknown; JUnit's timestamp); a
    # moment, not an outcome, so two results of the same run compare equal without it
    started: float = field(default=0.0, compare=False)

    @property
    def incomplete(self) -> bool:
        return bool(self.interrupted)

    @property
    def passed(self) -> bool:
        """Some case ran, every one :attr:`CaseResult.passed`, and the run is complete."""
        return bool(self.cases) and not self.incomplete and all(c.passed for c in self.cases)

    @property
    def summary(self) -> dict[str, Any]:
        # by outcome: an expected failure counts as xfailed, not as passed (nor an
        # unexpected pass as failed), so that the counts add up to the runs
        out: dict[str, Any] = {key: sum(c.outcome == o for c in self.cases)
                               for o, key in OUTCOMES.items()}
        out["seconds"] = round(self.seconds, 3)
        if self.incomplete:   # only then: a complete run's summary keeps its keys
            out.update(incomplete=True, interrupted=self.interrupted, not_run=self.not_run)
        return out

    def to_dict(self) -> dict:
        from . import __version__

        return {"version": __version__, "summary": self.summary,
                "cases": [c.to_dict() for c in self.cases]}

    @classmethod
    def from_dict(cls, data: dict) -> "RunResult":
        """The inverse of :meth:`to_dict` (the summary is recounted from the cases)."""
        summary = data.get("summary", {})
        return cls(cases=tuple(CaseResult.from_dict(c) for c in data.get("cases", ())),
                   seconds=_float(summary.get("seconds", 0.0)),
                   interrupted=summary.get("interrupted", "") if summary.get("incomplete")
                   else "", not_run=summary.get("not_run", 0))
