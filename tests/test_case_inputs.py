"""Integer and boolean inputs (``dtype = "int64" | "int32" | "bool"``): validated, sampled
uniformly in their domain (upper bound exclusive) or pinned, exact constants in every
witness (the reference never differentiates them, torch and the engine get integer
tensors that need no grad, the numeric witness never perturbs them, the rounding model
holds them exact), promoted to the run's float dtype in float arithmetic as torch
promotes them, and usable as the mask of ``where``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from conftest import check, make_case
from gradcheck.witnesses import engine as engine_backend
from gradcheck.witnesses import numeric as numeric_backend
from gradcheck.witnesses import torch as torch_backend
from gradcheck.witnesses.drive import rebuild
from gradcheck.base.errors import CaseFileError
from gradcheck.formula.forward import evaluate, exact_nodes
from gradcheck.reference import ExpandedReference, TensorReference
from gradcheck.bounds.point import error_bounds
from gradcheck.rules import RULES
from gradcheck.sampling.points import case_points, sample

INT = {"shape": [8], "dtype": "int64", "domain": [0, 10]}
MASK = {"shape": [8], "dtype": "bool"}


# --------------------------------------------------------------------------- reading

@pytest.mark.parametrize("spec, message", [
    ({"shape": [3], "dtype": "int64"}, r"give its domain = \[lo, hi\] \(hi exclusive\)"),
    ({"shape": [3], "dtype": "int64", "domain": [0, 4], "requires_grad": True},
     r"is int64: it cannot require grad"),
    ({"shape": [3], "dtype": "float16"}, r"dtype must be one of int64, int32, bool"),
    ({"shape": [3], "dtype": "int64", "domain": [0, 10], "value": [1, 2, 10]},
     r"outside its domain \[0, 10\) \(the upper bound is exclusive\)"),
    ({"shape": [3], "dtype": "int64", "domain": [0.5, 3]}, r"domain is \[lo, hi\] with "
                                                           r"integers"),
    ({"shape": [3], "dtype": "int64", "value": [1.5, 2, 3]}, r"expected integers"),
    ({"shape": [3], "dtype": "bool", "value": [1, 0, 1]}, r"expected true or false"),
    ({"shape": [3], "dtype": "bool", "domain": [0, 2]}, r"is bool: it takes no domain"),
    ({"shape": [3], "dtype": "int64", "value": [1, 2]}, r"value has shape \[2\]"),
])
def test_bad_integer_inputs_are_case_file_errors(spec, message):
    with pytest.raises(CaseFileError, match=message) as info:
        make_case("sum(x * k)", {"x": [3], "k": spec}, name="c")
    assert info.value.case == "c"


def test_integer_inputs_are_read_with_their_dtype():
    case = make_case("sum(x * k + where(m, x, 0))", {
        "x": [3], "k": {"shape": [3], "dtype": "int32", "value": [4, 5, 6]},
        "m": {"shape": [3], "dtype": "bool", "value": [True, False, True]}})
    k, m = case.input["k"], case.input["m"]
    assert (k.dtype, k.requires_grad, k.domain, k.value.dtype) == (
        "int32", False, (4, 7), np.int32)
    assert (m.dtype, m.value.dtype) == ("bool", np.bool_)
    assert case.nodes["k"].dtype == "int32" and case.nodes["x"].dtype is None
    # the DAG keeps each input's dtype across processes (--jobs, Dask)
    again = pickle.loads(pickle.dumps(case))
    assert again.nodes["k"].dtype == "int32" and again.input["m"].dtype == "bool"


def test_a_mask_input_or_let_is_a_condition_of_where():
    case = make_case("where(mm, x, -x)", {"x": [4], "m": MASK | {"shape": [4]}},
                     let={"mm": "m"})
    cond = case.output.args[0]
    assert RULES[cond.op].family == "comparison" and cond.args[0] is case.nodes["mm"]
    # a float input is still no mask
    with pytest.raises(CaseFileError, match="must be a comparison"):
        make_case("where(y, x, -x)", {"x": [4], "y": [4]})


def test_an_integer_mask_means_nonzero():
    case = make_case("where(k, x, -x)", {"x": [4], "k": {
        "shape": [4], "dtype": "int64", "value": [0, -2, 3, 0]}})
    point = sample(case, "float64", 0).values
    assert case.output.args[0].op == "ne"      # torch.where refuses an integer mask
    result = check(case)
    assert result.status == "passed", result.message
    assert np.array_equal(evaluate(case.output, point),
                          np.where(point["k"] != 0, point["x"], -point["x"]))
    both = make_case("where(m & (x > 0), x, 0)", {"x": [4], "m": MASK | {"shape": [4]}})
    assert check(both).status == "passed"


# --------------------------------------------------------------------------- sampling

def test_integers_are_drawn_uniformly_in_their_domain_upper_bound_exclusive():
    case = make_case("sum(x * k)", {"x": [200], "k": {"shape": [200], "dtype": "int64",
                                                       "domain": [-3, 4]}}, points=5)
    drawn = np.concatenate([p.values["k"] for p in case_points(case, "float32")])
    assert drawn.dtype == np.int64
    assert set(np.unique(drawn)) == set(range(-3, 4))     # 4 never, every other value
    counts = np.bincount(drawn + 3)
    assert counts.min() > 0.5 * counts.mean()              # roughly uniform
    mask = make_case("sum(where(m, x, 0))", {"x": [64], "m": MASK | {"shape": [64]}})
    m = sample(mask, "float64", 0).values["m"]
    assert m.dtype == np.bool_ and 0 < m.sum() < 64


def test_pinned_integers_are_used_as_given_and_extreme_points_keep_them_in_domain():
    case = make_case("sum(x * k + y * j)", {
        "x": [6], "y": [6], "k": {"shape": [6], "dtype": "int64", "value": [0, 1, 2, 3, 4, 5]},
        "j": {"shape": [6], "dtype": "int64", "domain": [1, 3]}})
    points = list(case_points(case, "float64"))
    assert len(points) == case.points + case.extreme_points
    for p in points:
        assert np.array_equal(p.values["k"], np.arange(6))
        assert p.values["j"].dtype == np.int64 and set(np.unique(p.values["j"])) <= {1, 2}
    # every float input pinned: the integers alone make no extreme points
    only = make_case("sum(x * j)", {"x": {"shape": [2], "value": [1.0, 2.0]},
                                    "j": {"shape": [2], "dtype": "int64", "domain": [0, 3]}})
    assert len(list(case_points(only, "float64"))) == only.points


def test_a_comparison_of_integers_is_no_kink():
    """where(k > 2, ...) switches exactly at integers: k = 2 is a fine point, where a
    float input would be kept 0.05 away from 2."""
    case = make_case("sum(where(k > 2, x, 2 * x))", {
        "x": [4], "k": {"shape": [4], "dtype": "int64", "value": [2, 2, 3, 1]}})
    assert all(id(n) in exact_nodes(case.output) for n in [case.output.args[0].args[0]])
    point = sample(case, "float64", 0)
    assert not any("kink" in n for n in point.notes)
    floats = make_case("sum(where(k > 2, x, 2 * x))", {
        "x": [4], "k": {"shape": [4], "value": [2.0, 2.0, 3.0, 1.0]}})
    assert any("kink" in n for n in sample(floats, "float64", 0).notes)
    # a float that meets an integer in a comparison still keeps away from it
    mixed = make_case("sum(where(x > k, x, 2 * x))", {"x": [64], "k": INT | {"shape": [64]}})
    p = sample(mixed, "float64", 0).values
    assert np.all(np.abs(p["x"] - p["k"]) >= 0.05)


# --------------------------------------------------------------------------- witnesses

FORMULAS = [
    ("sum(where(k > 2, x, x * k))", {"x": [8], "k": INT}),
    ("x * k", {"x": [8], "k": INT}),
    ("where(m, sin(x), x**2)", {"x": [8], "m": MASK}),
    ("sum(x * sin(k) + k / 3)", {"x": [8], "k": INT}),
    ("sum(tanh(x @ W) * k)", {"x": [4, 3], "W": [3, 8], "k": INT}),
    ("max(x * k, axis=0)", {"x": [3, 8], "k": INT | {"domain": [1, 10]}}),
    ("logsumexp(where(m, x, -x) @ W, axis=1)", {"x": [2, 8], "W": [8, 3], "m": MASK}),
]


@pytest.mark.parametrize("expr, inputs", FORMULAS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_witness_treats_integers_as_constants(expr, inputs, dtype):
    result = check(make_case(expr, inputs), dtype)
    assert result.status == "passed", result.message
    assert {w.witness for w in result.witnesses} == {"engine", "torch", "numeric"}
    for w in result.witnesses:
        assert w.checked > 0, w
        assert all(not e.quantity.startswith(("k.", "m.")) for e in w.worst_elements), w
    assert not any(q.startswith(("k.", "m.")) for q, _ in result.gradients)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_runs_integers_in_the_low_dtypes(dtype):
    result = check(make_case("sum(x * k + where(m, x, 0))", {"x": [8], "k": INT, "m": MASK}),
                   dtype)
    assert result.status == "passed", result.message
    assert result.witness("torch").status == "passed"


def _point_and_v(case, dtype="float32"):
    point = sample(case, dtype, 0).values
    v = np.ones(case.output.shape)
    return point, v


def test_torch_and_the_engine_get_integer_leaves_and_promote_as_torch_does():
    case = make_case("x * k", {"x": [8], "k": INT})
    point, _ = _point_and_v(case)
    leaves = torch_backend.leaves(case, point, "float32")
    assert leaves["k"].dtype == torch.int64 and not leaves["k"].requires_grad
    y = rebuild(case.output, leaves, torch_backend.applier(case, "float32"))
    assert y.dtype == torch.float32 == (leaves["x"] * leaves["k"]).dtype   # torch's own
    assert type(y.grad_fn).__name__ == "MulBackward0"
    e_leaves = {s.name: engine_backend.leaf(s, point[s.name], "float32") for s in case.inputs}
    assert e_leaves["k"].dtype == np.int64 and not e_leaves["k"].requires_grad
    z = rebuild(case.output, e_leaves, engine_backend.applier("float32"))
    assert z.dtype == np.float32            # NumPy alone would make it float64
    assert type(z.grad_fn).__name__ == "MulBackward0"
    # sin of an integer alone: the run's dtype (torch's default would be float32)
    alone = make_case("sum(x * sin(k))", {"x": [8], "k": INT})
    p64, _ = _point_and_v(alone, "float64")
    inner = alone.output.args[0].args[1]
    assert rebuild(inner, torch_backend.leaves(alone, p64, "float64"),
                   torch_backend.applier(alone, "float64")).dtype == torch.float64


def test_the_reports_never_show_a_gradient_for_an_integer_input():
    case = make_case("sum(x * k)", {"x": [8], "k": INT})
    point, v = _point_and_v(case, "float64")
    for run in (torch_backend.run, engine_backend.run, numeric_backend.run):
        got = run(case, point, v, "float64")
        assert set(got.grads) == {"x"}
        np.testing.assert_allclose(got.grads["x"], point["k"], rtol=1e-9, atol=1e-12)


def test_the_numeric_witness_never_perturbs_an_integer(monkeypatch):
    seen = []
    real = numeric_backend.forward_bound

    def spy(root, env, overrides=None, dtype="float64", at=None):
        seen.append(dict(env, **(overrides or {})))
        return real(root, env, overrides, dtype, at)

    monkeypatch.setattr(numeric_backend, "forward_bound", spy)
    case = make_case("sum(sin(x) * k)", {"x": [8], "k": INT})
    point, v = _point_and_v(case, "float64")
    numeric_backend.run(case, point, v, "float64")
    assert seen and all(np.array_equal(e["k"], point["k"]) and e["k"].dtype == np.int64
                        for e in seen)


def test_the_references_agree_and_differentiate_no_integer():
    case = make_case("sum(tanh(x @ W) * k, axis=1)",
                     {"x": [3, 4], "W": [4, 8], "k": INT})
    point, _ = _point_and_v(case, "float64")
    v = np.arange(1.0, 4.0)
    got, want = TensorReference(case), ExpandedReference(case)
    assert got.wrt == want.wrt == ["x", "W"]
    a, b = got.evaluate(point, v), want.evaluate(point, v)
    assert set(a.grads) == set(b.grads) == {"x", "W"}
    for n in a.grads:
        np.testing.assert_allclose(a.grads[n], b.grads[n], rtol=1e-12, atol=1e-14)


def test_the_rounding_model_holds_integers_exact():
    """k is exact: the bound of x * k is one rounding of the product, u·|x·k|; its
    x.grad = g·k only rounds in its own product, (2ρ + 1)·u·|g·k| (a float k would add
    the sensitivity to k's rounding where the VJP reads it)."""
    case = make_case("x * k", {"x": [8], "k": INT})
    point, v = _point_and_v(case)
    bounds = error_bounds(case, point, v, "float32")
    u, tiny = 2.0 ** -24, 1e-40   # (+ η, half a subnormal spacing, where one underflows)
    np.testing.assert_allclose(bounds["value"], u * np.abs(point["x"] * point["k"]),
                               rtol=1e-12, atol=tiny)
    np.testing.assert_allclose(bounds["x.grad"], 3 * u * np.abs(point["k"]), rtol=1e-12,
                               atol=tiny)


def test_a_witness_that_rounds_an_integer_is_caught(monkeypatch):
    """Mutation test: a torch witness that hands k over as k + 0.25 (an integer input
    taken for a float one and perturbed) fails, so the integers are really compared."""
    real = torch_backend.leaves

    def shifted(case, point, dtype):
        out = real(case, point, dtype)
        out["k"] = out["k"].to(torch.float64) + 0.25
        return out

    monkeypatch.setattr(torch_backend, "leaves", shifted)
    result = check(make_case("x * k", {"x": [8], "k": INT}))
    assert result.witness("torch").status == "failed"
    assert result.witness("engine").status == "passed"


def test_integers_beyond_what_a_low_dtype_holds_are_rounded_into_it(monkeypatch):
    """torch multiplies x (bfloat16) by k (int64) with k rounded to bfloat16 first (257
    becomes 256), and so does k - 256 once k is a float operand: the rounding model
    allows that conversion, and x * (k - 256), which it makes 0 for k = 257, passes.
    Without it (mutation: integers always exact) the torch witness fails."""
    from gradcheck.bounds import model as rounding

    x = torch.ones(2, dtype=torch.bfloat16)
    assert (x * torch.tensor([257, 1025])).tolist() == [256.0, 1024.0]
    case = make_case("x * (k - 256)", {"x": [8], "k": {"shape": [8], "dtype": "int64",
                                                       "domain": [257, 300]}})
    for dtype in ("bfloat16", "float16", "float32"):
        assert check(case, dtype).status == "passed", dtype
    monkeypatch.setattr(rounding.RoundingModel, "_integer_error",
                        lambda self, k: np.broadcast_to(0.0, np.shape(k)))
    assert check(case, "bfloat16").witness("torch").status == "failed"


# --------------------------------------------------------------------------- through lets

#: a boolean mask and integer labels through indexing, None axes, reshapes and lets
KEPT = [
    ("sum(where(m, x, y) * x)", {"x": [2, 3, 4, 5], "y": [2, 3, 4, 5],
                                 "mask": {"shape": [2, 5], "dtype": "bool"}},
     {"m": "mask[:, None, None, :]"}),
    ("sum(where(m, x, 0))", {"x": [3, 4], "k": {"shape": [4, 3], "dtype": "int64",
                                                "domain": [-1, 2]}}, {"m": "transpose(k)"}),
    ("sum(where(mm, x, -x))", {"x": [2, 3], "mask": {"shape": [3], "dtype": "bool"}},
     {"m": "expand(mask, [2, 3])", "mm": "m"}),
    ("sum(take_along_axis(log_softmax(z, axis=1), y[:, None], 1))",
     {"z": [4, 5], "y": {"shape": [4], "dtype": "int64", "domain": [0, 5]}}, {}),
    ("sum(gather(z, yy, 1))", {"z": [4, 5], "y": {"shape": [4], "dtype": "int64",
                                                  "domain": [0, 5]}},
     {"yy": "reshape(y, [4, 1])"}),
    ("sum(z[:, yy]) + sum(one_hot(y[0], 5) * z[:2])",
     {"z": [4, 5], "y": {"shape": [2, 2], "dtype": "int64", "domain": [0, 5]}},
     {"yy": "flatten(y)"}),
]


def test_integer_and_boolean_tensors_keep_their_kind_through_layout_rows_and_lets():
    import gradcheck

    case = make_case(*KEPT[0][:2], let=KEPT[0][2])
    m = case.nodes["m"]
    assert (m.dtype, m.args[0].op, m.args[0].dtype, m.shape) == ("bool", "index", "bool",
                                                                (2, 1, 1, 5))
    assert case.output.args[0].args[0].args[0].op == "ne"    # the mask, nonzero as true
    # what PyTorch does: the view of a bool tensor is a bool tensor, needing no grad
    mask = torch.tensor([[True, False, True, True, False]] * 2)
    assert mask[:, None, None, :].dtype == torch.bool
    # pad writes values of its own and concat joins: no kind kept, no mask
    with pytest.raises(CaseFileError, match="must be a comparison"):
        make_case("where(m, x, 0)", {"x": [4], "mask": {"shape": [2], "dtype": "bool"}},
                  let={"m": "concat([mask, mask])"})
    # through gradcheck.check, a let as a case file writes it
    result = gradcheck.check("sum(where(m, x, -x))", {
        "x": [3, 4], "mask": {"shape": [4], "dtype": "bool"}}, let={"m": "mask[None, :]"})
    assert result.status == "passed", result.message


@pytest.mark.parametrize("expr, inputs, let", KEPT)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_witness_takes_a_mask_or_indices_from_a_let(expr, inputs, let, dtype):
    result = check(make_case(expr, inputs, let=let), dtype)
    assert result.status == "passed", result.message
    assert {w.witness for w in result.witnesses} == {"engine", "torch", "numeric"}
    assert all(w.checked > 0 for w in result.witnesses)
    assert result.witness("engine").grad_fn == result.witness("torch").grad_fn


def test_a_mask_from_a_let_is_the_mask_each_witness_applies(monkeypatch):
    """The gradient through where(mask[:, None, None, :], x, y) is v where the mask holds
    (every witness, and the exact reference); a torch witness handed the negated mask
    (mutation) is caught, so the mask really decides."""
    expr, inputs, let = KEPT[0]
    case = make_case(expr, inputs, let=let)
    point, _ = _point_and_v(case, "float64")
    v = 1.0
    want = np.where(point["mask"][:, None, None, :], 2 * point["x"], point["y"]) * v
    for run in (torch_backend.run, engine_backend.run, numeric_backend.run):
        got = run(case, point, np.float64(v), "float64")
        np.testing.assert_allclose(got.grads["x"], want, rtol=1e-6, atol=1e-8)
    real = torch_backend.leaves

    def negated(case, point, dtype):
        out = real(case, point, dtype)
        out["mask"] = ~out["mask"]
        return out

    monkeypatch.setattr(torch_backend, "leaves", negated)
    result = check(case)
    assert result.witness("torch").status == "failed"
    assert result.witness("engine").status == "passed"
