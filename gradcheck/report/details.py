"""Plain-text pieces the CI renderers share: a case's title and location, a witness's
worst element, and the full diagnosis of a case that did not pass.

What a report says about one witness that did not pass comes from
:mod:`gradcheck.report.mismatch`. Everything here returns raw text (case names and
messages as the case file wrote them, broken into lines at ``\n`` only:
:func:`gradcheck.report.scrub.split_lines`); each renderer escapes for its own format."""

from __future__ import annotations

from ..base.result import INCONCLUSIVE, PASSED, SKIPPED
from .mismatch import chain, describe, shown_error  # noqa: F401  (chain: for the renderers)
from .opchecks import op_paths, skipped_lines
from .scrub import split_lines


def title(case) -> str:
    """``name[dtype]``, the way pytest names a parametrized test (a case-file error has
    no dtype: just the name)."""
    return f"{case.name}[{case.dtype}]" if case.dtype and case.dtype != "-" else str(case.name)


def where(case) -> str:
    """``file:line`` (or the file alone when the line is unknown)."""
    return f"{case.file}:{case.line}" if case.line else str(case.file)


def worst(w) -> str:
    """One line for a witness's worst element, or ``""`` when it has none."""
    return describe(w).worst_line


def diagnosis(w) -> str:
    return describe(w).diagnosis


def first_line(text: str, default: str = "") -> str:
    lines = split_lines(str(text).strip())
    return lines[0] if lines else default


def headline(case) -> str:
    """A one-line summary of why a case did not pass (for attributes and titles)."""
    if case.message:
        return first_line(case.message, case.status)
    for w in failing_witnesses(case):
        if w.message:
            return f"{w.witness}: {first_line(w.message)}"
    return case.status


def failing_witnesses(case) -> list:
    """The witnesses that failed or errored (a skipped one did not run: not a problem)."""
    return [w for w in case.witnesses if w.status not in (PASSED, SKIPPED, INCONCLUSIVE)]


def skip_line(w) -> str:
    """``engine: skipped: the engine witness runs in float64 and float32 only`` (or
    ``numeric: inconclusive: ...``)."""
    return f"{w.witness}: {w.status}: {w.message}" if w.message else \
        f"{w.witness}: {w.status}"


def skipped(case) -> list[str]:
    """One :func:`skip_line` per witness of ``case`` that did not run, or ran and could
    not settle (inconclusive); of an op case, one per check skipped or not run, why
    included, in OP_CHECKS order (:func:`gradcheck.report.opchecks.skipped_lines`)."""
    if op_paths(case):
        return skipped_lines(case)
    return [skip_line(w) for w in case.witnesses if w.status in (SKIPPED, INCONCLUSIVE)]


def witness_lines(w) -> list[str]:
    """Everything known about one witness that did not pass, one item a line."""
    return describe(w).lines()


def gradient_lines(case) -> list[str]:
    """The exact gradients as formulas (ḡ: the output's cotangent, ⊙: elementwise
    product), the shared subexpressions first."""
    lines = []
    for quantity, formula in case.gradients:
        for line in split_lines(formula):
            lines.append(f"exact: {line}" if not quantity else f"exact: {quantity} = {line}")
    return lines


def full_text(case) -> str:
    """The whole diagnosis of one case: what a CI system shows under a failed test."""
    out = [f"{title(case)} at {where(case)}: {case.outcome}"
           + (' (expect = "fail")' if case.expect == "fail" else "")]
    if case.message:
        out += split_lines(case.message)
    for w in case.witnesses:
        if w.status not in (PASSED, SKIPPED, INCONCLUSIVE):
            out += witness_lines(w)
    out += skipped(case)
    agreed = [f"{w.witness} {shown_error(w)}" for w in case.witnesses if w.status == PASSED]
    if agreed:
        out.append("agreed (worst error/tolerance): " + ", ".join(agreed))
    if case.mode or case.points:
        out.append(f"reference: {case.mode or '-'}; {case.points} point(s), seed {case.seed}")
    out += gradient_lines(case)
    out += [f"note: {n}" for n in case.notes]
    return "\n".join(out)


def counts(summary: dict) -> str:
    """``3 passed, 1 approximate, 0 failed, 0 errored, 0 skipped, 2 xfailed``: the
    summary's counts, as every report's summary line says them (approximate, xfailed
    and xpassed only where there are some; a JSON report of an earlier version has
    none of the last two)."""
    def some(key: str) -> str:
        return f", {summary[key]} {key}" if summary.get(key) else ""

    return (f"{summary['passed']} passed{some('approximate')}, "
            f"{summary['failed']} failed, {summary['errored']} errored, "
            f"{summary['skipped']} skipped{some('xfailed')}{some('xpassed')}")


def incomplete_line(result) -> str:
    """The line every report gives a run stopped by a signal ("" for a complete one)."""
    if not result.incomplete:
        return ""
    return (f"INCOMPLETE: the run was interrupted by {result.interrupted}; "
            f"{result.not_run} case run(s) did not finish and are not in this report")
