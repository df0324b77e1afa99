"""Markdown report for a pull-request comment (GitHub-flavoured): a title line with the
verdict and counts, a table of the cases that did not pass, and the full table of every
case under a collapsed ``<details>``.

Case names and messages come from user files: :func:`cell` drops control characters
(:func:`gradcheck.report.scrub.printable`), escapes HTML and the Markdown punctuation
that could format, link or break a table row, and turns newlines into ``<br>``."""

from __future__ import annotations

import html
import re

from ..result import ERROR, FAILED, PASSED, SKIPPED
from .details import skipped, where
from .mismatch import failing
from .scrub import one_newline, printable

_ICON = {PASSED: "✅ passed", FAILED: "❌ failed", ERROR: "💥 error", SKIPPED: "⏭️ skipped"}
# Inline Markdown that user text must not trigger: emphasis, code, links and images,
# strikethrough, math and table pipes, and escapes themselves (raw HTML and entities are
# escaped by html.escape).
_MD = re.compile(r"([\\`*_\[\]!~$|])")
_CELL_MAX = 600              # characters of one message cell
_COMMENT_MAX = 60000         # GitHub refuses comments over 65536 characters


def cell(text, limit: int | None = None, *, code: bool = False) -> str:
    """``text`` as literal content of one table cell. ``code`` sets it in ``<code>``,
    where GitHub neither links @mentions, #references nor :emoji: from user text."""
    text = printable(one_newline(text)).strip()   # newlines kept for <br>
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    if not text:
        return ""
    lines = [html.escape(_MD.sub(r"\\\1", line), quote=True) for line in text.split("\n")]
    body = "<br>".join(lines)
    return f"<code>{body}</code>" if code else body


def _row(values) -> str:
    return "| " + " | ".join(values) + " |"


def _table(header, rows) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)]


def _title(result) -> str:
    s = result.summary
    ok = s["failed"] == 0 and s["errored"] == 0
    return (f"## {'✅' if ok else '❌'} gradcheck: {s['passed']} passed, {s['failed']} failed, "
            f"{s['errored']} errored, {s['skipped']} skipped in {s['seconds']:.2f}s")


def _problem_rows(case) -> list[list[str]]:
    base = [_ICON[case.status], cell(case.name, code=True), cell(case.dtype),
            cell(where(case), code=True)]
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
    header = ["status", "case", "dtype", "location", *names, "time"]
    rows = []
    for c in result.cases:
        errs = []
        for name in names:
            w = c.witness(name)
            errs.append("-" if w is None else "error" if w.status == ERROR
                        else "skipped" if w.status == SKIPPED
                        else f"{w.max_rel_err:.1e}" + ("" if w.status == PASSED else " ❌"))
        rows.append([_ICON[c.status], cell(c.name, code=True), cell(c.dtype),
                     cell(where(c), code=True),
                     *(cell(e) for e in errs), f"{c.seconds:.2f}s"])
    return header, rows


def render_markdown(result) -> str:
    lines = [_title(result), ""]
    problems = [c for c in result.cases if c.status != PASSED]
    if problems:
        rows = [r for c in problems for r in _problem_rows(c)]
        lines += _table(["status", "case", "dtype", "location", "witness", "worst element",
                         "message"], rows)
        lines.append("")
    elif result.cases:
        lines += ["Every case agrees with the exact symbolic reference.", ""]
    if result.cases:
        header, rows = _all_rows(result)
        table = _table(header, [])
        budget = _COMMENT_MAX - sum(len(x) + 1 for x in lines) - 500
        used = sum(len(x) + 1 for x in table)
        for i, r in enumerate(rows):
            line = _row(r)
            if used + len(line) + 1 > budget:
                table.append(_row([f"… {len(rows) - i} more"] + [""] * (len(header) - 1)))
                break
            table.append(line)
            used += len(line) + 1
        # why a witness says "skipped", once per reason rather than once per run
        skips = dict.fromkeys(line for c in result.cases for line in skipped(c))
        lines += ["<details>",
                  f"<summary>All {len(result.cases)} case runs (max relative error of "
                  f"each witness against the symbolic reference)</summary>", "",
                  *table, "", *(f"- {cell(s)}" for s in skips), *([""] if skips else []),
                  "</details>", ""]
    return "\n".join(lines)
