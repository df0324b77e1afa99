"""The rounding bounds of a large elementwise formula taken by slabs of rows
(gradcheck.bounds.slab) are the whole arrays' to the bit, and hold a few arrays of the
full size instead of one value and one bound per node."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import make_case
from gradcheck.bounds import (blocks, elementwise as elementwise_bounds, point as bounds_at,
                              slab as slab_bounds)
from gradcheck.checking.case import cotangent
from gradcheck.rules import ELEMENTWISE, RULES
from gradcheck.sampling.points import case_points
from gradcheck.strategies import formulas

#: every elementwise row (the comparisons come with where)
ELEMENTWISE_ROWS = sorted(r for r, rule in RULES.items() if rule.family == ELEMENTWISE)


def _bounds(monkeypatch, case, point, dtype: str, slabs: bool) -> dict:
    """error_bounds at the point, the forward kept for the numeric witness at it (in the
    point's PointBounds), and whether the slabs were taken."""
    taken = []
    real = slab_bounds.slab_error_bounds
    monkeypatch.setattr(bounds_at, "slab_error_bounds",
                        lambda *a: taken.append(1) or real(*a))
    at = bounds_at.PointBounds()
    out = dict(bounds_at.error_bounds(case, point, cotangent(case, dtype, 0), dtype,
                                      at=at, slabs=slabs))
    assert at.get(case.output, point, dtype) is not None   # (kept, either way)
    value, out["forward"] = bounds_at.forward_bound(case.output, point, None, dtype, at=at)
    out["forward value"] = np.asarray(value)
    assert bool(taken) == slabs
    return out


def _assert_same(monkeypatch, case, dtype: str, block: int) -> None:
    monkeypatch.setattr(blocks, "BLOCK_ELEMENTS", block)
    for point in case_points(case, dtype):
        whole = _bounds(monkeypatch, case, point.values, dtype, False)
        cut = _bounds(monkeypatch, case, point.values, dtype, True)
        assert cut.keys() == whole.keys()
        for q in whole:
            assert np.shape(cut[q]) == np.shape(whole[q]), q
            np.testing.assert_array_equal(cut[q], whole[q], err_msg=f"{q}, {dtype}")


#: the probes of the integer input k (its product's VJP reads it) take one scale from
#: its largest move over the whole: two passes over the slabs; without that product,
#: one (k is read only through a comparison, whose 0/1 no probe moves)
BODIES = {"two passes": " - 0.1 * k * x", "one pass": " - 0.1 * x"}


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("top", ["sum({})", "mean({})", "{}", "sum({}, axis=1)",
                                 "mean({}, axis=0, keepdims=True)"])
@pytest.mark.parametrize("passes", sorted(BODIES))
def test_a_formula_by_slabs_has_the_bounds_of_the_whole(monkeypatch, dtype, top, passes):
    """A let retained and read twice, an integer input, a where over a comparison,
    constants; under a sum or a mean (of every element, or along an axis), or none (a
    random gradient); slabs of one row and of three, the last one shorter; the bulk
    point and the extreme ones; in one pass over the slabs or, where an integer input
    is probed, two (counted)."""
    firsts = []
    first = slab_bounds._Slabs.first_pass
    monkeypatch.setattr(slab_bounds._Slabs, "first_pass",
                        lambda self: firsts.append(1) or first(self))
    case = make_case(top.format("log(1 + exp(h)) * tanh(x) + where(k > 1, h * h, "
                                "sigmoid(x) ** 2)" + BODIES[passes]),
                     {"x": [7, 5], "k": {"shape": [7, 5], "dtype": "int64",
                                         "domain": [0, 3]}},
                     let={"h": "x * 1.5 - 0.25"}, retain_grad=["h"], gradient="random",
                     extreme_points=2)
    for block in (5, 15):
        _assert_same(monkeypatch, case, dtype, block)
    assert bool(firsts) == (passes == "two passes")


def test_random_elementwise_formulas_by_slabs_have_the_bounds_of_the_whole(monkeypatch):
    """Every elementwise row, over inputs of one shape, in slabs of two rows."""

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, shapes=[[6, 4], [6, 4]], functions=ELEMENTWISE_ROWS),
           st.sampled_from(["sum({})", "mean({})", "{}"]))
    def check(table, top):
        case = make_case(top.format(table["expr"]), table["inputs"], seed=table["seed"],
                         gradient="random", extreme_points=1)
        monkeypatch.setattr(blocks, "BLOCK_ELEMENTS", 8)
        # (an input of another shape, a scalar, broadcasts: such formulas run whole)
        assume(slab_bounds.slabbed(case.output) is not None)
        eligible.append(1)
        for dtype in ("float64", "float16"):
            _assert_same(monkeypatch, case, dtype, 8)

    eligible: list = []
    check()
    assert len(eligible) >= 40


def test_slabs_hold_a_few_arrays_of_the_full_size(monkeypatch):
    """At 2¹⁸ elements in blocks of 2¹², the bounds of the bench's elementwise formula
    by slabs allocate under 6 arrays of the input's size at their peak; over the whole
    arrays, over 14 (a value and a bound of each node its backward reads)."""
    n = 1 << 18
    monkeypatch.setattr(blocks, "BLOCK_ELEMENTS", 1 << 12)
    case = make_case("sum(log(1 + exp(x)) * tanh(x) + sigmoid(x)**2)", {"x": [n]})
    point = next(iter(case_points(case, "float64"))).values
    v = cotangent(case, "float64", 0)

    def peak(slabs: bool) -> float:
        tracemalloc.start()
        try:
            bounds_at.error_bounds(case, point, v, "float64", slabs=slabs)
            return tracemalloc.get_traced_memory()[1] / (8 * n)
        finally:
            tracemalloc.stop()

    assert peak(True) < 6 < 14 < peak(False)


def test_only_small_partials_are_kept_between_forwards():
    """partials() keeps a small node's partials, where its row saves no tensor, for the
    next forward; a sum of many elements is a small node whose partials have its
    operand's size: those are not kept (they were, 8 MB for each such sum)."""
    kept = elementwise_bounds._PARTIALS
    for n, some in ((50, True), (5000, False)):
        kept.clear()
        case = make_case("sum(tanh(x))", {"x": [n]})
        point = next(iter(case_points(case, "float64"))).values
        bounds_at.error_bounds(case, point, cotangent(case, "float64", 0), "float64")
        assert bool(kept) == some
        assert all(np.size(a) <= 4096 for a in kept.values())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_second_forward_bounds_only_what_the_backward_reads(monkeypatch, dtype):
    """A slab's second forward leaves out the bounds no probe reads (the final add's and
    the product's here) and gets the bounds it gets with every node bounded (two passes:
    the integer input k is probed)."""
    case = make_case("sum(sin(x) * exp(-x**2) + tanh(x) * k)",
                     {"x": [12, 5], "k": {"shape": [12, 5], "dtype": "int64",
                                          "domain": [0, 3]}})
    monkeypatch.setattr(blocks, "BLOCK_ELEMENTS", 15)
    point = next(case_points(case, dtype)).values
    kept = []
    bounded = slab_bounds.bounded
    monkeypatch.setattr(slab_bounds, "bounded", lambda nodes, probed: kept.append(
        (len(nodes), bounded(nodes, probed))) or kept[-1][1])
    some = _bounds(monkeypatch, case, point, dtype, True)
    assert kept and all(0 < len(need) < n for n, need in kept)   # (some left out)
    monkeypatch.setattr(slab_bounds, "bounded", lambda nodes, probed: set(range(len(nodes))))
    every = _bounds(monkeypatch, case, point, dtype, True)
    assert some.keys() == every.keys()
    for q in every:
        np.testing.assert_array_equal(some[q], every[q], err_msg=q)


def test_leaving_out_the_terms_that_change_no_bit_changes_no_bound(monkeypatch):
    """An elementwise VJP's underflow term η·max(1, |ḡ|) and its flushed factors are
    left out where they cannot change a bit (elementwise._quiet, read at min|c| and
    max|ḡ|): every bound is what adding them gives, on random formulas of every
    elementwise row in four dtypes; the test answers both ways (0 in c: relu's, and
    NaN-free nonzero c), and counted both ways here."""
    answers = []
    quiet = elementwise_bounds._quiet

    def counted(*a):
        answers.append(quiet(*a))
        return answers[-1]

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, shapes=[[6, 4], [6, 4]], functions=ELEMENTWISE_ROWS),
           st.sampled_from(["float64", "float32", "float16", "bfloat16"]))
    def check(table, dtype):
        case = make_case("sum({})".format(table["expr"]), table["inputs"],
                         seed=table["seed"], extreme_points=1)
        for point in case_points(case, dtype):
            v = cotangent(case, dtype, 0)
            monkeypatch.setattr(elementwise_bounds, "_quiet", counted)
            some = bounds_at.error_bounds(case, point.values, v, dtype, slabs=False)
            monkeypatch.setattr(elementwise_bounds, "_quiet", lambda *a: False)
            every = bounds_at.error_bounds(case, point.values, v, dtype, slabs=False)
            for q in every:
                np.testing.assert_array_equal(some[q], every[q], err_msg=f"{q}, {dtype}")

    check()
    assert True in answers and False in answers
