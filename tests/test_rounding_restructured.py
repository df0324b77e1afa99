"""Restructurings of the rounding model that must leave every bound the same to the
bit: a large elementwise or reduction row's bounds taken a block of rows at a time
(gradcheck.bounds.elementwise), cotangents summed back the same way (each element gets
the arithmetic the whole arrays get), arrays the model dropped written over by later
ones (Spare)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import make_case
from gradcheck.bounds import blocks
from gradcheck.bounds.point import error_bounds, forward_bound
from gradcheck.checking.case import cotangent
from gradcheck.base.dtypes import round_to
from gradcheck.sampling.points import case_points
from gradcheck.strategies import formulas

WHOLE = 1 << 60   # block size: every array one block


def _all_bounds(monkeypatch, case, point, dtype: str, block: int, batch: bool = False):
    """error_bounds at the point (and for every one-hot v with ``batch``), and the
    forward's bound at a point moved along the first float input, with blocks of
    ``block`` elements, and with every array made for the blocks written over once
    dropped (none for the whole arrays)."""
    monkeypatch.setattr(blocks, "BLOCK_ELEMENTS", block)
    monkeypatch.setattr(blocks, "SPARE_BYTES", 0 if block < WHOLE else WHOLE)
    v = cotangent(case, dtype, 0)
    out = {q: b for q, b in error_bounds(case, point, v, dtype).items()}
    if batch:
        n = int(np.prod(case.output.shape, dtype=np.int64))
        vs = np.eye(n).reshape((n,) + case.output.shape)
        out.update({f"batch {q}": b for q, b in
                    error_bounds(case, point, vs, dtype, {}, batch=True).items()})
    name = next(s.name for s in case.inputs if np.asarray(point[s.name]).dtype.kind == "f")
    moved = {name: round_to(point[name] * (1 + 2.0 ** -10), dtype)}
    value, out["forward"] = forward_bound(case.output, point, moved, dtype)
    out["forward value"] = np.asarray(value)
    return out


def _assert_same(monkeypatch, case, point, dtype, blocks, batch=False):
    whole = _all_bounds(monkeypatch, case, point, dtype, WHOLE, batch)
    for block in blocks:
        cut = _all_bounds(monkeypatch, case, point, dtype, block, batch)
        assert cut.keys() == whole.keys()
        for q in whole:
            assert np.shape(cut[q]) == np.shape(whole[q]), (q, block)
            np.testing.assert_array_equal(cut[q], whole[q], err_msg=f"{q}, block {block}")


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_a_layer_in_blocks_of_rows_has_the_bounds_of_the_whole(monkeypatch, dtype):
    """Layer norm (reductions over the last axis, broadcasts summed back over axis 0 and
    over the last, a let retained), a max and a logsumexp that keep axis 0 and a sum
    over it, with blocks of one row, of an odd number of rows and of several rows."""
    case = make_case("(x - mu) / sqrt(variance + 0.00001) * gamma + beta"
                     " + max(x * x, axis=1, keepdims=True) * logsumexp(x, axis=-1,"
                     " keepdims=True) + sum(tanh(x), axis=0) / 10",
                     {"x": [12, 8], "gamma": [8], "beta": [8]}, gradient="random",
                     let={"mu": "mean(x, axis=-1, keepdims=True)",
                          "variance": "mean((x - mu)**2, axis=-1, keepdims=True)"},
                     retain_grad=["mu"])
    point = next(iter(case_points(case, dtype))).values
    _assert_same(monkeypatch, case, point, dtype, [1, 3 * 8 - 1, 40], batch=False)


def test_random_formulas_in_blocks_of_rows_have_the_bounds_of_the_whole(monkeypatch):
    """Every row of the table, on inputs of several rows, one row and three rows a
    block; many cotangents at once too (those take the whole arrays in the backward)."""

    @settings(max_examples=80, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, shapes=[[5, 3], [3], [5, 1]]))
    def check(table):
        case = make_case(table["expr"], table["inputs"], seed=table["seed"],
                         gradient="random")
        for dtype in ("float64", "float16"):
            point = next(iter(case_points(case, dtype))).values
            small = int(np.prod(case.output.shape, dtype=np.int64)) <= 15
            _assert_same(monkeypatch, case, point, dtype, [1, 3], batch=small)

    check()
