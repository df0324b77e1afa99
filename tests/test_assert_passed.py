"""A failed gradcheck result in a project's test shows the text report: ``assert_passed()``
on the results the marker, the ``gradchecker`` fixture and the library calls give, and
the plugin's assertion hooks under a plain ``assert result.status == "passed"`` or
``assert result.passed`` (pytest run through ``pytester`` on a wrong fused RMSNorm)."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

# A fused RMSNorm over the last axis whose backward drops the term through the norm
# (x̄ = r · g · w, r held constant), and the right one.
OPS = '''
import torch


class RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        ctx.save_for_backward(x, w, r)
        return x * r * w

    @staticmethod
    def backward(ctx, g):
        x, w, r = ctx.saved_tensors
        gh = g * w
        gx = r * gh - x * r.pow(3) * (gh * x).mean(-1, keepdim=True)
        return gx, (g * x * r).reshape(-1, x.shape[-1]).sum(0)


class RMSNormNoProjection(RMSNorm):
    @staticmethod
    def backward(ctx, g):
        x, w, r = ctx.saved_tensors
        return r * g * w, (g * x * r).reshape(-1, x.shape[-1]).sum(0)
'''

REFERENCE = "x / sqrt(mean(x**2, axis=-1, keepdims=True) + 1e-6) * w"
# (small and quick: one point, the checks that need no compiler or extra calls)
QUICK = ('points = 1\nextreme_points = 0\nskip_checks = ["op.compile", "op.vmap", '
         '"op.contract", "op.jvp", "op.layout"]\n')
CASES = f'''
[defaults]
{QUICK}
[[case]]
name = "rms-norm-no-projection"
op = "rms_ops:RMSNormNoProjection"
reference = "{REFERENCE}"
inputs.x = {{ shape = [2, 4] }}
inputs.w = {{ shape = [4] }}
'''

TESTS = '''
import pytest


@pytest.mark.gradcheck_cases("rms.toml")
def test_status(gradcheck_case):
    assert gradcheck_case.status == "passed"


@pytest.mark.gradcheck_cases("rms.toml")
def test_passed(gradcheck_case):
    assert gradcheck_case.passed


@pytest.mark.gradcheck_cases("rms.toml")
def test_assert_passed(gradcheck_case):
    gradcheck_case.assert_passed()


def test_fixture(gradchecker):
    from rms_ops import RMSNormNoProjection

    result = gradchecker.check_op(RMSNormNoProjection, "{reference}",
                                  {{"x": (2, 4), "w": (4,)}}, points=1, extreme_points=0,
                                  skip_checks=["op.compile", "op.vmap", "op.contract",
                                               "op.jvp", "op.layout"])
    assert result.status == "passed"
'''.format(reference=REFERENCE)

TABLE = re.compile(r"Index\s+\| Obtained\s+\| Expected\s+\| Witness\s+\| Point")
DIAGNOSIS = ("diagnosis: x.grad: its error is rank one (E = J_op - J ≈ a bᵀ) in each "
             "wrong block of the Jacobian")


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(tmp_path_factory):
    """Run one op case before any ``pytester`` run: pytester removes the modules an
    in-process run imported, and NumPy cannot be imported twice."""
    import gradcheck

    folder = tmp_path_factory.mktemp("warm")
    (folder / "rms_ops_warm.py").write_text(OPS)
    (folder / "warm.toml").write_text(CASES.replace("rms_ops:", "rms_ops_warm:"))
    assert gradcheck.run([folder]).cases


def _sections(out: str) -> dict[str, str]:
    """pytest's failure output, by test: ``____ test_x[...] ____`` heads each."""
    parts = re.split(r"^_{3,} (\S+) _{3,}$", out, flags=re.MULTILINE)
    return {re.sub(r"\[.*", "", name): body for name, body in zip(parts[1::2], parts[2::2])}


def test_a_failing_case_shows_its_report_however_the_test_asserts(pytester):
    pytester.makeini("[pytest]\n")
    (pytester.path / "rms_ops.py").write_text(OPS)
    (pytester.path / "rms.toml").write_text(CASES)
    pytester.makepyfile(test_rms=TESTS)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=4)
    sections = _sections(result.stdout.str())
    assert set(sections) == {"test_status", "test_passed", "test_assert_passed",
                             "test_fixture"}
    for name, body in sections.items():
        # the worst-elements table and the diagnosis, under every way of asserting
        assert TABLE.search(body), (name, body)
        assert DIAGNOSIS in body, (name, body)
        assert "a projection along x (b ∝ x) is missing or wrong" in body, name
    # a comparison: said with the case and its diagnosis, then the whole report in a
    # section (pytest cuts a long explanation short)
    status = sections["test_status"]
    assert re.search(r"'failed' == 'passed'\n.*rms-norm-no-projection\[float64\] at "
                     r"rms.toml:\d+: failed\n.*diagnosis: x.grad: its error", status), status
    assert "gradcheck report" in status
    # a bare truth value: the report in a section of its own
    assert "gradcheck report" in sections["test_passed"]
    assert "<CaseResult rms-norm-no-projection[float64]: failed>" in sections["test_passed"]
    # assert_passed(): the report is the exception's message, and said once
    assert "GradientMismatch" in sections["test_assert_passed"]
    assert "gradcheck report" not in sections["test_assert_passed"]
    assert sections["test_assert_passed"].count("worst elements:") == 1


def test_assert_passed_passes_a_right_op_and_returns_the_result():
    import gradcheck
    from gradcheck.testing import CheckedCase

    namespace: dict = {}
    exec(OPS, namespace)
    result = gradcheck.check_op(namespace["RMSNorm"], REFERENCE, {"x": (2, 4), "w": (4,)},
                                points=1, extreme_points=0,
                                skip_checks=["op.compile", "op.vmap", "op.contract",
                                             "op.jvp", "op.layout"])
    assert isinstance(result, CheckedCase) and result.passed
    assert result.assert_passed() is result
    wrong = gradcheck.check_op(namespace["RMSNormNoProjection"], REFERENCE,
                               {"x": (2, 4), "w": (4,)}, points=1, extreme_points=0,
                               skip_checks=["op.compile", "op.vmap", "op.contract",
                                            "op.jvp", "op.layout"])
    with pytest.raises(AssertionError) as caught:
        wrong.assert_passed()
    text = str(caught.value)
    assert text.startswith("RMSNormNoProjection[float64] at <check_op>: failed")
    assert TABLE.search(text) and DIAGNOSIS in text


def test_a_run_with_no_case_does_not_pass():
    from gradcheck.base.result import RunResult
    from gradcheck.testing import CheckedRun

    empty = CheckedRun.of(RunResult())
    assert not empty.passed
    with pytest.raises(AssertionError, match="no case ran"):
        empty.assert_passed()


def test_the_documented_pattern_is_assert_passed():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    example = (root / "examples" / "test_using_gradcheck.py").read_text(encoding="utf-8")
    assert "assert_passed()" in example
    assert not re.search(r'^\s*assert .*status == "passed"', example, re.MULTILINE)
