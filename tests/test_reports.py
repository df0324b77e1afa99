"""The CI-facing reports (issue 4, "CI outputs"): JUnit XML, Markdown for a pull-request
comment, and GitHub Actions ``::error`` annotations. Built from hand-made RunResults
(every status, expect = "fail", hostile names), then end to end through the CLI."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main
from gradcheck.report import FORMATS, render
from gradcheck.report.annotations import escape_data, escape_property, github_annotations
from gradcheck.report.junit import classname, render_junit, xml_text
from gradcheck.report.markdown import cell, render_markdown
from gradcheck.report.scrub import one_line
from gradcheck.base.result import (ERROR, FAILED, PASSED, SKIPPED, CaseResult, RunResult,
                                   WitnessResult, Worst)

HOSTILE = "evil <b>&amp;\"'</b> ]]> \x1b[31mred\x00\x07 |pipe| [x](javascript:1) *e* @me\nline2"
FORBIDDEN = ["\x00", "\x07", "\x1b"]
DIAGNOSIS = "sign flipped: obtained = -1 x expected"


def with_diagnosis(w: WitnessResult, text: str) -> WitnessResult:
    """``w`` carrying a diagnosis, whether or not WitnessResult has that field yet."""
    if "diagnosis" in {f.name for f in dataclasses.fields(w)}:
        return dataclasses.replace(w, diagnosis=text)
    object.__setattr__(w, "diagnosis", text)
    return w


WORST = Worst(quantity="x.grad", index=(1, 2), obtained=0.5, expected=-0.5,
              tolerance=1e-7, point=2)


def ok(name: str, err: float = 1e-16, tol: float = 1e-12) -> WitnessResult:
    """A witness that agreed: its worst element off by ``err`` within ``tol``."""
    worst = Worst(quantity="x.grad", index=(0,), obtained=err, expected=0.0, tolerance=tol,
                  point=0)
    return WitnessResult(name, PASSED, max_abs_err=err, max_rel_err=err, worst=worst,
                         checked=6)


def make_result() -> RunResult:
    bad = with_diagnosis(
        WitnessResult("op", FAILED, max_abs_err=1.0, max_rel_err=2.0, worst=WORST,
                      checked=6, mismatched=6,
                      message="6 / 6 elements differ; worst x.grad[1,2]"), DIAGNOSIS)
    cases = (
        CaseResult("square", "cases/basic.toml", 3, "float64", PASSED,
                   witnesses=(ok("engine"), ok("torch"), ok("numeric", 3e-13)),
                   seconds=0.25, mode="elementwise", points=2),
        CaseResult("swish-flipped", "cases/ops/wrong.toml", 12, "float32", FAILED,
                   witnesses=(bad, ok("torch", 4e-8, 1e-7)), seconds=0.5, mode="expanded",
                   message="op: 6 / 6 elements differ; worst x.grad[1,2]", points=3),
        CaseResult("broken", "cases/bad.yaml", 7, "-", ERROR, error_kind="case",
                   message="cases/bad.yaml:7: case 'broken': invalid expression\n"
                           "  sum(x ** )"),
        CaseResult("on-gpu", "cases/gpu.toml", 2, "float64", SKIPPED,
                   message="no CUDA device"),
        CaseResult("caught", "cases/ops/wrong.toml", 20, "float64", PASSED, expect="fail",
                   witnesses=(bad, ok("torch")), message="caught as expected: op"),
        CaseResult("agreed", "cases/ops/wrong.toml", 30, "float64", FAILED, expect="fail",
                   witnesses=(ok("op"),),
                   message='expected a mismatch (expect = "fail"), but every witness agreed'),
        CaseResult(HOSTILE, "cases/evil<&>.toml", 1, "float64", FAILED,
                   witnesses=(with_diagnosis(dataclasses.replace(bad, message=HOSTILE),
                                             HOSTILE),),
                   message=HOSTILE, notes=(HOSTILE,)),
    )
    return RunResult(cases, seconds=1.25)


RESULT = make_result()


# --------------------------------------------------------------------------- JUnit

def parse(xml: str) -> ET.Element:
    return ET.fromstring(xml.encode("utf-8"))


def test_formats_include_the_ci_formats():
    assert {"junit", "markdown"} <= set(FORMATS)
    stamp = re.compile(r'timestamp="[^"]*"')   # the time it is rendered at
    assert stamp.sub("", render(RESULT, "junit")) == stamp.sub("", render_junit(RESULT))
    assert render(RESULT, "markdown") == render_markdown(RESULT)


def test_junit_parses_and_counts_match_the_summary():
    xml = render_junit(RESULT)
    assert xml.startswith('<?xml version="1.0" encoding="utf-8"?>')
    root = parse(xml)
    assert root.tag == "testsuites"
    (suite,) = root
    assert suite.tag == "testsuite" and suite.get("name") == "gradcheck"
    s = RESULT.summary
    assert suite.get("tests") == str(len(RESULT.cases)) == "7"
    # (an XPASS, "agreed", is a failure: the summary counts it apart, as pytest)
    assert suite.get("failures") == str(s["failed"] + s["xpassed"]) == "3"
    assert suite.get("errors") == str(s["errored"]) == "1"
    assert suite.get("skipped") == str(s["skipped"]) == "1"
    assert float(suite.get("time")) == 1.25
    cases = suite.findall("testcase")
    assert len(cases) == len(RESULT.cases)
    assert len(suite.findall("testcase/failure")) == 3
    assert len(suite.findall("testcase/error")) == 1
    assert len(suite.findall("testcase/skipped")) == 1


def test_junit_one_testcase_per_case_and_dtype():
    cases = parse(render_junit(RESULT)).findall("testsuite/testcase")
    names = [c.get("name") for c in cases]
    assert names[:6] == ["square[float64]", "swish-flipped[float32]", "broken",
                         "on-gpu[float64]", "caught[float64]", "agreed[float64]"]
    first = cases[0]
    assert first.attrib == {"classname": "cases.basic", "name": "square[float64]",
                            "file": "cases/basic.toml", "line": "3", "time": "0.250"}
    assert cases[1].get("classname") == "cases.ops.wrong"
    for c in cases:
        float(c.get("time"))
    assert list(first) == []                    # a pass has no child
    # caught as expect = "fail" said: a pass, with what was caught
    caught = cases[4]
    assert caught.find("failure") is None and "caught as expected" in caught.find("system-out").text
    assert caught.find("system-out").text.startswith("XFAIL: ")   # in pytest's word


def test_junit_failure_carries_message_worst_element_and_diagnosis():
    cases = parse(render_junit(RESULT)).findall("testsuite/testcase")
    failure = cases[1].find("failure")
    assert failure.get("message") == "op: 6 / 6 elements differ; worst x.grad[1,2]"
    body = failure.text
    for needle in ("swish-flipped[float32] at cases/ops/wrong.toml:12",
                   "witness op: failed", "6 / 6 elements differ",
                   "quantity:  x.grad", "index:     [1, 2]", "point:     2",
                   "obtained:  0.5", "expected:  -0.5", "tolerance: 1e-07",
                   f"diagnosis: {DIAGNOSIS}", "error:     1",
                   "agreed (worst error/tolerance): torch 4.0e-08/1.0e-07"):
        assert needle in body, needle
    agreed = cases[5].find("failure")
    assert "every witness agreed" in agreed.get("message")
    assert agreed.get("message").startswith("XPASS: ")
    assert 'expect = "fail"' in agreed.text


def test_junit_error_and_skipped_carry_messages():
    cases = parse(render_junit(RESULT)).findall("testsuite/testcase")
    error = cases[2].find("error")
    assert error.get("message") == "cases/bad.yaml:7: case 'broken': invalid expression"
    assert "sum(x ** )" in error.text and error.get("type") == "gradcheck.case_error"
    skipped = cases[3].find("skipped")
    assert skipped.get("message") == "no CUDA device"


def test_junit_escapes_hostile_text_and_stays_well_formed():
    xml = render_junit(RESULT)
    for ch in FORBIDDEN:
        assert ch not in xml
    assert "<b>" not in xml and "]]>" not in xml
    hostile = parse(xml).findall("testsuite/testcase")[6]
    shown = xml_text(HOSTILE)
    assert hostile.get("name") == one_line(HOSTILE) + "[float64]"   # one line
    assert '<b>&amp;"\'</b> ]]>' in hostile.get("name")
    assert "\\x1b[31mred\\x00\\x07" in hostile.get("name")
    assert hostile.get("file") == "cases/evil<&>.toml"
    failure = hostile.find("failure")
    assert failure.get("message") == xml_text(HOSTILE.splitlines()[0])
    assert failure.text.count(shown.splitlines()[1]) >= 3      # message, witness, note


@pytest.mark.parametrize("text", ["\x00", "\x08\x0b\x0c\x1f", "\ud800", "\ufffe\uffff",
                                  "\x7f\x85"])
def test_xml_text_removes_what_xml_forbids(text):
    out = xml_text(f"a{text}b")
    assert out.startswith("a") and out.endswith("b") and text not in out
    case = dataclasses.replace(RESULT.cases[1], name=text, message=text)
    parse(render_junit(RunResult((case,))))          # well-formed whatever the text
    render_junit(RunResult((case,))).encode("utf-8")  # and writable as UTF-8


def test_xml_text_keeps_what_xml_allows():
    text = "tab\tnl\ncr\r é ✓ 𝔸 \ud7ff \ue000"
    assert xml_text(text) == text


@pytest.mark.parametrize("file, expected", [
    ("cases/ops/swish.toml", "cases.ops.swish"), ("a.yaml", "a"),
    ("/abs/dir/c.toml", "abs.dir.c"), ("./x/y.toml", "x.y"), ("win\\d\\e.toml", "win.d.e"),
    ("", "gradcheck"),
])
def test_classname_is_the_dotted_file_path(file, expected):
    assert classname(file) == expected


def _junit_shape(root: ET.Element) -> dict[str, set[str]]:
    """Every element tag with the attribute names it carries."""
    shape: dict[str, set[str]] = {}
    for el in root.iter():
        shape.setdefault(el.tag, set()).update(el.attrib)
    return shape


def test_junit_has_the_shape_pytest_writes(tmp_path):
    """pytest's own junitxml (family xunit1, the one with file and line; captured output
    as system-out) on a pass, a failure, an error and a skip: ours uses the same
    elements and attributes."""
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("setup")

        def test_pass():
            print("out")

        def test_fail():
            assert 1 == 2

        def test_error(broken):
            pass

        def test_skip():
            pytest.skip("why")
    """))
    report = tmp_path / "pytest.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-o", "junit_family=xunit1", "-o", "junit_logging=system-out", f"--junitxml={report}",
                    str(tmp_path / "test_sample.py")], cwd=tmp_path, capture_output=True,
                   check=False)
    theirs = _junit_shape(ET.parse(report).getroot())
    ours = _junit_shape(parse(render_junit(RESULT)))
    assert {"testsuites", "testsuite", "testcase", "failure", "error", "skipped"} \
        <= set(ours) <= set(theirs)
    for tag, attrs in ours.items():
        extra = attrs - theirs[tag] - {"type"}    # the schema allows type everywhere
        assert not extra, (tag, extra)
    for tag in ("testsuite", "testcase"):
        missing = theirs[tag] - ours[tag]
        assert not missing, (tag, missing)
    for tag in ("failure", "error", "skipped"):
        assert "message" in ours[tag]


def test_junitparser_reads_it():
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromstring(render_junit(RESULT))
    suites = list(xml) if isinstance(xml, junitparser.JUnitXml) else [xml]
    (suite,) = suites
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == \
        ("gradcheck", 7, 3, 1, 1)
    kinds = {}
    for case in suite:
        kinds[case.name] = [type(r).__name__ for r in case.result]
    assert kinds["square[float64]"] == []
    assert kinds["swish-flipped[float32]"] == ["Failure"]
    assert kinds["broken"] == ["Error"]
    assert kinds["on-gpu[float64]"] == ["Skipped"]
    failed = next(c for c in suite if c.name == "swish-flipped[float32]")
    (failure,) = failed.result
    assert failure.message.startswith("op: 6 / 6") and DIAGNOSIS in failure.text


# --------------------------------------------------------------------------- Markdown

def _table_rows(md: str, header_start: str) -> list[str]:
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _cells(row: str) -> list[str]:
    return re.split(r"(?<!\\)\|", row)[1:-1]


def test_markdown_title_and_problem_table():
    md = render_markdown(RESULT)
    title = md.splitlines()[0]
    # counted by outcome: the caught one xfailed, the agreed one xpassed
    assert title.startswith("## ❌ gradcheck: 1 passed, 2 failed, 1 errored, 1 skipped, "
                            "1 xfailed, 1 xpassed")
    rows = _table_rows(md, "| status | case | dtype | location | witness")
    # the failed, errored, skipped and hostile cases; passes (caught included) left out
    assert len(rows) == 5
    assert all(len(_cells(r)) == 7 for r in rows)
    flipped = _cells(rows[0])
    assert "failed" in flipped[0] and "swish\\-flipped" not in flipped[1]
    assert "swish-flipped" in flipped[1] and flipped[2].strip() == "float32"
    assert "cases/ops/wrong.toml:12" in flipped[3] and flipped[4].strip() == "op"
    assert flipped[5].strip() == cell(
        "x.grad[1,2] at point 2: obtained 0.5, expected -0.5, tolerance 1e-07", code=True)
    assert "6 / 6 elements differ" in flipped[6] and DIAGNOSIS in flipped[6]
    assert "error" in _cells(rows[1])[0] and "invalid expression<br>" in _cells(rows[1])[6]
    assert "skipped" in _cells(rows[2])[0] and "no CUDA device" in _cells(rows[2])[6]


def test_markdown_details_has_every_case_and_each_witness_error():
    md = render_markdown(RESULT)
    assert "<details>" in md and "</details>" in md
    head = "| status | case | dtype | location | engine | torch | numeric | op | time |"
    assert head in md.splitlines()
    rows = _table_rows(md, head)
    assert len(rows) == len(RESULT.cases)
    square = [c.strip() for c in _cells(rows[0])]
    # each witness: its worst element's error/tolerance, a failed one marked
    assert square[4:8] == ["1.0e-16/1.0e-12", "1.0e-16/1.0e-12", "3.0e-13/1.0e-12", ""]
    assert _cells(rows[1])[7].strip() == "1.0e+00/1.0e-07 ✗"
    assert _cells(rows[2])[4].strip() == ""               # the errored case ran nothing
    assert "error/tolerance" in md


def test_markdown_escapes_hostile_text():
    md = render_markdown(RESULT)
    for ch in FORBIDDEN:
        assert ch not in md
    allowed = re.sub(r"</?(code|br|details|summary)>", "", md)
    assert "<" not in allowed and ">" not in allowed          # no HTML from user text
    assert "&lt;b&gt;&amp;amp;&quot;&#x27;&lt;/b&gt;" in md
    assert "\\|pipe\\|" in md and "\\[x\\](javascript&#8203;:1)" in md and "\\*e\\*" in md
    hostile = [r for r in _table_rows(md, "| status | case | dtype | location | witness")
               if "evil" in r]
    assert len(hostile) == 1 and len(_cells(hostile[0])) == 7   # one line, seven cells
    assert "<br>line2" in hostile[0]


def test_markdown_cell_escapes_pipes_and_newlines():
    assert cell("a|b\nc\r\nd") == "a\\|b<br>c<br>d"
    assert cell("x", code=True) == "<code>x</code>"
    assert cell("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert cell("a\\|b") == "a\\\\\\|b"
    assert cell("y" * 50, limit=10) == "y" * 9 + "…"


def test_markdown_all_passed():
    md = render_markdown(RunResult(RESULT.cases[:1], seconds=0.5))
    assert md.startswith("## ✅ gradcheck: 1 passed, 0 failed, 0 errored, 0 skipped")
    assert "| witness |" not in md and "<details>" in md


def test_markdown_stays_under_githubs_comment_limit():
    many = RunResult(tuple(dataclasses.replace(RESULT.cases[0], name=f"case-{i}" + "x" * 80)
                           for i in range(2000)))
    md = render_markdown(many)
    assert len(md) < 65536 and "more |" in md


# --------------------------------------------------------------------------- annotations

def test_annotation_escaping_is_exact():
    assert escape_data("100% a\r\nb: c, d") == "100%25 a%0D%0Ab: c, d"
    assert escape_property("a:b,c%d\r\ne") == "a%3Ab%2Cc%25d%0D%0Ae"
    assert escape_data("%0A") == "%250A"                 # no double decoding
    assert escape_data("a\x1bb\x00") == "a\\x1bb\\x00"      # shown, as Python escapes


def test_annotations_for_failed_and_errored_cases_only():
    lines = github_annotations(RESULT)
    assert len(lines) == 4                               # flipped, broken, agreed, hostile
    assert all("\n" not in line and "\r" not in line for line in lines)
    assert lines[0] == (
        "::error file=cases/ops/wrong.toml,line=12,title=gradcheck swish-flipped[float32]::"
        "op: 6 / 6 elements differ; worst x.grad[1,2]"
        "%0Aop worst x.grad[1,2] at point 2: obtained 0.5, expected -0.5, tolerance 1e-07"
        f"%0Aop diagnosis: {DIAGNOSIS}")
    assert lines[1].startswith("::error file=cases/bad.yaml,line=7,title=gradcheck broken::"
                               "cases/bad.yaml:7: case 'broken': invalid expression%0A")
    assert lines[2].startswith("::error file=cases/ops/wrong.toml,line=30,"
                               "title=gradcheck agreed[float64]::expected a mismatch")
    hostile = lines[3]
    for ch in FORBIDDEN:
        assert ch not in hostile
    props, message = hostile[len("::error "):].split("::", 1)
    assert props.startswith("file=cases/evil<&>.toml,line=1,title=gradcheck evil")
    assert props.count(",") == 2 and "%2C" not in props.split(",")[0]
    assert "\\nline2" in props and "%0A" not in props     # the title is one line
    assert message.startswith("evil <b>&amp;") and "%0Aline2" in message


def test_annotation_does_not_repeat_what_the_message_says():
    case = dataclasses.replace(RESULT.cases[1], message=f"op: differs ({DIAGNOSIS})")
    (line,) = github_annotations(RunResult((case,)))
    assert line.count(DIAGNOSIS) == 1 and line.count("6 / 6 elements differ") == 1


def test_annotation_without_a_line_leaves_it_out():
    case = dataclasses.replace(RESULT.cases[2], line=None, file="a,b:c.toml")
    (line,) = github_annotations(RunResult((case,)))
    assert line.startswith("::error file=a%2Cb%3Ac.toml,title=gradcheck broken::")


# --------------------------------------------------------------------------- CLI

CORRECT_BUT_EXPECT_FAIL = """\
[[case]]
name = "correct-but-expected-to-fail"
expr = "sum(sin(x))"
inputs.x = { shape = [3] }
expect = "fail"
points = 1
"""

PASSING = """\
[[case]]
name = "fine"
expr = "sum(x**2)"
inputs.x = { shape = [2] }
points = 1
"""


@pytest.fixture
def failing(tmp_path: Path) -> Path:
    path = tmp_path / "ops.toml"
    path.write_text(CORRECT_BUT_EXPECT_FAIL, encoding="utf-8")
    return path


def gc(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_annotations_after_the_report_under_actions(capsys, failing, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, _ = gc(capsys, "run", failing, "--witness", "torch")
    assert code == ExitCode.MISMATCH
    expected = (f"::error file={failing},line=1,"
                "title=gradcheck correct-but-expected-to-fail[float64]::"
                'expected a mismatch (expect = "fail"), but every witness agreed')
    lines = out.splitlines()
    assert lines[-1] == expected
    assert lines[-2].startswith("0 passed, 0 failed, 0 errored, 0 skipped, 1 xpassed")
    # (the report came first)


def test_cli_annotations_follow_the_text_report_with_output(capsys, failing, monkeypatch,
                                                             tmp_path):
    """With --output (as --report junit:FILE) the text report stays on stdout: the
    annotations follow its summary, then the line that says where the report went."""
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    report = tmp_path / "reports" / "gradcheck.xml"
    code, out, _ = gc(capsys, "run", failing, "--witness", "torch", "--format", "junit",
                      "--output", report)
    assert code == ExitCode.MISMATCH
    lines = out.splitlines()
    assert lines[0].startswith("XPASS  correct-but-expected-to-fa")
    assert lines[-3].startswith("0 passed, 0 failed, 0 errored, 0 skipped, 1 xpassed in")
    assert lines[-2].startswith(f"::error file={failing},line=1,title=gradcheck ")
    assert lines[-1] == f"report written to {report} (junit)"
    assert sum(line.startswith("::error") for line in lines) == 1


def test_cli_machine_format_on_stdout_keeps_annotations_off_it(capsys, failing,
                                                                monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, err = gc(capsys, "run", failing, "--witness", "torch", "--format", "junit")
    parse(out)                                                # stdout is the document
    assert "::error" not in out and err.count("::error file=") == 1


@pytest.mark.parametrize("value", [None, "false", "1"])
def test_cli_no_annotations_outside_actions(capsys, failing, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    else:
        monkeypatch.setenv("GITHUB_ACTIONS", value)
    code, out, err = gc(capsys, "run", failing, "--witness", "torch")
    assert code == ExitCode.MISMATCH and "::error" not in out + err


def test_cli_no_annotations_when_everything_passes(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    path = tmp_path / "fine.toml"
    path.write_text(PASSING, encoding="utf-8")
    code, out, err = gc(capsys, "run", path, "--witness", "torch")
    assert code == ExitCode.OK and "::error" not in out + err


def test_a_new_format_is_its_renderer_and_one_row(capsys, tmp_path, monkeypatch):
    """A format is a renderer module and one row of FORMATS: --format, --report and the
    settings' reports take it, and render() dispatches to it, with nothing else
    touched."""
    from gradcheck.cli.settings import KEYS
    from gradcheck.report import Format

    (tmp_path / "csv_report.py").write_text(
        "def render_csv(result):\n"
        "    return ''.join(f'{c.name},{c.dtype},{c.status}\\n' for c in result.cases)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(FORMATS, "csv", Format("csv", "csv_report:render_csv"))
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    path = tmp_path / "fine.toml"
    path.write_text(PASSING, encoding="utf-8")
    code, out, _ = gc(capsys, "run", path, "--witness", "torch", "--format", "csv",
                      "--report", "csv:out/again.csv")
    assert code == ExitCode.OK
    assert out == "fine,float64,passed\n"
    assert (tmp_path / "out" / "again.csv").read_text() == out
    assert KEYS["reports"].check(["csv:r.csv"])   # [tool.gradcheck] reports


def test_cli_junit_output_end_to_end(capsys, tmp_path, failing, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    path = tmp_path / "fine.toml"
    path.write_text(PASSING, encoding="utf-8")
    report = tmp_path / "out" / "gradcheck.xml"
    code, out, _ = gc(capsys, "run", path, failing, "--witness", "torch", "--witness",
                      "engine", "--format", "junit", "--output", report)
    assert code == ExitCode.MISMATCH
    lines = out.splitlines()       # the text report, then where the JUnit one went
    assert lines[-1] == f"report written to {report} (junit)"
    assert lines[-2].startswith("1 passed, 0 failed, 0 errored, 0 skipped, 1 xpassed in")
    suite = ET.parse(report).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    fine, bad = suite.findall("testcase")
    assert fine.get("name") == "fine[float64]" and fine.find("failure") is None
    assert bad.get("file") == str(failing) and bad.get("line") == "1"
    assert "every witness agreed" in bad.find("failure").get("message")
    assert re.search(r"agreed \(worst error/tolerance\): .*torch \d\.\de[-+]\d+/\d\.\de",
                     bad.find("failure").text)


def test_cli_markdown_end_to_end(capsys, failing, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, _ = gc(capsys, "run", failing, "--witness", "torch", "--format", "markdown")
    assert code == ExitCode.MISMATCH
    assert out.startswith("## ❌ gradcheck: 0 passed, 0 failed, 0 errored, 0 skipped, "
                          "1 xpassed")
    assert "❌ xpass" in out
    assert "correct\\-but" not in out and "correct-but-expected-to-fail" in out
    assert cell(f"{failing}:1") in out and "<details>" in out


# --------------------------------------------------------------------------- one formatter

def test_every_renderer_shows_the_one_mismatch_description():
    """The text report, Markdown, JUnit, the annotations and the assertion message of
    gradcheck.testing all render report.mismatch.describe's account of a witness."""
    from gradcheck.report.mismatch import describe, table
    from gradcheck.report.text import render_text
    from gradcheck.testing import mismatch_message

    case = RESULT.cases[1]
    m = describe(case.witness("op"))
    assert m.worst_line == ("x.grad[1,2] at point 2: obtained 0.5, expected -0.5, "
                            "tolerance 1e-07")
    assert f"op: worst {m.worst_line}" in render_text(RESULT, width=120)
    assert cell(m.worst_line, code=True) in render_markdown(RESULT)
    assert f"op worst {m.worst_line}" in github_annotations(RESULT)[0]
    body = parse(render_junit(RESULT)).findall("testsuite/testcase")[1].find("failure").text
    assert "\n".join(m.lines()) in body
    near = dataclasses.replace(WORST, index=(0, 0), obtained=1.0, expected=1.0)
    listed = dataclasses.replace(case.witness("op"), worst_elements=(WORST, near))
    with_table = dataclasses.replace(case, witnesses=(listed,))
    m = describe(listed)
    message = mismatch_message("title", with_table, "call()")
    assert "\n".join(m.summary()) in message and "\n".join(table([m])) in message
    assert m.summary()[0] == "  op: Mismatched elements: 6 / 6"
    rows = [[c.strip() for c in line.split("|")] for line in table([m])]
    assert rows == [["Index", "Obtained", "Expected", "Witness", "Point"],
                    ["x.grad[1,2]", "0.5", "-0.5", "op", "2"]]   # within tolerance: not listed


def test_mismatch_description_is_data_from_the_witness_result():
    from gradcheck.report.mismatch import Element, describe, failing, witness_message

    bad = RESULT.cases[1].witness("op")
    m = describe(bad)
    assert m.worst == Element("x.grad", (1, 2), 2, 0.5, -0.5, 1e-7) and m.worst.outside
    assert m.elements == () and m.outside == ()
    assert m.explanation() == f"6 / 6 elements differ; worst x.grad[1,2]\n{DIAGNOSIS}"
    assert [x.witness for x in failing(RESULT.cases[1].witnesses)] == ["op"]
    assert describe(WitnessResult("torch", PASSED)).worst_line == ""
    assert witness_message(WORST, 6, 6) == (
        "6 / 6 elements differ; worst x.grad[1,2] at point 2: got 0.5, expected -0.5 "
        "(|diff| 1 > tol 1e-07)")


# --------------------------------------------------------------------------- one scrubber

@pytest.mark.parametrize("fmt", FORMATS)
def test_no_report_format_lets_control_characters_through(fmt):
    out = render(RESULT, fmt, verbose=True) if fmt == "text" else render(RESULT, fmt)
    for ch in FORBIDDEN:
        assert ch not in out, (fmt, ch)


def test_annotations_and_the_text_report_scrub_every_control_character():
    text = "a\x1b[2Jb\x00c\x07d\u202ee\x9bf"      # ANSI, NUL, bell, bidi override, CSI
    case = dataclasses.replace(RESULT.cases[2], name=text, message=text)
    for out in [render(RunResult((case,)), "text"), *github_annotations(RunResult((case,)))]:
        for ch in "\x1b\x00\x07\u202e\x9b":
            assert ch not in out
    assert escape_data(text) == "a\\x1b[2Jb\\x00c\\x07d\\u202ee\\x9bf"


def test_one_scrubber_in_the_reports():
    from gradcheck.report import scrub, text

    assert text.printable is scrub.printable    # what the CLI and the plugin import
    assert scrub.printable("a\tb\rc\nd\x1b") == "a\\tb\\rc\nd\\x1b"
    assert scrub.printable("a\tb\rc\nd\x1b", keep="\r\n\t") == "a\tb\rc\nd\\x1b"
    assert scrub.printable("a\r\nb") == "a\nb" and scrub.one_line("a\r\nb") == "a\\r\\nb"
    # nothing else in report/ decides what is printable
    folder = Path(scrub.__file__).parent
    others = [p.name for p in folder.glob("*.py")
              if p.name != "scrub.py" and "isprintable" in p.read_text(encoding="utf-8")]
    assert others == []


def test_report_modules_do_not_import_their_package():
    """report/__init__ imports its renderers (inside render); they import their
    siblings, never the package, so there is no import cycle."""
    import ast

    from gradcheck import report

    folder = Path(report.__file__).parent
    for p in folder.glob("*.py"):
        if p.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                package = (node.level == 1 and node.module is None) or \
                    node.module in ("gradcheck.report",)
                assert not package, f"{p.name} imports the report package"


def test_failure_text_ends_with_the_command_that_reruns_the_case():
    from gradcheck.report.text import failure_text

    text = failure_text(RESULT.cases[1])
    assert text.endswith("reproduce: gradcheck run cases/ops/wrong.toml -k 'swish-flipped' "
                         "--dtype float32")
    assert "\x1b" not in failure_text(RESULT.cases[6])


# --------------------------------------------------------------------------- error column

def _case_line(text: str, name: str) -> str:
    return next(line for line in text.splitlines()
                if line.split(" ", 1)[0] in ("PASS", "FAIL", "ERROR", "SKIP")
                and f" {name} " in line)


def _witness_line(text: str, name: str) -> str:
    """The -v line of every witness's error/tolerance under case ``name``'s line."""
    lines = text.splitlines()
    return lines[lines.index(_case_line(text, name)) + 1]


def test_the_error_column_is_the_worst_elements_error_against_its_tolerance():
    """A witness that fails on an element judged by its absolute error shows that
    element's error and tolerance, marked, not the tiny maximum relative error that
    once read as a pass ("numeric 7.3e-14" on a failure)."""
    worst = Worst("x.grad", (3,), obtained=1e6 + 3.1e-5, expected=1e6, tolerance=1.2e-7,
                  point=1)
    tiny = WitnessResult("numeric", FAILED, max_abs_err=3.1e-5, max_rel_err=7.3e-14,
                         worst=worst, checked=6, mismatched=1, message="1 / 6 differ")
    case = CaseResult("tight", "cases/t.toml", 1, "float64", FAILED,
                      witnesses=(ok("torch", 2e-9, 1e-8), tiny), mode="elementwise")
    text = render(RunResult((case,)), "text", verbose=True)
    line = _witness_line(text, "tight")
    assert re.search(r"numeric 3\.1e-05/1\.2e-07 ✗", line), line
    # the case's own line: the witness furthest off, in tolerances (3.1e-05 / 1.2e-07)
    assert _case_line(text, "tight").endswith("✗ numeric 258×tol")
    assert "torch 2.0e-09/1.0e-08 " in line + " " and "torch 2.0e-09/1.0e-08 ✗" not in line
    assert "7.3e-14" not in text
    md = render_markdown(RunResult((case,)))
    assert "3.1e-05/1.2e-07 ✗" in md and "2.0e-09/1.0e-08" in md
    body = parse(render_junit(RunResult((case,)))).find("testsuite/testcase/failure").text
    assert "agreed (worst error/tolerance): torch 2.0e-09/1.0e-08" in body
    assert "error:     3.1e-05" in body and "tolerance: 1.2e-07" in body


def test_the_error_column_without_an_element():
    """Failed on no element (a None gradient): the mark alone; errored, skipped and
    nothing compared say so."""
    from gradcheck.report.mismatch import shown_error

    assert shown_error(WitnessResult("op", FAILED, message="x.grad is None")) == "✗"
    assert shown_error(WitnessResult("op", ERROR)) == "error"
    assert shown_error(WitnessResult("op", SKIPPED)) == "skip"
    assert shown_error(WitnessResult("op", PASSED)) == "-"
    nan = Worst("x.grad", (0,), obtained=float("nan"), expected=1.0, tolerance=1e-7, point=0)
    assert shown_error(WitnessResult("op", FAILED, worst=nan)) == "inf/1.0e-07 ✗"


def test_the_text_reports_case_lines_line_up_and_v_lists_every_witness():
    """One line per case run, its columns (name, dtype, kind, summary) starting at the
    same place on every line, formulas and ops alike; -v lists under it every witness's
    worst element's error/tolerance (a skip, a mark; an op case's checks in their
    order, a check it did not run left out) and the time."""
    wide = dataclasses.replace(ok("numeric", 2.5, 1e-300), status=FAILED)
    formulas = [CaseResult("f1", "a.toml", 1, "float64", PASSED, mode="elementwise",
                           witnesses=(ok("engine"), ok("torch"), ok("numeric"))),
                CaseResult("f2", "a.toml", 2, "bfloat16", FAILED, mode="elementwise",
                           witnesses=(WitnessResult("engine", SKIPPED), ok("torch"), wide))]
    op_names = ("op.zero", "op.forward", "op.backward", "op.jacobian")
    ops = [CaseResult("o1", "b.toml", 1, "float64", PASSED, mode="op",
                      witnesses=tuple(ok(n) for n in op_names)),
           CaseResult("o2", "b.toml", 5, "float32", PASSED, mode="op", seconds=1.5,
                      witnesses=tuple(ok(n, 1e-3, 1e-2) for n in op_names
                                      if n != "op.jacobian"))]
    result = RunResult((formulas[0], ops[0], formulas[1], ops[1]))
    text = render(result, "text")
    lines = {line.split()[1]: line for line in text.splitlines()
             if line.split(" ", 1)[0] in ("PASS", "FAIL")}
    assert len(lines) == 4
    fields = {"f1": ("float64", "elementwise", "engine"), "o1": ("float64", "op ", "op."),
              "f2": ("bfloat16", "elementwise", "✗"), "o2": ("float32", "op ", "op.")}
    for column in range(3):
        starts = {lines[n].index(words[column]) for n, words in fields.items()}
        assert len(starts) == 1, (column, lines)
    assert lines["f2"].endswith("✗ numeric 2.5e300×tol")
    assert lines["o2"].endswith("op.zero 0.1×tol")   # the one closest to its tolerance
    verbose = render(result, "text", verbose=True, width=120)
    assert "      engine skip  torch 1.0e-16/1.0e-12  numeric 2.5e+00/1.0e-300 ✗  0.00s" \
        in verbose.splitlines()
    assert ("      op.forward 1.0e-03/1.0e-02  op.backward 1.0e-03/1.0e-02  "
            "op.zero 1.0e-03/1.0e-02  1.50s") in verbose.splitlines()
    assert "every witness" in text.splitlines()[-2]


def test_quiet_text_keeps_failures_and_the_summary():
    loud, quiet = render(RESULT, "text"), render(RESULT, "text", quiet=True)
    shown = [line.split()[0] for line in quiet.splitlines()
             if line.split(" ", 1)[0] in ("PASS", "FAIL", "ERROR", "SKIP")]
    assert shown == ["FAIL", "ERROR", "FAIL"]     # no PASS, no SKIP, no XFAIL
    assert "square" not in quiet and "on-gpu" not in quiet and "caught" not in quiet
    assert "XPASS  agreed" in quiet               # an expected failure that did not fail
    assert "swish-flipped" in quiet and "op: worst x.grad[1,2]" in quiet
    assert quiet.splitlines()[-1] == loud.splitlines()[-1]   # the summary
    assert quiet.splitlines()[-1].startswith("1 passed, 2 failed, 1 errored, 1 skipped, "
                                             "1 xfailed, 1 xpassed")
    details = [line for line in loud.splitlines() if line.startswith("      ")]
    skip = ["      at cases/gpu.toml:2", "      no CUDA device"]     # the skipped case's
    assert [line for line in quiet.splitlines() if line.startswith("      ")] == \
        [line for line in details if line not in skip]             # every failure's kept


# --------------------------------------------------------------------------- JUnit suite

def test_junit_suite_has_pytests_timestamp_and_hostname():
    import platform
    import time
    from datetime import datetime

    junitparser = pytest.importorskip("junitparser")
    before = time.time()
    xml = render_junit(RESULT)
    after = time.time()
    suite = parse(xml).find("testsuite")
    stamp = datetime.fromisoformat(suite.get("timestamp"))
    assert stamp.tzinfo is not None                      # local time with its offset
    # the run's start: rendered now, less the run's 1.25 s
    assert before - 1.25 - 1 <= stamp.timestamp() <= after - 1.25 + 1
    assert suite.get("hostname") == platform.node()
    (parsed,) = list(junitparser.JUnitXml.fromstring(xml))
    assert parsed.hostname == platform.node()
    assert parsed.timestamp == suite.get("timestamp")
    datetime.fromisoformat(parsed.timestamp)


def test_junit_timestamp_is_the_start_a_result_records():
    from datetime import datetime

    from gradcheck.report.junit import started

    start = 1_700_000_000.25
    assert started(RESULT, now=start + 1.25) == start
    stamp = parse(render_junit(RESULT, now=start + 1.25)).find("testsuite").get("timestamp")
    assert datetime.fromisoformat(stamp).timestamp() == pytest.approx(start)
    recorded = RESULT
    object.__setattr__(recorded := dataclasses.replace(RESULT), "started", start - 60)
    assert started(recorded, now=start) == start - 60     # a RunResult.started wins


def test_a_run_records_when_it_began(tmp_path):
    import time

    from gradcheck.session.runner import run

    path = tmp_path / "c.toml"
    path.write_text('[[case]]\nname = "sq"\nexpr = "sum(x**2)"\ninputs.x = { shape = [3] }\n'
                    "points = 1\nextreme_points = 0\n")
    before = time.time()
    result = run([path])
    assert before <= result.started <= before + result.seconds + 1
    suite = parse(render_junit(result, now=result.started + 1000)).find("testsuite")
    assert abs(datetime_of(suite.get("timestamp")) - result.started) < 1e-3


def datetime_of(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


def test_the_text_report_paints_a_failed_witness_on_a_terminal():
    painted = render(RESULT, "text", color=True, verbose=True)
    assert "\033[31mop 1.0e+00/1.0e-07 ✗\033[0m" in painted
    assert "\033[31mtorch" not in painted                 # an agreeing one stays plain
    assert "\033[36mXFAIL \033[0m caught" in painted      # each outcome's word its colour
    assert "\033[31mXPASS \033[0m agreed" in painted
    plain = re.sub(r"\033\[[0-9;]*m", "", painted)
    assert plain == render(RESULT, "text", verbose=True)  # the same text, columns too


def test_an_annotation_names_its_file_from_the_workspace(tmp_path, monkeypatch):
    """A run from a subfolder sees absolute or ../ paths; GitHub resolves an
    annotation's file against the checkout, so it is written relative to that."""
    from gradcheck.report.annotations import workspace_path

    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "a.toml").write_text("")
    monkeypatch.chdir(tmp_path / "cases")
    env = {"GITHUB_WORKSPACE": str(tmp_path)}
    assert workspace_path(str(tmp_path / "cases" / "a.toml"), env) == "cases/a.toml"
    assert workspace_path("a.toml", env) == "cases/a.toml"
    assert workspace_path("/elsewhere/a.toml", env) == "/elsewhere/a.toml"
    assert workspace_path("a.toml", {}) == "a.toml"
    assert workspace_path("<check_op>", env) == "<check_op>"
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    failed = CaseResult("bad", str(tmp_path / "cases" / "a.toml"), 3, "float64", FAILED,
                        message="torch: 1 / 3 elements differ")
    (line,) = github_annotations(RunResult((failed,)))
    assert line.startswith("::error file=cases/a.toml,line=3,")
