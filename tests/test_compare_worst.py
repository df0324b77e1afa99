"""The worst elements a comparison keeps are those a full stable sort would give."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gradcheck.checking.compare import WORST_KEPT, _largest


@given(arrays(np.float64, st.integers(0, 40),
              elements=st.sampled_from([0.0, 1.0, 2.5, np.inf, np.nan, -1.0, 3.0])))
def test_the_largest_are_what_a_stable_sort_gives(flat):
    want = np.argsort(-np.where(np.isnan(flat), -np.inf, flat), kind="stable")[:WORST_KEPT]
    assert list(_largest(flat, WORST_KEPT)) == list(want)


@pytest.mark.parametrize("shape", [(70_000,), (3, 200, 150), (2, 70_000), (5,), ()])
def test_a_comparison_slab_by_slab_is_the_comparison_of_every_element(monkeypatch, shape):
    """Large quantities are compared in slabs (compare.COMPARED elements): the counts,
    the maxima and the worst elements, ties in index order, are what one comparison of
    the whole array gives."""
    import gradcheck.checking.compare as compare

    rng = np.random.default_rng(len(shape))
    expected = rng.standard_normal(shape)
    value = expected + 1e-9 * rng.standard_normal(shape) * (rng.random(shape) < 0.01)
    if expected.size > 30:
        value.flat[rng.integers(0, expected.size, 5)] = np.nan
        value.flat[:20] = expected.flat[:20] + 1.0       # equal ratios: index order
        value.flat[-3:] = np.inf
    tolerance = np.full(shape, 1e-10)

    def result(slab):
        monkeypatch.setattr(compare, "COMPARED", slab)
        tally = compare.Tally("w", "float64", rtol=1e-3)
        tally._compare("q", value, expected, tolerance, 0)
        return repr(tally.result())

    assert result(1000) == result(10 ** 9)
