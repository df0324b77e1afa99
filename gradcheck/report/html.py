"""HTML report: one self-contained page, nothing fetched from anywhere (no network, no
CDN; the pictures are inline PNG ``data:`` URLs, the style and the script inline).

- the summary (counts, seconds, the incomplete marker of an interrupted run);
- a table of every case run in file order, sortable by clicking a header (JavaScript;
  ``#sort=KEY`` in the address sorts at load; see :mod:`.html_assets`);
- where there are op cases, a table of their checks, one column each
  (:mod:`.html_checks`): what each check did, or that it was skipped and why;
- per case that did not pass, a section: its diagnosis (the text of
  :func:`gradcheck.report.details.full_text`), per witness that did not pass its message
  and diagnosis (:func:`gradcheck.report.mismatch.describe`), its worst elements, its
  grad_fn chain, and the pictures of its error maps (:mod:`.pictures`): a heat map of
  (obtained - expected) / tolerance per quantity and a histogram against the tolerance.

A passing case is one table row and nothing more: a page of hundreds stays small.

Every text from a case file or an op goes through :func:`~gradcheck.report.scrub.
printable` (or :func:`~gradcheck.report.scrub.one_line`) and then :func:`html.escape`;
the whole page through :func:`~gradcheck.report.scrub.neutral`, as every report."""

from __future__ import annotations

import html

from ..base.result import APPROXIMATE, INCONCLUSIVE, PASSED, SKIPPED, XFAIL, XPASS
from .details import failing_witnesses, full_text, incomplete_line, title, where
from .html_assets import CSS, JS
from .html_checks import op_table
from .mismatch import describe, shown_error, tolerances_off
from .scrub import neutral, one_line, printable

# the class (colour) of each outcome: a caught expect = "fail" case is a pass, an
# expected failure that agreed a failure
_STATUS = {"passed": "passed", APPROXIMATE: "approximate", "failed": "failed",
           "error": "error", "skipped": "skipped", XFAIL: "passed", XPASS: "failed"}
_NUM = ' class="num"'
#: error maps drawn in one page at most (two pictures each, ~0.2 s and ~30 kB a map):
#: the first, in report order; the JSON report holds every map's numbers
MAPS_DRAWN = 24
_COLUMNS = (("order", "#"), ("status", "status"), ("name", "case"), ("dtype", "dtype"),
            ("location", "location"), ("mode", "reference"),
            ("witnesses", "witnesses not passing"), ("err", "worst error/tolerance"),
            ("seconds", "seconds"))


def text(x) -> str:
    """One line of user text, escaped for HTML (content or attribute)."""
    return html.escape(one_line(x), quote=True)


def block(x) -> str:
    """User text that keeps its lines (for a ``<pre>``), escaped for HTML."""
    return html.escape(printable(x), quote=True)


def _status(status: str) -> str:
    cls = _STATUS.get(status, "error")
    return f'<span class="{cls}">{text(status)}</span>'


def _summary(result) -> list[str]:
    s = result.summary
    ok = not (s["failed"] or s.get("xpassed") or s["errored"] or result.incomplete)
    near = s.get("approximate", 0)
    verdict = ("NOT passed" if not ok else "passed, some approximately" if near
               else "all passed")
    out = [f'<h1 id="summary">gradcheck: {verdict}</h1>',
           '<p class="counts">'
           f'<span class="passed">{s["passed"]} passed</span>, '
           + (f'<span class="approximate">{near} approximate</span>, ' if near else "")
           + f'<span class="failed">{s["failed"]} failed</span>, '
           f'<span class="error">{s["errored"]} errored</span>, '
           f'<span class="skipped">{s["skipped"]} skipped</span>'
           + (f', <span class="passed">{s["xfailed"]} xfailed</span>'
              if s.get("xfailed") else "")
           + (f', <span class="failed">{s["xpassed"]} xpassed</span>'
              if s.get("xpassed") else "")
           + f' in {s["seconds"]:.2f}s</p>']
    if near:   # what the word means, once (gradcheck's own words)
        out.append('<p class="legend" id="legend"><span class="approximate">approximate'
                   '</span>: a float64 run whose every mismatch lies within the tolerance '
                   'the same check has in float32 (an approximation: a threshold, a '
                   'rounded constant, float32 arithmetic inside); not a failure unless '
                   'the case is strict.</p>')
    if result.incomplete:   # gradcheck's own words, escaped all the same
        out.append(f'<p class="incomplete" id="incomplete"><strong>'
                   f'{text(incomplete_line(result))}</strong></p>')
    return out


def _number(x: float) -> str:
    """``x`` as JavaScript's Number() reads it (NaN sorts as the largest)."""
    return "Infinity" if x != x or x == float("inf") else repr(float(x))


def _worst(case):
    """The witness whose worst element is furthest outside (or closest to) its
    tolerance, and that ratio (None, -1 when no witness compared an element): the
    column every report shows (:func:`~gradcheck.report.mismatch.shown_error`)."""
    found, ratio = None, -1.0
    for w in case.witnesses:
        if w.worst is None:
            continue
        r = tolerances_off(w.worst.obtained, w.worst.expected, w.worst.tolerance)
        if r > ratio:
            found, ratio = w, r
    return found, ratio


def _row(i: int, case, anchor: bool) -> str:
    bad = [w.witness for w in failing_witnesses(case)]
    name = text(case.name)
    if anchor:
        name = f'<a href="#case-{i}">{name}</a>'
    worst, ratio = _worst(case)
    cells = [("order", str(i), str(i + 1), True),
             ("status", text(case.outcome), _status(case.outcome), False),
             ("name", text(case.name), f"<code>{name}</code>", False),
             ("dtype", text(case.dtype), text(case.dtype), False),
             ("location", text(where(case)), f"<code>{text(where(case))}</code>", False),
             ("mode", text(case.mode), text(case.mode or "-"), False),
             ("witnesses", text(" ".join(bad)), text(", ".join(bad) or "-"), False),
             ("err", _number(ratio) if worst else "-1",
              text(f"{worst.witness} {shown_error(worst)}") if worst else "-", True),
             ("seconds", f"{case.seconds:.6f}", f"{case.seconds:.2f}", True)]
    tds = "".join(f'<td data-key="{k}" data-sort="{sort}"{_NUM if num else ""}>{shown}</td>'
                  for k, sort, shown, num in cells)
    return f'<tr class="{_STATUS.get(case.outcome, "error")}">{tds}</tr>'


def _table(result, sections: set[int]) -> list[str]:
    head = "".join(f'<th data-key="{k}" aria-sort="none" title="sort by {label}">'
                   f"{label}</th>" for k, label in _COLUMNS)
    rows = [_row(i, c, i in sections) for i, c in enumerate(result.cases)]
    return ['<h2 id="all-cases">All case runs</h2>',
            '<p>In file order; click a header to sort (again: the other way).</p>',
            f'<table id="cases"><thead><tr>{head}</tr></thead>', "<tbody>", *rows,
            "</tbody></table>"]


def _elements(m) -> list[str]:
    if not m.elements:
        return []
    head = ("element", "point", "obtained", "expected", "tolerance", "|diff| / tol")
    rows = []
    for e in m.elements:
        ratio = tolerances_off(e.obtained, e.expected, e.tolerance)
        rows.append("<tr>" + "".join(
            f'<td class="num">{v}</td>' if k else f"<td><code>{v}</code></td>"
            for k, v in enumerate([text(e.label), e.point, f"{e.obtained:.10g}",
                                   f"{e.expected:.10g}", f"{e.tolerance:.3g}",
                                   f"{ratio:.3g}"])) + "</tr>")
    return ['<table class="worst"><caption>worst elements</caption><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>",
            *rows, "</tbody></table>"]


def _grad_fn(names) -> list[str]:
    if names is None:
        return []
    items = "".join(f"<li>{text(n)}</li>" for n in names) or "<li>-</li>"
    return ['<p>grad_fn graph (the output first, depth first):</p>',
            f'<ol class="chain">{items}</ol>']


def _pictures(w, budget: list[int]) -> list[str]:
    """The pictures of ``w``'s maps while ``budget[0]`` (maps left to draw) lasts."""
    from .pictures import heat_map, histogram

    out = []
    drawn = w.error_maps[:max(0, budget[0])]
    budget[0] -= len(w.error_maps)
    if len(drawn) < len(w.error_maps):   # (the page's own line says why, once)
        out.append(f'<p class="left-out-here">{len(w.error_maps) - len(drawn)} error '
                   "map(s) of this witness not drawn.</p>")
    for m in drawn:
        what = "the Jacobian" if m.kind == "jacobian" else "the quantity"
        label = text(m.quantity)
        out += ['<div class="pictures">',
                f'<figure><img src="{heat_map(m)}" width="512" alt="heat map of '
                f'{label}"><figcaption>{label}: (obtained - expected) / tolerance over '
                f'{what}, the largest of each cell with its sign; red: too large, blue: '
                f'too small, pale: within the tolerance.</figcaption></figure>',
                f'<figure><img src="{histogram(m)}" width="512" alt="error histogram of '
                f'{label}"><figcaption>{label}: how many elements err by how many '
                f'tolerances; the dashed line is the tolerance.</figcaption></figure>',
                "</div>"]
    return out


def _witness(w, budget: list[int]) -> list[str]:
    m = describe(w)
    out = [f'<h3>witness <code>{text(w.witness)}</code>: {_status(w.status)}</h3>']
    if m.message:
        out.append(f'<pre class="message">{block(m.message)}</pre>')
    if m.diagnosis:
        out.append(f'<p class="diagnosis"><strong>diagnosis:</strong> '
                   f"{block(m.diagnosis)}</p>")
    if m.checked:
        out.append(f"<p>{m.mismatched} of {m.checked} elements outside the tolerance; "
                   f"max abs err {m.max_abs_err:.3g}, max rel err {m.max_rel_err:.3g}</p>")
    return out + _elements(m) + _grad_fn(w.grad_fn) + _pictures(w, budget)


def _section(i: int, case, budget: list[int]) -> list[str]:
    out = [f'<section class="case" id="case-{i}">',
           f"<h2><code>{text(title(case))}</code>: {_status(case.outcome)}</h2>",
           f"<p>at <code>{text(where(case))}</code>"
           + (' (expect = "fail")' if case.expect == "fail" else "") + "</p>"]
    if case.message:
        out.append(f'<pre class="message">{block(case.message)}</pre>')
    for w in case.witnesses:
        if w.status not in (PASSED, SKIPPED, INCONCLUSIVE):
            out += _witness(w, budget)
    out += ["<details><summary>the whole diagnosis as text</summary>",
            f"<pre>{block(full_text(case))}</pre></details>", "</section>"]
    return out


def _skipped(result) -> list[str]:
    """Why each skipped case was skipped (a device that is absent, a dtype no witness
    runs in), one item each: a skip is no pass, and the page says why."""
    items = [f'<li><code>{text(title(c))}</code>: {text(c.message or "skipped")}</li>'
             for c in result.cases if c.status == SKIPPED]
    if not items:
        return []
    return ['<h2 id="skipped">Skipped</h2>', '<ul class="skipped">', *items, "</ul>"]


def render_html(result) -> str:
    sections = {i for i, c in enumerate(result.cases) if c.status != PASSED
                and c.status != SKIPPED}
    body = _summary(result) + _table(result, sections) + op_table(result, sections)
    if sections:
        body.append('<h2 id="problems">Cases that did not pass</h2>')
        maps = sum(len(w.error_maps) for i in sections for w in result.cases[i].witnesses)
        if maps > MAPS_DRAWN:
            body.append(f'<p class="left-out">{maps - MAPS_DRAWN} of the {maps} error maps '
                        f"not drawn: a page draws the first {MAPS_DRAWN}, in report order "
                        "(the JSON report, --report json:PATH, holds every map's "
                        "numbers).</p>")
    budget = [MAPS_DRAWN]
    for i in sorted(sections):
        body += _section(i, result.cases[i], budget)
    body += _skipped(result)
    page = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>gradcheck report</title>", f"<style>{CSS}</style>", "</head>",
            '<body data-images-loaded="" data-sorted="" data-script="">', *body,
            f"<script>{JS}</script>", "</body>", "</html>", ""]
    # neutral: the net under the fields' scrubbing, as in every report
    return neutral("\n".join(page))
