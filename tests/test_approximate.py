"""The approximate verdict (issue 30, item 5): a float64 check whose mismatches all lie
within the tolerance the same check has in float32 is ``approximate`` (exit 0; a failure
with ``--strict``, ``strict = true`` in a case or ``[defaults]``, ``[tool.gradcheck]
strict``), its message naming the likely cause; a deviation beyond float32's tolerance
stays a failure in every dtype.

The real ops are cases/ops/approximations.py: softplus with PyTorch's threshold 20, a
tanh-GELU whose backward writes 3·0.044715·√(2/π) to 10 digits, swish computed in float32
inside a float64 call, and their versions too coarse for float32 (threshold 5, the
constant to 3 digits, bfloat16 inside). Every report format is read for the status."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck.checking.approximate import Near
from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main
from gradcheck.checking.compare import Comparison, Finding, Tally
from gradcheck.report import render
from gradcheck.report.annotations import github_annotations
from gradcheck.session.runner import run
from conftest import skipped_saying_why  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "cases" / "ops" / "approximations.toml"
RIGHT = {"softplus-threshold-20": "a threshold (errors only where x > 20)?",
         "gelu-tanh-constant-10-digits": "a rounded constant?",
         "float32-inside": "float32 arithmetic inside?"}
WRONG = ("softplus-threshold-5-wrong", "gelu-tanh-constant-3-digits-wrong",
         "bfloat16-inside-wrong")


@pytest.fixture(scope="module")
def results():
    """Every case of approximations.toml in float64 and float32, default and strict."""
    return {strict: {(c.name, c.dtype): c for c in run([CASES], strict=strict).cases}
            for strict in (False, True)}


@pytest.mark.parametrize("name", RIGHT)
def test_each_approximation_is_approximate_in_float64_with_its_cause(results, name):
    case = results[False][(name, "float64")]
    assert case.status == "approximate", case.message
    assert case.message.startswith("approximate: ")
    near = [w for w in case.witnesses if w.status == "approximate"]
    assert near and not [w for w in case.witnesses if w.status == "failed"]
    for w in near:
        assert "beyond float64's tolerance" in w.diagnosis and "within float32's" in (
            w.diagnosis)
        assert w.diagnosis.endswith(RIGHT[name]) or RIGHT[name] in w.diagnosis, w.diagnosis
    # the cause named fits every wrong element of the checks that differ in value
    assert RIGHT[name] in case.message


@pytest.mark.parametrize("name", RIGHT)
def test_each_approximation_passes_in_float32_and_fails_when_strict(results, name):
    assert results[False][(name, "float32")].status == "passed"
    strict = results[True][(name, "float64")]
    assert strict.status == "failed"
    assert strict.message.startswith("approximate: ") and "strict" in strict.message
    # (op.vmap skipped, saying why, for a Function without vmap support)
    assert {w.status for w in strict.witnesses if not skipped_saying_why(w)} <= {"passed",
                                                                              "failed"}
    assert results[True][(name, "float32")].status == "passed"


@pytest.mark.parametrize("name", WRONG)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_approximation_beyond_float32s_tolerance_fails_in_every_dtype(results, name,
                                                                           dtype):
    for strict in (False, True):
        case = results[strict][(name, dtype)]
        # expect = "fail": caught, by a failure (not an approximation)
        assert case.status == "passed" and case.message.startswith("caught as expected: ")
        failed = [w for w in case.witnesses if w.status == "failed"]
        assert failed and not [w for w in case.witnesses if w.status == "approximate"]


def test_the_same_wrong_op_unmarked_fails_in_float64(tmp_path):
    shutil.copy(CASES.with_suffix(".py"), tmp_path / "approximations.py")
    text = CASES.read_text(encoding="utf-8").replace('expect = "fail"\n', "")
    (tmp_path / "cases.toml").write_text(text, encoding="utf-8")
    got = {(c.name, c.dtype): c.status for c in run([tmp_path / "cases.toml"],
                                                    dtype="float64").cases}
    assert {got[(n, "float64")] for n in WRONG} == {"failed"}
    assert {got[(n, "float64")] for n in RIGHT} == {"approximate"}


# --------------------------------------------------------------------------- reports

def _float64(results):
    """The run's float64 results, as one RunResult."""
    from gradcheck.base.result import RunResult

    return RunResult(tuple(c for (n, d), c in results[False].items() if d == "float64"))


def test_every_report_says_approximate(results):
    result = _float64(results)
    assert result.summary["approximate"] == 3 and result.summary["failed"] == 0
    text = render(result, "text")
    lines = text.splitlines()
    assert sum(line.startswith("APPROX softplus-threshold-20") for line in lines) == 1
    # (the three wrong ones of the file caught as expect = "fail" said: xfailed)
    assert "0 passed, 3 approximate, 0 failed, 0 errored, 0 skipped, 3 xfailed in" in text
    assert "≈" in text
    data = json.loads(render(result, "json"))
    assert data["summary"]["approximate"] == 3
    by = {c["name"]: c for c in data["cases"]}
    assert by["float32-inside"]["status"] == "approximate"
    assert by["float32-inside"]["witnesses"]["op.backward"]["status"] == "approximate"
    suite = ET.fromstring(render(result, "junit")).find("testsuite")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    case = next(c for c in suite if c.get("name") == "float32-inside[float64]")
    assert case.find("failure") is None and case.find("error") is None
    assert "WARNING" in case.find("system-out").text
    assert "float32 arithmetic inside?" in case.find("system-out").text
    md = render(result, "markdown")
    assert md.startswith("## ✅ gradcheck: 0 passed, 3 approximate, 0 failed")
    assert "⚠️ approximate" in md
    html = render(result, "html")
    assert '<span class="approximate">3 approximate</span>' in html
    assert '<tr class="approximate">' in html and 'id="legend"' in html
    assert ".approximate {" in html   # its own colour
    notes = github_annotations(result)
    warned = [n for n in notes if n.startswith("::warning ")]
    assert len(warned) == 3 and not [n for n in notes if n.startswith("::error")]
    assert "title=gradcheck softplus-threshold-20[float64]" in warned[0]


def test_a_strict_run_reports_failures(results):
    from gradcheck.base.result import RunResult

    result = RunResult(tuple(c for (n, d), c in results[True].items()
                             if d == "float64" and n in RIGHT))
    assert result.summary["failed"] == 3 and result.summary["approximate"] == 0
    notes = github_annotations(result)
    assert len(notes) == 3 and all(n.startswith("::error ") for n in notes)
    suite = ET.fromstring(render(result, "junit")).find("testsuite")
    assert suite.get("failures") == "3"


# --------------------------------------------------------------------------- the CLI

@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    shutil.copy(CASES.with_suffix(".py"), tmp_path / "approximations.py")
    case = CASES.read_text(encoding="utf-8")
    start = case.index("[[case]]\nname = \"float32-inside\"")
    end = case.index("# ---", start)
    (tmp_path / "cases.toml").write_text(
        '[defaults]\ndtype = "float64"\npoints = 1\nextreme_points = 0\n\n'
        + case[start:end], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def gc(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().out


def test_approximate_exits_0_and_strict_exits_1(capsys, project):
    code, out = gc(capsys, "run", "cases.toml")
    assert code == ExitCode.OK and out.startswith("APPROX float32-inside")
    code, out = gc(capsys, "run", "cases.toml", "--strict")
    assert code == ExitCode.MISMATCH and out.startswith("FAIL   float32-inside")
    assert gc(capsys, "run", "cases.toml", "--strict", "--exit-zero")[0] == ExitCode.OK


def test_strict_in_the_case_in_defaults_and_in_the_pyproject(capsys, project):
    text = (project / "cases.toml").read_text(encoding="utf-8")
    (project / "cases.toml").write_text(text + "strict = true\n", encoding="utf-8")
    assert gc(capsys, "run", "cases.toml")[0] == ExitCode.MISMATCH
    (project / "cases.toml").write_text(
        text.replace("[defaults]\n", "[defaults]\nstrict = true\n"), encoding="utf-8")
    assert gc(capsys, "run", "cases.toml")[0] == ExitCode.MISMATCH
    (project / "cases.toml").write_text(text, encoding="utf-8")
    with open(project / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write("\n[tool.gradcheck]\nstrict = true\n")
    assert gc(capsys, "run", "cases.toml")[0] == ExitCode.MISMATCH
    # the command line overrides the table
    assert gc(capsys, "run", "cases.toml", "--no-strict")[0] == ExitCode.OK


def test_github_actions_prints_a_warning_annotation(capsys, project, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out = gc(capsys, "run", "cases.toml", "-q")
    assert code == ExitCode.OK
    warned = [line for line in out.splitlines() if line.startswith("::warning ")]
    assert len(warned) == 1 and "float32 arithmetic inside?" in warned[0]
    assert "::error" not in out


# --------------------------------------------------------------------------- library

def _float32_inside():
    import importlib.util

    spec = importlib.util.spec_from_file_location("approximations_test",
                                                  CASES.with_suffix(".py"))
    module = importlib.util.module_from_spec(spec)
    # (as an import would: torch.compile, op.compile's, looks the op's module up by name)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_assert_op_passes_an_approximation_with_a_warning_unless_strict():
    ops = _float32_inside()
    inputs = {"x": (8,)}
    result = gradcheck.check_op(ops.Float32Inside, "x * sigmoid(x)", inputs, points=1)
    assert result.status == "approximate"
    with pytest.warns(gradcheck.ApproximateGradient, match="float32 arithmetic inside"):
        gradcheck.assert_op(ops.Float32Inside, "x * sigmoid(x)", inputs, points=1)
    with pytest.raises(gradcheck.GradientMismatch):
        gradcheck.assert_op(ops.Float32Inside, "x * sigmoid(x)", inputs, points=1,
                            strict=True)
    with pytest.raises(gradcheck.GradientMismatch):   # beyond float32's: a failure
        gradcheck.assert_op(ops.HalfInside, "x * sigmoid(x)", inputs, points=1)
    # in float32 its own tolerance is float32's: it passes, with no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gradcheck.assert_op(ops.Float32Inside, "x * sigmoid(x)", inputs, points=1,
                            dtype="float32")


def test_a_formula_witness_computing_in_float32_is_approximate(monkeypatch):
    # torch's tanh row rounded through float32: the torch witness is approximate in
    # float64, finite differences still pass (the engine is left out: the casts are
    # nodes of torch's graph that the engine's does not have)
    import torch

    from gradcheck.rules import RULES

    rule = RULES["tanh"]

    def tanh32(x):
        return torch.tanh(x.float()).to(x.dtype)

    monkeypatch.setitem(RULES, "tanh", dataclasses.replace(rule, torch=tanh32))
    options = {"points": 2, "witnesses": ["torch", "numeric"]}
    result = gradcheck.check("sum(tanh(x))", {"x": (16,)}, **options)
    assert result.status == "approximate", result.message
    assert result.witness("torch").status == "approximate"
    assert "float32 arithmetic inside?" in result.witness("torch").diagnosis
    assert result.witness("numeric").status == "passed"
    assert gradcheck.check("sum(tanh(x))", {"x": (16,)}, strict=True,
                           **options).status == "failed"
    # beyond float32's tolerance: a torch tanh 1e-3 off fails

    def tanh_off(x):
        return torch.tanh(x) * (1 + 1e-3)

    monkeypatch.setitem(RULES, "tanh", dataclasses.replace(rule, torch=tanh_off))
    result = gradcheck.check("sum(tanh(x))", {"x": (16,)}, **options)
    assert result.status == "failed" and result.witness("torch").status == "failed"


# --------------------------------------------------------------------------- the tally

def _compare(tally, obtained, expected, tolerance, loose, values=None, point=0):
    tally.record([Comparison({"x.grad": np.asarray(obtained, float)},
                             {"x.grad": np.asarray(expected, float)}, point,
                             {"x.grad": np.asarray(tolerance, float)},
                             loose=(lambda: {"x.grad": np.asarray(loose, float)})
                             if loose is not None else None, values=values)])


def test_a_tally_is_approximate_only_in_float64_and_within_float32s_tolerance():
    e = np.ones(4)
    o = e + np.array([0, 1e-10, 0, 0])
    for dtype, loose, status in (("float64", 1e-6, "approximate"),
                                 ("float64", 1e-12, "failed"),
                                 ("float64", None, "failed"),
                                 ("float32", 1e-6, "failed")):
        t = Tally("torch", dtype)
        _compare(t, o, e, 1e-14, loose)
        assert t.result().status == status, (dtype, loose)
    t = Tally("torch", "float64")
    _compare(t, o, e, 1e-14, 1e-6)
    t.record([Finding(checked=1, problem="backward modified input x in place")])
    assert t.result().status == "failed"   # a problem no tolerance makes right


def test_the_float32_tolerance_is_asked_only_where_an_element_fails():
    asked = []

    def loose():
        asked.append(1)
        return {"x.grad": np.ones(4)}

    t = Tally("torch", "float64")
    t.record([Comparison({"x.grad": np.ones(4)}, {"x.grad": np.ones(4)}, 0,
                         {"x.grad": np.full(4, 1e-14)}, loose=loose)])
    assert not asked and t.result().status == "passed"
    t.record([Comparison({"x.grad": np.ones(4) + 1e-9}, {"x.grad": np.ones(4)}, 1,
                         {"x.grad": np.full(4, 1e-14)}, loose=loose)])
    assert len(asked) == 1 and t.result().status == "approximate"


def test_the_cause_fits_every_wrong_element_or_is_not_said():
    x = np.linspace(-30, 30, 61)
    e = np.log1p(np.exp(x))
    # a threshold: wrong exactly where x > 20
    t = Tally("op.forward", "float64")
    o = np.where(x > 20, x, e)
    _compare(t, o, e, 1e-16 * np.abs(e), 1e-6 * np.abs(e), {"x": x})
    assert t.result().diagnosis.endswith("a threshold (errors only where x > 20)?")
    # a constant relative error
    t = Tally("op.forward", "float64")
    _compare(t, e * (1 + 3e-10), e, 1e-14 * np.abs(e), 1e-6 * np.abs(e), {"x": x})
    assert "a rounded constant? (a constant relative error of 3e-10)" in (
        t.result().diagnosis)
    # float32 arithmetic: every element rounded to float32
    t = Tally("op.forward", "float64")
    o = e.astype(np.float32).astype(float)
    _compare(t, o, e, 1e-16 * np.abs(e), 1e-6 * np.abs(e), {"x": x})
    assert "float32 arithmetic inside?" in t.result().diagnosis
    # errors of every size up to float32's tolerance: no cause fits
    t = Tally("op.forward", "float64")
    rng = np.random.default_rng(0)
    o = e * (1 + 10.0 ** rng.uniform(-12, -6.5, e.shape))
    _compare(t, o, e, 1e-16 * np.abs(e), 1e-6 * np.abs(e), {"x": x})
    d = t.result().diagnosis
    assert t.result().status == "approximate" and d.endswith("of it)"), d


def test_a_threshold_needs_right_elements_beyond_zero_and_every_wrong_one():
    near = Near()
    assert near.threshold() is None
    x = np.array([-7.0, -3.0, 1.0, 2.0, 4.5, 6.0, 7.0, 8.0])   # |x| > 5 has a right -7
    e = np.ones(8)
    bad = x > 5
    near.judge(e + 1e-9 * bad, e, 1e-9 * bad.astype(float), np.where(bad, 2.0, 0.0),
               np.full(8, 1e-6), {"x": x})
    assert near.threshold() == "x > 5"
    near.judge(e, e, np.full(8, 1e-9), np.full(8, 2.0), np.full(8, 1e-6), {})
    assert near.threshold() is None   # wrong elements that line up with no input


def test_a_few_elements_just_past_float64s_tolerance_name_no_cause():
    # one element 1.03 times float64's tolerance (a bound that is close, not a
    # constant): approximate, with the numbers and no cause
    e = np.linspace(1, 2, 8) / 1024   # (1.03e-15 a multiple of their spacing, nearly)
    o = e.copy()
    o[3] += 1.03e-15
    t = Tally("torch", "float64")
    _compare(t, o, e, np.full(8, 1e-15), np.full(8, 1e-6), {"x": e})
    r = t.result()
    assert r.status == "approximate"
    assert r.diagnosis.startswith("beyond float64's tolerance (up to 1.03 times it), "
                                  "within float32's (up to 1e-09 of it)"), r.diagnosis
    assert "?" not in r.diagnosis
