"""The complex table (gradcheck/rules/complex): each row's lowering to real rows against
PyTorch's own complex autograd, every witness on formulas of each row, mutants of the
lowering caught, a sweep of random complex formulas with no false alarm, and the
operations with no complex row refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from gradcheck import check as check_formula
from gradcheck.base.errors import CaseFileError
from gradcheck.cases.load import read_file
from gradcheck.reference import Reference
from gradcheck.rules import RULES
from gradcheck.rules.complex import COMPLEX
from conftest import check, make_case

C = {"shape": [3], "dtype": "complex"}
INPUTS = {"z": C, "w": C, "x": [3], "A": {"shape": [2, 3], "dtype": "complex"},
          "B": {"shape": [3, 3], "dtype": "complex"}, "V": [3, 2],
          "C": {"shape": [2, 1, 3], "dtype": "complex"},
          "m": {"shape": [3], "dtype": "bool"},
          "idx": {"shape": [2], "dtype": "int64", "domain": [0, 3]}}
FFT = "fft" in RULES   # (the real rows the Fourier transforms apply)

# row -> (the row applied to inputs, as a formula; its torch column's operands, names
# or numbers; its parameters): the formula IS the torch column's call, so PyTorch's
# complex autograd of the one and the reference of the other's lowering must agree.
ROW_CASES = {
    "add": ("z + x", ["z", "x"], {}),
    "sub": ("x - w", ["x", "w"], {}),
    "mul": ("z * w", ["z", "w"], {}),
    "div": ("z / w", ["z", "w"], {}),
    "neg": ("-z", ["z"], {}),
    "pow": ("z ** 3", ["z", 3], {}),
    # (torch's where backward refuses a real branch beside a complex one: w, not x)
    "where": ("where(m, z, w)", ["m", "z", "w"], {}),
    "real": ("real(z)", ["z"], {}),
    "imag": ("imag(z)", ["z"], {}),
    "conj": ("conj(z)", ["z"], {}),
    "abs": ("abs(z)", ["z"], {}),
    "angle": ("angle(z)", ["z"], {}),
    "exp": ("exp(z)", ["z"], {}),
    "log": ("log(z)", ["z"], {}),
    "sqrt": ("sqrt(z)", ["z"], {}),
    "sum": ("sum(A, axis=1)", ["A"], {"axis": 1}),
    "mean": ("mean(A, axis=-2, keepdims=True)", ["A"], {"axis": -2, "keepdims": True}),
    "matmul": ("A @ z", ["A", "z"], {}),
    "einsum": ('einsum("ij,j,j->i", A, z, x)', ["A", "z", "x"], {"subscripts": "ij,j,j->i"}),
    "view_as_real": ("view_as_real(z)", ["z"], {}),
    "view_as_complex": ("view_as_complex(V)", ["V"], {}),
    "index": ("A[1, 0:2]", ["A"], {"key": (1, slice(0, 2))}),
    "take": ("A[:, idx]", ["A", "idx"], {"axis": 1}),
    "transpose": ("transpose(A)", ["A"], {}),
    "permute": ("permute(A, [1, 0])", ["A"], {"axes": [1, 0]}),
    "reshape": ("reshape(A, [3, 2])", ["A"], {"shape": [3, 2]}),
    "unsqueeze": ("unsqueeze(A, -1)", ["A"], {"axis": -1}),
    "squeeze": ("squeeze(C, 1)", ["C"], {"axis": 1}),
    "flip": ("flip(A, axis=-1)", ["A"], {"axis": -1}),
    "stack": ("stack([z, x], axis=-1)", ["z", "x"], {"axis": -1}),
    "concat": ("concat([A, B], axis=0)", ["A", "B"], {"axis": 0}),
    "fft": ("fft(A, axis=0)", ["A"], {"axis": 0}),
    "ifft": ('ifft(z, n=4, norm="ortho")', ["z"], {"n": 4, "norm": "ortho"}),
    "rfft": ("rfft(x)", ["x"], {}),
    "irfft": ("irfft(z, n=4)", ["z"], {"n": 4}),
}
NEEDS_FFT = {"fft", "ifft", "rfft", "irfft"}


def _point(case, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for s in case.inputs:
        if s.dtype == "bool":
            out[s.name] = rng.integers(0, 2, s.shape).astype(bool)
        else:
            out[s.name] = rng.integers(0, 3, s.shape) if s.dtype else rng.normal(size=s.shape)
    return out


def _tensor(spec, value):
    if spec.complex:
        return torch.tensor(value[..., 0] + 1j * value[..., 1], requires_grad=True)
    if spec.dtype:
        return torch.tensor(value)
    return torch.tensor(value, requires_grad=True)


def torch_against_reference(name: str, seed: int = 0) -> float:
    """The largest difference between PyTorch's complex autograd of the row's torch
    column (``backward(v)``, v complex where the output is) and the reference gradient
    of the row's lowered formula with cotangent ``view_as_real(v)``: the realified
    convention, z.grad = ∂L/∂(re z) + i ∂L/∂(im z)."""
    expr, operands, params = ROW_CASES[name]
    case = make_case(expr, INPUTS)
    point, specs = _point(case, seed), {s.name: s for s in case.inputs}
    tensors = {n: _tensor(specs[n], point[n]) for n in point}
    out = COMPLEX[name].torch(*(tensors[a] if isinstance(a, str) else a
                                for a in operands), **params)
    layout = torch.view_as_real(out.resolve_conj()) if out.is_complex() else out
    v = np.random.default_rng(seed + 1).normal(size=tuple(layout.shape))
    out.backward(torch.view_as_complex(torch.tensor(v)) if out.is_complex()
                 else torch.tensor(v))
    got = Reference(case).evaluate(point, v)
    worst = float(np.max(np.abs(got.value - layout.detach().numpy())))
    for n in operands:
        if isinstance(n, str) and tensors[n].requires_grad:
            grad = tensors[n].grad.resolve_conj()
            grad = torch.view_as_real(grad) if grad.is_complex() else grad
            worst = max(worst, float(np.max(np.abs(got.grads[n] - grad.numpy()))))
    return worst


def _needs(name: str) -> None:
    if name in NEEDS_FFT and not FFT:
        pytest.skip("the real table has no fft rows yet")


def test_a_complex_literal_is_a_constant_of_the_formula():
    case = make_case("exp(1j * x) * z + (2 - 3j) * z - 1.5j", INPUTS)
    point = _point(case)
    x, z = _tensor(case.inputs[2], point["x"]), _tensor(case.inputs[0], point["z"])
    out = torch.exp(1j * x) * z + (2 - 3j) * z - 1.5j
    v = np.random.default_rng(1).normal(size=(3, 2))
    out.backward(torch.view_as_complex(torch.tensor(v)))
    got = Reference(case).evaluate(point, v)
    assert np.allclose(got.value, torch.view_as_real(out.detach()).numpy(), atol=1e-12)
    assert np.allclose(got.grads["x"], x.grad.numpy(), atol=1e-12)
    assert np.allclose(got.grads["z"], torch.view_as_real(z.grad).numpy(), atol=1e-12)


def test_every_complex_row_has_a_test_case():
    assert set(ROW_CASES) == set(COMPLEX)


@pytest.mark.parametrize("name", list(ROW_CASES))
def test_row_lowering_matches_torchs_complex_autograd(name):
    _needs(name)
    assert torch_against_reference(name) < 1e-9


# formulas per row, with promotions, broadcasting and parameters: every witness passes
WITNESS_CASES = {
    "add": "z + w + x + 1", "sub": "z - w - x - 2", "mul": "z * w * x * 3 * A",
    "div": "z / w + x / w + z / x + 1 / z", "neg": "-z * w",
    "pow": "z ** 3 + z ** -2 + z ** 0.5 + w ** 0 + z ** (1 / 3) + w ** -1.5", "real": "real(z) * x + real(x)",
    "imag": "imag(z * w)",
    "where": "where(abs(z) > 1, z * w, x) + where(m, 1j, z) + where((x < 0) & ~m, 2, w)", "conj": "conj(z) * w + conj(x)", "abs": "abs(z * w)",
    "angle": "angle(z)", "exp": "exp(z) * w + exp(1j * x) * (2 - 0.5j)", "log": "log(z * w)", "sqrt": "sqrt(z) + w",
    "sum": "sum(A * z) + sum(A, axis=0, keepdims=True)", "mean": "mean(A * z, axis=-1)",
    "matmul": "A @ (z + x @ B) + A @ x + (B @ B[:, 0])[0:2]",
    "einsum": 'einsum("ij,j->i", A, z) + einsum("ij,jk,k->i", A, B, w)',
    "view_as_real": "view_as_real(z * w)", "view_as_complex": "view_as_complex(V) * z",
    "index": "A[1, 0:2] * z[::2] + A[..., 1]", "take": "A[:, idx] * z[idx]",
    "transpose": "transpose(A) @ z[0:2]", "permute": "permute(A, [1, 0])[0] * A[0, 0]",
    "reshape": "reshape(A * z, [-1])", "unsqueeze": "unsqueeze(z, 0) * A + unsqueeze(A, -1)[..., 0]",
    "squeeze": "squeeze(C) + squeeze(C, axis=-2)", "flip": "flip(A) * flip(z, 0)", "stack": "stack([z, w, x], axis=-1)",
    "concat": "concat([A, B], axis=0) @ z", "fft": "fft(z * w)", "ifft": "ifft(A, axis=0)",
    "rfft": "rfft(x, n=6) * w[0]", "irfft": 'irfft(z * w, norm="forward")',
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(WITNESS_CASES))
def test_every_witness_passes_on_each_row(name, dtype):
    _needs(name)
    result = check(make_case(WITNESS_CASES[name], INPUTS, points=2), dtype)
    assert result.status == "passed", result.message
    assert {w.witness for w in result.witnesses} >= {"engine", "torch", "numeric"}
    assert all(w.status == "passed" for w in result.witnesses), result.witnesses


def _drop_conjugate(b, args, given):   # z * conj(w): (ac + bd) + i(bc - ad)
    z, w = args
    a, bi, c, d = b.re(z), b.im(z), b.re(w), b.im(w)
    return b.pack(b.row("add", [b.row("mul", [a, c]), b.row("mul", [bi, d])]),
                  b.row("sub", [b.row("mul", [bi, c]), b.row("mul", [a, d])]))


def _flip_sine(b, args, given):   # exp z with the imaginary part's sign flipped
    (z,) = args
    scale = b.row("exp", [b.re(z)])
    return b.pack(b.row("mul", [scale, b.row("cos", [b.im(z)])]),
                  b.row("neg", [b.row("mul", [scale, b.row("sin", [b.im(z)])])]))


def _real_modulus(b, args, given):   # |z| without hypot's imaginary term
    return b.row("abs", [b.re(args[0])])


@pytest.mark.parametrize("name, mutant", [
    ("mul", _drop_conjugate), ("exp", _flip_sine), ("abs", _real_modulus)])
def test_a_wrong_lowering_is_caught_by_torchs_complex_autograd(monkeypatch, name, mutant):
    assert torch_against_reference(name) < 1e-9
    monkeypatch.setitem(COMPLEX, name, dataclasses.replace(COMPLEX[name], expand=mutant))
    assert torch_against_reference(name) > 1e-3


def test_the_witnesses_check_the_lowered_program_so_only_the_row_test_sees_its_errors(
        monkeypatch):
    """Every witness checks the real program the lowering wrote: a wrong lowering is a
    consistent, wrong program they all agree on. The torch column against it, above, is
    what holds the lowering to PyTorch's complex semantics."""
    monkeypatch.setitem(COMPLEX, "mul", dataclasses.replace(COMPLEX["mul"],
                                                            expand=_drop_conjugate))
    assert check(make_case("z * w", INPUTS, points=1)).status == "passed"
    assert torch_against_reference("mul") > 1e-3


# ---------------------------------------------------------------- random formulas
_LEAVES = st.sampled_from(["z", "w", "z * x", "(w + 0.5)"])


def _extend(inner):
    return st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda e: f"conj({e})"), inner.map(lambda e: f"exp(0.5 * {e})"),
        inner.map(lambda e: f"({e}) ** 2"), inner.map(lambda e: f"(B @ {e})"),
        inner.map(lambda e: f"(sum({e}) * w)"))


FORMULAS = st.tuples(st.recursive(_LEAVES, _extend, max_leaves=4),
                     st.sampled_from(["{}", "abs({})", "real({})", "imag({})",
                                      "view_as_real({})"])).map(lambda t: t[1].format(t[0]))
SWEEP: dict[str, list] = {"float64": [], "float32": []}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_random_complex_formulas_pass_every_witness(dtype):
    """No false alarm: every witness agrees with the reference; a formula whose exact
    gradient does not exist at its point (abs(B @ (z - z)) at 0) is refused as such."""
    @settings(max_examples=40)
    @given(FORMULAS)
    def sweep(expr):
        result = check(make_case(expr, INPUTS, points=1), dtype)
        SWEEP[dtype].append((expr, result.status))
        assert result.status == "passed" or (
            result.status == "error" and "the reference is not finite" in result.message
        ), (expr, result.message)

    sweep()
    statuses = [status for _, status in SWEEP[dtype]]
    assert statuses.count("passed") >= 30, statuses


# ---------------------------------------------------------------- refused, skipped
@pytest.mark.parametrize("expr, message", [
    ("tanh(z)", r"tanh does not take a complex operand; the operations on complex values "
                r"are \+ - \* / \*\* @, subscripts and abs, angle"),
    ("where(z < 0, z, w)", r"< does not take a complex operand"),
    ("max(z)", r"max does not take a complex operand"),
    ("z ** w", r"pow: takes a complex base and a real constant exponent"),
    ("2 ** z", r"pow: takes a complex base and a real constant exponent"),
    ("imag(x)", r"imag: takes a complex operand"),
    ("rfft(z)", r"rfft: "),
    ('einsum("i,i,i,i->", z, z, z, z)', r"einsum: takes at most 3 operands"),
    ("z @ A", r"matmul: "),
])
def test_an_operation_without_a_complex_row_is_refused(expr, message):
    with pytest.raises(CaseFileError, match=message):
        make_case(expr, INPUTS)


def test_the_refusal_names_the_case_files_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[case]]\nname = "t"\ninputs.z = { shape = [3], dtype = "complex" }\n'
                    'expr = """\nsum(\n  tanh(z))"""\n')
    cases, errors = read_file(path)
    assert not cases and len(errors) == 1
    assert errors[0].line == 6 and "tanh does not take a complex operand" in str(errors[0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_complex_case_is_skipped_in_half_precision_saying_why(dtype):
    result = check(make_case("z * w", INPUTS), dtype)
    assert result.status == "skipped" and "complex32" in result.message
    assert check(make_case("x * 2", {"x": [3]}), dtype).status != "skipped"


def test_check_takes_complex_arrays_and_tensors_as_pinned_complex_inputs():
    from gradcheck.testing import _input_table

    z = np.array([1 + 2j, -0.5 + 0.25j, 3 - 1j])
    w = torch.tensor([0.5 - 1j, 2 + 0j, -1 + 1j], dtype=torch.complex128)
    table = _input_table({"z": z, "w": w.conj()})   # (a conjugate view, resolved)
    assert table["z"] == {"shape": [3], "dtype": "complex",
                          "value": [[1, 2], [-0.5, 0.25], [3, -1]]}
    assert table["w"]["value"] == [[0.5, 1], [2, 0], [-1, -1]]
    result = check_formula("sum(abs(z * conj(w)) ** 2)", {"z": z, "w": w})
    assert result.status == "passed"


def test_every_complex_row_is_documented():
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "formulas.md").read_text()
    section = page.split("## Complex numbers")[1].split("\n## ")[0]
    for name, row in COMPLEX.items():
        if row.symbol is None and name not in ("index", "take"):
            assert f"{name}" in section, name
