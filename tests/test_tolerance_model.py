"""The per-element tolerance model (gradcheck.bounds.model, gradcheck.checking.compare): correct but
numerically hard ops pass in every dtype, and bug classes the old per-tensor scale hid
are caught. Every op here is run for real, through PyTorch's autograd."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gradcheck
from conftest import assert_torch_within_bounds
from gradcheck.cases import case_from_dict
from gradcheck.base.dtypes import round_to
from gradcheck.bounds.point import error_bounds

DTYPES = ["float64", "float32", "bfloat16", "float16"]
NUMERICS = Path(__file__).resolve().parent.parent / "cases" / "ops" / "numerics.toml"
LAYER_NORM = ("(x - mean(x, axis=1, keepdims=True)) / sqrt(mean((x - mean(x, axis=1, "
              "keepdims=True))**2, axis=1, keepdims=True) + 0.00001)")

#: the bundled wrong ops and the check that must catch each (cases/ops/numerics.toml)
CAUGHT_BY = {
    "exp-small-elements-wrong": "op.backward",
    "nan-for-zero-grad-output": "op.zero",
    "softmax-shifts-its-input": "op.inplace",
    "scales-grad-output-in-place": "op.inplace",
    "negates-saved-weight": "op.inplace",
    "sin-detached-grad-output": "op.double",
    "linear-detached-W": "op.double",
}
INPLACE_MESSAGES = {
    "softmax-shifts-its-input": "forward modified input x in place",
    "scales-grad-output-in-place": "backward modified grad_output of out0 in place",
    "negates-saved-weight": "backward modified input w in place",
}


@pytest.fixture(scope="module")
def numerics():
    """Every case of cases/ops/numerics.toml in each of its dtypes, by (name, dtype)."""
    return {(r.name, r.dtype): r for r in gradcheck.run([NUMERICS], timeout=None).cases}


def test_correct_hard_ops_pass_in_every_dtype(numerics):
    right = {k: r for k, r in numerics.items() if r.expect == "pass"}
    assert {d for _, d in right} == set(DTYPES)
    assert len({n for n, _ in right}) == 8
    for (name, dtype), r in right.items():
        assert r.status == "passed", (name, dtype, r.message)


def test_each_wrong_op_is_caught_by_its_check(numerics):
    wrong = {k: r for k, r in numerics.items() if r.expect == "fail"}
    assert {n for n, _ in wrong} == set(CAUGHT_BY)
    for (name, dtype), r in wrong.items():
        check = r.witness(CAUGHT_BY[name])
        assert check is not None and check.status == "failed", (name, dtype, r.message)
        assert r.status == "passed"   # caught as expect = "fail" says
        if name in INPLACE_MESSAGES:
            assert INPLACE_MESSAGES[name] in check.message


def test_the_checks_that_catch_them_pass_correct_ops(numerics):
    # op.zero, op.inplace and op.double are not failing for everything
    for name, check in (("tanh-saturated", "op.zero"), ("mish", "op.inplace"),
                        ("linear-double-backward", "op.double")):
        for dtype in ("float64", "float32"):
            result = numerics[(name, dtype)].witness(check)
            assert result.status == "passed" and result.checked > 0


def test_second_order_catches_what_first_order_cannot(numerics):
    for name in ("sin-detached-grad-output", "linear-detached-W"):
        r = numerics[(name, "float64")]
        assert r.witness("op.backward").status == "passed"
    detached = numerics[("sin-detached-grad-output", "float64")].witness("op.double")
    assert "grad_output" in detached.worst.quantity


def test_a_per_tensor_scale_would_have_hidden_the_small_element_error(numerics):
    r = numerics[("exp-small-elements-wrong", "float32")].witness("op.backward")
    w = r.worst
    # wrong by orders of magnitude at an element far smaller than the largest gradient
    assert abs(w.obtained - w.expected) > 100 * abs(w.expected)
    assert abs(w.obtained - w.expected) < 1e-5 * 7.4


# --------------------------------------------------------------------------- the bound

BOUND_CASES = [
    ("sum(tanh(x))", {"x": [64]}, (8, 16)),
    ("sum(sigmoid(x))", {"x": [64]}, (4, 12)),
    ("sum(expm1(x) - log1p(x))", {"x": [64]}, (-1e-3, 1e-3)),
    ("sum(tanh(x @ W))", {"x": [8, 16], "W": [16, 8]}, (-2, 2)),
    ("sum(x * tanh(softplus(x)))", {"x": [64]}, (-5, 5)),
    (LAYER_NORM, {"x": [4, 32]}, (-2, 2)),
    ("x - logsumexp(x, axis=1, keepdims=True)", {"x": [4, 16]}, (-30, 30)),
    # gelu's tail: 1 + erf cancels (relative error 1 beyond -8.3), so one probe scale
    # for the whole value moved gelu(-4) below its spacing and hid its error through
    # the product (a sweep's formula, sin(gelu(x) * relu(y)), failed torch in float64)
    ("sum(sin(gelu(x) * y))", {"x": [64], "y": [64]}, (-12, -3)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("expr, shapes, domain", BOUND_CASES)
def test_bound_covers_torchs_actual_error(expr, shapes, domain, dtype):
    """The derived bound holds for PyTorch's own float computation, without the safety
    factor (the float64 reference's own rounding is the same bound at float64's u).
    That it is tight enough to catch bugs, the tests above show."""
    table = {"name": "b", "expr": expr, "gradient": "random",
             "inputs": {k: {"shape": s} for k, s in shapes.items()}}
    case = case_from_dict(table)
    rng = np.random.default_rng(0)
    point = {k: round_to(rng.uniform(*domain, s), dtype) for k, s in shapes.items()}
    v = round_to(rng.standard_normal(case.output.shape), dtype)
    assert_torch_within_bounds(case, point, v, dtype)


# --------------------------------------------------------------------------- one table

def test_every_tolerance_comes_from_gradcheck_tolerance():
    """compare, diagnose and the op checks read the one table (gradcheck.bounds.tolerance)."""
    from gradcheck.checking import compare, diagnose
    from gradcheck.bounds import tolerance
    from gradcheck.checking.diagnose import elements, summary

    for name in ("BOUND_FACTOR", "PEER_FACTOR", "SAFETY", "model_tolerance",
                 "witness_tolerance", "peer_tolerance"):
        # defined once, in gradcheck.bounds.tolerance; compare keeps no copy of its own
        assert getattr(compare, name, getattr(tolerance, name)) is getattr(tolerance, name)
    assert diagnose.TOLERANCES is summary.TOLERANCES is tolerance.PATTERN_TOLERANCES
    assert (elements.PATTERN_RTOL, elements.PATTERN_ATOL) == tolerance.pattern_tolerance(
        "float64")
    assert tolerance.pattern_tolerance("float32") == (1e-4, 1e-5)
    # a name that is no dtype's is an error, never float64's numbers
    with pytest.raises(ValueError, match="no-such-dtype"):
        tolerance.pattern_tolerance("no-such-dtype")
    # the numeric witness's margin and the approximate verdict's factors live there too
    from gradcheck.checking import approximate
    from gradcheck.witnesses import numeric

    assert numeric.FORWARD_MARGIN is tolerance.FORWARD_MARGIN
    assert approximate.CONSTANT_WITHIN is tolerance.CONSTANT_WITHIN
    assert approximate.CONSTANT_BEYOND is tolerance.CONSTANT_BEYOND


def test_second_order_and_nondeterminism_rules():
    from gradcheck.base.dtypes import unit_roundoff
    from gradcheck.bounds.tolerance import (BOUND_FACTOR, SECOND_ORDER_FACTOR,
                                            second_order_tolerance, with_nondeterminism)

    e, size = {"x.grad": np.array([-2.0, 0.0])}, {"x.grad": np.array([3.0, 1.0])}
    got = second_order_tolerance(e, size, "float32")["x.grad"]
    u = unit_roundoff("float32")
    np.testing.assert_array_equal(got, BOUND_FACTOR * SECOND_ORDER_FACTOR * u * np.array(
        [5.0, 1.0]))
    assert with_nondeterminism({"out0": 1.0, "x.grad": 2.0}, 0.5) == {"out0": 1.0,
                                                                     "x.grad": 2.5}


# --------------------------------------------------------------------------- batched

#: formulas whose VJPs a leading batch axis could trip: matmul in every rank pair, dot,
#: transpose (negative axes), reductions with positive axes and keepdims, max/min ties,
#: broadcasting, where, a let used twice and retained
BATCH_CASES = [
    ("tanh(x @ W + b)", {"x": [3, 4], "W": [4, 2], "b": [2]}, ()),
    ("(x @ v) * (v @ transpose(x))", {"x": [3, 4], "v": [4]}, ()),
    ("sum(v @ w + dot(v, w) * v)", {"v": [4], "w": [4]}, ()),
    ("A @ B", {"A": [2, 3, 4], "B": [4, 2]}, ()),
    ("transpose(A) @ A", {"A": [3, 2]}, ()),
    ("sum(x * y, axis=0, keepdims=True) / mean(y) + sum(exp(x), axis=1, keepdims=True)",
     {"x": [3, 4], "y": [4]}, ()),
    ("prod(x, axis=(0, 2)) + mean(x, axis=(0, 2))", {"x": [2, 3, 2]}, ()),
    ("max(x, axis=1) - min(x * 2, axis=0, keepdims=True)", {"x": [3, 3]}, ()),
    ("max(maximum(x, 1), axis=0)", {"x": [4, 2]}, ()),
    ("x - logsumexp(x, axis=1, keepdims=True)", {"x": [2, 5]}, ()),
    ("where(x > y, x * y, sin(y)) + maximum(x, y) / minimum(x, y)", {"x": [3, 1], "y": [4]},
     ()),
    ("clamp(x, min=0.7) ** 2 + sqrt(abs(x) + 1) / y + x ** y", {"x": [2, 3], "y": [3]}, ()),
    ("h * sigmoid(h) + softplus(h) / atan2(h, 2)", {"x": [4, 2]}, ("h",)),
    ("sum(h, axis=1) * s", {"x": [2, 3], "s": []}, ("h",)),
    # the composite rows' own bounds (rules/composite_bounds.py), axes shifted past the
    # batch, einsum's cotangent with the batch axis itself
    ("softmax(x, axis=0) * cumsum(x, axis=1) + log_softmax(x)", {"x": [3, 4]}, ()),
    ("var(x, axis=1, keepdims=True) + std(x, axis=0) + norm(x, ord=1, axis=1, keepdims=True)"
     " * norm(x)", {"x": [3, 4]}, ()),
    ('einsum("ij,jk->ik", x, W) + topk(x, 2, axis=1)[:, :1] * einsum("ij->j", W)[:1]',
     {"x": [3, 4], "W": [4, 2]}, ()),
    ("sort(x, axis=0) * cumprod(x, axis=1) + norm(x, inf, axis=0)", {"x": [3, 4]}, ()),
]


def _batch_case(expr: str, shapes: dict, retain: tuple):
    table = {"name": "batch", "expr": expr, "gradient": "random",
             "inputs": {k: {"shape": s, "domain": [0.5, 2]} for k, s in shapes.items()}}
    if retain:   # h: a let over the first input, used more than once
        first = next(iter(shapes))
        table.update(let={"h": f"tanh({first}) + {first}"}, retain_grad=list(retain))
    return case_from_dict(table)


def _assert_batched_equals_per_v(case, point: dict, dtype: str, seed: int = 1) -> None:
    """error_bounds of every one-hot v and two random ones, in one batched pass, against
    the same bounds one v at a time."""
    shape = case.output.shape
    n = int(np.prod(shape, dtype=np.int64))
    rng = np.random.default_rng(seed)
    vs = np.concatenate([np.eye(n).reshape((n,) + shape),
                         round_to(rng.standard_normal((2,) + shape), dtype)])
    kept: dict = {}
    batched = error_bounds(case, point, vs, dtype, kept, batch=True)
    for i, v in enumerate(vs):
        alone = error_bounds(case, point, v, dtype)     # its own forward, no cache
        assert set(batched) == set(alone)
        for q, bound in alone.items():
            row = batched[q] if q == "value" else batched[q][i]
            assert row.shape == bound.shape, (q, row.shape, bound.shape)
            # equal up to the order of a few float sums of the bound itself
            np.testing.assert_allclose(row, bound, rtol=1e-13, atol=0, err_msg=q)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("expr, shapes, retain", BATCH_CASES)
def test_batched_bounds_are_the_per_v_bounds(expr, shapes, retain, dtype):
    """op.jacobian bounds all its one-hot cotangents in one backward pass: each row of
    that is the bound the cotangent gets alone."""
    case = _batch_case(expr, shapes, retain)
    rng = np.random.default_rng(0)
    point = {k: round_to(rng.uniform(0.5, 2, s), dtype) for k, s in shapes.items()}
    _assert_batched_equals_per_v(case, point, dtype)


def test_batched_bounds_cover_every_row():
    """The same over random formulas drawn from every row of the table."""
    from hypothesis import HealthCheck, given, settings

    from gradcheck.sampling.points import case_points
    from gradcheck.strategies import formulas

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3))
    def check(table):
        case = case_from_dict(table)
        for dtype in ("float64", "float32"):
            point = next(iter(case_points(case, dtype))).values
            _assert_batched_equals_per_v(case, point, dtype, table["seed"])

    check()


@pytest.mark.parametrize("expr, inputs, lets", [
    ("xc / sqrt(variance + 0.00001) * w + b", {"x": [4, 8], "w": [8], "b": [8]},
     {"mu": "mean(x, axis=-1, keepdims=True)", "xc": "x - mu",
      "variance": "mean(xc**2, axis=-1, keepdims=True)"}),
    ("sum(transpose(x) @ x - 2 * x @ transpose(x) + sign(x) * x, axis=0)", {"x": [3, 3]}, {}),
    ("exp(x / y) * tanh(x) ** 2 + sqrt(y) - maximum(x, y) * prod(y)", {"x": [4], "y": [4]},
     {}),
])
def test_values_a_vjp_does_not_read_are_not_probed_and_no_bound_changes(monkeypatch, expr,
                                                                         inputs, lets):
    """The probes measure how a VJP moves with the forward's values; a row whose node
    saves no tensor (add, sub, sum, sign...) reads none, and g * b does not read a: so
    skipping those probes must give bit-identical bounds to probing them."""
    import dataclasses

    from conftest import make_case
    from gradcheck.checking.case import cotangent
    from gradcheck.rules import RULES
    from gradcheck.sampling.points import case_points

    case = make_case(expr, inputs, let=lets, gradient="random")
    point = next(iter(case_points(case, "float64"))).values
    v = cotangent(case, "float64", 0)
    skipped = {dt: error_bounds(case, point, v, dt) for dt in ("float64", "bfloat16")}
    for name, rule in list(RULES.items()):
        if rule.engine is not None and not rule.engine.saves:
            monkeypatch.setitem(RULES, name, dataclasses.replace(
                rule, engine=dataclasses.replace(rule.engine, saves=True)))
    for dt, bounds in skipped.items():
        probed = error_bounds(case, point, v, dt, skip_unread=False)
        assert probed.keys() == bounds.keys()
        for q in bounds:
            np.testing.assert_array_equal(probed[q], bounds[q])


def test_the_forward_keeps_only_what_a_vjp_reads():
    """Layer norm's bounds: the product with gamma feeds only an add (whose VJP reads
    nothing) and the square only a mean (which reads its operand's shape): both are
    dropped after the forward; what div, mul and pow read stays; the bounds are those
    of a forward that keeps everything (the test above)."""
    from conftest import make_case
    from gradcheck.bounds.kept import kept
    from gradcheck.formula.tree import ordered

    case = make_case("(x - mu) / sqrt(variance + 0.00001) * gamma + beta",
                     {"x": [4, 8], "gamma": [8], "beta": [8]},
                     let={"mu": "mean(x, axis=-1, keepdims=True)",
                          "variance": "mean((x - mu)**2, axis=-1, keepdims=True)"})
    keep = kept(case.output)
    full = {n.op: id(n) in keep for n in ordered(case.output) if n.shape == (4, 8)}
    assert full == {"input": True, "sub": True, "pow": False, "div": True, "mul": False,
                    "add": True}


@pytest.mark.parametrize("expr, ranges", [
    # erf's VJP factor 2/√π·exp(-x²) falls into float32's subnormals at x = -10 (a few
    # spacings, each half a spacing off) before ḡ = y (thousands) multiplies it
    ("sum(erf(x) * y)", {"x": (-10.3, -9.6), "y": (2000.0, 4000.0)}),
])
def test_bound_covers_underflow_magnified_after_it(expr, ranges):
    """A subnormal intermediate errs by half a spacing, and what multiplies it after
    magnifies that: the bound holds for torch's float32 where the gradient or value is
    itself subnormal (a sweep's formula, sum(cumsum((erf(x) * silu(y))**3)), failed
    torch and the engine by 140x with a bound of one half spacing per operation)."""
    table = {"name": "u", "expr": expr,
             "inputs": {k: {"shape": [256]} for k in ranges}}
    case = case_from_dict(table)
    rng = np.random.default_rng(1)
    point = {k: round_to(rng.uniform(*r, 256), "float32") for k, r in ranges.items()}
    assert_torch_within_bounds(case, point, np.ones(()), "float32")
