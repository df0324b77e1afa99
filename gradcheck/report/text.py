"""Text report: one line per case run, no wider than the width it is given (the
terminal's), details under the ones that did not pass; ``verbose``: every witness's
error/tolerance, the details of every case, and the contract notes."""

from __future__ import annotations

import textwrap

from ..base.result import APPROXIMATE, FAILED, INCONCLUSIVE, PASSED, SKIPPED, XFAIL
from .details import chain, counts, full_text, gradient_lines, incomplete_line, skip_line, where
from .labels import COLOR, LABEL_WIDTH, label
from .mismatch import APPROX_MARK, FAILED_MARK, describe, failing, shown_error, table, tolerances_off
from .opchecks import op_paths, rank, skipped_lines, skipped_summary
# (the CLI imports these from here: the one scrubber is report.scrub)
from .scrub import neutral, one_line, printable, split_lines

#: the width of a report no terminal gives one (a pipe, a file, a CI log)
WIDTH = 80
#: the outcomes whose details wait for -v: what was expected (and -q leaves out)
EXPECTED = (PASSED, XFAIL)
#: characters of a case's name its line keeps at least (longer ones cut with …)
NAME_MIN = 16
NAME_MAX = 40
#: what the summary at the end of a line keeps at least, before a name is cut for it
SUMMARY_MIN = 22
INDENT = " " * 6


def _paint(text: str, outcome: str, color: bool) -> str:
    return f"\033[{COLOR[outcome]}m{text}\033[0m" if color and outcome in COLOR else text


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis for what was cut."""
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def wrap(line: str, width: int) -> list[str]:
    """A detail line broken at spaces into lines of at most ``width`` characters, each
    after the first indented two more than it (a word longer than the width, a path
    most often, is kept whole: a path cut in two can be neither copied nor searched)."""
    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    return textwrap.wrap(line, width=width, subsequent_indent=" " * min(lead + 2, width // 2),
                         break_long_words=False, break_on_hyphens=False) or [line]


def _ratio(w) -> float:
    """How many tolerances the worst element of ``w`` is off (-1: none compared)."""
    if w.worst is None:
        return -1.0
    return tolerances_off(w.worst.obtained, w.worst.expected, w.worst.tolerance)


def times(r: float) -> str:
    """A ratio in few characters: ``0.36``, ``4``, ``158``, ``1.6e3``, ``inf``."""
    if r != r or r in (float("inf"), float("-inf")):
        return str(r)
    if r < 10:
        return f"{r:.2g}"
    if r < 1000:
        return f"{r:.0f}"
    mantissa, exponent = f"{r:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def case_summary(c) -> str:
    """What a case's line ends with: the witnesses that failed (``✗``) or are
    approximate (``≈``), the furthest off first, as ``✗ op.contract 1.8e14×tol +1``
    (+1: one more did) or, failed on no element, ``✗ op.layout: <why>``; where none
    did, the witness closest to its tolerance (``op.backward 0.36×tol``); where no
    witness compared an element, the head of the case's message."""
    off = [w for w in c.witnesses if w.status in (FAILED, APPROXIMATE)]
    ranked = sorted(off or [w for w in c.witnesses if w.worst is not None], key=_ratio,
                    reverse=True)
    if not ranked:
        lines = split_lines(c.message or "")
        return lines[0] if lines else "-"
    w = ranked[0]
    more = f" +{len(ranked) - 1}" if off and len(ranked) > 1 else ""
    if w.status == FAILED and _ratio(w) <= 1:   # failed on no element: say on what
        head = split_lines(w.message or "")
        return f"{FAILED_MARK} {w.witness}{more}: {head[0] if head else 'failed'}"
    mark = (f"{FAILED_MARK} " if w.status == FAILED else
            f"{APPROX_MARK} " if w.status == APPROXIMATE else "")
    return f"{mark}{w.witness} {times(_ratio(w))}×tol{more}"


def _columns(shown, width: int) -> tuple[int, int, int]:
    """The widths of the name, dtype and kind columns of ``shown``'s lines: the name
    as long as the longest (up to NAME_MAX), less where the line would leave the
    summary under SUMMARY_MIN characters (down to NAME_MIN)."""
    dtype_w = max(len(one_line(c.dtype)) for c in shown)
    kind_w = max(len(one_line(c.mode or "-")) for c in shown)
    fixed = LABEL_WIDTH + 1 + 2 + dtype_w + 2 + kind_w + 2
    longest = max(len(one_line(c.name)) for c in shown)
    name_w = min(longest, NAME_MAX, max(NAME_MIN, width - fixed - SUMMARY_MIN))
    return name_w, dtype_w, kind_w


def case_line(c, widths: tuple[int, int, int], width: int, color: bool = False) -> str:
    """One case run's line: its outcome's word, name, dtype, kind and :func:`case_summary`,
    no wider than ``width`` (a name longer than its column and a summary beyond the
    width cut with an ellipsis)."""
    name_w, dtype_w, kind_w = widths
    word = f"{label(c.outcome):<{LABEL_WIDTH}}"
    text = fit(f"{word} {fit(one_line(c.name), name_w):<{name_w}}  "
               f"{one_line(c.dtype):<{dtype_w}}  {one_line(c.mode or '-'):<{kind_w}}  "
               f"{one_line(case_summary(c))}".rstrip(), width)
    if text.startswith(word):   # (only the word is painted: the cut counts characters)
        text = _paint(word, c.outcome, color) + text[len(word):]
    return text


def witness_lines(c, width: int, color: bool = False) -> list[str]:
    """Every witness's error/tolerance (``op.forward 5.6e-17/3.8e-16``, ``✗`` where it
    failed, painted when ``color``), an op case's checks in OP_CHECKS order, as many to
    a line as fit in ``width``, and the case's time after them (``-v``)."""
    ws = sorted(c.witnesses, key=lambda w: rank(w.witness) if w.witness.startswith("op.")
                else -1)
    cells = [one_line(f"{w.witness} {shown_error(w)}") for w in ws]
    cells.append(f"{c.seconds:.2f}s")
    rows: list[list[str]] = [[]]
    for cell in cells:   # (measured unpainted: the paint takes no column)
        if rows[-1] and len(INDENT + "  ".join([*rows[-1], cell])) > width:
            rows.append([])
        rows[-1].append(cell)
    return [INDENT + "  ".join(_paint_cell(cell, color) for cell in row) for row in rows]


def _paint_cell(cell: str, color: bool) -> str:
    outcome = (FAILED if cell.endswith(FAILED_MARK) else
               APPROXIMATE if cell.endswith(APPROX_MARK) else None)
    return _paint(cell, outcome, color) if outcome else cell


def render_text(result, *, color: bool = False, verbose: bool = False,
                quiet: bool = False, width: int = WIDTH) -> str:
    """The text report of ``result``, each line at most ``width`` characters (a line
    of details longer than that broken at spaces); ``quiet``: only the cases that did
    not go as expected, and the summary."""
    width = max(int(width), 40)
    lines = []
    shown = [c for c in result.cases
             if not (quiet and c.outcome in (*EXPECTED, SKIPPED))]
    if shown:
        widths = _columns(shown, width)
        for c in shown:
            lines.append(case_line(c, widths, width, color))
            if verbose:
                lines += witness_lines(c, width, color)
            if c.outcome not in EXPECTED or verbose:
                # (a name cut on its line is given whole first: it is what -k takes)
                cut = len(one_line(c.name)) > widths[0]
                lines += [part for line in _details(c, verbose, cut)
                          for part in wrap(line, width)]
    lines.append("")
    lines += summary_lines(result, width, verbose)
    # the net under the fields' own scrubbing: no two fields side by side form a command
    return neutral("\n".join(lines) + "\n")


def summary_lines(result, width: int = WIDTH, verbose: bool = False) -> list[str]:
    """What a case line's summary means, then the counts (the last line, as pytest's;
    an interrupted run's line after it), in lines of at most ``width``."""
    s = result.summary
    near = f", {APPROX_MARK} approximate" if s.get("approximate") else ""
    every = ("; under it, every witness's worst element's error/tolerance"
             if verbose else "; -v: every witness")
    lines = wrap(f"(per case: the witness whose worst element is furthest off, its error "
                 f"in tolerances against the symbolic reference, {FAILED_MARK} failed"
                 f"{near}{every})", width)
    lines += wrap(f"{counts(s)} in {s['seconds']:.2f}s", width)
    if result.incomplete:
        lines += wrap(incomplete_line(result), width)
    return lines


def _details(c, verbose: bool, cut: bool = False) -> list[str]:
    out = [f"      name: {one_line(c.name)}"] if cut else []
    if c.outcome not in EXPECTED:
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
    # what PyTorch's contract for a backward accepts as it is: news to no one, -v only
    if verbose:
        out += [f"      contract note: {one_line(n)}" for n in c.contract_notes]
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
