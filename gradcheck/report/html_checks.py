"""The HTML report's table of op checks: one row per op case run, one column per check
in OP_CHECKS order (:mod:`.opchecks`), each cell what that check did: passed or failed,
with its worst element's error/tolerance where it compared one (as every report shows
it: :func:`~gradcheck.report.mismatch.shown_error`), or skipped, with the head of why
in the cell and the whole reason as its tooltip (``title``). A run without op cases has
no such table: a formula's page is as it was.

Text from results is escaped here as in :mod:`.html` (one line, then
:func:`html.escape`)."""

from __future__ import annotations

import html

from ..base.result import APPROXIMATE, ERROR, FAILED, PASSED, SKIPPED
from .details import first_line, title
from .mismatch import element_error, shown_error
from .opchecks import NAMES, OpPath, op_paths, short, skip_text
from .scrub import one_line

_CLASS = {PASSED: "passed", APPROXIMATE: "approximate", FAILED: "failed", ERROR: "error",
          SKIPPED: "skipped"}


def _text(x) -> str:
    return html.escape(one_line(x), quote=True)


def _tooltip(p: OpPath) -> str:
    """What hovering over a cell tells: a skip's whole reason, a failure's first line,
    the worst element's error against its tolerance."""
    w = p.witness
    if p.skipped:
        return skip_text(p)
    if w is not None and w.status not in (PASSED, APPROXIMATE) and w.message:
        return f"{p.name}: {w.status}: {first_line(w.message)}"
    if w is not None and w.worst is not None:
        err = element_error(w.worst.obtained, w.worst.expected)
        return (f"{p.name}: {w.status}; worst element's error {err:.3g} against its "
                f"tolerance {w.worst.tolerance:.3g}")
    return f"{p.name}: {p.status}"


def _cell(p: OpPath | None) -> str:
    if p is None:   # (a check this result does not know: an older gradcheck's)
        return '<td class="check none">-</td>'
    cls = _CLASS.get(p.status, "error")
    shown = f'<span class="{cls}">{_text(p.status)}</span>'
    if p.skipped:
        if p.reason:
            shown += f'<br><span class="why">{_text(short(p.reason))}</span>'
    elif p.witness is not None and p.witness.worst is not None:
        # (a line may break after the "/", never inside a number: thirteen columns of
        # two numbers then fit a screen)
        err = "<wbr>".join(f"<span>{_text(part)}</span>" for part in
                           shown_error(p.witness).replace("/", "/\n", 1).split("\n"))
        shown += f'<br><code class="err">{err}</code>'
    return (f'<td class="check {cls}" data-check="{_text(p.name)}" '
            f'title="{_text(_tooltip(p))}">{shown}</td>')


def op_table(result, sections: set[int]) -> list[str]:
    """The table (``[]`` where no case is an op case's); ``sections``: the cases that
    have a section of their own, which their name links to."""
    rows = [(i, c, {p.name: p for p in op_paths(c)}) for i, c in enumerate(result.cases)]
    rows = [r for r in rows if r[2]]
    if not rows:
        return []
    seen = {name for _, _, paths in rows for name in paths}
    names = [n for n in NAMES if n in seen] + sorted(seen - set(NAMES))
    # (a header is the check's name less "op.", every column being an op check's: a
    # page of 13 columns stays within a screen's width)
    head = "".join(f'<th scope="col" title="{_text(n)}">{_text(n.removeprefix("op."))}'
                   "</th>" for n in names)
    body = []
    for i, case, paths in rows:
        name = _text(title(case))
        if i in sections:
            name = f'<a href="#case-{i}">{name}</a>'
        # (the case's status colours its name; each cell has its check's own colour)
        cls = _CLASS.get(case.status, "error")
        body.append(f'<tr><th scope="row" class="{cls}"><code>{name}</code></th>'
                    + "".join(_cell(paths.get(n)) for n in names) + "</tr>")
    return ['<h2 id="op-checks">Op checks</h2>',
            "<p>Each op case run's checks (<code>op.NAME</code>), in the order they run: "
            "passed or failed with "
            "the worst element's error/tolerance, or skipped and why (the op does not "
            "support that path, the check does not apply to it, or skip_checks switched "
            "it off); hover over a cell for the whole of it.</p>",
            '<div class="wide">',
            f'<table id="op-checks"><thead><tr><th scope="col">case</th>{head}</tr>'
            "</thead>", "<tbody>", *body, "</tbody></table>", "</div>"]
