"""The worst elements a comparison keeps are those a full stable sort would give."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gradcheck.checking.worst import WORST_KEPT, top_indices


@given(arrays(np.float64, st.integers(0, 40),
              elements=st.sampled_from([0.0, 1.0, 2.5, np.inf, np.nan, -1.0, 3.0])))
def test_the_largest_are_what_a_stable_sort_gives(flat):
    want = np.argsort(-np.where(np.isnan(flat), -np.inf, flat), kind="stable")[:WORST_KEPT]
    assert list(top_indices(flat, WORST_KEPT)) == list(want)


@pytest.mark.parametrize("k", [1, WORST_KEPT])
def test_the_largest_found_past_a_samples_cut_are_what_a_stable_sort_gives(monkeypatch, k):
    """Above worst.SAMPLED entries the partition runs over those at or above a sample's
    k-th largest (and the caller's bar): ties (few distinct values), NaNs, infinities,
    the largest in one place or many, bars below, among and above the entries; the
    same indices in the same order as a stable sort of all."""
    from gradcheck.checking import worst

    monkeypatch.setattr(worst, "SAMPLED", 16)
    monkeypatch.setattr(worst, "SAMPLE", 4)
    rng = np.random.default_rng(k)
    cut = []
    sample_cut = worst.sample_cut

    def spied(flat, k):   # (each cut lies at or below the k-th largest: it keeps them)
        cut.append(sample_cut(flat, k))
        assert cut[-1] <= np.sort(flat)[-k]
        return cut[-1]

    monkeypatch.setattr(worst, "sample_cut", spied)
    for trial in range(400):
        n = int(rng.integers(17, 300))
        flat = rng.choice([0.0, 1.0, 2.5, np.inf, np.nan, -1.0, 3.0, -np.inf], n,
                          p=[.3, .2, .1, .01, .05, .2, .13, .01])
        if trial % 4 == 0:
            flat = rng.standard_normal(n)
        keyed = np.where(np.isnan(flat), -np.inf, flat)
        most = np.nan if np.isnan(flat).any() else flat.max()
        bar = rng.choice([-np.inf, -1.0, 0.0, 1.0, 2.5, 3.0, np.inf])
        want = [i for i in np.argsort(-keyed, kind="stable") if keyed[i] >= bar][:k]
        assert list(top_indices(flat, k, most, at_least=bar)) == want, (trial, bar, flat)
    assert any(c > -np.inf for c in cut)   # (the samples' cuts were taken, and cut)


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


@given(arrays(np.float64, st.integers(0, 40),
              elements=st.sampled_from([0.0, 1.0, 2.5, np.inf, np.nan, -1.0, 3.0])),
       st.sampled_from([-1.0, 0.0, 1.0, 2.5, 3.0, np.inf]))
def test_the_largest_at_or_above_a_bar_are_the_sorts_at_or_above_it(flat, bar):
    keyed = np.where(np.isnan(flat), -np.inf, flat)
    want = [i for i in np.argsort(-keyed, kind="stable") if keyed[i] >= bar][:WORST_KEPT]
    assert list(top_indices(flat, WORST_KEPT, at_least=bar)) == want


def test_the_worst_kept_over_points_and_slabs_do_not_depend_on_the_bar(monkeypatch):
    """Each slab looks only for elements at or above the worst already held (the k-th
    worst candidate, the floor of the kept list): the tally's worst elements, ties
    included, are those of looking at every slab's k largest. Each slab here
    holds an element a little worse than the last slab's (a bar set too high loses
    them), and two equal ones lie in slabs in the opposite order of their indices."""
    import gradcheck.checking.compare as compare

    rng = np.random.default_rng(7)
    shape = (40, 5000)        # (slabs of 75 columns at COMPARED = 3000)
    points = []
    for p in range(3):
        expected = rng.standard_normal(shape)
        value = expected + 1e-11 * rng.standard_normal(shape)
        scale = 1e-9 * (1 + 0.01 * p)
        for j in range(66):   # slab j's worst: a ratio of about 10·(1 + 0.001·j)
            row, col = (7 * j + p) % 40, 75 * j + 3
            value[row, col] = expected[row, col] + scale * (1 + 1e-3 * j)
        # equal ratios among the worst, the later slab's first in index order
        expected[0, 4500] = expected[1, 750] = 0.5
        value[0, 4500] = value[1, 750] = 0.5 + scale * 1.0645
        points.append((value, expected))

    def worst(largest):
        monkeypatch.setattr(compare, "top_indices", largest)
        monkeypatch.setattr(compare, "COMPARED", 3000)
        tally = compare.Tally("w", "float64")
        for p, (value, expected) in enumerate(points):
            for q in ("x.grad", "y.grad"):
                tally._compare(q, value, expected, np.full(shape, 1e-10), p)
        return repr(tally.result())

    unbarred = compare.top_indices
    assert worst(unbarred) == worst(lambda flat, k, most=np.nan, at_least=-np.inf:
                                    unbarred(flat, k, most))
