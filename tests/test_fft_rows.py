"""The spectral rows (fft, ifft, rfft, irfft) on the view_as_real layout: each VJP is the
adjoint of its forward (⟨F x, y⟩ = ⟨x, F* y⟩ over every norm, odd and even lengths, n
shorter and longer, an axis not last), equals torch's own FFT autograd, and agrees with
PyTorch's realified convention for complex leaves; each row as a formula passes every
witness, spelled as a user spells it (the complex table's fft of view_as_complex(x),
view_as_real of the result); the exact SymPy column is the DFT; the rounding bound holds float32 against
float64; a wrong norm or a missing halving or doubling in a VJP is caught."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import hypothesis

from conftest import check, make_case
from gradcheck import engine
from gradcheck.base.shapes import ShapeError
from gradcheck.bounds.summation import accumulation
from gradcheck.cases import case_from_dict
from gradcheck.reference import ExpandedReference, TensorReference
from gradcheck.rules import RULES
from gradcheck.rules.spectral import columns as sc
from gradcheck.rules.spectral import vjps as sv
from gradcheck.rules.spectral.tensor import ADJOINTS
from gradcheck.sampling.points import sample
from gradcheck.strategies import formulas
from gradcheck.witnesses.drive import grad_fn_chain

NAMES = ("fft", "ifft", "rfft", "irfft")
NORMS = sc.NORMS


def _shape(name: str, cshape: tuple) -> tuple:
    """The operand's shape for a complex (or, rfft, real) shape ``cshape``."""
    return cshape if name == "rfft" else cshape + (2,)


def _configs():
    """(name, operand shape, parameters): odd and even lengths, n default, shorter and
    longer, along the first axis (not last) and the last; every norm."""
    for name, m, n, norm in itertools.product(NAMES, (5, 8), (None, 3, 11), NORMS):
        for cshape, axis in (((m, 3), 0), ((2, m), -1)):
            yield name, _shape(name, cshape), {"n": n, "axis": axis, "norm": norm}


CONFIGS = list(_configs())


def _run(name, shape, given, seed=0):
    rule = RULES[name]
    params = rule.bind([shape], given)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    y = rule.call("numpy", [x], params)
    g = rng.standard_normal(y.shape)
    return rule, params, x, y, g


@pytest.mark.parametrize("name,shape,given", CONFIGS)
def test_each_vjp_is_the_adjoint_of_its_forward(name, shape, given):
    # <F x, y> = <x, F* y>, the real inner product of layouts; and F*'s result has x's
    # shape
    rule, params, x, y, g = _run(name, shape, given)
    assert y.shape == rule.result_shape([shape], params)
    back = rule.vjp(0, g, y, [x], params)
    assert back.shape == x.shape
    np.testing.assert_allclose(np.sum(y * g), np.sum(x * back), rtol=1e-12, atol=1e-12)
    # the tensor column, written apart from the definition, is the same adjoint
    np.testing.assert_allclose(ADJOINTS[name](g, shape, **given), back, atol=1e-12)
    # many cotangents at once along a leading axis (the rounding model's batch)
    many = rule.vjp(0, np.stack([g, 2 * g]), y, [x], params)
    np.testing.assert_allclose(many, np.stack([back, 2 * back]), atol=1e-12)


@pytest.mark.parametrize("name,shape,given", CONFIGS[::5])
def test_each_vjp_equals_torchs_autograd_through_the_torch_column(name, shape, given):
    import torch

    rule, params, x, y, g = _run(name, shape, given, seed=1)
    xt = torch.tensor(x, requires_grad=True)
    yt = rule.call("torch", [xt], params)
    np.testing.assert_allclose(yt.detach().numpy(), y, atol=1e-12)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(rule.vjp(0, g, y, [x], params), xt.grad.numpy(), atol=1e-12)
    # the engine records torch's graph, and its gradient is torch's
    xe = engine.Tensor(x)
    xe.requires_grad = True
    ye = getattr(engine, name)(xe, **given)
    ye.backward(engine.Tensor(g))
    assert grad_fn_chain(ye) == grad_fn_chain(yt)
    np.testing.assert_allclose(xe.grad.data, xt.grad.numpy(), atol=1e-12)


def test_the_layouts_gradient_is_pytorchs_realified_gradient_of_a_complex_leaf():
    # for a complex leaf z and w = fft(z), w.backward(v): view_as_real(z.grad) is the
    # gradient of the layout x (z = view_as_complex(x)) with cotangent view_as_real(v)
    import torch

    rng = np.random.default_rng(2)
    x, v = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    z = torch.view_as_complex(torch.tensor(x)).clone().requires_grad_(True)
    torch.fft.fft(z).backward(torch.view_as_complex(torch.tensor(v)))
    rule = RULES["fft"]
    params = rule.bind([(6, 2)])
    got = rule.vjp(0, v, None, [x], params)
    np.testing.assert_allclose(torch.view_as_real(z.grad).numpy(), got, atol=1e-12)
    # and for a real loss L = Σ |fft(z)|²: z.grad = ∂L/∂Re z + i ∂L/∂Im z
    z.grad = None
    (torch.fft.fft(z).abs() ** 2).sum().backward()
    y = rule.call("numpy", [x], params)
    np.testing.assert_allclose(torch.view_as_real(z.grad).numpy(),
                               rule.vjp(0, 2 * y, y, [x], params), atol=1e-10)


@pytest.mark.parametrize("name,shape,given", [
    ("fft", (3, 2), {"n": 4, "axis": 0, "norm": "forward"}),
    ("ifft", (2, 3, 2), {"n": None, "axis": 1, "norm": "ortho"}),
    ("rfft", (5,), {"n": 4, "axis": 0, "norm": "backward"}),
    ("irfft", (3, 2, 2), {"n": 5, "axis": 0, "norm": "ortho"})])
def test_the_sympy_column_is_the_exact_dft(name, shape, given):
    rule, params, x, y, g = _run(name, shape, given, seed=3)
    exact = rule.call("sympy", [np.asarray(x, dtype=object)], params)
    assert exact.shape == y.shape
    np.testing.assert_allclose(exact.astype(float), y, atol=1e-14)


# Each row through the complex spelling (a call of fft is torch.fft.fft's, of a complex
# value): x, a real array in the layout, viewed as complex; the complex result viewed as
# real again, so that the real weights c give a real loss with a cotangent in every part
FORMULAS = {
    "fft": ("sum(view_as_real(fft(view_as_complex(x), axis=0)) * c)",
            {"x": [8, 2], "c": [8, 2]}),
    "ifft": ('sum(view_as_real(ifft(view_as_complex(x), n=5, axis=0, norm="ortho")) * c)',
             {"x": [8, 2], "c": [5, 2]}),
    "rfft": ('sum(view_as_real(rfft(x[:, 0], n=9, norm="forward")) * c)',
             {"x": [8, 2], "c": [5, 2]}),
    "irfft": ("sum(irfft(view_as_complex(x[:5]), axis=0) * c)", {"x": [8, 2], "c": [8]}),
}


#: the shape of the real row's operand in each formula: the layout of 8 complex values
#: (5 for irfft's), or rfft's real signal
OPERANDS = {"fft": (8, 2), "ifft": (8, 2), "rfft": (8,), "irfft": (5, 2)}


@pytest.mark.parametrize("name", NAMES)
def test_each_formula_applies_its_real_row_to_the_complex_values(name):
    # the complex spelling lowers to the real table's row on the layout of x (not to an
    # FFT of the layout taken as a real signal, a promoted [8, 2, 2])
    from gradcheck.formula.tree import walk

    root = make_case(*FORMULAS[name]).output
    (node,) = [n for n in walk(root) if n.op == name]
    assert [a.shape for a in node.args] == [OPERANDS[name]]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", NAMES)
def test_each_row_as_a_formula_passes_every_witness(name, dtype):
    expr, inputs = FORMULAS[name]
    result = check(make_case(expr, inputs, points=2), dtype)
    assert result.status == "passed", result.message
    assert [w.witness for w in result.witnesses] == ["engine", "torch", "numeric"]
    assert all(w.checked > 0 for w in result.witnesses)


@pytest.mark.parametrize("name", NAMES)
def test_the_tensor_reference_equals_sympys_element_by_element_derivative(name):
    expr, inputs = FORMULAS[name]
    case = make_case(f"({expr}) * sum(x * x)", inputs, gradient="random")
    point = sample(case, "float64", 0).values
    v = np.ones(case.output.shape)
    got = TensorReference(case).evaluate(point, v).quantities()
    want = ExpandedReference(case).evaluate(point, v).quantities()
    for q, w in want.items():
        np.testing.assert_allclose(got[q], w, rtol=1e-12, atol=1e-12)


def test_a_non_contiguous_operand_is_cloned_as_torch_clones_it():
    # transpose(w) is a strided view (view_as_complex moves no value: the lowering
    # applies the fft row to it), and the row's torch.view_as_complex needs
    # x.contiguous() (CloneBackward0): what torch records, and the engine alike
    result = check(make_case("sum(view_as_real(fft(view_as_complex(transpose(w)), axis=0)) * c)",
                             {"w": [2, 8], "c": [8, 2]}, points=1))
    assert result.status == "passed", result.message
    chain = ("FftC2CBackward0", "ViewAsComplexBackward0", "CloneBackward0",
             "TransposeBackward0")
    for witness in ("torch", "engine"):
        got = result.witness(witness).grad_fn
        start = got.index("FftC2CBackward0")
        assert got[start:start + len(chain)] == chain, (witness, got)


@pytest.mark.parametrize("name", NAMES)
def test_the_engines_results_are_strided_as_torchs(name):
    # torch's FFT lays its result out with the transformed axis innermost and the others
    # in the operand's stride order; the ops after it (their layouts, a later
    # contiguous()) depend on that
    import torch

    from gradcheck.engine.views import _strides

    rng = np.random.default_rng(5)
    pair = [] if name == "rfft" else [3]
    x = rng.standard_normal((4, 6, 5) + ((2,) if pair else ()))
    rule = RULES[name]
    for perm, axis, n in itertools.product(itertools.permutations(range(3)), range(3),
                                           (None, 3, 9)):
        order = list(perm) + pair
        xt = torch.tensor(x).permute(*order)
        given = {"n": n, "axis": axis}
        yt = rule.call("torch", [xt], rule.bind([tuple(xt.shape)], given))
        ye = getattr(engine, name)(engine.Tensor(np.transpose(x, order)), **given)
        assert _strides(ye.data) == tuple(yt.stride()), (perm, axis, n)


def test_a_transform_after_a_transform_along_a_leading_axis_records_torchs_graph():
    # rfft along axis 0 gives a strided result; its product with a real c keeps that
    # layout (TensorIterator's) and irfft's view_as_complex needs a clone of it
    # (CloneBackward0), in both graphs
    result = check(make_case("sum(irfft(rfft(r, axis=0) * c, n=16, axis=0) * r)",
                             {"r": [16, 4], "c": [9, 4]}, points=1))
    assert result.status == "passed", result.message
    for witness in ("torch", "engine"):
        got = result.witness(witness).grad_fn
        assert got[2:5] == ("FftC2RBackward0", "ViewAsComplexBackward0", "CloneBackward0")
    # a complex c: the product is a stack of its parts, which torch.stack lays out
    # row-major whatever its operands' strides (NumPy's stack would keep them): no clone
    result = check(make_case("sum(irfft(rfft(r, axis=0) * c, n=16, axis=0) * r)",
                             {"r": [16, 4], "c": {"shape": [9, 4], "dtype": "complex"}},
                             points=1))
    assert result.status == "passed", result.message
    for witness in ("torch", "engine"):
        got = result.witness(witness).grad_fn
        assert got[2:5] == ("FftC2RBackward0", "ViewAsComplexBackward0", "StackBackward0")


@pytest.mark.parametrize("join", ["stack", "concat"])
def test_the_engines_joins_are_row_major_as_torchs(join):
    import torch

    from gradcheck.engine.views import _strides

    x = np.random.default_rng(6).standard_normal((4, 9))
    for axis in (0, 1, -1):
        if join == "concat" and axis == -1:
            continue
        got = getattr(engine, join)([engine.Tensor(x.T)] * 2, axis=axis)
        want = getattr(torch, "cat" if join == "concat" else join)(
            [torch.tensor(x).T] * 2, axis)
        assert _strides(got.data) == tuple(want.stride()), (join, axis)


@hypothesis.settings(max_examples=25, deadline=None, database=None)
@hypothesis.given(formulas(functions=["fft", "ifft", "rfft", "irfft", "sum", "mul", "sin"],
                           depth=3))
def test_drawn_formulas_of_the_transforms_pass_every_witness(table):
    # nested transforms, each over the drawn formulas its templates take (a complex
    # signal scaled by them; rfft of any real one), in float64 and float32
    case = case_from_dict({"name": "random", **table})
    for dtype in ("float64", "float32"):
        result = check(case, dtype)
        assert result.status == "passed", (dtype, table["expr"], result.message)


def test_explain_names_an_ffts_nodes_and_prints_its_adjoint():
    from gradcheck.explanation import explain

    # (view_as_complex of an input is lowered to a reshape of its layout, an alias;
    # view_as_real of the transform is the transform's node itself)
    e = explain("sum(view_as_real(fft(view_as_complex(z), axis=0)) * z)", {"z": [4, 2]})
    assert [n.name for n in e.engine_graph] == [n.name for n in e.torch_graph]
    inner = next(n for n in e.torch_graph if n.name == "FftC2CBackward0")
    assert "ifft" not in inner.computes
    assert "fft(reshape(z, shape=[4, 2]), axis=0)" in inner.computes
    assert e.formulas["z.grad"] == ("(ḡ ⊙ (fft(reshape(z, shape=[4, 2]), axis=0))) "
                                    "+ fft_adjoint(ḡ ⊙ (z), axis=0)")


# ----------------------------------------------------------------- rounding

U32 = 2.0 ** -24


@pytest.mark.parametrize("name", NAMES)
def test_the_rounding_bound_holds_float32_against_float64(name):
    import torch

    rng = np.random.default_rng(4)
    for points, norm in itertools.product((2, 7, 16, 97, 1024), NORMS):
        cshape = (points // 2 + 1, 3) if name == "irfft" else (points, 3)
        shape = _shape(name, cshape)
        rule = RULES[name]
        params = rule.bind([shape], {"n": points if name == "irfft" else None,
                                     "axis": 0, "norm": norm})
        x = (rng.standard_normal(shape) * np.exp(2 * rng.standard_normal(shape))
             ).astype(np.float32)
        exact = rule.call("numpy", [x.astype(float)], params)
        zero = np.zeros(shape)
        units = (U32, U32, accumulation)
        bound = rule.rounding.forward(exact, [x.astype(float)], [zero], units,
                                      *dict(params).values())
        for got in (rule.call("numpy", [x], params),
                    rule.call("torch", [torch.tensor(x)], params).numpy()):
            assert np.all(np.abs(got - exact) <= bound), (name, points, norm)
        g = rng.standard_normal(exact.shape).astype(np.float32)
        c = rule.vjp(0, g.astype(float), exact, [x.astype(float)], params)
        back = rule.rounding.backward(0, g.astype(float), np.zeros(g.shape), c, exact,
                                      np.zeros(exact.shape), [x.astype(float)], [zero],
                                      units, *dict(params).values())
        assert np.all(np.abs(rule.vjp(0, g, exact, [x], params) - c) <= back), (name, points)


# ----------------------------------------------------------------- shapes

@pytest.mark.parametrize("name,shape,given,says", [
    ("fft", (8,), {}, "view_as_real layout"),
    ("ifft", (8, 3), {}, "view_as_real layout"),
    ("fft", (8, 2), {"axis": 1}, "out of range"),
    ("rfft", (8,), {"n": 0}, "n >= 1"),
    ("irfft", (1, 2), {}, "n >= 1"),
])
def test_a_shape_the_row_cannot_take_is_refused(name, shape, given, says):
    rule = RULES[name]
    with pytest.raises(ShapeError, match=says):
        rule.result_shape([shape], rule.bind([shape], given))


def test_the_result_lengths_follow_numpy():
    for name, shape, given in CONFIGS:
        rule, params, x, y, g = _run(name, shape, given)
        assert rule.result_shape([shape], params) == y.shape
    assert RULES["irfft"].result_shape([(5, 2)], (("n", None), ("axis", -1),
                                                  ("norm", "backward"))) == (8,)


# ----------------------------------------------------------------- mutations

def _engine_vjp(monkeypatch, name, vjp):
    rule = RULES[name]
    monkeypatch.setitem(RULES, name, dataclasses.replace(
        rule, engine=dataclasses.replace(rule.engine, vjps=(vjp,))))


def _wrong_norm(vjp):
    # the adjoint taken with the norm itself instead of its dual (ortho, its own dual:
    # with backward's)
    wrong = {"backward": "forward", "forward": "backward", "ortho": "forward"}
    return lambda g, ans, x, n, axis, norm: vjp(g, ans, x, n, axis, wrong[norm])


@pytest.mark.parametrize("name", NAMES)
def test_a_vjp_with_the_wrong_norm_is_caught(monkeypatch, name):
    _engine_vjp(monkeypatch, name, _wrong_norm(sv.VJPS[name]))
    expr, inputs = FORMULAS[name]
    result = check(make_case(expr, inputs, points=1))
    assert result.witness("engine").status == "failed"
    assert result.witness("torch").status == "passed"


@pytest.mark.parametrize("name", ["rfft", "irfft"])
def test_a_vjp_without_the_halving_or_doubling_of_interior_bins_is_caught(monkeypatch,
                                                                           name):
    # rfft's adjoint halves the interior bins (irfft counts them twice), irfft's
    # doubles them: with no interior bins, neither does
    monkeypatch.setattr(sv, "interior", lambda count: slice(0, 0))
    result = check(make_case(*FORMULAS[name], points=1))
    assert result.witness("engine").status == "failed"
    assert result.witness("torch").status == "passed"
