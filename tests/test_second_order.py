"""Second order (``order = 2``) for formulas that mix elements, at tensor level
(:mod:`gradcheck.reference.second`): its Hessian-vector and Jacobian-vector products
equal the element-expanded reference's (SymPy's second derivatives, element by element)
on layers and on random formulas; its magnitudes bound every value; a deliberately
wrong second partial is caught (mutation test); an operation it has no adjoint for falls
back to the expanded reference where the inputs are tiny (the rest of that policy, and
every row's second order, in tests/test_second_order_rows.py). The op-level checks (a differentiable backward passes,
a detached one fails op.double) are in tests/test_surrogates.py's fixtures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from conftest import make_case
from gradcheck.cases import case_from_dict
from gradcheck.reference import ExpandedReference, TensorReference, mode_of
from gradcheck.reference import second as second_module
from gradcheck.reference.second import Hessian
from gradcheck.sampling.points import sample
from gradcheck.strategies import formulas

RELATIVE = 1e-11


def _second_orders(case, seed: int = 0):
    """(tensor-level, expanded) hvp and jvp, and the tensor level's magnitudes, at a
    point of ``case`` for random v and u."""
    rng = np.random.default_rng(seed)
    point = sample(case, "float64", 0).values
    v = rng.standard_normal(case.output.shape)
    u = {s.name: rng.standard_normal(s.shape) for s in case.inputs}
    tensor, expanded = TensorReference(case), ExpandedReference(case)
    got = (tensor.hvp(point, v, u), tensor.jvp(point, u))
    want = (expanded.hvp(point, v, u), expanded.jvp(point, u))
    sizes = (tensor.hvp(point, v, u, absolute=True), tensor.jvp(point, u, absolute=True))
    return tensor, got, want, sizes


def _assert_agree(case, seed: int = 0) -> TensorReference:
    tensor, (h, j), (h2, j2), (hs, js) = _second_orders(case, seed)
    assert set(h) == set(h2) == set(tensor.wrt)
    for got, want, size in [*((h[n], h2[n], hs[n]) for n in h), (j, j2, js)]:
        scale = max(1.0, float(np.max(np.abs(want)))) if np.size(want) else 1.0
        assert np.max(np.abs(got - want), initial=0.0) <= RELATIVE * scale, (case.expr,)
        assert np.all(size >= np.abs(want) * (1 - 1e-9) - 1e-300), (case.expr,)
    return tensor


LAYERS = [
    ("tanh(x @ W + b)", {"x": [3, 2], "W": [2, 3], "b": [3]}),
    ("logsumexp(x @ W, axis=1)", {"x": [2, 3], "W": [3, 3]}),
    ("exp(s - logsumexp(s, axis=-1, keepdims=True)) @ v", {"s": [2, 3], "v": [3, 2]}),
    ("max(x * y, axis=1) ** 2", {"x": [3, 4], "y": [4]}),
    ("dot(sin(a), b * a)", {"a": [5], "b": [5]}),
    ("transpose(x) @ tanh(x)", {"x": [3, 2]}),
    ("mean((tanh(x @ W1) @ W2 - y) ** 2)", {"x": [2, 2], "W1": [2, 2], "W2": [2, 2],
                                            "y": [2, 2]}),
    ("x ** 3 / (1 + sum(y ** 2))", {"x": [3, 2], "y": [2]}),
]


@pytest.mark.parametrize("expr, inputs", LAYERS)
def test_the_tensor_level_second_order_equals_the_expanded_one(expr, inputs):
    case = make_case(expr, inputs, gradient="random")
    assert mode_of(case) == "tensor"
    tensor = _assert_agree(case)
    assert isinstance(tensor._second(), Hessian)


@pytest.mark.parametrize("functions", [
    ["matmul", "tanh", "mul", "sum"],
    ["logsumexp", "exp", "sub", "matmul"],
    ["mean", "transpose", "sin", "div"],
    ["max", "dot", "add", "sigmoid"],
])
def test_random_formulas_agree(functions):
    @settings(max_examples=5, suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, functions=functions))
    def agree(table):
        case = case_from_dict(table)
        assume(mode_of(case) == "tensor")
        assume(sum(int(np.prod(s.shape)) for s in case.inputs) <= 64)
        _assert_agree(case)

    agree()


def test_a_wrong_second_partial_is_caught(monkeypatch):
    """Mutation test: second partials 1% off make the tensor level disagree with the
    expanded reference."""
    real = second_module.SecondKernel.run

    def off(self, args):
        return [1.01 * a for a in real(self, args)]

    monkeypatch.setattr(second_module.SecondKernel, "run", off)
    case = make_case("tanh(x @ W + b)", {"x": [2, 2], "W": [2, 3], "b": [3]},
                     gradient="random")
    with pytest.raises(AssertionError):
        _assert_agree(case)


def test_a_product_is_differentiated_twice_at_tensor_level():
    """prod's product of the others has its adjoint (second.others_adjoint): no fallback
    to the expanded reference, whose SymPy products grow quadratically in the length."""
    case = make_case("prod(x, axis=0) * sum(x, axis=0)", {"x": [3, 2]}, gradient="random")
    tensor = _assert_agree(case)
    assert isinstance(tensor._second(), Hessian)


def test_what_has_no_tensor_adjoint_falls_back_to_the_expanded_reference(monkeypatch):
    def unsupported(self, ref, cotangent):
        raise second_module.UnsupportedOpError("no adjoint here")

    monkeypatch.setattr(second_module.Hessian, "__init__", unsupported)
    case = make_case("prod(x, axis=0) * sum(x, axis=0)", {"x": [3, 2]}, gradient="random")
    tensor = _assert_agree(case)
    assert isinstance(tensor._second(), ExpandedReference)


def test_second_order_needs_no_expansion():
    """Inputs far beyond the expanded reference's 4096 elements: the tensor level still
    gives the exact products (checked against the identity H u = d/dt ∇(x + t u) by a
    central difference of the exact gradients)."""
    case = make_case("sum(tanh(x @ W) ** 2)", {"x": [64, 80], "W": [80, 64]})
    tensor = TensorReference(case)
    rng = np.random.default_rng(1)
    point = {"x": rng.uniform(-0.1, 0.1, (64, 80)), "W": rng.uniform(-0.1, 0.1, (80, 64))}
    u = {n: rng.standard_normal(a.shape) for n, a in point.items()}
    h = tensor.hvp(point, np.ones(()), u)
    t = 1e-5
    plus = tensor.evaluate({n: a + t * u[n] for n, a in point.items()}, np.ones(())).grads
    minus = tensor.evaluate({n: a - t * u[n] for n, a in point.items()}, np.ones(())).grads
    for n in point:
        fd = (plus[n] - minus[n]) / (2 * t)
        assert np.max(np.abs(h[n] - fd)) <= 1e-6 * max(1.0, float(np.max(np.abs(h[n]))))
    assert isinstance(tensor._second(), Hessian)
