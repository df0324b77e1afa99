"""Finite differences grouped by the symbolic sparsity pattern (Jacobian colouring)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import count_numeric_evaluations, make_case
from gradcheck.witnesses import numeric
from gradcheck.sampling.points import sample
from gradcheck.reference import ExpandedReference, Reference


def _pattern(dense: np.ndarray):
    rows, cols = np.nonzero(dense)
    return rows, cols


@st.composite
def patterns(draw):
    m = draw(st.integers(1, 12))
    n = draw(st.integers(1, 12))
    return np.array(draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n),
                                  min_size=m, max_size=m)))


@given(patterns())
def test_colour_groups_cover_every_column_once_and_share_no_row(dense):
    m, n = dense.shape
    groups = numeric.colour(*_pattern(dense), n, m)
    assert sorted(j for g in groups for j in g) == list(range(n))
    for g in groups:
        assert (dense[:, g].sum(axis=1) <= 1).all()


def test_diagonal_and_banded_jacobians_need_a_handful_of_groups():
    n = 50
    assert len(numeric.colour(*_pattern(np.eye(n)), n, n)) == 1
    band = np.eye(n) + np.eye(n, k=1) + np.eye(n, k=-1)
    assert len(numeric.colour(*_pattern(band), n, n)) == 3
    assert len(numeric.colour(*_pattern(np.ones((n, n))), n, n)) == n


def _evaluate(case, sparsity, monkeypatch=None):
    point = sample(case, "float64", 0).values
    v = np.random.default_rng(1).standard_normal(case.output.shape)
    return numeric.run(case, point, v, "float64", sparsity=sparsity)


def test_grouped_differences_equal_element_by_element_ones(monkeypatch):
    case = make_case("tanh(A @ x) * 2", {"A": (8, 6), "x": (6,)})
    ref = ExpandedReference(case)   # the reference kind that has a sparsity pattern
    calls = count_numeric_evaluations(monkeypatch)
    grouped = _evaluate(case, ref.sparsity)
    grouped_calls = len(calls)
    calls.clear()
    plain = _evaluate(case, None)
    # A[i, j] moves only output i: 6 groups of 8 elements instead of 48 perturbations
    # (6 evaluations each), plus x's 6 columns, which touch every output.
    assert grouped_calls == 1 + 6 * (6 + 6)
    assert len(calls) == 1 + 6 * (48 + 6)
    for name in ("A", "x"):
        np.testing.assert_allclose(grouped.grads[name], plain.grads[name], rtol=1e-9,
                                   atol=1e-12)


def test_a_pattern_that_misses_a_dependency_is_measured_again(monkeypatch):
    case = make_case("A @ x", {"A": (5, 4), "x": (4,)})
    ref = ExpandedReference(case)
    rows, cols = ref.sparsity["A"]
    keep = rows != 2                       # pretend row 2 depends on nothing in A
    wrong = dict(ref.sparsity, A=(rows[keep], cols[keep]))
    plain = _evaluate(case, None)
    got = _evaluate(case, wrong)
    np.testing.assert_allclose(got.grads["A"], plain.grads["A"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("expr, shapes", [
    ("sum(tanh(A @ B), axis=1)", {"A": (4, 3), "B": (3, 5)}),
    ("exp(x) @ W + b", {"x": (3, 4), "W": (4, 2), "b": (2,)}),
])
def test_grouped_witness_agrees_with_the_reference(expr, shapes):
    case = make_case(expr, shapes)
    ref = ExpandedReference(case)
    point = sample(case, "float64", 0).values
    v = np.random.default_rng(2).standard_normal(case.output.shape)
    got = numeric.run(case, point, v, "float64", sparsity=ref.sparsity)
    expected = ref.evaluate(point, v)
    for name, g in expected.grads.items():
        assert np.all(np.abs(got.grads[name] - g) <= got.error[f"{name}.grad"] + 1e-12)


def test_points_in_one_call_equal_points_one_by_one():
    """The vectorized evaluation of all points (small elementwise formulas) and the
    slab-by-slab evaluation of large ones give what one point at a time gives."""
    from gradcheck.checking.case import cotangent

    for n, expr in [(7, "sum(log(1 + exp(x)) * tanh(x) + c * x)"),
                    (70_000, "log(1 + exp(x)) * tanh(x) + c * x")]:
        case = make_case(expr, {"x": (n,), "c": ()}, points=3)
        ref = Reference(case)
        points = [sample(case, "float64", i).values for i in range(3)]
        vs = [cotangent(case, "float64", i) for i in range(3)]
        together = list(ref.evaluations(points, vs))
        for p, v, got in zip(points, vs, together):
            args = ref._kernel_args(p)
            alone = [np.broadcast_to(np.asarray(r, dtype=float), ref._padded())
                     for r in ref._kernel(*args)]          # one unsliced call
            x = p["x"]
            np.testing.assert_allclose(got.grads["x"], v * alone[1].reshape(x.shape)
                                       if n > 7 else alone[1], rtol=1e-15, atol=0)
            np.testing.assert_allclose(got.grads["c"], np.sum(np.broadcast_to(v, x.shape)
                                                              * alone[2]), rtol=1e-12)
