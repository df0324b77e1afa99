"""A VJP factor below the smallest normal may come out as 0 (gradcheck.bounds.elementwise.
_flushed): the engine's softplus VJP, ḡ·σ(x) with σ evaluated as 1/(1 + exp(-x)), is 0 in
float32 below x = -88.7, where exp(-x) overflows, while σ(x) is a subnormal down to
x = -103.3 (a sweep's formula, var(softplus(abs(x @ W + b) @ V), axis=-1), failed the
engine in float32 with a bound of half a subnormal spacing per operation). The bound
takes |c| there, and nothing where the factor is normal: a wrong VJP of the same
absolute size is still caught."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gradcheck import check
from gradcheck.bounds.elementwise import _flushed
from gradcheck.rules import RULES

# σ(x) for x in [-100, -80]: normal above -87.3, a subnormal below, 0 below -103.3
SUBNORMAL = ("sum(softplus(x) * y)", {"x": {"shape": [64], "domain": [-100, -80]},
                                      "y": [64]})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_factor_flushed_to_zero_is_no_failure(dtype):
    result = check(*SUBNORMAL, dtype=dtype)
    assert result.status == "passed", result.message


@pytest.mark.parametrize("factor", [1 + 2 ** -10, 1 + 2 ** -14])
def test_a_wrong_vjp_of_that_size_still_fails(monkeypatch, factor):
    # off by 2^-14 relative, 3.7e-40 at a gradient of 6e-36: the size of the engine's
    # flushed error that the bound now allows at the subnormal factors (3.2e-40 in the
    # sweep's formula), caught at the normal ones
    rule = RULES["softplus"]
    right = rule.engine.vjps[0]

    def wrong(g, ans, x):
        c = right(g, ans, x)
        return c * np.asarray(factor, dtype=np.asarray(c).dtype)

    monkeypatch.setitem(RULES, "softplus", dataclasses.replace(
        rule, engine=dataclasses.replace(rule.engine, vjps=(wrong,))))
    result = check(*SUBNORMAL, dtype="float32")
    assert result.witness("engine").status == "failed"
    assert result.witness("torch").status == "passed"


def test_the_flush_term_is_the_cotangent_where_the_factor_is_subnormal_only():
    tiny = float(np.finfo(np.float32).tiny)
    g = np.array([2.0, 2.0, 0.5, 0.0])
    c = g * np.array([tiny / 2, tiny, tiny / 4, tiny / 8])
    assert np.array_equal(_flushed(tiny, g, c), [abs(c[0]), 0.0, abs(c[2]), 0.0])
    # no factor below λ anywhere: nothing to add (None), not an array of zeros
    assert _flushed(tiny, np.full(3, 2.0), np.full(3, 2 * tiny)) is None
    assert _flushed(tiny, np.float64(3.0), np.array([3 * tiny, 1.0])) is None
