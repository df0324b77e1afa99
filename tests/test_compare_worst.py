"""The worst elements a comparison keeps are those a full stable sort would give."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gradcheck.compare import WORST_KEPT, _largest


@given(arrays(np.float64, st.integers(0, 40),
              elements=st.sampled_from([0.0, 1.0, 2.5, np.inf, np.nan, -1.0, 3.0])))
def test_the_largest_are_what_a_stable_sort_gives(flat):
    want = np.argsort(-np.where(np.isnan(flat), -np.inf, flat), kind="stable")[:WORST_KEPT]
    assert list(_largest(flat, WORST_KEPT)) == list(want)
