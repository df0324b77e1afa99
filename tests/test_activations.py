"""The elementwise rows of gradcheck/rules/activation/rows.py (hypot ... hardtanh), each run
against PyTorch itself: the engine's ops and their grad_fn names, the rounding bound
against torch's real float32/bfloat16/float16 kernels where their formulas cancel, the
steps' jumps, and deliberately wrong VJPs caught by a check."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import gradcheck.engine as engine
from conftest import assert_torch_within_bounds, check, make_case
from gradcheck.cases import case_from_dict
from gradcheck.base.dtypes import round_to, unit_roundoff
from gradcheck.formula.forward import hazard_distances
from gradcheck.reference import Reference
from gradcheck.bounds.point import error_bounds
from gradcheck.rules import RULES
from gradcheck.rules.activation import columns as ac
from gradcheck.rules.terms import Terms
from gradcheck.sampling.points import MARGIN, case_points

F = torch.nn.functional
M, V = [4, 3], [3]

# (engine call, torch call, domain of the operands): torch's own function for each row
TORCH_OPS = {
    "hypot": (lambda a, b: engine.hypot(a, b), torch.hypot, (-2, 2)),
    "logaddexp": (lambda a, b: engine.logaddexp(a, b), torch.logaddexp, (-30, 30)),
    "xlogy": (lambda a, b: engine.xlogy(a, b), torch.xlogy, (0.1, 3)),
    "square": (lambda a: engine.square(a), torch.square, (-2, 2)),
    "rsqrt": (lambda a: engine.rsqrt(a), torch.rsqrt, (0.1, 3)),
    "reciprocal": (lambda a: engine.reciprocal(a), torch.reciprocal, (0.1, 3)),
    "floor": (lambda a: engine.floor(a), torch.floor, (-3, 3)),
    "ceil": (lambda a: engine.ceil(a), torch.ceil, (-3, 3)),
    "round": (lambda a: engine.round(a), torch.round, (-3, 3)),
    "trunc": (lambda a: engine.trunc(a), torch.trunc, (-3, 3)),
    "gelu": (lambda a: engine.gelu(a), F.gelu, (-6, 4)),
    "gelu-tanh": (lambda a: engine.gelu(a, "tanh"), lambda a: F.gelu(a, approximate="tanh"),
                  (-6, 4)),
    "silu": (lambda a: engine.silu(a), F.silu, (-20, 20)),
    "mish": (lambda a: engine.mish(a), F.mish, (-20, 20)),
    "elu": (lambda a: engine.elu(a, alpha=0.5), lambda a: F.elu(a, 0.5), (-5, 3)),
    "leaky_relu": (lambda a: engine.leaky_relu(a, 0.2), lambda a: F.leaky_relu(a, 0.2),
                   (-3, 3)),
    "hardtanh": (lambda a: engine.hardtanh(a, lo=-0.5, hi=2.0),
                 lambda a: F.hardtanh(a, min_val=-0.5, max_val=2.0), (-3, 3)),
}


@pytest.mark.parametrize("name", sorted(TORCH_OPS))
def test_engine_op_is_torchs_function(name):
    """Forward, grad_fn class name and gradient of the engine's op equal torch's, in
    float64 (float64 rounding apart)."""
    ours, theirs, (lo, hi) = TORCH_OPS[name]
    arity = 2 if name in ("hypot", "logaddexp", "xlogy") else 1
    rng = np.random.default_rng(0)
    data = [rng.uniform(lo, hi, (5, 3)) for _ in range(arity)]
    g = rng.standard_normal((5, 3))
    e_in = [engine.tensor(d, requires_grad=True) for d in data]
    t_in = [torch.tensor(d, requires_grad=True) for d in data]
    e_out, t_out = ours(*e_in), theirs(*t_in)
    assert type(e_out.grad_fn).__name__ == type(t_out.grad_fn).__name__
    # (the engine's gelu is the accurate erfc form; torch's 1 + erf cancels for x < 0)
    np.testing.assert_allclose(e_out.data, t_out.detach().numpy(), rtol=1e-13, atol=1e-15)
    e_out.backward(engine.tensor(g))
    t_out.backward(torch.tensor(g))
    for a, b in zip(e_in, t_in):   # (1 + tanh cancels: 1 ulp of tanh is 1e-16 of 1)
        np.testing.assert_allclose(a.grad.data, b.grad.numpy(), rtol=1e-12, atol=1e-14)


EDGES = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -1.5, 2.0, -2.0, 1e-300, -40.0,
                  40.0, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("name", sorted(TORCH_OPS))
def test_engine_op_is_torchs_at_the_edges(name):
    """At kinks, jumps, ties, zeros, infinities and NaN (where no point is sampled) the
    engine's value and gradient are still torch's: its VJPs are PyTorch's formulas."""
    ours, theirs, _ = TORCH_OPS[name]
    data = [EDGES, EDGES[::-1].copy()] if name in ("hypot", "logaddexp", "xlogy") else [EDGES]
    e_in = [engine.tensor(d, requires_grad=True) for d in data]
    t_in = [torch.tensor(d, requires_grad=True) for d in data]
    with np.errstate(all="ignore"):
        e_out, t_out = ours(*e_in), theirs(*t_in)
        e_out.backward(engine.tensor(np.ones(len(EDGES))))
    t_out.backward(torch.ones(len(EDGES), dtype=torch.float64))
    np.testing.assert_allclose(e_out.data, t_out.detach().numpy(), rtol=1e-13, atol=0)
    for a, b in zip(e_in, t_in):
        np.testing.assert_allclose(a.grad.data, b.grad.numpy(), rtol=1e-12, atol=0)


def test_grad_fn_names_are_torchs():
    # torch.square records PowBackward0; the activations their own nodes
    x = torch.tensor([0.5], requires_grad=True)
    assert type(torch.square(x).grad_fn).__name__ == RULES["square"].engine.grad_fn
    for name, fn in (("gelu", F.gelu), ("silu", F.silu), ("mish", F.mish), ("elu", F.elu),
                     ("leaky_relu", F.leaky_relu), ("hardtanh", F.hardtanh),
                     ("floor", torch.floor), ("round", torch.round)):
        assert type(fn(x).grad_fn).__name__ == RULES[name].engine.grad_fn, name


def test_parameters_positional_or_by_keyword_and_torchs_names():
    x = engine.tensor(np.array([-1.0, 0.5, 3.0]), requires_grad=True)
    np.testing.assert_array_equal(engine.elu(x, 0.5).data, engine.elu(x, alpha=0.5).data)
    np.testing.assert_array_equal(engine.hardtanh(x, -0.5, 1.0).data, [-0.5, 0.5, 1.0])
    np.testing.assert_array_equal(engine.leaky_relu(x, slope=0.1).data, [-0.1, 0.5, 3.0])
    ours = make_case("leaky_relu(x, 0.1) + hardtanh(x, -0.5, 2) + elu(x, 0.5)", {"x": M})
    assert check(ours).status == "passed"


def test_xlogy_at_x_zero_is_torchs():
    # value 0 whatever y; x-gradient log(y) (the limit), 0 where y <= 0 (torch's
    # masked_fill); the engine equals torch at every such element, NaN included
    x = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 2.0])
    y = np.array([0.0, 2.0, 0.5, 0.7, -1.0, 3.0])
    ex, ey = engine.tensor(x, requires_grad=True), engine.tensor(y, requires_grad=True)
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    engine.xlogy(ex, ey).backward(engine.tensor(np.ones(6)))
    torch.xlogy(tx, ty).sum().backward()
    np.testing.assert_array_equal(ex.grad.data, tx.grad.numpy())
    np.testing.assert_array_equal(ey.grad.data, ty.grad.numpy())
    pinned = make_case("xlogy(x, y)", {"x": {"shape": [4], "value": [0.0, 0.0, 1.0, 2.0]},
                                       "y": {"shape": [4], "value": [2.0, 0.5, 0.5, 3.0]}})
    assert check(pinned).status == "passed"    # the numeric witness too: log(y) at 0


def test_round_is_half_to_even_as_torch_at_pinned_ties():
    # the jumps are hazards (points are drawn away from them), but pinned values at the
    # ties give torch's values: the reference's round is NumPy's rint, half to even
    values = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]
    case = make_case("round(x) * y", {"x": {"shape": [6], "value": values}, "y": [6]},
                     witnesses=["engine", "torch"])
    result = check(case)
    assert result.status == "passed", result.message
    assert any("kink" in n for n in result.notes)   # the point says it sits on the jumps
    ref = Reference(case).evaluate({"x": np.array(values), "y": np.ones(6)}, np.ones(6))
    np.testing.assert_array_equal(ref.value, torch.round(torch.tensor(values)).numpy())


@pytest.mark.parametrize("expr, jump", [("floor(x * 3)", lambda z: z - np.rint(z)),
                                        ("round(x * 3)", lambda z: z - 0.5 - np.rint(z - 0.5)),
                                        ("trunc(x * 3)", None)])
def test_steps_are_sampled_away_from_their_jumps(expr, jump):
    # (the kink points, which come near the jumps on purpose, are tests/test_kink_points')
    case = make_case(expr, {"x": [64]}, points=4, kink_points=0)
    for p in case_points(case, "float64"):
        z = 3 * p.values["x"]
        if jump is None:   # trunc: every nonzero integer, not 0
            d = np.where(np.abs(z) < 1, 1 - np.abs(z), np.abs(z - np.rint(z)))
        else:
            d = np.abs(jump(z))
        assert np.all(d >= MARGIN), (expr, float(d.min()))


def test_steps_keep_extreme_arguments_within_reach():
    # the jumps recur at every magnitude and finite differences' steps grow with |x|:
    # at |x| = 43, floor(30·x) jumped inside the stencil (the numeric witness failed)
    from gradcheck.sampling.points import PERIODIC_REACH

    case = make_case("floor(x * 30) * y", {"x": M, "y": V}, points=4)
    for p in case_points(case, "float32"):
        assert np.all(np.abs(30 * p.values["x"]) <= PERIODIC_REACH)
    assert check(case, "float32").status == "passed"


# ------------------------------------------------------------------ the rounding bound

# (formula, range of x): where the rows' float formulas cancel (gelu's 1 + erf for x ≪ 0,
# silu' and mish' crossing 0, logaddexp's log1p against the larger operand)
HARD = [
    ("gelu(x)", (-9, 3)),
    ('gelu(x, approximate="tanh")', (-9, 3)),
    ("silu(x)", (-30, 30)),
    ("silu(x)", (-1.6, -1.0)),
    ("mish(x)", (-30, 30)),
    ("mish(x)", (-1.5, -0.9)),
    ("logaddexp(x, -x * 0.5 - 0.4)", (-3, 3)),
    ("elu(x, alpha=0.7)", (-20, 3)),
    ("hypot(x, x * 0.3 + 1)", (-30, 30)),
    ("xlogy(x, x * x + 0.1)", (-3, 3)),
    ("rsqrt(x) + reciprocal(x) + square(x)", (0.05, 30)),
    ("leaky_relu(x, slope=0.3) + hardtanh(x, lo=-2, hi=1.5)", (-3, 3)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("expr, domain", HARD)
def test_bound_covers_torchs_actual_error(expr, domain, dtype):
    """The derived bound holds for PyTorch's own kernels, without the witnesses' safety
    factor (as tests/test_tolerance_model.py does for the older rows)."""
    def case_of(n):
        return case_from_dict({"name": "b", "expr": expr, "gradient": "random",
                               "inputs": {"x": {"shape": [n]}}})

    rng = np.random.default_rng(1)
    x = round_to(rng.uniform(*domain, 256), dtype)
    near = [d < MARGIN for _, d in hazard_distances(case_of(256).output, {"x": x})]
    x = x[~np.any(near, axis=0)] if near else x   # off the kinks, as sampling keeps them
    case, point = case_of(len(x)), {"x": x}
    v = round_to(rng.standard_normal(case.output.shape), dtype)
    assert_torch_within_bounds(case, point, v, dtype)


def _worst_ratio(expr, domain, dtype) -> float:
    """max |torch - exact| / bound over the value and x.grad at 256 points of ``domain``."""
    from gradcheck.witnesses.torch import run as torch_run

    case = case_from_dict({"name": "b", "expr": expr, "gradient": "random",
                           "inputs": {"x": {"shape": [256]}}})
    rng = np.random.default_rng(1)
    point = {"x": round_to(rng.uniform(*domain, 256), dtype)}
    v = round_to(rng.standard_normal(256), dtype)
    exact = Reference(case).evaluate(point, v).quantities()
    got = torch_run(case, point, v, dtype).quantities()
    bounds = error_bounds(case, point, v, dtype)
    return max(float(np.max(np.abs(got[q] - exact[q]) / np.maximum(bounds[q], 1e-300)))
               for q in exact)


@pytest.mark.parametrize("name, expr, domain, dtype", [
    ("gelu", "gelu(x)", (-9, 3), "float32"),
    ("gelu", 'gelu(x, approximate="tanh")', (-9, 3), "float64"),
    ("silu", "silu(x)", (-1.6, -1.0), "float64"),     # silu' crosses 0 at -1.28
    ("mish", "mish(x)", (-1.5, -0.9), "float32"),     # mish' crosses 0 at -1.19
])
def test_the_rows_bound_needs_its_terms(monkeypatch, name, expr, domain, dtype):
    """With its Terms the bound holds for torch's kernel; with the plain ρ·u·|result|
    model (the same ρ) it misses torch's real error: the terms are what let it pass."""
    assert _worst_ratio(expr, domain, dtype) <= 1
    rule = RULES[name]
    monkeypatch.setitem(RULES, name, dataclasses.replace(rule, rounding=rule.rounding.rho))
    assert _worst_ratio(expr, domain, dtype) > 1.5


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_batched_bounds_of_the_terms_rows_are_the_per_v_bounds(dtype):
    # op.jacobian's one batched backward: a Terms row takes the batch as it is
    from test_tolerance_model import _assert_batched_equals_per_v, _batch_case

    case = _batch_case('gelu(x) * silu(y) + mish(x * y) + logaddexp(x, y) + '
                       'gelu(y, approximate="tanh")', {"x": [2, 3], "y": [3]}, ())
    rng = np.random.default_rng(0)
    point = {"x": round_to(rng.uniform(-3, 2, (2, 3)), dtype),
             "y": round_to(rng.uniform(-3, 2, 3), dtype)}
    _assert_batched_equals_per_v(case, point, dtype)


def test_the_terms_keep_the_bound_tight_where_nothing_cancels():
    # gelu's bound at x > 0 stays a few u of the value: a 1e-5 relative error is caught
    case = case_from_dict({"name": "g", "expr": "gelu(x)", "inputs": {"x": [3]}})
    point = {"x": np.array([0.5, 1.0, 2.0])}
    bound = error_bounds(case, point, np.ones(3), "float32")["value"]
    value = Reference(case).evaluate(point, np.ones(3)).value
    assert np.all(bound < 20 * unit_roundoff("float32") * np.abs(value))
    assert isinstance(RULES["gelu"].rounding, Terms)


# ------------------------------------------------------------------ deliberate bugs

def _wrong_vjp(monkeypatch, name, *vjps):
    rule = RULES[name]
    monkeypatch.setitem(RULES, name, dataclasses.replace(
        rule, engine=dataclasses.replace(rule.engine, vjps=vjps)))


def _gelu_without_pdf(g, ans, x, approximate):   # forgets the x·φ(x) term
    from scipy.special import erf

    return g * 0.5 * (1 + erf(x / np.sqrt(2)))


# (formula, inputs, row, wrong VJPs): each a bug seen in hand-written backwards
BUGS = {
    "gelu drops x·pdf": ("gelu(x)", {"x": M}, "gelu", (_gelu_without_pdf,)),
    "elu forgets alpha": ("elu(x, alpha=0.5)", {"x": M}, "elu",
                          (lambda g, ans, x, alpha: np.where(x > 0, g, g * np.exp(x)),)),
    "silu forgets the product rule": ("silu(x * 2)", {"x": M}, "silu",
                                      (lambda g, ans, x: g * ac._expit(x),)),
    "floor straight through": ("floor(x * 3) * y", {"x": M, "y": V}, "floor",
                               (lambda g, ans, x: g,)),
    "hardtanh passes the gradient outside": (
        "hardtanh(x, lo=-0.5, hi=0.5)", {"x": M}, "hardtanh",
        (lambda g, ans, x, lo, hi: g * np.ones_like(x),)),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_a_wrong_engine_vjp_is_caught_and_torchs_own_op_passes(monkeypatch, bug):
    expr, inputs, name, vjps = BUGS[bug]
    right = check(make_case(expr, inputs, points=2))
    assert right.status == "passed", right.message
    _wrong_vjp(monkeypatch, name, *vjps)
    result = check(make_case(expr, inputs, points=2))
    assert result.witness("engine").status == "failed", bug
    assert result.witness("torch").status == "passed", bug
    assert result.witness("numeric").status == "passed", bug
