"""Markdown report for a pull-request comment (GitHub-flavoured): a title line with the
verdict and counts, a table of the cases that did not pass, and the full table of every
case under a collapsed ``<details>``.

Case names and messages come from user files: :func:`cell` shows control characters as
escapes and neutralises workflow commands (:func:`gradcheck.report.scrub.printable`),
escapes HTML and the Markdown punctuation that could format, link or break a table row,
breaks what GitHub would autolink (URLs, ``www.``, e-mail addresses:
:func:`gradcheck.report.scrub.unlinked`) and turns newlines into ``<br>``.

GitHub refuses a comment over 65,536 characters: the report stays under it. The title
line is always there; then as many cases that did not pass as fit, in report order, then
as many rows of the table of every case; a line says how many were left out and how many
characters they would have taken."""

from __future__ import annotations

import html
import re

from ..base.result import APPROXIMATE, ERROR, FAILED, PASSED, SKIPPED, XFAIL, XPASS
from .details import counts, incomplete_line, skipped, where
from .mismatch import FAILED_MARK, failing, shown_error
from .opchecks import NAMES, rank
from .scrub import neutral, printable, unlinked

# by outcome: an expect = "fail" case caught is xfail, one that agreed xpass (a failure)
_ICON = {PASSED: "✅ passed", APPROXIMATE: "⚠️ approximate", FAILED: "❌ failed",
         ERROR: "💥 error", SKIPPED: "⏭️ skipped", XFAIL: "☑️ xfail", XPASS: "❌ xpass"}
# Inline Markdown that user text must not trigger: emphasis, code, links and images,
# strikethrough, math and table pipes, and escapes themselves (raw HTML and entities are
# escaped by html.escape).
_MD = re.compile(r"([\\`*_\[\]!~$|])")
_CELL_MAX = 600              # characters of one message cell
_NAME_MAX = 200              # of a case's name or location
_COMMENT_MAX = 65536         # GitHub refuses a longer comment
_ROOM = _COMMENT_MAX - 1500  # for the rows: the rest is the frame and the left-out line


def cell(text, limit: int | None = None, *, code: bool = False) -> str:
    """``text`` as literal content of one table cell. ``code`` sets it in ``<code>``,
    where GitHub neither links @mentions, #references nor :emoji: from user text."""
    text = printable(text).strip()   # newlines kept for <br>
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    if not text:
        return ""
    lines = [unlinked(html.escape(_MD.sub(r"\\\1", line), quote=True))
             for line in text.split("\n")]
    body = "<br>".join(lines)
    return f"<code>{body}</code>" if code else body


def _row(values) -> str:
    return "| " + " | ".join(values) + " |"


def _table(header, rows) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)]


def _title(result) -> str:
    s = result.summary
    ok = not (s["failed"] or s.get("xpassed") or s["errored"] or result.incomplete)
    return f"## {'✅' if ok else '❌'} gradcheck: {counts(s)} in {s['seconds']:.2f}s"


def _problem_rows(case) -> list[list[str]]:
    base = [_ICON[case.outcome], cell(case.name, _NAME_MAX, code=True), cell(case.dtype),
            cell(where(case), _NAME_MAX, code=True)]
    mismatches = failing(case.witnesses)
    if not mismatches:
        return [base + ["-", "-", cell(case.message or case.status, _CELL_MAX, code=True)]]
    rows = []
    for m in mismatches:
        message = m.explanation() or case.message
        rows.append(base + [cell(m.witness), cell(m.worst_line, code=True) or "-",
                            cell(message or m.status, _CELL_MAX, code=True)])
    return rows


def _all_rows(result) -> tuple[list[str], list[list[str]]]:
    names = list(dict.fromkeys(w.witness for c in result.cases for w in c.witnesses))
    # an op case's checks in the order they run, after the formulas' witnesses (as
    # they come: a run of formulas keeps its columns)
    names.sort(key=lambda n: (1, rank(n)) if n in NAMES else (0, 0))
    header = ["status", "case", "dtype", "location", *names, "time"]
    rows = []
    for c in result.cases:
        errs = []
        unchecked = dict(c.unchecked)   # (why: in the list under the table)
        for name in names:
            w = c.witness(name)
            errs.append("skipped" if name in unchecked else "" if w is None
                        else "skipped" if w.status == SKIPPED else shown_error(w))
        rows.append([_ICON[c.outcome], cell(c.name, _NAME_MAX, code=True), cell(c.dtype),
                     cell(where(c), _NAME_MAX, code=True),
                     *(cell(e) for e in errs), f"{c.seconds:.2f}s"])
    return header, rows


def size(text: str) -> int:
    """``text``'s length as GitHub counts a comment's: in UTF-16 code units (a character
    above U+FFFF, most emoji, is two)."""
    return len(text.encode("utf-16-le")) // 2


def _lines_size(lines) -> int:
    """The size of ``lines`` joined by newlines (one more for the last)."""
    return sum(size(x) + 1 for x in lines)


def _fit(items: list[list[str]], room: int) -> tuple[list[str], int, int]:
    """The lines of the first ``items`` (each a list of lines) that fit in ``room``, and
    how many items and characters were left out (after the first that does not fit)."""
    kept: list[str] = []
    used = 0
    for i, item in enumerate(items):
        need = _lines_size(item)
        if used + need > room:
            return kept, len(items) - i, sum(_lines_size(it) for it in items[i:])
        kept += item
        used += need
    return kept, 0, 0


def _left_out(problems: int, shown: int, rows: int, listed: int, chars: int) -> str:
    parts = []
    if shown < problems:
        parts.append(f"{problems - shown:,} of {problems:,} case runs that did not pass")
    if listed < rows:
        parts.append(f"{rows - listed:,} of {rows:,} rows of the table of all case runs")
    return (f"**Left out** to stay under GitHub's {_COMMENT_MAX:,}-character comment "
            f"limit: {' and '.join(parts)} ({chars:,} characters); the JSON and JUnit "
            "reports hold every case.")


def _details(result, room: int) -> tuple[list[str], int, int]:
    """The collapsed table of every case run, in ``room``, and how many rows and
    characters were left out."""
    header, rows = _all_rows(result)
    # why a witness says "skipped", once per reason rather than once per run (the
    # reasons are gradcheck's own, a few)
    skips = [f"- {cell(s, _CELL_MAX)}"
             for s in dict.fromkeys(x for c in result.cases for x in skipped(c))]
    before = ["<details>",
              f"<summary>All {len(result.cases)} case runs (each witness: its worst "
              f"element's error/tolerance against the symbolic reference, {FAILED_MARK} "
              f"where it failed)</summary>", "",
              *_table(header, [])]
    after = ["", *skips, *([""] if skips else []), "</details>", ""]
    more_row = _row(["… 999999 more"] + [""] * (len(header) - 1))
    table, more, chars = _fit([[_row(r)] for r in rows],
                              room - _lines_size(before + after + [more_row]))
    if more:
        table.append(_row([f"… {more} more"] + [""] * (len(header) - 1)))
    return before + table + after, more, chars


def render_markdown(result) -> str:
    title = [_title(result), ""]
    if result.incomplete:   # gradcheck's own words: nothing to escape
        title += [f"**{incomplete_line(result)}**", ""]
    problems = [c for c in result.cases if c.outcome not in (PASSED, XFAIL)]
    room = _ROOM - _lines_size(title)
    body, cut, chars = [], 0, 0
    if problems:
        head = _table(["status", "case", "dtype", "location", "witness", "worst element",
                       "message"], [])
        shown, cut, chars = _fit([[_row(r) for r in _problem_rows(c)] for c in problems],
                                 room - _lines_size(head))
        body = [*head, *shown, ""] if shown else []
    elif result.cases:
        caught = result.summary["xfailed"]
        body = ["Every case agrees with the exact symbolic reference"
                + (f", but for {caught} caught as `expect = \"fail\"` said (xfail)."
                   if caught else "."), ""]
    details, more = [], 0
    if result.cases:
        details, more, more_chars = _details(result, room - _lines_size(body))
        chars += more_chars
    if chars:
        body += [_left_out(len(problems), len(problems) - cut, len(result.cases),
                           len(result.cases) - more, chars), ""]
    # neutral: the net under the cells' scrubbing, for a report printed on stdout
    return neutral("\n".join(title + body + details))
