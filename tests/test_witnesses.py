"""The witnesses and the comparison (DESIGN.md sections 3 and 6): vector-Jacobian products
for every kind of ``gradient``, ``retain_grad``, ``requires_grad = false``, inputs no
differentiable path reaches, float32, sampling, the three kinds of reference, the
expansion limit, large elementwise cases, the numeric witness's error bound, and what a
witness that raises or computes a wrong gradient turns into."""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap

import numpy as np
import pytest
import torch

from conftest import check, count_numeric_evaluations, make_case
from gradcheck.sampling import points as sampling
from gradcheck.witnesses import numeric as numeric_witness
from gradcheck.witnesses import torch as torch_witness
from gradcheck.base.errors import CaseFileError
from gradcheck.sampling.kinks import count
from gradcheck.report import render
from gradcheck.base.result import RunResult
from gradcheck.rules import RULES
from gradcheck.checking.case import cotangent, run_case
from gradcheck.session.runner import run
from gradcheck.reference import EXPANSION_LIMIT, ExpandedReference, Reference


def at(case, dtype="float64", index=0):
    """(point values, cotangent) of point ``index``."""
    return sampling.sample(case, dtype, index).values, cotangent(case, dtype, index)


def points(case) -> int:
    """Points a run of ``case`` checks: the bulk's, the extreme ones and the kink
    points (where the formula has a kink an input reaches: gradcheck.sampling.kinks)."""
    return case.points + case.extreme_points + count(case)


def per_point(case) -> int:
    """Elements one point compares: the value, every checked input and retained let."""
    size = lambda shape: math.prod(shape)  # noqa: E731
    n = size(case.output.shape)
    n += sum(size(s.shape) for s in case.inputs if s.requires_grad)
    n += sum(size(case.nodes[h].shape) for h in case.retain_grad)
    return n


def assert_agree(result, witnesses=("engine", "torch", "numeric")):
    assert result.status == "passed", (result.message, result.notes)
    assert result.error_kind == ""
    assert [w.witness for w in result.witnesses] == list(witnesses)
    for w in result.witnesses:
        assert w.status == "passed" and w.mismatched == 0, w.message
        assert w.checked > 0


def patch_rule(monkeypatch, name, **columns):
    monkeypatch.setitem(RULES, name, dataclasses.replace(RULES[name], **columns))


# --------------------------------------------------------------------------- y.backward(v)

@pytest.mark.parametrize("gradient", ["ones", "random", [[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]]])
def test_vector_gradients_agree(gradient):
    case = make_case("tanh(x) * y + x", {"x": [2, 3], "y": [3]}, gradient=gradient)
    result = check(case)
    assert_agree(result)
    assert result.witness("torch").checked == points(case) * per_point(case)


def test_explicit_vector_gradient_on_a_vector_output():
    case = make_case("exp(x) * 2", {"x": [4]}, gradient=[1, -1, 2.5, 0])
    assert_agree(check(case))
    point, v = at(case)
    assert v.tolist() == [1, -1, 2.5, 0]
    got = torch_witness.run(case, point, v, "float64")
    np.testing.assert_allclose(got.grads["x"], v * 2 * np.exp(point["x"]), rtol=1e-14)


def test_the_cotangent_is_what_each_gradient_kind_says():
    ones = make_case("x * 3", {"x": [2, 2]}, gradient="ones")
    assert (at(ones)[1] == 1).all()
    random = make_case("x * 3", {"x": [2, 2]}, gradient="random")
    v0, v1 = at(random, index=0)[1], at(random, index=1)[1]
    assert v0.shape == (2, 2) and not np.array_equal(v0, v1)
    assert np.array_equal(v0, at(random, index=0)[1])  # repeatable
    matrix = make_case("x * 3", {"x": [2, 2]}, gradient=[[1, 2], [3, 4]])
    assert at(matrix)[1].tolist() == [[1, 2], [3, 4]]
    # vᵀJ of x * 3 is 3 v, in every witness and the reference
    for case in (ones, random, matrix):
        point, v = at(case)
        for w in (torch_witness, numeric_witness):
            np.testing.assert_allclose(w.run(case, point, v, "float64").grads["x"], 3 * v,
                                       rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(Reference(case).evaluate(point, v).grads["x"], 3 * v)


def test_matrix_shaped_gradient_through_a_matmul():
    case = make_case("x @ W", {"x": [2, 3], "W": [3, 2]}, gradient=[[1, -1], [0.5, 2]])
    result = check(case)
    assert_agree(result)
    assert result.mode == "tensor"
    point, v = at(case)
    ref = Reference(case).evaluate(point, v)
    np.testing.assert_allclose(ref.grads["x"], v @ point["W"].T, rtol=1e-13)
    np.testing.assert_allclose(ref.grads["W"], point["x"].T @ v, rtol=1e-13)


def test_a_gradient_ignored_by_torch_is_caught(monkeypatch):
    """If the torch witness dropped v (backward with ones), the explicit v would expose it."""
    case = make_case("sin(x)", {"x": [3]}, gradient=[2.0, -1.0, 0.5])
    real = torch_witness.run

    def ignores_v(case, point, v, dtype, reference=None):
        return real(case, point, np.ones_like(v), dtype, reference)

    monkeypatch.setattr(torch_witness, "run", ignores_v)
    result = check(case)
    assert result.status == "failed"
    assert result.witness("torch").status == "failed"
    assert result.witness("numeric").status == "passed"


# --------------------------------------------------------------------------- retain_grad

RETAINED = {
    "one let": dict(expr="sum(h ** 2)", inputs={"x": [3]}, let={"h": "tanh(x)"},
                    retain_grad=["h"]),
    "two lets": dict(expr="sum(h * g)", inputs={"x": [3]},
                     let={"h": "tanh(x)", "g": "exp(h)"}, retain_grad=["h", "g"]),
    "let used twice": dict(expr="sum(h * h + sin(h))", inputs={"x": [4]},
                           let={"h": "sigmoid(x)"}, retain_grad=["h"]),
    "broadcast let": dict(expr="sum(h * y)", inputs={"x": [3], "y": [2, 3]},
                          let={"h": "tanh(x)"}, retain_grad=["h"]),
    "broadcast inside let": dict(expr="sum(sin(h))", inputs={"x": [2, 3], "b": [3]},
                                 let={"h": "x * b"}, retain_grad=["h"]),
    "matmul let": dict(expr="sum(tanh(h @ W))", inputs={"x": [2, 3], "W": [3, 2]},
                       let={"h": "x * 2"}, retain_grad=["h"]),
}


@pytest.mark.parametrize("name", list(RETAINED))
def test_retained_grads_are_checked(name):
    spec = dict(RETAINED[name])
    case = make_case(spec.pop("expr"), spec.pop("inputs"), **spec)
    result = check(case)
    assert_agree(result)
    lets = case.retain_grad
    for w in result.witnesses:
        # the h.grad elements are among those compared
        assert w.checked == points(case) * per_point(case)
    point, v = at(case)
    got = torch_witness.run(case, point, v, "float64")
    for h in lets:
        assert got.retained[h] is not None
        assert got.retained[h].shape == case.nodes[h].shape


def test_retained_grad_values_are_the_chain_rule():
    # y = sum(h*h + sin(h)), h = sigmoid(x): h.grad = 2h + cos(h)
    case = make_case("sum(h * h + sin(h))", {"x": [4]}, let={"h": "sigmoid(x)"},
                     retain_grad=["h"])
    point, v = at(case)
    h = 1 / (1 + np.exp(-point["x"]))
    for got in (Reference(case).evaluate(point, v),
                torch_witness.run(case, point, v, "float64")):
        np.testing.assert_allclose(got.retained["h"], 2 * h + np.cos(h), rtol=1e-12)


@pytest.mark.parametrize("name", ["one let", "let used twice", "broadcast let",
                                  "matmul let"])
def test_a_broken_retain_grad_is_caught(monkeypatch, name):
    spec = dict(RETAINED[name])
    case = make_case(spec.pop("expr"), spec.pop("inputs"), **spec)
    monkeypatch.setattr(torch.Tensor, "retain_grad", lambda self: None)
    result = check(case)
    assert result.status == "failed"
    torch_result = result.witness("torch")
    assert torch_result.status == "failed"
    assert "h.grad is None" in torch_result.message
    assert result.witness("numeric").status == "passed"


def test_a_wrong_retained_grad_is_caught(monkeypatch):
    """torch returning h.grad with the wrong values (twice the truth) fails."""
    case = make_case("sum(h ** 2)", {"x": [3]}, let={"h": "tanh(x)"}, retain_grad=["h"])
    real = torch_witness.run

    def doubled(case, point, v, dtype, reference=None):
        out = real(case, point, v, dtype, reference)
        out.retained = {k: 2 * g for k, g in out.retained.items()}
        return out

    monkeypatch.setattr(torch_witness, "run", doubled)
    result = check(case)
    assert result.status == "failed"
    worst = result.witness("torch").worst
    assert worst.quantity == "h.grad"
    assert worst.obtained == pytest.approx(2 * worst.expected)


@pytest.mark.parametrize("let", ["y * 2", "2", "where(x > 0, 1, 2)"])
def test_retaining_a_let_that_needs_no_grad_is_a_case_error(let):
    """PyTorch cannot retain_grad a tensor that does not require grad; such a case is
    invalid (not a gradient mismatch of the torch witness)."""
    with pytest.raises(CaseFileError, match="retain_grad names 'h'.*requires grad"):
        make_case("sum(h * x)", {"x": [3], "y": {"shape": [3], "requires_grad": False}},
                  let={"h": let}, retain_grad=["h"])


# --------------------------------------------------------------------------- requires_grad

def test_an_input_without_requires_grad_is_not_checked():
    case = make_case("sum(x * y + y ** 2)", {"x": [3], "y": {"shape": [3],
                                                          "requires_grad": False}})
    result = check(case)
    assert_agree(result)
    for w in result.witnesses:
        assert w.checked == points(case) * (1 + 3)  # the value and x.grad only
        assert not w.worst_index.startswith("y.")
    point, v = at(case)
    for evaluation in (torch_witness.run(case, point, v, "float64"),
                       numeric_witness.run(case, point, v, "float64"),
                       Reference(case).evaluate(point, v)):
        assert "y" not in evaluation.grads
        assert "y.grad" not in evaluation.quantities()


def test_an_input_reaching_the_output_only_through_a_condition_gets_none():
    case = make_case("sum(where(c > 0, x, x ** 2))", {"x": [3], "c": [3]})
    result = check(case)
    assert_agree(result)
    point, v = at(case)
    got = torch_witness.run(case, point, v, "float64")
    assert got.grads["c"] is None
    assert got.grads["x"] is not None
    assert Reference(case).evaluate(point, v).grads["c"] is None
    for w in result.witnesses:
        assert w.checked == points(case) * (1 + 3)


def test_a_grad_where_none_is_due_is_caught(monkeypatch):
    case = make_case("sum(where(c > 0, x, x ** 2))", {"x": [3], "c": [3]})
    real = torch_witness.run

    def zeros_for_c(case, point, v, dtype, reference=None):
        out = real(case, point, v, dtype, reference)
        out.grads["c"] = np.zeros(3)
        return out

    monkeypatch.setattr(torch_witness, "run", zeros_for_c)
    result = check(case)
    assert result.status == "failed"
    assert "c.grad should be None" in result.witness("torch").message


# --------------------------------------------------------------------------- float32

def test_float32_runs_pass_and_really_run_in_float32():
    # the bulk only: at extreme magnitudes cancellation (1 - tanh(x)**2) dominates the
    # relative errors of both dtypes
    case = make_case("sum(tanh(x) * exp(y))", {"x": [64], "y": [64]}, extreme_points=0)
    r32, r64 = check(case, "float32"), check(case, "float64")
    assert_agree(r32)
    assert_agree(r64)
    assert r32.dtype == "float32"
    # float32 arithmetic shows: its error is far above float64's, and within tolerance
    assert r32.witness("torch").max_rel_err > 1e-9 > r64.witness("torch").max_rel_err
    assert r32.witness("torch").max_rel_err < 1e-4


def test_float32_points_are_exactly_representable():
    case = make_case("sum(x * y)", {"x": [100], "y": {"shape": [10, 100],
                                                     "domain": [-1e3, 1e3]}})
    for i in range(3):
        for x in sampling.sample(case, "float32", i).values.values():
            assert x.dtype == np.float64
            assert np.array_equal(x.astype(np.float32).astype(np.float64), x)


def test_float32_reference_is_evaluated_at_the_rounded_point(monkeypatch):
    case = make_case("sum(sin(x) * y)", {"x": [50], "y": [50]})
    seen: list[dict] = []
    real = Reference.evaluations

    def spy(self, points, vs):
        seen.extend({k: np.array(x) for k, x in point.items()} for point in points)
        return real(self, points, vs)

    monkeypatch.setattr(Reference, "evaluations", spy)
    assert_agree(check(case, "float32"))
    drawn = list(sampling.case_points(case, "float32"))   # bulk and extreme points
    assert len(seen) == len(drawn) == points(case)
    for point, expected in zip(seen, (p.values for p in drawn)):
        for name, x in point.items():
            assert np.array_equal(x, expected[name])
            assert np.array_equal(x.astype(np.float32).astype(np.float64), x)


def test_a_float32_pinned_value_is_rounded_to_float32():
    case = make_case("sum(exp(x))", {"x": {"shape": [2], "value": [0.1, 1 / 3]}})
    x32 = sampling.sample(case, "float32", 0).values["x"]
    assert x32.tolist() == [float(np.float32(0.1)), float(np.float32(1 / 3))]
    assert_agree(check(case, "float32"))


# --------------------------------------------------------------------------- sampling

def test_points_are_repeatable_and_depend_on_the_seed():
    case = make_case("sum(exp(x) * y)", {"x": [20], "y": [4, 20]})
    same = make_case("sum(exp(x) * y)", {"x": [20], "y": [4, 20]})
    other = make_case("sum(exp(x) * y)", {"x": [20], "y": [4, 20]}, seed=1)
    for i in range(3):
        a, b, c = (sampling.sample(k, "float64", i).values for k in (case, same, other))
        for name in ("x", "y"):
            assert np.array_equal(a[name], b[name])
            assert not np.array_equal(a[name], c[name])
    p0 = sampling.sample(case, "float64", 0).values["x"]
    p1 = sampling.sample(case, "float64", 1).values["x"]
    assert not np.array_equal(p0, p1)  # different points of one case differ too


def test_repeatable_results():
    case = make_case("sum(tanh(x @ W))", {"x": [2, 3], "W": [3, 2]})
    a, b = check(case), check(case)
    assert [w.to_dict() for w in a.witnesses] == [w.to_dict() for w in b.witnesses]


def test_points_stay_inside_the_domain():
    case = make_case("sum(x + y + z + u + w)", {
        "x": {"shape": [500], "domain": "positive"},
        "y": {"shape": [500], "domain": "unit"},
        "z": {"shape": [500], "domain": [3, 4]},
        "u": {"shape": [500], "domain": "nonzero"},
        "w": {"shape": [500], "domain": "nonnegative"}})
    for i in range(3):
        p = sampling.sample(case, "float64", i).values
        assert (p["x"] > 0).all()
        assert (np.abs(p["y"]) < 1).all()
        assert ((3 <= p["z"]) & (p["z"] <= 4)).all()
        assert (p["u"] != 0).all()
        assert (p["w"] >= 0).all()


def test_sampling_keeps_away_from_the_kink_of_abs():
    case = make_case("sum(abs(x))", {"x": [20000]})
    for i in range(3):
        point = sampling.sample(case, "float64", i)
        assert np.abs(point.values["x"]).min() >= sampling.MARGIN
        assert point.notes == ()


def test_without_redraws_abs_would_be_sampled_at_its_kink(monkeypatch):
    """The check above can fail: with no redraws, 20000 draws land near 0 and say so."""
    monkeypatch.setattr(sampling, "MAX_ROUNDS", 0)
    point = sampling.sample(make_case("sum(abs(x))", {"x": [20000]}), "float64", 0)
    assert np.abs(point.values["x"]).min() < sampling.MARGIN
    assert any("abs" in note for note in point.notes)


def test_sampling_keeps_away_from_kinks_inside_a_formula():
    case = make_case("sum(relu(x - y) + abs(x * 2 - 1))", {"x": [5000], "y": [5000]})
    p = sampling.sample(case, "float64", 0)
    assert np.abs(p.values["x"] - p.values["y"]).min() >= sampling.MARGIN
    assert np.abs(p.values["x"] * 2 - 1).min() >= sampling.MARGIN
    assert_agree(check(case))


def test_log_of_a_real_input_is_sampled_positive():
    case = make_case("sum(log(x))", {"x": [20000]})
    for i in range(3):
        point = sampling.sample(case, "float64", i)
        assert point.values["x"].min() >= sampling.MARGIN
        assert point.notes == ()
    assert_agree(check(case))


def test_a_pinned_value_is_used_as_given():
    value = [[0.0, 1.5, -2.0], [0.25, 3.0, -0.5]]
    case = make_case("sum(abs(x) * y)", {"x": {"shape": [2, 3], "value": value}, "y": [3]})
    point = sampling.sample(case, "float64", 0)
    assert point.values["x"].tolist() == value  # not redrawn, though 0 is abs's kink
    assert any("abs" in note for note in point.notes)
    # the free input is still sampled normally
    assert point.values["y"].shape == (3,)


def test_a_pinned_value_reaches_the_witnesses(monkeypatch):
    case = make_case("sum(exp(x) * y)", {"x": {"shape": [3], "value": [0.5, -1, 2]},
                                          "y": [3]})
    seen = []
    real = torch_witness.run

    def spy(case, point, v, dtype, reference=None):
        seen.append(point["x"].copy())
        return real(case, point, v, dtype, reference)

    monkeypatch.setattr(torch_witness, "run", spy)
    assert_agree(check(case))
    assert len(seen) == points(case)   # the extreme points leave x pinned too
    assert all(x.tolist() == [0.5, -1.0, 2.0] for x in seen)


# --------------------------------------------------------------------------- two modes

@pytest.mark.parametrize("expr, inputs", [
    ("sum(exp(x) * y)", {"x": [4, 3], "y": [3]}),
    ("mean(tanh(x) ** 2)", {"x": [5]}),
    ("sin(x) * 2", {"x": [3]}),
])
def test_elementwise_formulas_use_the_elementwise_mode(expr, inputs):
    case = make_case(expr, inputs)
    result = check(case)
    assert result.mode == "elementwise"
    assert_agree(result)


@pytest.mark.parametrize("expr, inputs", [
    ("sum(tanh(x @ W))", {"x": [2, 3], "W": [3, 2]}),
    ("sum(x @ W, axis=1)", {"x": [2, 3], "W": [3, 2]}),
])
def test_matmul_uses_the_tensor_mode(expr, inputs):
    result = check(make_case(expr, inputs))
    assert result.mode == "tensor"
    assert_agree(result)


# --------------------------------------------------------------------------- limits

def test_expansion_limit_gives_an_error_and_the_run_goes_on(tmp_path, monkeypatch):
    # the element-expanded reference, forced here, has a size limit (the tensor-level
    # one, chosen by default, does not)
    from gradcheck.reference import base

    monkeypatch.setattr(base, "mode_of", lambda case: "elementwise" if base.
                        elementwise_split(case.output) is not None else "expanded")
    n = EXPANSION_LIMIT // 2 + 1  # x [1, n] and W [n, 1]: 2n > EXPANSION_LIMIT elements
    path = tmp_path / "big.toml"
    path.write_text(textwrap.dedent(f"""
        [[case]]
        name = "too-big"
        inputs.x = {{ shape = [1, {n}] }}
        inputs.W = {{ shape = [{n}, 1] }}
        expr = "sum(x @ W)"

        [[case]]
        name = "after"
        expr = "sum(sin(x))"
        inputs.x = {{ shape = [3] }}
        """), encoding="utf-8")
    result = run([path], timeout=None)
    assert [c.name for c in result.cases] == ["too-big", "after"]
    big, after = result.cases
    assert big.status == "error"
    assert big.error_kind == "case"
    assert str(2 * n) in big.message and str(EXPANSION_LIMIT) in big.message
    assert "mixes elements" in big.message
    assert after.status == "passed"
    assert result.summary["errored"] == 1 and result.summary["passed"] == 1


def test_a_million_elements_elementwise():
    # (its witnesses named: finite differences too, which a case this large runs only
    # where the exact witnesses leave them something to add)
    case = make_case("sum(sin(x) * exp(x / 4) + log1p(x * x))", {"x": [1_000_000]},
                     points=1, extreme_points=0,
                     witnesses=["symbolic", "engine", "torch", "numeric"])
    result = check(case)
    assert result.mode == "elementwise"
    assert_agree(result)
    for w in result.witnesses:
        assert w.checked == 1 + 1_000_000


# --------------------------------------------------------------------------- numeric

@pytest.mark.parametrize("expr, inputs", [
    ("sum(sin(x) * exp(x))", {"x": [50]}),
    ("sum(x ** 3)", {"x": [10]}),
    ("sum(tanh(x @ W))", {"x": [2, 3], "W": [3, 2]}),
])
def test_numeric_error_bound_is_small_and_holds(expr, inputs):
    # the bulk, where the functions are smooth on the step's scale: absolute errors
    # grow with exp(x) at extreme points
    case = make_case(expr, inputs, extreme_points=0)
    ref = Reference(case)
    for i in range(case.points):
        point, v = at(case, index=i)
        expected = ref.evaluate(point, v)
        got = numeric_witness.run(case, point, v, "float64")
        for name in got.grads:
            exact = expected.grads[name]
            bound = got.error[f"{name}.grad"]
            scale = max(1.0, float(np.abs(exact).max()))
            assert bound.shape == exact.shape
            assert (bound >= 0).all()
            assert bound.max() <= 1e-4 * scale  # small for a smooth function
            # ... and it really bounds the error (the extrapolated value is better still)
            err = np.abs(got.grads[name] - exact)
            assert (err <= bound + 1e-12 * scale).all()
            assert err.max() <= 1e-8 * scale
    result = check(case)
    numeric = result.witness("numeric")
    assert numeric.status == "passed"
    assert numeric.max_abs_err < 1e-8
    assert numeric.worst.tolerance < 1e-3 * max(1.0, abs(numeric.worst.expected))


# --------------------------------------------------------------------------- failures

def test_a_witness_that_raises_is_that_cases_error(monkeypatch):
    def broken(*args):
        raise RuntimeError("torch column exploded")

    patch_rule(monkeypatch, "tanh", torch=broken)
    case = make_case("sum(tanh(x) * y)", {"x": [3], "y": [3]})
    result = check(case)
    assert result.status == "error"
    assert "torch" in result.message and "torch column exploded" in result.message
    t, n = result.witness("torch"), result.witness("numeric")
    assert t.status == "error" and "RuntimeError" in t.message
    assert n.status == "passed" and n.checked == points(case) * per_point(case)


def test_a_witness_error_does_not_stop_the_run(monkeypatch, tmp_path):
    def broken(*args):
        raise RuntimeError("boom")

    patch_rule(monkeypatch, "tanh", torch=broken)
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent("""
        [[case]]
        name = "uses-tanh"
        expr = "sum(tanh(x))"
        inputs.x = { shape = [3] }

        [[case]]
        name = "no-tanh"
        expr = "sum(sin(x))"
        inputs.x = { shape = [3] }
        """), encoding="utf-8")
    result = run([path], timeout=None)
    assert [(c.name, c.status) for c in result.cases] == [("uses-tanh", "error"),
                                                         ("no-tanh", "passed")]


def test_an_infinite_result_is_reported_as_infinite(monkeypatch):
    patch_rule(monkeypatch, "exp", torch=lambda x: torch.exp(x) * float("inf"))
    result = check(make_case("sum(exp(x))", {"x": [3]}))
    assert result.status == "failed"
    t = result.witness("torch")
    assert t.max_abs_err == float("inf") and t.max_rel_err == float("inf")
    assert t.worst.quantity == "value" and t.worst.obtained == float("inf")
    assert result.witness("numeric").status == "passed"
    report = json.loads(render(RunResult((result,)), "json"))
    assert report["cases"][0]["witnesses"]["torch"]["max_abs_err"] == "inf"


class FlippedTanh(torch.autograd.Function):
    """tanh whose backward has the wrong sign."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return -grad * (1 - y * y)


def test_a_wrong_torch_backward_fails_and_names_the_element(monkeypatch):
    patch_rule(monkeypatch, "tanh", torch=FlippedTanh.apply)
    # without extreme points: at |x| > 19, 1 - tanh(x)**2 is 0 and the flipped sign agrees
    case = make_case("sum(tanh(x) * y)", {"x": [2, 3], "y": [3]}, extreme_points=0)
    result = check(case)
    assert result.status == "failed"
    assert result.error_kind == ""
    t = result.witness("torch")
    assert t.status == "failed"
    assert t.mismatched == case.points * 6  # every x.grad element; value and y.grad agree
    assert t.worst.quantity == "x.grad"
    assert len(t.worst.index) == 2
    assert all(0 <= i < n for i, n in zip(t.worst.index, (2, 3)))
    assert t.worst.obtained == pytest.approx(-t.worst.expected, rel=1e-12)
    assert t.worst_index.startswith("x.grad[")
    assert "elements differ" in t.message
    assert t.worst_index in t.message
    assert "elements differ" in result.message and "torch" in result.message
    assert t.max_rel_err == pytest.approx(2.0, rel=1e-9)
    assert "FlippedTanhBackward" in t.grad_fn
    # the numeric witness uses no derivative rule: it still agrees
    assert result.witness("numeric").status == "passed"


def test_expect_fail_passes_when_the_wrong_backward_is_caught(monkeypatch):
    patch_rule(monkeypatch, "tanh", torch=FlippedTanh.apply)
    case = make_case("sum(tanh(x))", {"x": [3]}, expect="fail")
    result = check(case)
    assert result.status == "passed"
    assert "caught as expected" in result.message and "torch" in result.message


def test_run_case_with_a_fresh_and_a_shared_cache_agree():
    case = make_case("sum(exp(x) * y)", {"x": [3], "y": [3]})
    cache: dict = {}
    first = run_case(case, "float64", cache=cache, timeout=None)
    second = run_case(case, "float64", cache=cache, timeout=None)
    assert len(cache) == 1
    assert [w.to_dict() for w in first.witnesses] == [w.to_dict() for w in second.witnesses]


# --------------------------------------------------------------------------- the registry

def test_the_registry_lists_every_formula_witness_once():
    from gradcheck.witnesses import registry as witnesses

    assert witnesses.names() == ("engine", "torch", "numeric")
    assert witnesses.formula_names() == ("symbolic", "engine", "torch", "numeric")
    assert witnesses.case_names() == ("symbolic", "engine", "torch", "numeric", "op")
    for name, entry in witnesses.REGISTRY.items():
        assert entry.name == name and entry.description
        assert dataclasses.is_dataclass(entry)
        with pytest.raises(dataclasses.FrozenInstanceError):
            entry.name = "other"
        assert witnesses.witness(name) is entry.run
    assert witnesses.REGISTRY["torch"].runs_in is None
    assert witnesses.REGISTRY["engine"].runs_in == ("float64", "float32")
    assert witnesses.REGISTRY["numeric"].runs_in == ("float64", "float32")


def test_a_worker_preloads_the_witness_modules_the_registry_names(monkeypatch):
    from gradcheck.session import tasks
    from gradcheck.witnesses import registry

    assert registry.modules() == {"engine": "gradcheck.witnesses.engine",
                                  "torch": "gradcheck.witnesses.torch",
                                  "numeric": "gradcheck.witnesses.numeric"}
    monkeypatch.setitem(tasks._STATE, "preloaded", False)
    monkeypatch.setitem(registry.REGISTRY, "ghost", registry.Witness(
        name="ghost", run=registry.witness("torch"), runs_in=None,
        tolerance=registry.formula_tolerance, description="a module that is missing",
        module="gradcheck.witnesses.ghost"))
    # a wrong name is gradcheck's (or a plugin's) mistake: said at once, never ignored
    with pytest.raises(ModuleNotFoundError, match="the ghost witness names the module "
                                                  "'gradcheck.witnesses.ghost'"):
        tasks.preload()
    assert not tasks._STATE["preloaded"]


def test_a_witness_module_whose_dependency_fails_is_left_for_its_cases(
        monkeypatch, tmp_path):
    from gradcheck.session import tasks
    from gradcheck.witnesses import registry

    (tmp_path / "broken_witness.py").write_text("import a_dependency_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(tasks._STATE, "preloaded", False)
    monkeypatch.setitem(registry.REGISTRY, "broken", registry.Witness(
        name="broken", run=registry.witness("torch"), runs_in=None,
        tolerance=registry.formula_tolerance, description="its dependency is missing",
        module="broken_witness"))
    tasks.preload()   # the cases that run it report the error
    assert tasks._STATE["preloaded"]


def test_skip_reason_comes_from_the_registry():
    from gradcheck.witnesses.registry import skip_reason

    for dtype in ("float64", "float32"):
        assert skip_reason("engine", dtype) is None and skip_reason("numeric", dtype) is None
    for dtype in ("float16", "bfloat16"):
        assert skip_reason("engine", dtype) == \
            "the engine witness runs in float64 and float32 only"
        assert skip_reason("numeric", dtype) == \
            "the numeric witness runs in float64 and float32 only"
        assert skip_reason("torch", dtype) is None


def test_every_witness_runs_through_the_one_signature():
    """run(case, point, v, dtype, reference): what the registry's entries take, the
    backends' own run functions included."""
    from gradcheck.witnesses import registry as witnesses
    from gradcheck.witnesses import engine as engine_witness

    case = make_case("sum(tanh(A @ x))", {"A": (4, 3), "x": (3,)})
    ref = Reference(case)
    point, v = at(case)
    expected = ref.evaluate(point, v)
    for name in witnesses.names():
        got = witnesses.witness(name)(case, point, v, "float64", ref)
        for n, g in expected.grads.items():
            np.testing.assert_allclose(got.grads[n], g, rtol=1e-6, atol=1e-9)
    for module in (torch_witness, engine_witness, numeric_witness):
        module.run(case, point, v, "float64", ref)   # the reference as the fifth argument


def test_the_numeric_witness_reads_the_sparsity_from_the_reference(monkeypatch):
    case = make_case("tanh(A @ x) * 2", {"A": (8, 6), "x": (6,)})
    ref = ExpandedReference(case)   # the reference kind that has a sparsity pattern
    point, v = at(case)
    calls = count_numeric_evaluations(monkeypatch)
    by_reference = numeric_witness.run(case, point, v, "float64", ref)
    grouped = len(calls)
    calls.clear()
    by_pattern = numeric_witness.run(case, point, v, "float64", sparsity=ref.sparsity)
    assert len(calls) == grouped
    calls.clear()
    numeric_witness.run(case, point, v, "float64")   # no pattern: element by element
    assert grouped < len(calls)
    for name in ("A", "x"):
        np.testing.assert_array_equal(by_reference.grads[name], by_pattern.grads[name])


def test_importing_the_registry_imports_no_witness():
    import subprocess
    import sys

    # the registry lives in gradcheck.witnesses beside the witnesses: none of their
    # modules (the registry names them), nor torch, SymPy or the comparison, is imported
    code = ("import sys, gradcheck.witnesses.registry as w; w.names(); w.skip_reason('engine', "
            "'float16'); print(sorted(m for m in sys.modules if m == 'torch' or "
            "m.startswith(('gradcheck.witnesses.', 'gradcheck.checking.compare', 'sympy')) "
            "and m != 'gradcheck.witnesses.registry'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_witness_added_to_the_registry_is_one_everywhere(monkeypatch, tmp_path):
    """An entry of the registry is a witness a case file may name, that --witness
    accepts, that runs in the dtypes it says, and whose tolerance rule judges it."""
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    from gradcheck.witnesses import registry as witnesses
    from gradcheck.cli.exit_codes import ExitCode
    from gradcheck.cli.main import main

    judged = []

    def halved(case, point, v, dtype, reference=None):
        out = witnesses.witness("torch")(case, point, v, dtype, reference)
        return dataclasses.replace(out, grads={n: g / 2 for n, g in out.grads.items()})

    def tolerance(dtype, bounds, own_error):
        judged.append(dtype)
        return witnesses.formula_tolerance(dtype, bounds, own_error)

    monkeypatch.setitem(witnesses.REGISTRY, "halved", witnesses.Witness(
        "halved", halved, ("float64",), tolerance, "torch's gradient, halved"))
    path = tmp_path / "cases.toml"
    path.write_text(textwrap.dedent("""
        [[case]]
        name = "sine"
        expr = "sum(sin(x))"
        inputs.x = { shape = [3] }
        witnesses = ["torch", "halved"]
        dtype = ["float64", "float32"]
        points = 1
        extreme_points = 0
    """))
    out = tmp_path / "report.json"
    assert main(["run", str(path), "--witness", "halved", "--witness", "torch",
                 "--format", "json", "--output", str(out)]) == ExitCode.MISMATCH
    cases = json.loads(out.read_text())["cases"]
    assert [(c["dtype"], c["status"]) for c in cases] == [("float64", "failed"),
                                                          ("float32", "passed")]
    assert cases[0]["witnesses"]["halved"]["status"] == "failed"
    assert cases[0]["witnesses"]["torch"]["status"] == "passed"
    assert cases[1]["witnesses"]["halved"]["message"] == \
        "the halved witness runs in float64 only"
    # its own rule, at its one point, in its one dtype; then, as float64 failed there,
    # the same rule in float32 for the approximate verdict (halved is beyond it too)
    assert judged == ["float64", "float32"]
    # without the entry the name is neither a witness of a case file nor of --witness
    monkeypatch.delitem(witnesses.REGISTRY, "halved")
    with pytest.raises(SystemExit):
        main(["run", str(path), "--witness", "halved"])
    assert main(["run", str(path)]) == ExitCode.USAGE
