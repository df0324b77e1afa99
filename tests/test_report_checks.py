"""Every report says of each check of an op case whether it ran, and if not why: a path
the op does not support (a skipped witness, its reason as message) and a check that did
not run at all (``CaseResult.unchecked``: not asked of this op, switched off by
skip_checks) alike, in OP_CHECKS order. Results made here, no case run (the driver's
side is tests/test_skip_checks.py's)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from gradcheck.base.result import (FAILED, OP_CHECKS, PASSED, SKIPPED, CaseResult,
                                   RunResult, WitnessResult, Worst)
from gradcheck.report import render
from gradcheck.report.opchecks import NAMES, op_paths, short, skipped_summary

NO_JVP = ("forward mode not supported: NotImplementedError: You must implement the jvp "
          "function for custom autograd.Function to use it with forward mode AD.")
NO_LIBRARY = "not a torch.library op"
ORDER_1 = "order = 1: no second derivatives asked"


def _passed(name: str, err: float = 1e-17) -> WitnessResult:
    return WitnessResult(name, PASSED, checked=10,
                         worst=Worst("x.grad", (0,), 1.0 + err, 1.0, 1e-15, 0))


def op_case(status=PASSED, name="swish", unchecked=None) -> CaseResult:
    """An op case whose op.backward failed (when ``status`` is failed), op.jvp was
    skipped (the op has no forward mode), op.double and op.registration did not run."""
    backward = (WitnessResult("op.backward", FAILED, checked=10, mismatched=10,
                              worst=Worst("x.grad", (3,), 2.0, 1.0, 1e-15, 0),
                              message="10 / 10 elements differ; worst x.grad[3]")
                if status == FAILED else _passed("op.backward"))
    witnesses = (_passed("op.forward"), backward, _passed("op.jacobian"),
                 WitnessResult("op.jvp", SKIPPED, message=NO_JVP), _passed("op.vmap"))
    return CaseResult(name=name, file="ops.toml", line=3, dtype="float64", status=status,
                      witnesses=witnesses, mode="op",
                      unchecked=unchecked if unchecked is not None else (
                          ("op.double", ORDER_1), ("op.registration", NO_LIBRARY)))


def formula_case() -> CaseResult:
    return CaseResult(name="tanh", file="f.toml", line=1, dtype="float64", status=PASSED,
                      witnesses=(_passed("engine"), _passed("torch")), mode="elementwise")


def test_the_checks_come_in_op_checks_order_with_why():
    paths = op_paths(op_case())
    assert [p.name for p in paths] == sorted((p.name for p in paths), key=NAMES.index)
    skipped = {p.name: p.reason for p in paths if p.skipped}
    assert skipped == {"op.jvp": NO_JVP, "op.double": ORDER_1,
                       "op.registration": NO_LIBRARY}
    assert short(NO_JVP) == "forward mode not supported" and short(ORDER_1) == "order = 1"
    assert op_paths(formula_case()) == []
    # the order is OP_CHECKS' own, whatever it holds
    assert NAMES == tuple(f"op.{c}" for c in OP_CHECKS)


def test_a_check_a_newer_gradcheck_added_is_shown_after_the_known_ones():
    case = op_case(unchecked=(("op.registration", NO_LIBRARY),
                              ("op.someday", "switched off by skip_checks")))
    names = [p.name for p in op_paths(case)]
    assert names[-2:] == ["op.registration", "op.someday"]
    assert "op.someday (switched off by skip_checks)" in skipped_summary(case)


def test_text_says_which_checks_were_skipped_and_why():
    run = RunResult((op_case(FAILED), formula_case()))
    out = render(run, "text", width=200)   # (each detail on one line)
    summary = ("skipped checks: op.double (order = 1), op.jvp (forward mode not "
               "supported), op.registration (not a torch.library op)")
    assert summary in out
    assert NO_JVP not in out          # the whole reason: -v
    assert out.count("skipped checks") == 1   # the formula case has none
    verbose = render(RunResult((op_case(PASSED), formula_case())), "text", verbose=True,
                     width=200)
    lines = [line.strip() for line in verbose.splitlines()]
    skips = [line for line in lines if ": skipped: " in line]
    assert skips == [f"op.double: skipped: {ORDER_1}", f"op.jvp: skipped: {NO_JVP}",
                     f"op.registration: skipped: {NO_LIBRARY}"]
    assert "skipped checks" not in verbose
    # a passing case without -v: its line alone, as before
    assert "skipped" not in render(RunResult((op_case(PASSED),)), "text").split("\n\n")[0]


def _cell(page: str, check: str) -> tuple[str, str, str]:
    """The class, title and shown text of the first cell of ``check``."""
    m = re.search(rf'<td class="check ([a-z]+)" data-check="{re.escape(check)}" '
                  r'title="([^"]*)">(.*?)</td>', page)
    assert m, check
    return m.group(1), m.group(2), re.sub(r"<[^>]+>", " ", m.group(3))


def test_html_has_a_column_per_check_with_why_a_skipped_one_was_skipped():
    page = render(RunResult((op_case(FAILED), formula_case())), "html")
    table = page[page.index('<table id="op-checks">'):]
    table = table[:table.index("</table>")]
    heads = re.findall(r'<th scope="col" title="([^"]*)">', table)
    assert heads == [n for n in NAMES if n in heads]          # OP_CHECKS order
    assert {"op.jvp", "op.double", "op.registration", "op.backward"} <= set(heads)
    cls, title, shown = _cell(table, "op.jvp")
    assert cls == "skipped" and title == f"op.jvp: skipped: {NO_JVP}"
    assert "forward mode not supported" in shown and "NotImplementedError" not in shown
    cls, title, shown = _cell(table, "op.registration")
    assert cls == "skipped" and NO_LIBRARY in title and NO_LIBRARY in shown
    cls, title, shown = _cell(table, "op.backward")
    assert cls == "failed" and "failed" in shown and "✗" in shown
    assert "10 / 10 elements differ" in title
    cls, _, shown = _cell(table, "op.forward")
    assert cls == "passed" and re.search(r"\d\.\de[+-]\d\d/ *\d\.\de[+-]\d\d", shown)
    assert table.count("<tr>") == 1 + 1     # the header's, the op case's: no formula row
    assert 'href="#case-0"' in table        # its section, the case having failed


def test_html_of_formulas_alone_has_no_table_of_op_checks():
    assert 'id="op-checks"' not in render(RunResult((formula_case(),)), "html")


def test_html_escapes_a_reason():
    hostile = "<script>alert(1)</script>"
    page = render(RunResult((op_case(unchecked=(("op.double", hostile),)),)), "html")
    assert hostile not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_json_keeps_each_skip_with_its_status_and_reason():
    case = op_case()
    data = json.loads(render(RunResult((case, formula_case())), "json"))
    op, formula = data["cases"]
    assert op["witnesses"]["op.jvp"]["status"] == "skipped"
    assert op["witnesses"]["op.jvp"]["message"] == NO_JVP
    assert op["unchecked"] == {"op.double": ORDER_1, "op.registration": NO_LIBRARY}
    assert "unchecked" not in formula
    assert CaseResult.from_dict(case.to_dict()) == case


def test_junit_and_markdown_give_each_skip_its_reason():
    run = RunResult((op_case(PASSED, "ok"), op_case(FAILED, "bad"), formula_case()))
    suite = ET.fromstring(render(run, "junit"))
    ok, bad, _ = suite.iter("testcase")
    out = ok.find("system-out").text
    assert f"op.registration: skipped: {NO_LIBRARY}" in out
    assert f"op.jvp: skipped: {NO_JVP}" in out
    assert f"op.double: skipped: {ORDER_1}" in bad.find("failure").text
    md = render(run, "markdown")
    assert f"- op.registration: skipped: {NO_LIBRARY}" in md
    header = next(line for line in md.splitlines() if line.startswith("| status | case")
                  and line.endswith("| time |"))   # the table of every case
    columns = [c.strip() for c in header.strip("|").split("|")]
    ops = [c for c in columns if c.startswith("op.")]
    assert columns.index("torch") < columns.index(ops[0])     # formulas' first
    assert ops == sorted(ops, key=NAMES.index)
    row = next(line for line in md.splitlines() if "<code>ok</code>" in line
               and line.startswith("| ✅"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[columns.index("op.jvp")] == "skipped"
