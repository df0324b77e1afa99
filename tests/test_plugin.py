"""The pytest plugin end to end, through pytest's ``pytester``: the ``gradchecker`` fixture
(and ``gradcheck``, its deprecated alias), the ``gradcheck_cases`` marker (one item per
case and dtype), ``--gradcheck-report`` (also under pytest-xdist), the
``--gradcheck-collect`` collector, and a plugin module that imports neither torch nor
SymPy."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest_plugins = ["pytester"]

# A correct op and the same op with its backward's sign flipped.
OPS = '''
import torch


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))


class SwishSignFlipped(Swish):
    @staticmethod
    def backward(ctx, grad_output):
        return -Swish.backward(ctx, grad_output)
'''

CASES_A = """
[defaults]
points = 1

[[case]]
name = "square"
expr = "sum(x**2)"
inputs.x = { shape = [3] }
dtype = ["float64", "float32"]

[[case]]
name = "flip"
op = "plugin_ops:SwishSignFlipped"
reference = "x * sigmoid(x)"
inputs.x = { shape = [4] }

[[case]]
name = "caught"
op = "plugin_ops:SwishSignFlipped"
reference = "x * sigmoid(x)"
inputs.x = { shape = [4] }
expect = "fail"
"""

CASES_BAD = """
[[case]]
name = "broken"
expr = "sum(x ** )"
inputs.x = { shape = [2] }
"""

# (file, case[dtype], outcome) of the folder above, in collection order.
ITEMS = [("a.toml", "square[float64]", "PASSED"), ("a.toml", "square[float32]", "PASSED"),
         ("a.toml", "flip[float64]", "FAILED"), ("a.toml", "caught[float64]", "PASSED"),
         ("sub/bad.toml", "broken", "FAILED")]

MARKED = """
import pytest


@pytest.mark.gradcheck_cases("cases/")
def test_cases(gradcheck_case):
    assert gradcheck_case.name in ("square", "flip", "caught", "broken")
"""


@pytest.fixture
def project(pytester):
    """tests/cases/{a.toml, sub/bad.toml, plugin_ops.py} and a marked test file."""
    pytester.makeini("[pytest]\n")
    cases = pytester.path / "tests" / "cases"
    (cases / "sub").mkdir(parents=True)
    (cases / "a.toml").write_text(CASES_A)
    (cases / "sub" / "bad.toml").write_text(CASES_BAD)
    (cases / "plugin_ops.py").write_text(OPS)
    (pytester.path / "tests" / "test_marked.py").write_text(MARKED)
    return pytester


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(tmp_path_factory):
    """Run one formula case and one op case before any ``pytester`` run: pytester removes
    the modules an in-process run imported, and NumPy cannot be imported twice."""
    import gradcheck

    folder = tmp_path_factory.mktemp("warm")
    (folder / "plugin_ops_warm.py").write_text(OPS)
    (folder / "warm.toml").write_text(CASES_A.replace("plugin_ops:", "plugin_ops_warm:"))
    assert gradcheck.run([folder]).cases


def _report(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _runs(report: dict) -> list[tuple]:
    return [(c["file"], c["name"], c["dtype"], c["status"]) for c in report["cases"]]


REPORT_RUNS = [("tests/cases/a.toml", "square", "float64", "passed"),
               ("tests/cases/a.toml", "square", "float32", "passed"),
               ("tests/cases/a.toml", "flip", "float64", "failed"),
               ("tests/cases/a.toml", "caught", "float64", "passed"),
               ("tests/cases/sub/bad.toml", "broken", "-", "error")]


# --------------------------------------------------------------------------- fixture

def test_fixture_assert_op_passes_a_correct_op_and_explains_a_wrong_one(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(OPS + textwrap.dedent('''

        def test_correct(gradchecker):
            result = gradchecker.assert_op(Swish, "x * sigmoid(x)", {"x": (5,)}, points=1)
            assert result.status == "passed"
            assert gradchecker.check_op(Swish, "x * sigmoid(x)", {"x": (5,)},
                                        points=1).status == "passed"


        def test_wrong(gradchecker):
            gradchecker.assert_op(SwishSignFlipped, "x * sigmoid(x)", {"x": (5,)}, points=1)
        '''))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "GradientMismatch" in out and "sign flipped" in out
    # the helper frames are hidden: the traceback points at the test's own line
    assert "gradchecker.assert_op(SwishSignFlipped" in out
    assert "def assert_op(self" not in out


def test_fixture_delegates_check_and_assert_gradients_at_call_time(pytester):
    pytester.makepyfile('''
        import gradcheck as gc


        def test_delegates(gradchecker, monkeypatch):
            monkeypatch.setattr(gc, "check", lambda e, i, **o: ("check", e, i, o),
                                raising=False)
            monkeypatch.setattr(gc, "assert_gradients", lambda e, i, **o: ("assert", e, o),
                                raising=False)
            assert gradchecker.check("x*x", {"x": (2,)}, seed=3) == \\
                ("check", "x*x", {"x": (2,)}, {"seed": 3})
            assert gradchecker.assert_gradients("x", {}, points=1) == \\
                ("assert", "x", {"points": 1})
        ''')
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_fixture_run_case_file_resolves_against_the_test_files_folder(project):
    (project.path / "tests" / "test_marked.py").unlink()
    (project.path / "tests" / "test_file.py").write_text(textwrap.dedent('''
        def test_run(gradchecker):
            result = gradchecker.run_case_file("cases/a.toml", dtype="float64")
            assert [(c.name, c.status) for c in result.cases] == \\
                [("square", "passed"), ("flip", "failed"), ("caught", "passed")]
        '''))
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_fixture_gradchecker_leaves_the_module_and_gc_alone(pytester):
    """A test that imports gradcheck (and gc) still sees the modules beside the fixture,
    which warns nothing."""
    pytester.makepyfile("""
        import gc

        import gradcheck


        def test_both(gradchecker):
            assert gradcheck.check("x*x", {"x": (2,)}, points=1).status == "passed"
            assert gradchecker.check("x*x", {"x": (2,)}, points=1).status == "passed"
            assert callable(gc.collect) and "gradchecker fixture" in repr(gradchecker)
        """)
    result = pytester.runpytest("-p", "no:cacheprovider", "-W", "error::DeprecationWarning")
    result.assert_outcomes(passed=1)
    assert "deprecated" not in result.stdout.str()


def test_fixture_gradcheck_is_a_deprecated_alias_that_names_gradchecker(pytester):
    """The fixture's name in 0.1.0 still works, for one release, with a
    PytestDeprecationWarning (a DeprecationWarning) at the test that asks for it."""
    pytester.makepyfile(test_old="""
        def test_old(gradcheck):
            assert gradcheck.check("x*x", {"x": (2,)}, points=1).status == "passed"
        """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, warnings=1)
    out = result.stdout.str()
    assert "PytestDeprecationWarning: the gradcheck fixture is deprecated" in out
    assert "use gradchecker" in out
    assert "test_old.py:1: PytestDeprecationWarning" in out   # at the def of the test
    assert issubclass(pytest.PytestDeprecationWarning, DeprecationWarning)
    # as any DeprecationWarning: an error where a project makes those errors
    strict = pytester.runpytest("-p", "no:cacheprovider", "-W", "error::DeprecationWarning")
    strict.assert_outcomes(errors=1)
    assert "use gradchecker" in strict.stdout.str()


# --------------------------------------------------------------------------- marker

def test_marker_gives_one_item_per_case_and_dtype(project):
    result = project.runpytest("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2)
    lines = [line for line in result.stdout.lines if line.startswith("tests/test_marked.py::")]
    prefix = "tests/test_marked.py::test_cases["
    got = [(line.split()[0][len(prefix):-1], line.split()[1]) for line in lines]
    assert got == [(f"{f}::{c}", o) for f, c, o in ITEMS]


def test_marker_failure_shows_the_cases_diagnosis(project):
    result = project.runpytest("-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "flip[float64] at tests/cases/a.toml:" in out
    assert "worst element: x.grad[" in out
    assert "diagnosis: x.grad has its sign flipped" in out
    assert "reproduce: gradcheck run tests/cases/a.toml -k 'flip' --dtype float64" in out
    assert "broken at tests/cases/sub/bad.toml:4: error" in out
    assert "invalid syntax" in out
    # no Python traceback of the plugin for a case failure
    assert "gradcheck/plugin" not in out


def test_marker_options_and_the_test_body(project):
    (project.path / "tests" / "test_marked.py").write_text(textwrap.dedent('''
        import pytest


        @pytest.mark.gradcheck_cases("cases/a.toml", dtype="float32", k="squ")
        def test_one(gradcheck_case):
            assert (gradcheck_case.name, gradcheck_case.dtype) == ("square", "float32")
            assert gradcheck_case.file == "tests/cases/a.toml"


        @pytest.mark.gradcheck_cases("cases/a.toml", k="caught")
        def test_body_can_fail_a_passing_case(gradcheck_case):
            assert gradcheck_case.seconds < 0, "too slow"
        '''))
    result = project.runpytest("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_one[a.toml::square[float32]] PASSED" in out
    assert "too slow" in out


def test_marker_errors_are_collection_errors(project):
    (project.path / "tests" / "test_marked.py").write_text(textwrap.dedent('''
        import pytest


        @pytest.mark.gradcheck_cases("no-such-folder/")
        def test_missing(gradcheck_case):
            pass
        '''))
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    assert "no-such-folder: no such file or folder" in result.stdout.str()


# --------------------------------------------------------------------------- report

def test_report_holds_every_case_of_the_session(project):
    (project.path / "tests" / "test_more.py").write_text(textwrap.dedent('''
        def test_run(gradchecker):
            assert gradchecker.run_case_file("cases/a.toml", k="square").cases
        '''))
    result = project.runpytest("-p", "no:cacheprovider", "--gradcheck-report=out/report.json")
    result.assert_outcomes(passed=4, failed=2)
    assert "gradcheck report: 7 case run(s) written to" in result.stdout.str()
    report = _report(project.path / "out" / "report.json")
    extra = [("tests/cases/a.toml", "square", d, "passed") for d in ("float64", "float32")]
    assert _runs(report) == REPORT_RUNS + extra
    # (counted by outcome: the expect = "fail" case caught is xfailed)
    assert report["summary"] | {"seconds": 0} == {"passed": 4, "approximate": 0,
                                                  "failed": 1, "errored": 1,
                                                  "skipped": 0, "xfailed": 1,
                                                  "xpassed": 0, "seconds": 0}
    flip = report["cases"][2]
    assert "sign flipped" in flip["witnesses"]["op.backward"]["diagnosis"]
    assert not list(project.path.joinpath("out").glob(".*.tmp"))   # written atomically


def test_report_has_the_schema_of_gradcheck_run(project):
    from gradcheck.cli.main import main

    project.runpytest("-p", "no:cacheprovider", "--gradcheck-report=report.json")
    ours = _report(project.path / "report.json")
    main(["run", str(project.path / "tests" / "cases"), "--format", "json",
          "--output", str(project.path / "cli.json")])
    cli = _report(project.path / "cli.json")
    assert ours.keys() == cli.keys() and ours["summary"].keys() == cli["summary"].keys()
    assert ours["version"] == cli["version"]
    assert len(ours["cases"]) == len(cli["cases"])
    by_run = {(c["name"], c["dtype"]): c for c in cli["cases"]}
    for case in ours["cases"]:
        theirs = by_run[case["name"], case["dtype"]]
        assert case.keys() == theirs.keys()
        assert (case["status"], case["witnesses"].keys()) == \
            (theirs["status"], theirs["witnesses"].keys())


def test_report_under_xdist_has_the_same_cases_in_the_same_order(project):
    pytest.importorskip("xdist")
    serial = project.runpytest_subprocess("--gradcheck-report=serial.json", timeout=300)
    serial.assert_outcomes(passed=3, failed=2)
    parallel = project.runpytest_subprocess("-p", "xdist", "-n", "2",
                                            "--gradcheck-report=parallel.json", timeout=300)
    parallel.assert_outcomes(passed=3, failed=2)
    assert "gradcheck report: 5 case run(s) written to" in parallel.stdout.str()
    one, two = _report(project.path / "serial.json"), _report(project.path / "parallel.json")
    assert _runs(one) == _runs(two) == REPORT_RUNS
    assert one["summary"] | {"seconds": 0} == two["summary"] | {"seconds": 0}


def test_no_report_without_the_option(project):
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3, failed=2)
    assert not list(project.path.rglob("*.json"))


# --------------------------------------------------------------------------- collector

def test_collector_runs_case_files_with_gradcheck_collect(project):
    (project.path / "tests" / "test_marked.py").unlink()
    (project.path / "tests" / "cases" / "pyproject-like.toml").write_text("[tool.x]\na = 1\n")
    result = project.runpytest("-v", "-p", "no:cacheprovider", "--gradcheck-collect",
                               "tests/cases", "--gradcheck-report=report.json")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    for file, case, outcome in ITEMS:
        assert f"tests/cases/{file}::{case} {outcome}" in out
    assert "diagnosis: x.grad has its sign flipped" in out
    assert _runs(_report(project.path / "report.json")) == REPORT_RUNS
    # without the option, case files are not tests
    project.runpytest("-p", "no:cacheprovider", "tests/cases").assert_outcomes()


APPROXIMATE_OPS = '''
import torch


class Float32Inside(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        y = x.float()
        return (y * torch.sigmoid(y)).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y, h = x.float(), g.float()
        s = torch.sigmoid(y)
        return (h * (s + y * s * (1 - s))).to(x.dtype)
'''

APPROXIMATE_CASES = """
[defaults]
points = 1
extreme_points = 0

[[case]]
name = "inside"
op = "approx_ops:Float32Inside"
reference = "x * sigmoid(x)"
inputs.x = { shape = [4] }

[[case]]
name = "inside-strict"
op = "approx_ops:Float32Inside"
reference = "x * sigmoid(x)"
inputs.x = { shape = [4] }
strict = true
"""


def test_an_approximate_case_item_passes_with_a_warning_and_fails_when_strict(pytester):
    pytester.makeini("[pytest]\n")
    (pytester.path / "approx_ops.py").write_text(APPROXIMATE_OPS)
    (pytester.path / "approx.toml").write_text(APPROXIMATE_CASES)
    result = pytester.runpytest("-v", "-p", "no:cacheprovider", "--gradcheck-collect",
                                "approx.toml")
    result.assert_outcomes(passed=1, failed=1, warnings=1)
    out = result.stdout.str()
    assert "approx.toml::inside[float64] PASSED" in out
    assert "approx.toml::inside-strict[float64] FAILED" in out
    assert "ApproximateGradient" in out and "float32 arithmetic inside?" in out


# --------------------------------------------------------------------------- packaging

def test_plugin_module_imports_neither_torch_nor_sympy():
    code = ("import sys, gradcheck.plugin; "
            "heavy = [m for m in ('torch', 'sympy') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_plugin_is_registered_through_the_pytest11_entry_point():
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="pytest11") if e.name == "gradcheck"]
    assert [e.value for e in found] == ["gradcheck.plugin"]


# --------------------------------------------------------------------------- results

def test_a_result_that_travelled_as_a_dict_is_a_case_result_again():
    """What an xdist worker (or a subprocess) hands back: the frozen CaseResult the
    check made, equal field by field, non-finite floats and the worst elements too."""
    import dataclasses

    from gradcheck.base.result import CaseResult, RunResult, WitnessResult, Worst

    for cls in (Worst, WitnessResult, CaseResult, RunResult):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    worst = Worst("x.grad", (1, 0), float("inf"), 2.5, 1e-12, 3)
    result = CaseResult(
        name="c", file="cases/a.toml", line=4, dtype="float32", status="failed",
        witnesses=(WitnessResult("torch", "failed", max_abs_err=float("inf"),
                                 max_rel_err=0.5, worst=worst, checked=12, mismatched=1,
                                 grad_fn=("SumBackward0", "AccumulateGrad"),
                                 message="1 of 12 elements differ", diagnosis="sign",
                                 worst_elements=(worst,), notes=("n",)),
                   WitnessResult("engine", "skipped", message="not in float16")),
        message="torch: differs", seconds=0.25, expect="pass", mode="elementwise",
        points=3, seed=1, notes=("a note",), error_kind="")
    back = CaseResult.from_dict(result.to_dict())
    assert back == result
    errored = dataclasses.replace(result, witnesses=(), status="error", error_kind="case",
                                  line=None)
    assert CaseResult.from_dict(errored.to_dict()) == errored
    run = RunResult((result, errored), seconds=1.5)
    assert RunResult.from_dict(run.to_dict()) == run
