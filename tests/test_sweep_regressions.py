"""False alarms the sweep of traced torch.nn.functional calls found (every witness, four
dtypes; the formulas are the traces' own text), each a rounding-model case:

- hardtanh clamps to a limit the dtype cannot hold (0.8): the result rounds it;
- masked_fill with -inf, then a max and a clamp: an infinite value rounds nothing (its
  u·|t| was inf, and 0·inf made the tolerance downstream NaN, read as 0);
- take with repeated indices (F.embedding, index_select): the VJP adds the repeated
  cotangents one at a time in bfloat16/float16 (index_add_), not in float32;
- expand's copies (x.repeat) summed back in a float32 accumulator are rounded once more
  to bfloat16/float16.
"""

from __future__ import annotations

import pytest

from conftest import check, make_case

CASES = {
    "hardtanh-limit": ("hardtanh(x, lo=-0.5, hi=0.8)", {"x": [4, 6]}),
    "masked-fill-inf-max": (
        "masked_fill(x, m, value=-1.5) + clamp(max(masked_fill(x, ~m, value=-inf), "
        "axis=1, keepdims=True), min=-3.0)",
        {"x": [4, 6], "m": {"shape": [4, 6], "dtype": "bool"}}),
    "embedding": ("take(w, i, axis=0)",
                  {"w": [7, 4], "i": {"shape": [2, 3], "dtype": "int64", "domain": [0, 7]}}),
    "gather-repeated": ("gather(x, i, axis=1)",
                        {"x": [4, 6], "i": {"shape": [4, 3], "dtype": "int64",
                                            "domain": [0, 6]}}),
    "repeat": ("reshape(expand(reshape(x, [1, 1, 1, 4, 1, 6]), [2, 1, 1, 4, 3, 6]), "
               "[2, 4, 18])", {"x": [4, 6]}),
}


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_no_false_alarm(name, dtype):
    expr, inputs = CASES[name]
    result = check(make_case(expr, inputs, points=4), dtype)
    assert result.status == "passed", result.message
