"""The tensor-level reference's chain of trust: it equals the element-expanded reference
(the ground truth at small sizes, where SymPy differentiates every element) on random
formulas over every row; each structural rule of the table's tensor column passes the
adjoint identity ⟨L x, y⟩ = ⟨x, Lᵀ y⟩; and a deliberately wrong rule is caught by both
tests and by a check of the case (mutation tests)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from conftest import check, make_case
from gradcheck.cases import case_from_dict
from gradcheck.base.errors import UnsupportedOpError
from gradcheck.reference import ExpandedReference, Reference, TensorReference, mode_of
from gradcheck.reference import tensor as tensor_module
from gradcheck.reference.texpr import Builder, evaluate, leaf
from gradcheck.rules import COMPARISON, ELEMENTWISE, RULES, STRUCTURE, TensorRule
from gradcheck.rules.keys import Slice
from gradcheck.sampling.points import sample
from gradcheck.strategies import formulas
from gradcheck.formula.tree import walk

STRUCTURAL = sorted(n for n, r in RULES.items() if r.tensor is not None)
ELEMENTWISE_ROWS = sorted(n for n, r in RULES.items()
                          if r.tensor is None and r.family != COMPARISON)
RELATIVE = 1e-12


def _at(case, seed: int = 0):
    point = sample(case, "float64", 0).values
    v = np.random.default_rng(seed).standard_normal(case.output.shape)
    return point, v


def _differences(case) -> dict[str, float]:
    """max |tensor − expanded| / max(1, max |expanded|) per quantity, at a point."""
    point, v = _at(case)
    got = TensorReference(case).evaluate(point, v).quantities()
    want = ExpandedReference(case).evaluate(point, v).quantities()
    assert got.keys() == want.keys()
    out = {}
    for q, w in want.items():
        if w is None or got[q] is None:   # no differentiable path: None in both
            assert w is None and got[q] is None, q
            continue
        w, g = np.asarray(w, dtype=float), np.asarray(got[q], dtype=float)
        assert g.shape == w.shape, q
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        out[q] = float(np.max(np.abs(g - w))) / scale if w.size else 0.0
    return out


def _assert_equal_references(case) -> None:
    bad = {q: d for q, d in _differences(case).items() if not d <= RELATIVE}
    assert not bad, (case.name, bad)


# --------------------------------------------------------------------------- differential

def test_every_structural_row_has_a_tensor_rule():
    assert STRUCTURAL == sorted(n for n, r in RULES.items()
                                if r.family not in (ELEMENTWISE, COMPARISON))
    for name in STRUCTURAL:
        assert len(RULES[name].tensor.vjps) == RULES[name].arity


@pytest.mark.parametrize("row", STRUCTURAL + ELEMENTWISE_ROWS)
def test_the_tensor_reference_equals_the_expanded_one(row):
    """Random formulas that use ``row``, most of them mixing elements (a matmul or an
    inner sum): the elementwise rows inside fused kernels, the structural ones as
    tensor rules. (The tensor reference is built whatever the formula's mode.)"""
    functions = {row, "matmul", "sum", "mul", "tanh"}

    @settings(max_examples=8, suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, functions=sorted(functions)))
    def agree(table):
        case = case_from_dict(table)
        assume(any(n.op == row for n in walk(case.output)))
        _assert_equal_references(case)

    agree()


@pytest.mark.parametrize("expr, inputs, extra", [
    ("sum(h * h)", {"x": [4, 3], "W": [3, 2]},
     {"let": {"h": "tanh(x @ W)"}, "retain_grad": ["h"]}),
    ("mean((out - y)**2)", {"x": [2, 3], "W1": [3, 3], "W2": [3, 2], "y": [2, 2]},
     {"let": {"h": "tanh(x @ W1)", "out": "h @ W2"}, "retain_grad": ["h", "out"]}),
    ("xc / sqrt(variance + 0.00001) * w + b", {"x": [3, 5], "w": [5], "b": [5]},
     {"let": {"mu": "mean(x, axis=-1, keepdims=True)", "xc": "x - mu",
              "variance": "mean(xc**2, axis=-1, keepdims=True)"}, "gradient": "random"}),
    ("exp(s - logsumexp(s, axis=-1, keepdims=True)) @ v",
     {"q": [2, 3, 4], "k": [2, 3, 4], "v": [2, 3, 4]},
     {"let": {"s": "q @ transpose(k) / 8"}, "gradient": "random"}),
    ("a @ B + B @ c", {"a": [3], "B": [2, 3, 3], "c": [3]}, {"gradient": "random"}),
    ("prod(x, axis=0, keepdims=True) * max(x, axis=1, keepdims=True)", {"x": [3, 4]},
     {"gradient": "random"}),
    ("where(x @ W > 0, x @ W, min(x, axis=1, keepdims=True))", {"x": [3, 4], "W": [4, 4]},
     {"gradient": "random"}),
    ("dot(a, b) * transpose(M)", {"a": [3], "b": [3], "M": [3, 2]}, {"gradient": "random"}),
])
def test_layers_and_retained_intermediates(expr, inputs, extra):
    case = make_case(expr, inputs, **extra)
    assert mode_of(case) == "tensor"
    _assert_equal_references(case)


# --------------------------------------------------------------------------- adjoint identity

# (row, argument shapes, parameters) of linear maps: each row is linear in each argument
# with the others fixed, so L x is the row's own forward.
LINEAR = [
    ("sum", [(3, 4, 2)], {"axis": (0, 2), "keepdims": False}),
    ("sum", [(3, 4)], {"axis": 1, "keepdims": True}),
    ("sum", [(5,)], {}),
    ("mean", [(3, 4, 2)], {"axis": 1, "keepdims": True}),
    ("mean", [(3, 4)], {}),
    ("matmul", [(3, 4), (4, 2)], {}),
    ("matmul", [(2, 1, 3, 4), (5, 4, 2)], {}),
    ("matmul", [(4,), (2, 4, 3)], {}),
    ("matmul", [(2, 3, 4), (4,)], {}),
    ("matmul", [(4,), (4,)], {}),
    ("dot", [(5,), (5,)], {}),
    ("transpose", [(2, 3, 4)], {}),
    # the structural rows (kind structure): exact linear maps of 0/1 coefficients
    ("transpose", [(2, 3, 4)], {"dim0": 0, "dim1": 2}),
    ("reshape", [(3, 4)], {"shape": (2, -1)}),
    ("flatten", [(2, 3, 4)], {"start": 1}),
    ("squeeze", [(3, 1, 4)], {"axis": 1}),
    ("unsqueeze", [(3, 4)], {"axis": -1}),
    ("permute", [(2, 3, 4)], {"axes": (2, 0, 1)}),
    ("expand", [(3, 1)], {"shape": (2, 3, 4)}),
    ("flip", [(3, 4)], {"axis": 1}),
    ("flip", [(2, 3, 4)], {}),
    ("roll", [(3, 4)], {"shift": (1, -2), "axis": (0, 1)}),
    ("roll", [(3, 4)], {"shift": 5}),
    ("pad", [(3, 4)], {"widths": ((1, 0), (2, 3))}),
    ("tril", [(2, 3, 4)], {"k": 1}),
    ("triu", [(4, 3)], {"k": -1}),
    ("index", [(3, 4, 5)], {"key": (Slice(None, None, -2), None, 1, Slice(1, 4, 2))}),
    ("index", [(3, 4)], {"key": (Ellipsis, Slice(3, 0, -1))}),
    ("index", [(3, 4)], {"key": -1}),
    ("concat", [(3, 4), (3, 2), (3, 1)], {"axis": -1}),
    ("stack", [(3, 4), (3, 4)], {"axis": 1}),
    ("split", [(3, 5)], {"sizes": (2, 3), "axis": 1, "piece": 1}),
    # composite rows that are linear (sort and topk: for the permutation at x)
    ("cumsum", [(3, 4)], {"axis": 1}),
    ("cumsum", [(3, 4, 2)], {"axis": 0}),
    ("sort", [(3, 4)], {"axis": 1, "descending": True}),
    ("sort", [(4, 3)], {"axis": 0}),
    ("topk", [(3, 5)], {"k": 2, "axis": 1}),
    ("einsum", [(2, 3, 4), (2, 4, 5)], {"subscripts": "bij,bjk->bik"}),
    ("einsum", [(3, 4), (5,)], {"subscripts": "ij,k->ik"}),
    ("einsum", [(3, 4)], {"subscripts": "ij->j"}),
    ("einsum", [(2, 3, 4)], {"subscripts": "...ij->...ji"}),
    ("einsum", [(3, 4), (4,)], {"subscripts": "ij,j"}),
    ("einsum", [(2, 3, 4), (2, 4, 5), (5,)], {"subscripts": "bij,bjk,k->bi"}),
    ("einsum", [(3,), (3, 2), (2, 4), (4,)], {"subscripts": "i,ij,jk,k->j"}),
    # a convolution is linear in its input and in its weight (conv_input_grad and
    # conv_weight_grad, each with every parameter); avg_pool2d in its input
    ("conv2d", [(2, 4, 5, 6), (6, 2, 3, 2)],
     {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2}),
    ("conv2d", [(3, 4, 4), (2, 3, 2, 2)], {"padding": 3}),
    ("conv1d", [(2, 3, 9), (4, 3, 3)], {"stride": 2, "padding": 1, "dilation": 2}),
    ("conv1d", [(4, 7), (4, 2, 2)], {"groups": 2, "stride": 3}),
    ("avg_pool2d", [(2, 3, 5, 6)], {"kernel_size": 2}),
    ("avg_pool2d", [(3, 5, 6)], {"kernel_size": (3, 2), "stride": (1, 2)}),
]


def _adjoint_gap(row: str, shapes, given: dict, k: int, rng) -> float:
    """|⟨L x, y⟩ − ⟨x, Lᵀ y⟩| / (|L x|·|y|) for argument ``k`` of ``row`` (the others
    fixed at random values; zero for a structural row, linear in all of them together:
    concat): L is the row's float64 forward, Lᵀ its tensor rule."""
    rule = RULES[row]
    args = [np.zeros(s) if rule.family == STRUCTURE and i != k else rng.standard_normal(s)
            for i, s in enumerate(shapes)]
    params = rule.bind(list(shapes), given)
    out_shape = rule.result_shape(list(shapes), params)
    y = rng.standard_normal(out_shape)
    b = Builder()
    leaves = [leaf(f"a{i}", s) for i, s in enumerate(shapes)]
    g = leaf("y", out_shape)
    ans = b.row(row, *leaves, **dict(params))
    adjoint = b.sum_to(rule.tensor_vjp(k, b, g, ans, leaves, params), shapes[k])
    env = {f"a{i}": a for i, a in enumerate(args)} | {"y": y}
    (lt_y,) = evaluate([adjoint], env)
    lx = np.asarray(rule.call("numpy", args, params), dtype=float)
    left, right = float(np.sum(lx * y)), float(np.sum(args[k] * lt_y))
    return abs(left - right) / (np.linalg.norm(lx) * np.linalg.norm(y) + 1e-300)


@pytest.mark.parametrize("row, shapes, given", LINEAR,
                         ids=[f"{r}-{s}" for r, s, _ in LINEAR])
def test_each_structural_rule_passes_the_adjoint_identity(row, shapes, given):
    rng = np.random.default_rng(7)
    for k in range(len(shapes)):
        for _ in range(3):
            assert _adjoint_gap(row, shapes, given, k, rng) < 1e-12


def test_the_builders_steps_pass_the_adjoint_identity():
    """broadcast and sum_to are each other's adjoints; reshape is its own inverse's."""
    rng = np.random.default_rng(3)
    b = Builder()
    for small, big in [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((), (2, 2))]:
        x, y = rng.standard_normal(small), rng.standard_normal(big)
        (bx,) = evaluate([b.broadcast(leaf("x", small), big)], {"x": x})
        (sy,) = evaluate([b.sum_to(leaf("y", big), small)], {"y": y})
        assert np.isclose(np.sum(bx * y), np.sum(x * sy), rtol=1e-13)
    x, y = rng.standard_normal((2, 6)), rng.standard_normal((3, 4))
    (rx,) = evaluate([b.reshape(leaf("x", (2, 6)), (3, 4))], {"x": x})
    (ry,) = evaluate([b.reshape(leaf("y", (3, 4)), (2, 6))], {"y": y})
    assert np.isclose(np.sum(rx * y), np.sum(x * ry), rtol=1e-13)


# --------------------------------------------------------------------------- mutation

def _wrong_matmul_a(b, g, ans, x, y):
    # the classic slip: Ḡ B instead of Ḡ Bᵀ (shape-compatible for square B)
    return b.row("matmul", g, y)


def _wrong_sum(b, g, ans, x, axis, keepdims):
    return b.scale(RULES["mean"].tensor.vjps[0](b, g, ans, x, axis, keepdims), 2.0)


def _wrong_flip(b, g, ans, x, axis):
    return g                          # the cotangent not flipped back


def _wrong_pad(b, g, ans, x, pad, value):
    # the slice taken from the wrong side: after the padding, not before
    key = tuple(Slice(after, after + n) for n, (_, after) in zip(x.shape, pad))
    return b.row("index", g, key=key)


def _wrong_logsumexp(b, g, ans, x, axis, keepdims):
    # exp(x) without the normalisation by exp(logsumexp)
    from gradcheck.rules.tensor import _kept

    return b.mul(_kept(b, g, x.shape, axis, keepdims), b.row("exp", x))


def _wrong_softmax(b, g, ans, x, axis):
    # y ⊙ ḡ, without the − Σ y ⊙ ḡ term
    return b.mul(ans, g)


def _wrong_cumsum(b, g, ans, x, axis):
    # the cumulative sum of ḡ, not reversed
    return b.row("cumsum", g, axis=axis)


MUTANTS = [
    ("matmul", TensorRule((_wrong_matmul_a, RULES["matmul"].tensor.vjps[1])),
     ("matmul", [(3, 3), (3, 3)], {}, 0), "sum(tanh(x @ W))", {"x": [3, 3], "W": [3, 3]}),
    ("sum", TensorRule((_wrong_sum,)), ("sum", [(3, 4)], {"axis": 1}, 0),
     "sum(x, axis=1) * 2", {"x": [3, 4]}),
    ("logsumexp", TensorRule((_wrong_logsumexp,)), None,
     "sum(logsumexp(x, axis=1))", {"x": [2, 3]}),
    ("flip", TensorRule((_wrong_flip,)), ("flip", [(3, 4)], {"axis": 1}, 0),
     "sum(tanh(flip(x, axis=1)) * y)", {"x": [3, 4], "y": [4]}),
    ("pad", TensorRule((_wrong_pad,)), ("pad", [(3, 4)], {"widths": ((0, 0), (1, 2))}, 0),
     "sum(sin(pad(x, [[0, 0], [1, 2]])) * y)", {"x": [3, 4], "y": [7]}),
    ("softmax", TensorRule((_wrong_softmax,)), None,
     "sum(softmax(x, axis=1) * y)", {"x": [2, 3], "y": [3]}),
    ("cumsum", TensorRule((_wrong_cumsum,)), ("cumsum", [(3, 4)], {"axis": 1}, 0),
     "sum(cumsum(x, axis=1) * y)", {"x": [2, 4], "y": [4]}),
]


@pytest.mark.parametrize("row, rule, identity, expr, inputs", MUTANTS,
                         ids=[m[0] for m in MUTANTS])
def test_a_wrong_structural_rule_is_caught(monkeypatch, row, rule, identity, expr, inputs):
    case = make_case(expr, inputs, points=1)
    _assert_equal_references(case)            # the real rule passes
    assert check(case).status == "passed"
    monkeypatch.setitem(RULES, row, dataclasses.replace(RULES[row], tensor=rule))
    if identity is not None:                  # a linear rule: the adjoint identity fails
        name, shapes, given, k = identity
        assert _adjoint_gap(name, shapes, given, k, np.random.default_rng(1)) > 1e-3
    assert max(_differences(case).values()) > 1e-3   # and differs from the expanded one
    result = check(case)                      # and every witness disagrees with it
    assert result.status == "failed"
    assert all(w.status == "failed" for w in result.witnesses)


# --------------------------------------------------------------------------- scale and text

def test_the_gradient_formulas_are_the_matrix_calculus_ones():
    ref = Reference(make_case("sum(tanh(x @ W))", {"x": [4, 3], "W": [3, 2]}))
    assert ref.mode == "tensor"
    shown = ref.formulas()
    assert shown["W.grad"] == "xᵀ @ t1" and shown["x.grad"] == "t1 @ Wᵀ"
    assert shown[""] == "t1 = ḡ ⊙ (1 - tanh(x @ W)**2)"


def test_no_element_limit_for_the_tensor_reference():
    n = 3000    # x [1, n], W [n, 1]: more elements than the expanded reference takes
    case = make_case("sum(tanh(x @ W))", {"x": [1, n], "W": [n, 1]}, points=1,
                     extreme_points=0, witnesses=["symbolic", "engine", "torch"])
    result = check(case)
    assert result.mode == "tensor" and result.status == "passed", result.message
    with pytest.raises(UnsupportedOpError, match="mixes elements"):
        ExpandedReference(case)


def test_memory_that_would_not_fit_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(tensor_module, "_available_memory", lambda: 1000)
    with pytest.raises(UnsupportedOpError, match="GiB of memory is free"):
        TensorReference(make_case("sum(x @ W)", {"x": [30, 30], "W": [30, 30]}))


def test_a_formula_too_large_to_print_is_named_not_printed():
    # h_k = sin(h_{k-1}) h_{k-1} + h_{k-1}: a DAG of 120 operations whose tree has 10³⁷
    lets = {"h0": "x @ W"} | {f"h{k}": f"sin(h{k - 1}) * h{k - 1} + h{k - 1}"
                              for k in range(1, 40)}
    ref = TensorReference(make_case("sum(h39)", {"x": [2, 3], "W": [3, 2]}, let=lets))
    shown = ref.formulas()
    assert "operations, not printed" in shown[""] and len(shown[""]) < 200
    assert shown["W.grad"] == "xᵀ @ t1"


def test_several_cotangents_at_one_point_equal_each_evaluated_alone(monkeypatch):
    """Where a point comes several times in a row (an op's Jacobian: one one-hot v per
    output element), what does not depend on v is computed once for them all: the
    values and gradients are, bit for bit, those of each v evaluated on its own, on
    random formulas over every row (retained lets included), and the same where the
    values to share are past SHARED_ELEMENTS (then not shared)."""

    def alone(ref, point, v):
        return next(iter(ref.evaluations([point], [v])))

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, shapes=[[4, 3], [3], [4, 1]]))
    def same(table):
        case = case_from_dict(dict(table, gradient="random"))
        ref = TensorReference(case)
        point = sample(case, "float64", 0).values
        rng = np.random.default_rng(table["seed"])
        vs = [rng.standard_normal(case.output.shape) for _ in range(3)]
        other = sample(case, "float64", 1).values
        together = list(ref.evaluations([point, point, point, other], vs + [vs[0]]))
        for got, (p, v) in zip(together, [(point, vs[0]), (point, vs[1]),
                                          (point, vs[2]), (other, vs[0])]):
            want = alone(TensorReference(case), p, v)
            np.testing.assert_array_equal(got.value, want.value)
            assert set(got.grads) == set(want.grads)
            for n, g in want.grads.items():
                np.testing.assert_array_equal(got.grads[n], g, err_msg=n)

    same()
    monkeypatch.setattr(tensor_module, "SHARED_ELEMENTS", 0)
    same()


def test_a_points_cotangents_compute_its_forward_once(monkeypatch):
    """The one-hot rows of a Jacobian at one point: the forward's kernel runs once for
    them all, not once per row."""
    from gradcheck.reference import regions

    case = make_case("tanh(x @ W)", {"x": [2, 3], "W": [3, 2]})
    ref = TensorReference(case)
    point = sample(case, "float64", 0).values
    rows = [np.eye(4)[k].reshape(2, 2) for k in range(4)]
    calls = []
    real = regions.Kernel.run
    monkeypatch.setattr(regions.Kernel, "run",
                        lambda self, args: calls.append(self) or real(self, args))
    list(ref.evaluations([point] * 4, rows))
    shared = len(calls)
    calls.clear()
    for v in rows:
        list(ref.evaluations([point], [v]))
    assert shared < len(calls)
