"""Text report: one aligned line per case, details under the ones that did not pass."""

from __future__ import annotations

from ..base.result import APPROXIMATE, ERROR, FAILED, INCONCLUSIVE, PASSED, SKIPPED
from .details import chain, counts, full_text, gradient_lines, incomplete_line, skip_line, where
from .mismatch import APPROX_MARK, FAILED_MARK, describe, failing, shown_error, table
from .opchecks import NAMES, op_paths, rank, skipped_lines, skipped_summary
# (the CLI imports these from here: the one scrubber is report.scrub)
from .scrub import neutral, one_line, printable, split_lines

_LABEL = {PASSED: "PASS", APPROXIMATE: "APPROX", FAILED: "FAIL", ERROR: "ERROR",
          SKIPPED: "SKIP"}
# approximate: bright yellow, apart from a skip's plain yellow
_COLOR = {PASSED: "32", APPROXIMATE: "93", FAILED: "31", ERROR: "35", SKIPPED: "33"}


def _paint(text: str, status: str, color: bool) -> str:
    return f"\033[{_COLOR[status]}m{text}\033[0m" if color else text


def _family(case) -> tuple[str, ...]:
    """The kinds of witness a case has (``engine``, ``torch``, ``numeric``; ``op`` for
    all of an op's ``op.*``): cases of one family share columns."""
    return tuple(sorted({w.witness.split(".")[0] for w in case.witnesses}))


def _errs(cases, color: bool) -> list[str]:
    """Each case's ``witness error/tolerance`` (:func:`shown_error`) of every witness,
    lined up: among the cases of one :func:`_family`, one column per witness name (a
    case without that witness leaves its column blank, an op's ``op.jacobian``), so that
    the time after them lines up too (a run of formulas and ops keeps each family's
    lines as narrow as they are). A failed witness is painted when ``color``."""
    parts = [{w.witness: one_line(f"{w.witness} {shown_error(w)}") for w in c.witnesses}
             for c in cases]
    names: dict[tuple, list[str]] = {}
    for c in cases:
        names.setdefault(_family(c), []).extend(w.witness for w in c.witnesses)
    # (an op case's checks in OP_CHECKS order, whichever case has one first)
    widths = {family: {n: max(len(p.get(n, "")) for c, p in zip(cases, parts)
                              if _family(c) == family)
                       for n in sorted(dict.fromkeys(these),
                                       key=lambda n: rank(n) if n in NAMES else -1)}
              for family, these in names.items()}
    rows = []
    for c, row in zip(cases, parts):
        cells = []
        for n, width in widths[_family(c)].items():
            text = row.get(n, "")
            pad = " " * (width - len(text))
            status = (FAILED if text.endswith(FAILED_MARK) else
                      APPROXIMATE if text.endswith(APPROX_MARK) else None)
            cells.append((_paint(text, status, color) if status else text) + pad)
        rows.append("  ".join(cells))
    return rows


def render_text(result, *, color: bool = False, verbose: bool = False,
                quiet: bool = False) -> str:
    cases = result.cases
    lines = []
    if cases:
        name_w = min(40, max(len(one_line(c.name)) for c in cases))
        dtype_w = max(7, *(len(one_line(c.dtype)) for c in cases))   # bfloat16: 8
        shown = [c for c in cases if not (quiet and c.status in (PASSED, SKIPPED))]
        errs = _errs(shown, color)
        # (APPROX is a letter wider than the rest: the column widens only where it shows)
        label_w = max([5, *(len(_LABEL.get(c.status, c.status)) for c in shown)])
        for c, err in zip(shown, errs):
            label = _paint(f"{_LABEL[c.status]:<{label_w}}", c.status, color)
            expect = " (expect fail)" if c.expect == "fail" else ""
            lines.append(f"{label} {one_line(c.name):<{name_w}}  {one_line(c.dtype):<{dtype_w}}  "
                         f"{one_line(c.mode or '-'):<11}"
                         f"  {err} {c.seconds:6.2f}s{expect}")
            if c.status != PASSED or verbose:
                lines += _details(c, verbose)
    s = result.summary
    lines.append("")
    near = f", {APPROX_MARK} where approximate" if s.get("approximate") else ""
    lines.append(f"{counts(s)} in {s['seconds']:.2f}s "
                 f"(per witness: its worst element's error/tolerance against the symbolic "
                 f"reference, {FAILED_MARK} where it failed{near})")
    if result.incomplete:
        lines.append(incomplete_line(result))
    # the net under the fields' own scrubbing: no two fields side by side form a command
    return neutral("\n".join(lines) + "\n")


def _details(c, verbose: bool) -> list[str]:
    out = []
    if c.status != PASSED:
        out.append(f"      at {one_line(where(c))}")
    out += [f"      {one_line(line)}" for line in split_lines(c.message or "")]
    checks = {p.name for p in op_paths(c)}   # an op case's: said below, all together
    for w in c.witnesses:
        if w.status in (SKIPPED, INCONCLUSIVE):
            # (a skipped case's message already gives the reasons)
            if c.status != SKIPPED and w.witness not in checks:
                out.append(f"      {one_line(skip_line(w))}")
            continue
        if w.status != PASSED and w.worst is not None:
            out.append(f"      {one_line(w.witness)}: worst "
                       f"{one_line(describe(w).worst_line)}")
        if w.grad_fn is not None and (verbose or c.status != PASSED):
            out.append(f"      {one_line(w.witness)} grad_fn: {one_line(chain(w.grad_fn))}")
    # the checks an op case skipped: -v each with the whole of why, else one line
    # (the row's columns show which ran)
    skips = [] if c.status == SKIPPED else skipped_lines(c) if verbose \
        else [skipped_summary(c)]
    out += [f"      {one_line(line)}" for line in skips if line]
    if verbose or c.status != PASSED:
        out += [f"      {one_line(line)}" for line in gradient_lines(c)]
    out += [f"      note: {one_line(n)}" for n in c.notes]
    return out + output_lines(c)


OUTPUT_LINES = 20   # lines of an op's output the text report shows (JSON keeps it all)


def output_lines(c) -> list[str]:
    """What the case's op printed, each line scrubbed and marked as the op's (never
    a line of the run's own: a workflow command in it is neutral)."""
    if not c.output:
        return []
    lines = split_lines(c.output.rstrip("\n"))
    out = [f"      op output ({len(c.output)} characters):"]
    out += [f"      | {one_line(line)}" for line in lines[:OUTPUT_LINES]]
    if len(lines) > OUTPUT_LINES:
        out.append(f"      | ... {len(lines) - OUTPUT_LINES} more lines (the JSON report "
                   "has them)")
    return out


def failure_text(case) -> str:
    """What a failed test item shows (the pytest plugin's failure, and the assertion of
    ``assert_passed()``): the case's full diagnosis
    (:func:`gradcheck.report.details.full_text`) and the table of its worst elements
    (:func:`gradcheck.report.mismatch.table`), scrubbed, and a command that re-runs it
    where the case comes from a file."""
    lines = [printable(full_text(case))]
    rows = table(failing(case.witnesses))
    if rows:
        lines += ["worst elements:"] + [printable(row) for row in rows]
    if case.dtype and case.dtype != "-" and case.file and not case.file.startswith("<"):
        lines.append(f"reproduce: gradcheck run {one_line(case.file)} "
                     f"-k {one_line(case.name)!r} --dtype {one_line(case.dtype)}")
    return neutral("\n".join(lines))
