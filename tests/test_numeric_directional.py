"""The numeric witness without a sparsity pattern (the tensor reference of large mixing
formulas): inputs beyond NUMERIC_COLUMNS elements are measured along random directions,
compared as projections uᵀ(vᵀJ) ("W.grad·u"), and wrong gradients are still caught."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import check, make_case
from gradcheck.checking import case as checking
from gradcheck.witnesses import numeric
from gradcheck.checking.compare import Tally
from gradcheck.base.evaluation import PROJECTED, Evaluation
from gradcheck.reference import ExpandedReference, Reference
from gradcheck.report import FORMATS, render
from gradcheck.base.result import RunResult
from gradcheck.bounds.point import error_bounds
from gradcheck.sampling.points import sample
from gradcheck.witnesses.registry import entry

MATMUL = ("sum(tanh(x @ W))", {"x": (8, 40), "W": (40, 16)})
SMALL = ("sum(tanh(x @ W))", {"x": (4, 12), "W": (12, 10)})   # both over 32 elements


class Patternless:
    """What the numeric witness reads of a tensor reference: no sparsity pattern."""

    sparsity = None
    mode = "tensor"


class Wrong:
    """The case's own reference (the tensor kind, which has no pattern), its gradients
    passed through ``wrong`` (a mutation)."""

    def __init__(self, case, wrong):
        self.exact, self.wrong = Reference(case), wrong

    def __getattr__(self, name):
        return getattr(self.exact, name)

    def evaluations(self, points, vs):
        for e in self.exact.evaluations(points, vs):
            e.grads = {n: None if g is None else self.wrong(n, g)
                       for n, g in e.grads.items()}
            yield e


@pytest.fixture(scope="module")
def matmul():
    case = make_case(*MATMUL)
    point = sample(case, "float64", 0).values
    v = np.ones(case.output.shape)
    return case, point, v, ExpandedReference(case).evaluate(point, v)


def _tally(case, point, v, got, expected) -> Tally:
    """The comparison checking.py makes: the bounds projected, then Tally.add."""
    bounds = checking._projected(lambda d: error_bounds(case, point, v, d), got)
    tally = Tally("numeric", "float64")
    tally.add(got, expected, 0, entry("numeric").tolerance("float64", bounds, got.error))
    return tally


def test_large_inputs_are_measured_along_directions_and_agree(matmul):
    case, point, v, expected = matmul
    got = numeric.run(case, point, v, "float64", Patternless())
    assert set(got.directions) == {"x.grad", "W.grad"}
    assert got.directions["W.grad"].shape == (numeric.DIRECTIONS, 40, 16)
    assert got.grads["W"].shape == (numeric.DIRECTIONS,)
    assert set(got.quantities()) == {"value", "x.grad" + PROJECTED, "W.grad" + PROJECTED}
    projected = got.project(expected.quantities())
    for q in ("x.grad·u", "W.grad·u"):
        err = np.abs(got.quantities()[q] - projected[q])
        assert (err <= got.error[q]).all()
        # tight enough to see a 1e-3 relative change of one element (below)
        assert (got.error[q] <= 1e-7 * np.abs(projected[q]).max()).all()
    tally = _tally(case, point, v, got, expected)
    result = tally.result()
    assert result.status == "passed" and result.checked == 1 + 2 * numeric.DIRECTIONS
    assert result.notes == ("numeric: x.grad, W.grad checked along 3 random directions u "
                            "(uᵀ(vᵀJ)), not element by element",)


def test_the_directions_are_reproducible(matmul):
    case, point, v, _ = matmul
    a = numeric.run(case, point, v, "float64", Patternless())
    b = numeric.run(case, point, v, "float64", Patternless())
    np.testing.assert_array_equal(a.directions["W.grad"], b.directions["W.grad"])
    moved = dict(point, x=point["x"] + 0.5)
    c = numeric.run(case, moved, v, "float64", Patternless())
    assert not np.array_equal(a.directions["x.grad"], c.directions["x.grad"])


def _one_element(g):
    g = g.copy()
    g.flat[7] *= 1 + 1e-3
    return g


def _one_row_flipped(g):
    g = g.copy()
    g[3] *= -1
    return g


@pytest.mark.parametrize("wrong", [_one_element, _one_row_flipped, lambda g: -g,
                                   lambda g: 2 * g],
                         ids=["one element 1e-3 off", "one row flipped", "sign", "twice"])
def test_wrong_gradients_are_caught(matmul, wrong):
    case, point, v, expected = matmul
    got = numeric.run(case, point, v, "float64", Patternless())
    for name in ("x", "W"):
        bad = Evaluation(expected.value, dict(expected.grads, **{
            name: wrong(expected.grads[name])}))
        result = _tally(case, point, v, got, bad).result()
        assert result.status == "failed" and result.mismatched >= 1, name
        assert result.worst.quantity == f"{name}.grad·u"
        assert "elements differ; worst " + f"{name}.grad·u[" in result.message


def test_a_transposed_gradient_is_caught():
    case = make_case("sum(tanh(x @ W))", {"x": (4, 12), "W": (12, 12)})
    point = sample(case, "float64", 0).values
    v = np.ones(())
    expected = ExpandedReference(case).evaluate(point, v)
    got = numeric.run(case, point, v, "float64", Patternless())
    bad = Evaluation(expected.value, dict(expected.grads, W=expected.grads["W"].T))
    assert _tally(case, point, v, got, bad).result().status == "failed"


def test_small_inputs_stay_element_by_element():
    case = make_case("sum(tanh(x @ W), axis=1)", {"x": (2, 8), "W": (8, 40)})
    point = sample(case, "float64", 0).values
    v = np.random.default_rng(3).standard_normal(case.output.shape)
    got = numeric.run(case, point, v, "float64", Patternless())
    assert set(got.directions) == {"W.grad"}            # x has 16 <= 32 elements
    plain = numeric.run(case, point, v, "float64")      # no reference: every element
    np.testing.assert_array_equal(got.grads["x"], plain.grads["x"])
    assert got.notes == ("numeric: W.grad checked along 3 random directions u "
                         "(uᵀ(vᵀJ)), not element by element; x.grad element by element",)


def test_a_pattern_keeps_the_grouped_columns():
    case = make_case(*SMALL)
    point, v = sample(case, "float64", 0).values, np.ones(())
    ref = ExpandedReference(case)
    for got in (numeric.run(case, point, v, "float64", ref),
                numeric.run(case, point, v, "float64", Patternless(),
                            sparsity=ref.sparsity)):
        assert got.directions is None and got.notes == ()
        assert got.grads["W"].shape == (12, 10)


def test_an_elementwise_formula_is_perturbed_whole():
    case = make_case("tanh(x) * 2", {"x": (50,)})
    point = sample(case, "float64", 0).values
    got = numeric.run(case, point, np.ones(50), "float64", Patternless())
    assert got.directions is None and got.grads["x"].shape == (50,)


def test_a_whole_check_reports_projections(monkeypatch):
    """Through run_case with the tensor reference the checker builds for a mixing
    formula (no pattern): the directional witness passes; with a wrong reference it
    names a projection, its diagnosis reads no projection, and every report renders."""
    case = make_case(*SMALL, points=2, extreme_points=0)
    assert Reference(case).sparsity is None
    right = check(case)
    assert right.mode == "tensor" and right.status == "passed", right.message
    note = ("numeric: x.grad, W.grad checked along 3 random directions u (uᵀ(vᵀJ)), "
            "not element by element")
    assert right.witness("numeric").notes == (note,) and note in right.notes
    assert right.witness("numeric").worst.quantity.endswith(PROJECTED)
    monkeypatch.setattr(checking, "_reference", lambda case, cache: Wrong(
        case, lambda n, g: _one_element(g) if n == "W" else g))
    wrong = check(case)
    assert wrong.status == "failed"
    w = wrong.witness("numeric")
    assert w.status == "failed" and w.worst.quantity == "W.grad·u"
    assert w.diagnosis == ""
    run = RunResult((right, wrong))
    texts = {fmt: render(run, fmt) for fmt in FORMATS}
    for fmt in ("text", "junit", "markdown"):
        assert "W.grad·u" in texts[fmt], fmt
    data = json.loads(texts["json"])["cases"][1]
    assert data["witnesses"]["numeric"]["worst"]["quantity"] == "W.grad·u"
    assert note in data["witnesses"]["numeric"]["notes"]


def test_the_numeric_witness_reuses_the_forward_bound_the_tolerance_computed(monkeypatch):
    """One running-bound forward per point in float64, not one more for the numeric
    witness's own rounding term (at a layer's size, hundreds of MB and a second)."""
    from gradcheck.bounds import model as rounding
    from gradcheck.cases import case_from_dict
    from gradcheck.checking.case import run_case

    case = case_from_dict({"name": "reuse", "expr": "sum(tanh(x @ W))", "points": 1,
                           "extreme_points": 0,
                           "inputs": {"x": {"shape": [8, 40]}, "W": {"shape": [40, 4]}}})
    forwards = []
    real = rounding.RoundingModel.forward

    def counting(self, root, point, overrides=None):
        forwards.append(overrides)
        return real(self, root, point, overrides)

    monkeypatch.setattr(rounding.RoundingModel, "forward", counting)
    result = run_case(case, "float64", timeout=None)
    assert result.status == "passed", result.message
    assert [o for o in forwards if not o] == [None]
    # (nothing is kept between points: the forward lives in the point's PointBounds,
    # tests/test_bounds_package.py; no module of the model holds a list of state)
    import gradcheck.bounds.point as at_point

    assert not [n for m in (rounding, at_point) for n, x in vars(m).items()
                if isinstance(x, list)]


def _counted(f, rounding):
    """g(t) = (f(t), rounding), counting its evaluations."""
    calls = []

    def g(t):
        calls.append(t)
        return float(f(t)), rounding
    return g, calls


@pytest.mark.parametrize("rounding, least", [
    (1e-11, 3),    # truncation and rounding balanced at the middle rung: it stops there
    (1e-20, 0),    # rounding negligible: the smallest steps are the least bound
    (1e-6, 5),     # rounding dominates: the largest steps are
])
def test_the_step_ladder_stops_at_the_middle_only_where_no_neighbour_is_tighter(
        rounding, least):
    # f(t) = sin(a + h·t) at steps h·c, c = 1..128: Richardson's truncation error is
    # known (~c⁴h⁴), the rounding term is the bound g reports over the step
    h = 1e-3
    g, calls = _counted(lambda t: np.sin(0.3 + h * t), rounding)
    d, bound, j = numeric._ladder(g, range(numeric.LADDER))
    # the full search's answer: the least bound over every rung
    everything = []
    for k in range(numeric.LADDER):
        c = 2 ** k
        q = {m: (np.sin(0.3 + h * m) - np.sin(0.3 - h * m)) / (2 * m)
             for m in (c, 2 * c, 4 * c)}
        r1, r2 = (4 * q[c] - q[2 * c]) / 3, (4 * q[2 * c] - q[4 * c]) / 3
        everything.append(abs(r1 - r2) + 6 * rounding / c)
    assert j == least == int(np.argmin(everything))
    assert abs(d - h * np.cos(0.3)) <= bound
    # a stop at the middle takes its three pairs only (a walk would have looked at both
    # neighbours: 10); a walk takes one pair more per rung, and tries up before down
    assert len(calls) == {3: 6, 5: 6 + 2 + 2, 0: 6 + 2 + 3 * 2}[least]


def test_random_mixing_formulas_pass_at_the_extreme_points_too():
    """Along directions, the rounding term is the running bound at x, doubled, which is
    no bound at points of tiny magnitudes (a step of 0.1% of max(1, |x|) moves their
    values far beyond their size there): on random mixing formulas over inputs of more
    than NUMERIC_COLUMNS elements, at the bulk points and both extreme ones, the
    numeric witness still passes (its truncation term and the reference's E_float64
    cover what the rounding term misses)."""
    from hypothesis import HealthCheck, assume, given, settings

    from gradcheck.cases import case_from_dict
    from gradcheck.reference import mode_of
    from gradcheck.strategies import formulas

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, shapes=[[6, 8], [8], [6, 1]],
                    functions=["prod", "mul", "matmul", "pow", "exp", "transpose", "max",
                               "sum", "tanh", "logsumexp", "div"]))
    def passes(table):
        case = case_from_dict(dict(table, points=2, extreme_points=2,
                                   witnesses=["numeric"], gradient="random"))
        assume(mode_of(case) == "tensor")
        result = check(case)
        assert result.status == "passed", (table["expr"], result.message)

    passes()
