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


def _traced(case):
    """(result, peak of traced memory: NumPy's arrays among it) of checking ``case``."""
    check(make_case("sum(x * x)", {"x": [3]}))   # imports and first-use caches, untraced
    gc.collect()
    tracemalloc.start()
    try:
        result = check(case)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _peak(points: int) -> int:
    """The peak of traced memory of a layer norm's check."""
    result, peak = _traced(make_case(
        "(x - mu) / sqrt(mean((x - mu)**2, axis=-1, keepdims=True) + 1e-5)",
        {"x": [ROWS, COLUMNS]}, let={"mu": "mean(x, axis=-1, keepdims=True)"},
        gradient="random", points=points, extreme_points=0,
        # (named: finite differences at every point, their memory measured too)
        witnesses=["symbolic", "engine", "torch", "numeric"]))
    assert result.status == "passed", result.message
    assert result.witnesses and all(w.status == "passed" for w in result.witnesses)
    return peak


def test_a_large_case_holds_one_point_at_a_time():
    one, four = _peak(1), _peak(4)
    array = 8 * ROWS * COLUMNS
    assert (four - one) / array < 1.0, (one / array, four / array)


def _op_peak(tmp_path, points: int, source: str = SQUARE_OP, status: str = "passed") -> int:
    """The peak of traced memory (the op's gradients as NumPy arrays, the exact ones, the
    points) of the check of an op (a correct one) at 2^18 elements."""
    (tmp_path / "square_op.py").write_text("import torch\n" + source)

    def square(shape: list[int]):
        (tmp_path / "cases.toml").write_text(f"""
[[case]]
name = "square"
op = "square_op:Square"
reference = "x * x"
points = {points}
extreme_points = 0
inputs.x = {{ shape = {shape} }}
""")
        (case,), errors = read_file(tmp_path / "cases.toml")
        assert not errors
        return case
    # (what the judge imports before it forks an op's process, torch._dynamo among
    # it, untraced: modules, not the check's arrays)
    check(square([4, 4]))
    result, peak = _traced(square([ROWS, COLUMNS]))
    assert result.status == status, result.message
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


def test_a_large_failing_op_keeps_the_samples_of_a_few_points():
    """A wrong op (its backward 3·x·g) fails at every point: the diagnosis keeps the
    samples of the first KEPT_POINTS large points and counts the others, where it held
    every one (seven arrays of the input's size more per point)."""
    import tempfile
    from pathlib import Path

    from gradcheck.checking.diagnose import KEPT_POINTS

    wrong = SQUARE_OP.replace("return 2 * x * g", "return 3 * x * g")
    assert wrong != SQUARE_OP
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        # (one point past those kept: its samples are alive until it is counted)
        few = _op_peak(Path(a), KEPT_POINTS + 1, wrong, status="failed")
        more = _op_peak(Path(b), KEPT_POINTS + 4, wrong, status="failed")
    assert (more - few) / (8 * ROWS * COLUMNS) < 1.0, (few, more)


def test_a_large_failing_witness_keeps_the_samples_of_a_few_points(monkeypatch):
    """The engine witness made wrong (its x.grad 1.5 times the right one) fails at every
    point of a large formula: its check keeps the first KEPT_POINTS points' samples and
    counts the others (no more memory for three more points), and its diagnosis still
    names the error."""
    import dataclasses

    from gradcheck.witnesses import engine
    from gradcheck.checking.diagnose import KEPT_POINTS

    right = engine.run

    def wrong(*args, **kwargs):
        got = right(*args, **kwargs)
        return dataclasses.replace(got, grads={n: 1.5 * g for n, g in got.grads.items()})

    monkeypatch.setattr(engine, "run", wrong)
    results, peaks = zip(*(_traced(make_case(
        "sum(x * sin(x))", {"x": [ROWS, COLUMNS]}, points=points, extreme_points=0,
        witnesses=["engine"])) for points in (KEPT_POINTS + 1, KEPT_POINTS + 4)))
    assert [r.status for r in results] == ["failed", "failed"]
    assert (peaks[1] - peaks[0]) / (8 * ROWS * COLUMNS) < 1.0, peaks
    (engine_result,) = results[1].witnesses
    assert "3/2 times the exact gradient" in engine_result.diagnosis


def test_points_drawn_one_at_a_time_give_the_results_of_points_drawn_together(
        monkeypatch):
    """A small formula's points are drawn together and evaluated in one vectorized call;
    drawn, evaluated and checked one at a time (as a large formula's are), every bundled
    formula case of two files gives the same result to the last bit of its report."""
    from pathlib import Path

    from gradcheck.base import arrays
    from gradcheck.cases import read_paths

    root = Path(__file__).resolve().parent.parent / "cases"
    cases, errors = read_paths([root / "activations.toml", root / "layers.toml"])
    assert cases and not errors

    def report(case):
        out = check(case).to_dict()
        del out["seconds"]
        return out

    together = [report(c) for c in cases]
    monkeypatch.setattr(arrays, "SLAB", 0)   # every formula "large": one at a time
    apart = [report(c) for c in cases]
    assert apart == together
    assert any(r["points"] > 1 for r in together)
