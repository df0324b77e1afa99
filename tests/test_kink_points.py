"""Kink points (gradcheck.sampling.kinks, issue 31 item 7): a case whose formula reaches a kink
through an input gets points with that input's elements close to the kink on both sides,
after its bulk and extreme points, which do not move; ops wrong only there are caught
(tests/hostile/kinks/), right ones and formulas pass, finite differences raise no alarm
there, and the report names the convention at a kink itself."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gradcheck.base.errors import CaseFileError
from gradcheck.cases import case_from_dict, read_file
from gradcheck.checking.case import run_case
from gradcheck.base.dtypes import round_to
from gradcheck.sampling.kinks import CONVENTION, kink_point, targets
from gradcheck.base.result import FAILED, PASSED
from gradcheck.sampling.points import MARGIN, case_points

from conftest import make_case

CORPUS = Path(__file__).parent / "hostile" / "kinks"
PROBES = [c for p in sorted(CORPUS.glob("*.toml")) for c in read_file(p)[0]]
DTYPES = ("float64", "float32", "float16", "bfloat16")


def kinks_of(case, dtype="float64"):
    """The case's kink points: the points after its bulk and extreme ones."""
    return list(case_points(case, dtype))[case.points + case.extreme_points:]


# --------------------------------------------------------------------------- the probes

def test_the_corpus_reads_without_errors():
    assert all(not read_file(p)[1] for p in CORPUS.glob("*.toml"))
    assert sum(c.expect == "fail" for c in PROBES) >= 5


@pytest.mark.parametrize("case", PROBES, ids=lambda c: c.name)
def test_an_op_wrong_only_near_a_kink_is_caught_and_a_right_one_passes(case):
    for dtype in case.dtypes:
        result = run_case(case, dtype, timeout=None)
        assert result.status == PASSED, (dtype, result.message)
        if case.expect == "fail":   # caught by its backward, not by an error of its run
            assert not result.error_kind, (dtype, result.message)
            assert any(w.status == FAILED and w.witness in ("op.backward", "op.jacobian")
                       for w in result.witnesses), dtype
        assert CONVENTION in result.notes   # the report names the convention


@pytest.mark.parametrize("case", [c for c in PROBES if c.expect == "fail"],
                         ids=lambda c: c.name)
def test_without_kink_points_the_wrong_ops_pass(case):
    """What the kink points add: the bulk and extreme points alone miss every probe."""
    off = dataclasses.replace(case, kink_points=0)
    for dtype in case.dtypes:
        result = run_case(off, dtype, timeout=None)
        assert result.status == FAILED, dtype
        assert "expected a mismatch" in result.message and "every witness agreed" in \
            result.message, dtype


# --------------------------------------------------------------------------- placement

@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_points_sit_on_both_sides_of_0_within_the_band(dtype):
    case = make_case("sum(relu(x))", {"x": [64]})
    found = kinks_of(case, dtype)
    assert len(found) == 2
    for point in found:
        x = point.values["x"]
        assert np.array_equal(round_to(x, dtype), x)   # held exactly by the dtype
        assert (x > 0).sum() == (x < 0).sum() == 32     # both sides, alternating
        assert np.all(np.abs(x) <= MARGIN / 2) and np.all(x != 0)
        assert np.abs(x).max() > 3 * np.abs(x).min()    # spread over the band
        if dtype in ("float64", "float32", "bfloat16"):   # (float16: subnormals below)
            assert np.abs(x).min() < 1e-5
        assert point.near == ("relu",)
        assert CONVENTION in point.notes
        assert any("is a kink point: 64 elements of x" in n and "32 below it in x, 32 above"
                   in n for n in point.notes)


def test_an_affine_argument_is_placed_near_its_kink_in_the_input():
    case = make_case("sum(relu(2 * x - 0.7) + abs(1.5 - y))", {"x": [32], "y": [32]})
    for point in kinks_of(case):
        a, b = 2 * point.values["x"] - 0.7, 1.5 - point.values["y"]
        for arg in (a, b):
            assert np.all(np.abs(arg) < 3e-3) and (arg > 0).any() and (arg < 0).any()


def test_clamp_gets_both_of_its_kinks_and_maximum_its_ties():
    case = make_case("sum(clamp(x, min=-1, max=1) + maximum(y, z))",
                     {"x": [64], "y": [64], "z": [64]})
    for point in kinks_of(case):
        x, y, z = (point.values[n] for n in "xyz")
        assert np.all(np.minimum(np.abs(x - 1), np.abs(x + 1)) < MARGIN / 2)
        assert (np.abs(x - 1) < 0.01).any() and (np.abs(x + 1) < 0.01).any()
        assert np.all(np.abs(y - z) < MARGIN / 2) and (y > z).any() and (y < z).any()


def test_a_scalar_input_gets_both_sides_over_the_two_kink_points():
    case = make_case("relu(x) * y", {"x": [], "y": []})
    xs = [float(p.values["x"]) for p in kinks_of(case)]
    assert len(xs) == 2 and min(xs) < 0 < max(xs) and max(map(abs, xs)) < MARGIN / 2


def test_the_existing_points_do_not_move():
    case = make_case("sum(abs(x) * y + relu(y - 1))", {"x": [40], "y": [40]}, points=3)
    with_kinks = list(case_points(case, "float32"))
    without = list(case_points(dataclasses.replace(case, kink_points=0), "float32"))
    assert len(with_kinks) == len(without) + 2
    for a, b in zip(with_kinks, without):
        assert all(np.array_equal(a.values[n], b.values[n]) for n in a.values)
    again = list(case_points(case, "float32"))[-2:]   # seeded: the same every time
    assert all(np.array_equal(p.values["x"], q.values["x"])
               for p, q in zip(with_kinks[-2:], again))


@pytest.mark.parametrize("expr, inputs", [
    ("sum(sin(x) * exp(y))", {"x": [8], "y": [8]}),            # no kink
    ("sum(relu(x @ W))", {"x": [3, 4], "W": [4, 2]}),          # not elementwise in an input
    ("sum(where(round(x) == 0, x, 2 * x))", {"x": [8]}),       # a comparison of steps
    ("sum(where(i > 2, x, 2 * x))",                            # of integers
     {"x": [8], "i": {"shape": [8], "dtype": "int64", "domain": [0, 5]}}),
])
def test_no_kink_points_where_no_input_reaches_a_kink(expr, inputs):
    case = make_case(expr, inputs)
    found = kinks_of(case)
    if "round" in expr:   # round's own jumps are kinks (its comparison's hazard is waived)
        assert found and all(p.near == ("round",) for p in found)
    else:
        assert found == []


@pytest.mark.parametrize("expr", ["sum(log(relu(x) + 1e-9))", "sum(abs(x) + 1 / x)"])
def test_a_kink_on_a_singularity_is_not_approached(expr):
    """Elements near the kink are near the singularity too: they stay at their base,
    and a point with none left is not made."""
    assert kinks_of(make_case(expr, {"x": [16]})) == []


def test_elements_near_a_singularity_go_back_but_the_others_stay():
    case = make_case("sum(abs(x - 0.5) / x)", {"x": [16]})   # abs's kink at 0.5: far from 0
    for point in kinks_of(case):
        x = point.values["x"]
        assert np.all(np.abs(x - 0.5) < MARGIN / 2) and np.all(np.abs(x) > MARGIN)


def test_a_pinned_or_integer_input_is_never_moved():
    case = make_case("sum(relu(x) + relu(p) + where(i > 2, x, 0))",
                     {"x": [4], "p": {"shape": [4], "value": [0.0, 1.0, -1.0, 2.0]},
                      "i": {"shape": [4], "dtype": "int64", "domain": [0, 5]}})
    assert [t.spec.name for row in targets(case) for t in row] == ["x"]
    for point in kinks_of(case):
        assert np.array_equal(point.values["p"], [0.0, 1.0, -1.0, 2.0])


def test_an_input_with_a_domain_stays_inside_it():
    case = make_case("sum(relu(x - 1))", {"x": {"shape": [16], "domain": [0, 1]}})
    for point in kinks_of(case):
        assert np.all((point.values["x"] >= 0) & (point.values["x"] <= 1))
        assert np.all(point.values["x"] < 1)


def test_kink_point_returns_none_without_a_kink():
    case = make_case("sum(x * x)", {"x": [4]})
    assert kink_point(case, "float64", 0, 5, {"x": np.ones(4)},
                      np.random.default_rng(0)) is None


# --------------------------------------------------------------------------- verdicts

@pytest.mark.parametrize("dtype", DTYPES)
def test_formulas_with_kinks_pass_in_every_witness(dtype):
    case = make_case("sum(relu(2 * x - 0.7) * y + abs(x) + clamp(y, min=-1, max=1) "
                     "+ maximum(x, y) + leaky_relu(x, slope=0.1) + hardtanh(y))",
                     {"x": [32], "y": [32]})
    result = run_case(case, dtype, timeout=None)
    assert result.status == PASSED, result.message
    assert CONVENTION in result.notes
    assert any(w.status == PASSED and w.checked for w in result.witnesses)


def test_finite_differences_across_a_kink_are_a_note_not_a_mismatch():
    case = make_case("sum(relu(x))", {"x": [16]}, witnesses=["numeric"], points=1,
                     extreme_points=0)
    result = run_case(case, "float64", timeout=None)
    assert result.status == PASSED, result.message
    assert any("stays near a kink of relu" in n and "not counted" in n
               for n in result.witnesses[0].notes + result.notes)


# --------------------------------------------------------------------------- the key

def test_kink_points_is_a_case_key_with_a_default_of_2():
    assert make_case("relu(x)", {"x": []}).kink_points == 2
    assert case_from_dict({"name": "t", "expr": "relu(x)", "inputs": {"x": {}},
                           "kink_points": 0}).kink_points == 0
    with pytest.raises(CaseFileError, match="kink_points"):
        case_from_dict({"name": "t", "expr": "relu(x)", "inputs": {"x": {}},
                        "kink_points": -1})


def test_a_kink_beyond_the_bulk_is_not_approached():
    """round(x·y) with y = -5e-4 jumps at x = 944 (found at this seed): there sigmoid's
    derivative is not finite in the reference; kinks are approached inside the bulk."""
    case = make_case("sum(sigmoid(round(x * y) + x) ** 2)", {"x": [24], "y": [24]},
                     name="k27")
    for point in kinks_of(case):
        assert all(np.all(np.abs(v) <= 2) for v in point.values.values())
    assert run_case(case, "float64", timeout=None).status == PASSED
