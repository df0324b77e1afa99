"""Safe to publish: under GitHub Actions, nothing a case file or an op says can become a
workflow command. tests/hostile/publish/commands.toml puts commands in names,
descriptions, expression errors and op exceptions (publish_ops.py); every format of
``gradcheck run`` and ``gradcheck list`` is run on it in a real subprocess (from a folder
whose own name is hostile too), and every line printed on stdout and stderr is read the
way the Actions runner reads it.

The runner (actions/runner, ActionCommandManager.TryProcessCommand through
ActionCommand.TryParseV2 and TryParse) reads each line of a step's output (split at
``\\n``, ``\\r`` and ``\\r\\n``) as a command when, after TrimStart, it starts with
``::name`` and holds a second ``::``, or when it holds ``##[name]`` anywhere, for a
registered name (error, warning, add-mask, stop-commands, ...). :func:`commands` is
stricter on every count: it splits at every break Python knows, strips every Unicode
space, and counts any leading ``::`` and any ``##[`` whatever follows.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
import pytest

from gradcheck.base.errors import describe_exception
from gradcheck.report import FORMATS, render
from gradcheck.report.annotations import github_annotations
from gradcheck.report.markdown import size
from gradcheck.report.scrub import json_safe, neutral, one_line, printable
from gradcheck.base.result import ERROR, FAILED, CaseResult, RunResult, WitnessResult

CORPUS = Path(__file__).parent / "hostile" / "publish"
HOSTILE_DIR = "dir\n::error::from a path ##[error]\u202e"
ROOT = Path(__file__).resolve().parents[1]
# an annotation of gradcheck's own: ::error file=...,line=N,title=gradcheck ...::message
OWN = re.compile(r"::error file=(?P<file>[^,:]*),(?:line=\d+,)?title=gradcheck [^,:]*"
                 r"::(?P<data>.*)")


def commands(text: str) -> list[str]:
    """Every line of ``text`` that the Actions runner could take for a command."""
    return [line for line in text.splitlines()
            if line.lstrip().startswith("::") or "##[" in line]


def test_the_scanner_sees_what_the_runner_would_run():
    forged = ("a\n::error::x\n  ::add-mask::gc\rb ##[error]c\n\u2028::stop-commands::t\n"
              "\u3000::warning::w\nsafe :: text\n:\\:error::x #\\#[error]")
    assert commands(forged) == ["::error::x", "  ::add-mask::gc", "b ##[error]c",
                                "::stop-commands::t", "\u3000::warning::w"]
    assert commands(neutral(forged)) == []
    assert commands(printable(forged)) == [] and commands(one_line(forged)) == []


def _unescape(value: str, mappings: str) -> str:
    """The runner's UnescapeData / UnescapeProperty: its mappings in its order."""
    for code in mappings.split():
        value = value.replace(code, chr(int(code[1:], 16)))
    return value


def _own(line: str, files: set[str]) -> bool:
    """``line`` is an annotation gradcheck wrote for one of ``files`` (as reports show
    a path: :func:`one_line`), whose message, once the runner unescapes it, starts no
    command on any of its lines."""
    m = OWN.fullmatch(line)
    if m is None or _unescape(m.group("file"), "%0D %0A %3A %2C %25") not in files:
        return False
    return commands(_unescape(m.group("data"), "%0D %0A %25")) == []


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The corpus, in a folder whose name carries a command and a newline."""
    folder = tmp_path_factory.mktemp("publish") / HOSTILE_DIR
    shutil.copytree(CORPUS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@pytest.fixture(scope="module")
def outputs(corpus) -> dict[str, subprocess.CompletedProcess]:
    """Every format of ``run`` and ``list``, in subprocesses started side by side.
    The text run has each case in its worker process (the default); the others run
    in-process (the same results, without a second torch import each)."""
    # (120 columns: the text report's lines keep the forged names whole, so that they
    # are seen escaped; a long message is still broken into lines)
    env = {**os.environ, "GITHUB_ACTIONS": "true", "NO_COLOR": "1", "COLUMNS": "120"}
    file = str(corpus / "commands.toml")
    argvs = {fmt: ["run", file, "--format", fmt] for fmt in FORMATS}
    argvs["list"] = ["list", file]
    procs = {k: subprocess.Popen([sys.executable, "-m", "gradcheck", *a], cwd=ROOT,
                                 env={**env, "GRADCHECK_IN_PROCESS": "0" if k == "text" else "1"},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for k, a in argvs.items()}
    done = {}
    for k, p in procs.items():
        out, err = p.communicate(timeout=600)
        done[k] = subprocess.CompletedProcess(argvs[k], p.returncode,
                                              out.decode("utf-8"), err.decode("utf-8"))
    return done


def _cases(corpus) -> list[dict]:
    return tomllib.loads((corpus / "commands.toml").read_text(encoding="utf-8"))["case"]


@pytest.mark.parametrize("what", [*FORMATS, "list"])
def test_no_line_of_any_output_is_a_command(outputs, corpus, what):
    proc = outputs[what]
    assert proc.returncode == 2, proc.stderr[-3000:]      # three cases are invalid
    files = {one_line(corpus / "commands.toml")}
    lines = commands(proc.stdout) + commands(proc.stderr)
    foreign = [line for line in lines if not _own(line, files)]
    assert foreign == []
    own = [line for line in lines if _own(line, files)]
    # one annotation per case that failed or errored, nothing else looks like one
    assert len(own) == (0 if what == "list" else 8)
    for text in (proc.stdout, proc.stderr):   # bidi controls and escapes shown, never raw
        assert not re.search("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\x1b\u2028\r]",
                             text)


def test_the_text_report_keeps_one_line_per_case(outputs, corpus):
    out = outputs["text"].stdout
    rows = [line for line in out.splitlines()
            if re.match(r"(PASS|FAIL|ERROR|SKIP|APPROX|XFAIL|XPASS) ", line)]
    assert len(rows) == len(_cases(corpus))
    assert "PASS   passes\\n::error file=forged.py" in out     # one line: not a command
    assert ":\\:warning::a name that starts with a command #\\#[error]x" in out
    assert "\\u202eevil\\u2066bidi\\u200f\\x1b[2J" in out          # visible, not "?"
    assert "op-forged-type-name\\u2028::error::U+2028" in out


def test_json_on_stdout_parses_to_the_raw_values(outputs, corpus):
    doc = json.loads(outputs["json"].stdout)
    by_name = {c["name"]: c for c in doc["cases"]}
    assert set(by_name) == {c["name"] for c in _cases(corpus)}    # values untouched
    assert "##[" not in outputs["json"].stdout and "\\u0023#[" in outputs["json"].stdout
    unprintable = by_name["op-unprintable-str"]
    assert (unprintable["status"], unprintable["error_kind"]) == (FAILED, "op raised")
    assert "Unprintable: <unprintable: RuntimeError in __str__>" in unprintable["message"]
    assert by_name["op-non-str-str"]["error_kind"] == "op raised"
    assert "NotText: <unprintable: TypeError in __str__>" in by_name["op-non-str-str"]["message"]
    forged = by_name["op-forged-message\r::error::after CR"]
    assert "\n::error file=forged.py,line=1::forged annotation" in forged["message"]
    assert not any(c["error_kind"] == "internal" for c in doc["cases"])


def test_junit_and_markdown_stay_documents(outputs):
    suite = ET.fromstring(outputs["junit"].stdout).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("9", "5", "3")
    names = [t.get("name") for t in suite.findall("testcase")]
    assert "passes\\n::error file=forged.py,line=1::forged by a name[float64]" in names
    md = outputs["markdown"].stdout
    assert md.startswith("## ❌ gradcheck: 1 passed, 5 failed, 3 errored")
    assert all(line.startswith("|") for line in md.splitlines() if "forged" in line)


def test_list_prints_one_line_per_case_and_description_line(outputs, corpus):
    out = outputs["list"].stdout.splitlines()
    cases = [line for line in out if not line.startswith("    ")][:-1]
    assert len(cases) == len(_cases(corpus)) - 3      # three are invalid: on stderr
    assert out[-1] == f"{len(cases)} cases, 3 invalid"
    assert "    :\\:add-mask::gradcheck" in out and "    #\\#[error]from a description \\u202eRLO" in out


# --------------------------------------------------------------------------- the renderers

def _erroring(n: int) -> RunResult:
    """``n`` case-file errors with long hostile messages, as a broken file gives."""
    text = "::error::x\n##[error]y \u202e " + "long message " * 80
    cases = tuple(CaseResult(f"case-{i} ::error::" + "n" * 100, "cases/many.toml", i + 1,
                             "-", ERROR, error_kind="case", message=text)
                  for i in range(n))
    bad = WitnessResult("op", FAILED, max_abs_err=1.0, max_rel_err=2.0, checked=6,
                        mismatched=6, message=text)
    failed = tuple(dataclasses.replace(c, status=FAILED, dtype="float64",
                                       witnesses=(bad,), error_kind=None)
                   for c in cases[: n // 2])
    return RunResult(failed + cases[n // 2:], seconds=3.0)


def test_markdown_is_capped_below_githubs_limit_with_what_was_left_out():
    result = _erroring(3000)
    md = render(result, "markdown")
    assert size(md) < 65536 and len(md) < 65536
    assert md.startswith("## ❌ gradcheck: 0 passed, 1500 failed, 1500 errored")
    (line,) = [x for x in md.splitlines() if x.startswith("**Left out**")]
    m = re.search(r"([\d,]+) of 3,000 case runs that did not pass and ([\d,]+) of 3,000 "
                  r"rows of the table of all case runs \(([\d,]+) characters\)", line)
    problems, details = md.split("<details>")
    shown = sum(1 for x in problems.splitlines() if x.startswith(("| ❌", "| 💥")))
    listed = sum(1 for x in details.splitlines() if x.startswith(("| ❌", "| 💥")))
    left, rows_left, chars = (int(g.replace(",", "")) for g in m.groups())
    assert shown == 3000 - left > 10                # as many failures as fit, in order
    assert listed == 3000 - rows_left and chars > 1_000_000
    assert f"case-{shown - 1} " in problems and f"case-{shown} " not in problems
    assert f"| … {rows_left} more |" in details
    assert commands(md) == []
    small = render(_erroring(4), "markdown")
    assert "Left out" not in small and small.count("| 💥 error") == 4


def test_markdown_counts_characters_as_github_does():
    wide = RunResult(tuple(CaseResult("𝔸" * 150 + str(i), "f.toml", 1, "-", ERROR,
                                      error_kind="case", message="𝔸" * 590)
                           for i in range(400)))
    md = render(wide, "markdown")
    assert len(md) < size(md) < 65536                # astral characters count twice


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_renderer_neutralises_what_a_composed_line_could_form(fmt):
    """Two fields side by side (a name ending in ``##``, a dtype in brackets) cannot
    form a command either: each renderer passes its whole document through neutral."""
    case = CaseResult("x##", "::f.toml", 1, "float64", FAILED, message="m\n  ::error::y",
                      witnesses=(WitnessResult("op", FAILED, message="##[error]z"),))
    result = RunResult((case,))
    out = render(result, fmt)
    assert commands(out) == []
    annotations = github_annotations(result)
    assert [_own(a, {one_line("::f.toml")}) for a in annotations] == [True]


def test_json_safe_keeps_every_value():
    doc = {"a": "##[error]", "b": "\\##[x", "c": "###[", "d": ["x##[", "::e"]}
    text = json_safe(json.dumps(doc, indent=2))
    assert json.loads(text) == doc and "##[" not in text and commands(text) == []


class _Raises(Exception):
    def __str__(self):
        raise ValueError("no text")


def test_one_describer_for_exceptions_whose_str_fails():
    assert describe_exception(_Raises()) == "_Raises: <unprintable: ValueError in __str__>"
    assert describe_exception(KeyError("k")) == "KeyError: 'k'"
