"""A large case's peak memory does not grow with its number of points: its points are
drawn, checked and dropped one at a time, and a point that agreed keeps nothing of its
arrays for a diagnosis, not even where the numeric witness measured projections (a few
numbers whose sample would still hold the point's values). Before, every point added
about 4.6 arrays of the input's size to a formula's peak, and 7 to an op's."""

from __future__ import annotations

import gc
import tracemalloc

from conftest import SQUARE_OP, check, make_case
from gradcheck.cases import read_file

ROWS, COLUMNS = 512, 512       # 2^18 elements: over the sizes kept for a diagnosis


def _peak(points: int) -> int:
    """The peak of traced memory (NumPy's arrays among it) of a layer norm's check."""
    case = make_case("(x - mu) / sqrt(mean((x - mu)**2, axis=-1, keepdims=True) + 1e-5)",
                     {"x": [ROWS, COLUMNS]}, let={"mu": "mean(x, axis=-1, keepdims=True)"},
                     gradient="random", points=points, extreme_points=0)
    check(make_case("sum(x * x)", {"x": [3]}))   # imports and first-use caches, untraced
    gc.collect()
    tracemalloc.start()
    try:
        result = check(case)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "passed", result.message
    assert result.witnesses and all(w.status == "passed" for w in result.witnesses)
    return peak


def test_a_large_case_holds_one_point_at_a_time():
    one, four = _peak(1), _peak(4)
    array = 8 * ROWS * COLUMNS
    assert (four - one) / array < 1.0, (one / array, four / array)


def _op_peak(tmp_path, points: int) -> int:
    """The peak of traced memory (the op's gradients as NumPy arrays, the exact ones, the
    points) of a correct op's check at 2^18 elements."""
    (tmp_path / "square_op.py").write_text("import torch\n" + SQUARE_OP)
    (tmp_path / "cases.toml").write_text(f"""
[[case]]
name = "square"
op = "square_op:Square"
reference = "x * x"
points = {points}
extreme_points = 0
inputs.x = {{ shape = [{ROWS}, {COLUMNS}] }}
""")
    (case,), errors = read_file(tmp_path / "cases.toml")
    assert not errors
    check(make_case("sum(x * x)", {"x": [3]}))
    gc.collect()
    tracemalloc.start()
    try:
        result = check(case)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "passed", result.message
    return peak


def test_a_large_op_case_keeps_no_samples_of_points_that_agreed(tmp_path):
    """Each point kept three samples of its backward calls (the op's gradients, the
    exact ones, the point): about seven arrays of the input's size more per point."""
    one, four = _op_peak(tmp_path, 1), _op_peak(tmp_path, 4)
    array = 8 * ROWS * COLUMNS
    assert (four - one) / array < 1.0, (one / array, four / array)


def test_a_large_op_takes_its_cotangents_tolerances_one_at_a_time(tmp_path):
    """An op whose Jacobian is not checked keeps no forward pass of its tolerances for
    more cotangents, and bounds its random cotangents one at a time: 26 arrays of the
    input's size at the peak of the check, where one batched pass over both, its forward
    kept, took 35."""
    assert _op_peak(tmp_path, 1) / (8 * ROWS * COLUMNS) < 30
