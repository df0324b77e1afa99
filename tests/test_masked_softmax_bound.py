"""A masked softmax (x = -inf where masked, as F.scaled_dot_product_attention's causal
mask traces): its rounding bound is finite, 0 at the masked elements, and as large at
the kept ones as where the masked elements are absent (0·inf was NaN, which made the
tolerance of every element in the row vanish: a false alarm on causal attention)."""

from __future__ import annotations

import numpy as np

from gradcheck.rules.composite.bounds import softmax_forward


def _units(u=2.0 ** -24):
    return (u, u, lambda n: n * u)


def test_a_masked_softmax_has_the_bound_of_its_kept_elements():
    x = np.array([[0.3, -1.2, -np.inf, -np.inf], [0.5, 0.1, 2.0, -np.inf]])
    t = np.exp(x - x.max(-1, keepdims=True))
    t /= t.sum(-1, keepdims=True)
    e = np.zeros_like(x)
    bound = softmax_forward(t, (x,), (e,), _units(), (1,))
    assert np.all(np.isfinite(bound))
    assert np.all(bound[np.isinf(x)] == 0)
    kept = x[0, :2][None]
    tk = t[0, :2][None]
    alone = softmax_forward(tk, (kept,), (np.zeros_like(kept),), _units(), (1,))
    assert np.all(bound[0, :2] > 0)
    # the masked pair adds no term of its own (only the accumulation's length differs)
    assert np.allclose(bound[0, :2], alone[0], rtol=0.5)


def test_the_element_expanded_masked_softmax_is_no_nan_where_the_first_is_masked():
    """The expanded reference shifts softmax's exponents by a finite value: the first
    element's, or its unmasked branch (shifting by -inf was NaN in every row whose
    first element is masked)."""
    from conftest import make_case
    from gradcheck.reference import Reference, kind_of

    mask = np.array([[0, 1, 1], [0, 0, 1], [1, 1, 0]], bool)
    point = {"x": np.random.default_rng(0).standard_normal((3, 3)), "m": mask}
    v = np.random.default_rng(1).standard_normal((3, 3))
    for row in ("softmax", "log_softmax"):
        case = make_case(f"{row}(masked_fill(x, m, value=-inf), axis=1)",
                         {"x": [3, 3], "m": {"shape": [3, 3], "dtype": "bool"}})
        expanded = Reference.kinds["expanded"](case).evaluate(point, v)
        mine = kind_of(case)(case).evaluate(point, v)
        assert not np.isnan(expanded.value).any()
        np.testing.assert_allclose(expanded.value, mine.value, rtol=1e-12)
        np.testing.assert_allclose(expanded.grads["x"], mine.grads["x"], rtol=1e-10,
                                   atol=1e-14)
