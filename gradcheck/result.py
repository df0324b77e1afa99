"""Results are data: frozen dataclasses with ``to_dict()``. Renderers turn them into
text, JSON and the other formats; nothing here prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"


def _plain(x: Any) -> Any:
    """JSON-safe: tuples to lists, non-finite floats to strings."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


@dataclass(frozen=True)
class Worst:
    """The element that is furthest outside its tolerance (or closest to it)."""

    quantity: str                  # "value", "x.grad", "h.grad"
    index: tuple[int, ...]
    obtained: float
    expected: float
    tolerance: float
    point: int                     # which sampled point

    def to_dict(self) -> dict:
        return _plain(self.__dict__.copy())


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

    @property
    def worst_index(self) -> str | None:
        if self.worst is None:
            return None
        return f"{self.worst.quantity}[{','.join(map(str, self.worst.index))}]"

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
        })


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
    mode: str = ""                 # "elementwise" or "expanded" (the reference's shape)
    points: int = 0
    seed: int = 0
    notes: tuple[str, ...] = ()
    # for errors: "case" (bad input, an op that cannot be imported), "internal" (a bug in
    # gradcheck), "timeout"; for an op's failure (or catch): "op raised", "op crashed"
    error_kind: str = ""

    def witness(self, name: str) -> WitnessResult | None:
        return next((w for w in self.witnesses if w.witness == name), None)

    def to_dict(self) -> dict:
        return _plain({
            "name": self.name, "file": self.file, "line": self.line, "dtype": self.dtype,
            "status": self.status, "expect": self.expect, "mode": self.mode,
            "points": self.points, "seed": self.seed, "seconds": round(self.seconds, 6),
            "witnesses": {w.witness: w.to_dict() for w in self.witnesses},
            "message": self.message, "notes": list(self.notes),
            "error_kind": self.error_kind or None,
        })


@dataclass(frozen=True)
class RunResult:
    """A whole run: every case result, in the order the cases were found."""

    cases: tuple[CaseResult, ...] = ()
    seconds: float = 0.0

    @property
    def summary(self) -> dict[str, Any]:
        count = {s: sum(c.status == s for c in self.cases)
                 for s in (PASSED, FAILED, ERROR, SKIPPED)}
        return {"passed": count[PASSED], "failed": count[FAILED], "errored": count[ERROR],
                "skipped": count[SKIPPED], "seconds": round(self.seconds, 3)}

    def to_dict(self) -> dict:
        from . import __version__

        return {"version": __version__, "summary": self.summary,
                "cases": [c.to_dict() for c in self.cases]}
