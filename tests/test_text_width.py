"""What a newcomer's first ``gradcheck run`` prints: one line per case run at the
terminal's width, pytest's words for the expected failures (XFAIL caught, XPASS not:
a failure), and no note on what PyTorch's contract for a backward allows unless -v
asks. The whole of ``cases/`` takes minutes; a small subset of the bundled cases stands
for it: an op pair with expect = "fail", an approximate case and its wrong twin, an op
whose backward returns a trailing None for a defaulted argument, formulas, and formulas
skipped in a dtype their only witness does not run in."""

from __future__ import annotations

import dataclasses
import io
import os
import re
from pathlib import Path

import pytest

from gradcheck.base.result import FAILED, PASSED, CaseResult, RunResult, WitnessResult, Worst
from gradcheck.cli import progress
from gradcheck.cli.main import main
from gradcheck.cli.output import text_width
from gradcheck.report import render
from gradcheck.report.text import render_text
from gradcheck.session.runner import run

CASES = Path(__file__).parent.parent / "cases"
WORDS = ("PASS", "FAIL", "ERROR", "SKIP", "APPROX", "XFAIL", "XPASS")


@pytest.fixture(scope="module")
def first_run() -> RunResult:
    """The bundled cases' results, as a first run gives them (in this process)."""
    parts = [run([CASES / "ops" / "contract.toml"], keyword="gram", timeout=None),
             run([CASES / "ops" / "approximations.toml"], keyword="inside", dtype="float64",
                 timeout=None),
             run([CASES / "ops" / "ops.toml"], keyword="rms-norm-default-eps",
                 dtype="float64", timeout=None),
             run([CASES / "activations.toml"], keyword="sigmoid-explicit", timeout=None),
             run([CASES / "activations.toml"], keyword="tanhshrink", dtype="bfloat16",
                 witnesses=("engine",), timeout=None)]
    return RunResult(tuple(c for p in parts for c in p.cases), seconds=1.0)


def case_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.split(" ", 1)[0] in WORDS]


@pytest.mark.parametrize("verbose", [False, True])
def test_the_first_run_fits_80_columns_and_names_expected_failures(first_run, verbose):
    outcomes = {c.outcome for c in first_run.cases}
    assert {"passed", "xfail", "approximate", "skipped"} <= outcomes   # the subset's point
    text = render_text(first_run, width=80, verbose=verbose)
    assert max(map(len, text.splitlines())) <= 80
    lines = case_lines(text)
    assert len(lines) == len(first_run.cases)            # one line per case run
    for case, line in zip(first_run.cases, lines):
        assert line.split()[1] == case.name
        if case.expect == "fail":
            assert line.startswith("XFAIL ") and "✗" in line, line   # caught, and where
        else:
            assert not line.startswith("X"), line
    assert not any(c.expect == "fail" and line.startswith("PASS")
                   for c, line in zip(first_run.cases, lines))
    assert text.splitlines()[-1].startswith(
        "4 passed, 1 approximate, 0 failed, 0 errored, 1 skipped, 3 xfailed in ")


def test_pytorchs_contract_is_a_note_for_v_only(first_run):
    """A backward's trailing None for a defaulted eps is what PyTorch documents: kept in
    the data (the JSON report), said by the text and JUnit reports with -v only."""
    (rms,) = [c for c in first_run.cases if c.name == "rms-norm-default-eps"]
    said = "returned 3 gradients; forward was given 2 arguments"
    assert any(said in n for n in rms.contract_notes)
    assert not any(said in n for n in rms.notes)
    assert said in render(first_run, "json")
    for fmt in ("text", "junit"):
        assert said not in render(first_run, fmt)
        flat = " ".join(render(first_run, fmt, verbose=True).split())   # (lines wrapped)
        assert f"contract note: RMSNorm.backward {said}" in flat


def fits(text: str, width: int) -> bool:
    """Every line fits but one word that no width holds (a name, a path: kept whole,
    on its own line, so that it can be copied and searched for)."""
    return all(len(line) <= width or len(line.split()) == 1 for line in text.splitlines())


def _failed(name: str, expect: str = "pass") -> CaseResult:
    worst = Worst("x.grad", (0,), obtained=1.0, expected=-1.0, tolerance=1e-8, point=0)
    bad = WitnessResult("torch", FAILED, 2.0, 2.0, worst, checked=4, mismatched=4,
                        message="4 / 4 elements differ")
    return CaseResult(name, "cases/long.toml", 3, "bfloat16", FAILED, witnesses=(bad,),
                      message="torch: 4 / 4 elements differ", mode="elementwise",
                      expect=expect)


LONG = "a-case-name-" + "that-goes-on-" * 15 + "and-on"


@pytest.mark.parametrize("width", [40, 57, 80, 132, 300])
@pytest.mark.parametrize("verbose", [False, True])
def test_no_line_is_wider_than_the_width_whatever_the_names(width, verbose):
    agreed = WitnessResult("torch", PASSED, worst=Worst("x.grad", (0,), 0.0, 0.0, 1e-8, 0))
    cases = (_failed(LONG), _failed("short"),
             CaseResult(LONG + "-expected", "cases/long.toml", 9, "float64", FAILED,
                        witnesses=(agreed,), expect="fail", mode="op",
                        message='expected a mismatch (expect = "fail"), but every witness '
                                "agreed"))
    text = render_text(RunResult(cases, seconds=3.0), width=width, verbose=verbose)
    assert fits(text, width), text
    lines = case_lines(text)
    assert [line.split()[0] for line in lines] == ["FAIL", "FAIL", "XPASS"]
    assert "…" in lines[0] and LONG not in lines[0]      # cut, with an ellipsis
    # a name cut on its line (at 40 characters at most) is given whole under it
    assert f"name: {LONG}" in " ".join(text.split())
    assert "name: short" not in text
    assert " ".join(text.split()).endswith(
        "0 passed, 2 failed, 0 errored, 0 skipped, 1 xpassed in 3.00s")


def test_the_width_is_columns_or_the_terminals_or_80(monkeypatch):
    monkeypatch.setenv("COLUMNS", "123")
    assert text_width() == 123
    monkeypatch.delenv("COLUMNS")

    def no_terminal(*args):
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    assert text_width() == 80                            # a pipe, a file, a CI log


def test_the_command_fits_the_columns_it_is_given(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    path = tmp_path / "long.toml"
    path.write_text(f'[[case]]\nname = "{LONG}"\nexpr = "sum(x**2)"\n'
                    'inputs.x = {{ shape = [2] }}\npoints = 1\nexpect = "fail"\n'
                    .replace("{{", "{").replace("}}", "}"), encoding="utf-8")
    code = main(["run", str(path), "--witness", "torch", "--in-process"])
    out, err = capsys.readouterr()
    assert code == 1                                     # an XPASS fails the run
    assert fits(out, 50), out
    assert case_lines(out)[0].startswith("XPASS  a-case-name-")
    assert re.search(r"^\[1/1\] XPASS a-case-name-.*… \(float64\) \d+\.\d\ds$", err, re.M), err
    assert max(map(len, err.splitlines())) <= 50, err


def test_progress_lines_say_xfail_and_fit_the_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    out = io.StringIO()
    caught = dataclasses.replace(_failed(LONG, expect="fail"), status=PASSED)
    with progress.display(out, mode="lines", color=False) as p:
        p.planned(2)
        p(1, 2, caught)
        p(2, 2, _failed("short", expect="fail"))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/2] XFAIL a-case-") and lines[0].endswith(
        "… (bfloat16) 0.00s")
    assert lines[1] == "[2/2] XPASS short (bfloat16) 0.00s"
    assert max(map(len, lines)) <= 40
