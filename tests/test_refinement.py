"""Finite differences never the cause of a false failure (gradcheck.checking.refinement): a point
where the numeric witness disagrees is measured again at finer steps; a finer step that
agrees counts, measurements that do not settle make the point inconclusive, and a
disagreement every step confirms (a wrong forward) still fails."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gradcheck import check, run
from gradcheck.checking.refinement import _settled, refine
from gradcheck.base.result import INCONCLUSIVE
from gradcheck.rules import RULES
from gradcheck.base.evaluation import Evaluation

SWEPT = """
[[case]]
name = "sweep-54"
expr = "sum(exp(-(sin(x) * leaky_relu(y))**2))"
inputs.x = { shape = [2048] }
inputs.y = { shape = [2048], domain = "positive" }
dtype = ["float32"]

[[case]]
name = "sweep-69"
expr = "sum(sort((softplus(x @ W + b) @ V)**3, axis=-1) * (softplus(x @ W + b) @ V)**3)"
inputs.x = { shape = [3, 16] }
inputs.W = { shape = [16, 5] }
inputs.b = { shape = [5] }
inputs.V = { shape = [5, 16] }
dtype = ["float32"]

[[case]]
name = "sweep-377"
expr = "sum(clamp(cos(x @ W + b) @ V, min=-1, max=1))"
inputs.x = { shape = [8, 4] }
inputs.W = { shape = [4, 32] }
inputs.b = { shape = [32] }
inputs.V = { shape = [32, 4] }
dtype = ["float64", "float32"]
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    # (formulas and names of the sweep's generator, whose default step failed them:
    # the names seed the points)
    path = tmp_path_factory.mktemp("swept") / "swept.toml"
    path.write_text(SWEPT)
    return {(c.name, c.dtype): c for c in run([path]).cases}


def test_formulas_finite_differences_could_not_resolve_pass(swept):
    for key, result in swept.items():
        assert result.status == "passed", (key, result.message)


def test_a_finer_step_that_agrees_is_named(swept):
    notes = swept[("sweep-54", "float32")].notes
    assert any("at a finer step they agree" in n for n in notes)


def test_a_switch_within_the_finest_steps_makes_the_point_inconclusive(swept):
    notes = swept[("sweep-69", "float32")].notes
    assert any("inconclusive for numeric" in n and "sort" in n for n in notes)


def test_a_wrong_forward_is_still_caught_by_every_step(monkeypatch):
    # the numpy column 1% off: finite differences agree with one another at every step,
    # not with the reference, and no kink is near: the disagreement stands
    monkeypatch.setitem(RULES, "cos", dataclasses.replace(
        RULES["cos"], numpy=lambda x: np.cos(1.01 * x)))
    for dtype in ("float64", "float32"):
        result = check("sum(cos(x @ W) * y)", {"x": [4, 8], "W": [8, 5], "y": [4, 5]},
                       dtype=dtype)
        assert result.witness("numeric").status == "failed", dtype
        assert result.witness("torch").status == "passed", dtype


def test_a_witness_inconclusive_everywhere_fails_no_case(monkeypatch):
    import gradcheck.checking.refinement as refinement

    import gradcheck.witnesses.numeric as numeric

    real = numeric.run

    def doubled(*args, **options):   # finite differences twice the derivative
        out = real(*args, **options)
        out.grads = {n: 2 * g for n, g in out.grads.items()}
        return out

    monkeypatch.setattr(numeric, "run", doubled)
    monkeypatch.setattr(refinement, "refine", lambda *a, **k: ("unsettled", None))
    result = check("sum(cos(x))", {"x": [6]})
    numeric = result.witness("numeric")
    assert numeric.status == INCONCLUSIVE and "inconclusive" in numeric.message
    assert result.status == "passed"   # on torch and the engine
    from gradcheck.report.text import render_text
    from gradcheck.base.result import RunResult

    shown = render_text(RunResult((result,), 0.0), verbose=True)   # -v: every witness
    assert "numeric inconclusive" in shown or "numeric: inconclusive" in shown, shown


def _evaluation(x, err):
    return Evaluation(np.zeros(()), {"x": np.array(x, float)},
                      error={"value": np.zeros(()), "x.grad": np.array(err, float)})


def test_settled_reads_only_the_wrong_elements():
    a, b = _evaluation([1.0, 5.0], [0.1, 0.1]), _evaluation([1.05, 9.0], [0.1, 0.1])
    assert _settled([a, b], {"x.grad": np.array([True, False])})
    assert not _settled([a, b], {"x.grad": np.array([False, True])})


def test_refine_takes_the_first_finer_step_that_agrees():
    steps = []
    got = _evaluation([1.0], [0.0])

    def measure(step):
        steps.append(step)
        return _evaluation([2.0 if len(steps) == 2 else 3.0], [0.0])

    verdict, found = refine(measure, lambda e: e.grads["x"][0] == 2.0,
                            {"x.grad": np.array([True])}, got, lambda step: [])
    assert verdict == "agreed" and found.grads["x"][0] == 2.0 and len(steps) == 2


def test_finite_differences_off_by_a_factor_still_fail(monkeypatch):
    # a numeric witness twice off at every step is steady, near no kink: it fails
    import gradcheck.witnesses.numeric as numeric

    real = numeric.run

    def doubled(*args, **options):
        out = real(*args, **options)
        out.grads = {n: 2 * g for n, g in out.grads.items()}
        return out

    monkeypatch.setattr(numeric, "run", doubled)
    assert check("sum(cos(x) * y)", {"x": [6], "y": [6]}).witness(
        "numeric").status == "failed"
