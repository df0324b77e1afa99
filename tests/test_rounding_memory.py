"""The rounding model's bilinear rows (matmul, dot, the convolutions) sum the terms of
their bounds in place as they come: attention's bounds hold fewer arrays of its scores'
size at their peak (the sums are the same; tests/test_rounding_restructured.py and the
verdicts check the bounds themselves)."""

from __future__ import annotations

import tracemalloc

from conftest import make_case
from gradcheck.bounds.point import error_bounds
from gradcheck.checking.case import cotangent
from gradcheck.sampling.points import case_points


def test_attention_bounds_hold_fewer_arrays_of_its_scores_size():
    """Under 13.5 arrays of the [4, 256, 256] scores' size at the peak (12.5); summing each
    bound's five terms as whole new arrays took 15.5."""
    case = make_case("exp(s - logsumexp(s, axis=-1, keepdims=True)) @ v",
                     {c: [4, 256, 16] for c in "qkv"}, let={"s": "q @ transpose(k) / 8"},
                     gradient="random")
    point = next(iter(case_points(case, "float64"))).values
    v = cotangent(case, "float64", 0)
    tracemalloc.start()
    try:
        error_bounds(case, point, v, "float64")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / (8 * 4 * 256 * 256) < 13.5
