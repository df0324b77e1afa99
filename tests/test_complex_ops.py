"""Custom ops on complex tensors: the op's process hands an op complex leaves for complex
inputs (and complex cotangents for complex outputs), and what it hands back complex
comes to the judge as torch.view_as_real holds it, so every op check runs on the
layout against the case's formula. The bundled right ops (cases/ops/complex.py) pass
every check in float64 and float32, their twins fail op.backward and op.jacobian,
op.backward at the boundary is torch's own complex autograd, and an output of the wrong
kind (real for a complex reference, complex for a real one) is an error naming the
case.

The references are the complex spelling (``z * w``, ``abs(A @ z)**2``,
``irfft(rfft(x) * w, n=16)``: gradcheck.rules.complex and the spectral rows) where the
parser reads it, else the same formulas written on the layout with real rows (the
DFT as constant matrices), the root marked complex by hand: the boundary is tested
either way."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gradcheck.cases import case_from_dict
from gradcheck.checking.case import run_case
from conftest import skipped_saying_why

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "cases" / "ops" / "complex.toml"       # (its ops: complex.py beside it)
FIXTURES = ROOT / "tests" / "fixtures" / "complex_ops.toml"   # (complex_ops.py)
DTYPES = ("float64", "float32")
#: the checks every right op below must run and pass (the others may be skipped,
#: saying why: op.jvp of a Function without jvp)
RAN = ("op.forward", "op.backward", "op.jacobian", "op.zero", "op.determinism",
       "op.shapes", "op.inplace", "op.layout", "op.contract", "op.vmap", "op.compile")


@dataclasses.dataclass(frozen=True)
class Reference:
    text: str
    inputs: dict
    complex_output: bool
    keys: tuple = ()    # (other case keys: a call passing the op its inputs only)


def _dft(n: int = 16) -> dict:
    """rfft and irfft of length n as matrices, reference-only constants: rfft(x) =
    (x @ C, x @ S); irfft(Y) = re Y @ P + im Y @ Q (P, Q: the bins weighted by how often
    irfft counts them, over n). The entries that are exactly zero (sin(k pi), cos(pi/2
    + k pi)) are held exactly."""
    bins = n // 2 + 1
    theta = 2 * np.pi * np.outer(np.arange(n), np.arange(bins)) / n
    C, S = np.cos(theta), -np.sin(theta)
    C[abs(C) < 1e-12], S[abs(S) < 1e-12] = 0.0, 0.0
    m = np.where((np.arange(bins) == 0) | (np.arange(bins) == n // 2), 1.0, 2.0)
    P, Q = m[:, None] * C.T / n, m[:, None] * S.T / n
    return {k: {"shape": list(a.shape), "value": a.tolist(), "requires_grad": False}
            for k, a in dict(C=C, S=S, P=P, Q=Q).items()}


MUL_INPUTS = {"z": {"shape": [5], "dtype": "complex"},
              "w": {"shape": [5], "dtype": "complex"}}
ABS2_INPUTS = {"A": {"shape": [3, 4], "dtype": "complex"},
               "z": {"shape": [4], "dtype": "complex"}}
SPECTRAL_INPUTS = {"x": {"shape": [3, 16]}, "w": {"shape": [9], "dtype": "complex"}}
COMPLEX_SPELLING = {
    "mul": Reference("z * w", MUL_INPUTS, True),
    "abs2": Reference("abs(A @ z)**2", ABS2_INPUTS, False),
    "spectral": Reference("irfft(rfft(x) * w, n=16)", SPECTRAL_INPUTS, False)}
LAYOUT_SPELLING = {
    # (zr wr - zi wi, zr wi + zi wr), real rows on the parts
    "mul": Reference("view_as_complex(stack([real(z)*real(w) - imag(z)*imag(w), "
                     "real(z)*imag(w) + imag(z)*real(w)], -1))", MUL_INPUTS, True),
    # re(A z)**2 + im(A z)**2
    "abs2": Reference("(real(A) @ real(z) - imag(A) @ imag(z))**2 "
                      "+ (real(A) @ imag(z) + imag(A) @ real(z))**2",
                      ABS2_INPUTS, False),
    "spectral": Reference("(x @ C * real(w) - x @ S * imag(w)) @ P "
                          "+ (x @ C * imag(w) + x @ S * real(w)) @ Q",
                          {**SPECTRAL_INPUTS, **_dft()}, False,
                          (("call", "op(x, w)"),))}


def reference(kind: str, spelling: dict = COMPLEX_SPELLING) -> Reference:
    return spelling[kind]


def op_case(op: str, kind: str, file: Path = BUNDLED, spelling: dict = COMPLEX_SPELLING,
            **keys):
    """A case of ``op`` against the formula ``kind`` (:func:`reference`)."""
    ref = reference(kind, spelling)
    case = case_from_dict({"name": op.split(":")[1], "op": op, "reference": ref.text,
                           "inputs": ref.inputs, "points": 2, **dict(ref.keys), **keys},
                          file=str(file))
    assert case.outputs[0].complex == ref.complex_output
    return case


def passed_every_check(result, plain: bool = False) -> None:
    """``plain``: the op is a plain function (no backward of its own for op.shapes)."""
    assert result.status == "passed", result.message
    ran = {w.witness: w for w in result.witnesses}
    for name in RAN:
        if plain and name == "op.shapes":
            continue
        assert ran[name].status == "passed" and ran[name].checked > 0, (name, ran[name])
    assert all(w.status == "passed" or skipped_saying_why(w) for w in result.witnesses)


# --------------------------------------------------------------------------- right ops

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op, kind", [("ComplexMul", "mul"), ("AbsSquaredLinear", "abs2")])
def test_bundled_right_ops_pass_every_check(op, kind, dtype):
    passed_every_check(run_case(op_case(f"complex:{op}", kind), dtype, timeout=None))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_plain_function_on_complex_tensors_passes_forward_mode_and_double_backward(
        dtype):
    """PyTorch's own complex autograd behind a plain function: op.jvp (forward-mode AD
    on complex duals) and op.double (double backward with complex cotangents) run on
    the layout too and agree with the exact ones; the op asserts it is handed complex
    leaves of the run's precision."""
    case = op_case("complex_ops:mul", "mul", FIXTURES, order=2)
    result = run_case(case, dtype, timeout=None)
    passed_every_check(result, plain=True)
    for name in ("op.jvp", "op.double"):
        w = result.witness(name)
        assert w.status == "passed" and w.checked > 0, w


def test_a_real_output_of_complex_inputs_passes_with_its_derived_backward():
    case = op_case("complex_ops:abs_squared", "abs2", FIXTURES, order=2)
    result = run_case(case, "float64", timeout=None)
    passed_every_check(result, plain=True)
    assert result.witness("op.double").status == "passed"


@pytest.mark.parametrize("op, kind", [("ComplexMul", "mul"), ("AbsSquaredLinear", "abs2"),
                                      ("SpectralConv1d", "spectral")])
def test_the_layout_spelling_of_each_reference_passes_the_same_op(op, kind):
    """The same ops against their references written with real rows on the layout (the
    FFT as DFT matrices): the complex table's lowering and the FFT rows agree with an
    independent spelling of the same maps."""
    case = op_case(f"complex:{op}", kind, spelling=LAYOUT_SPELLING)
    assert run_case(case, "float64", timeout=None).status == "passed"


# --------------------------------------------------------------------------- wrong twins

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op, kind, diagnosis", [
    # (z * w's real Jacobian transposed is multiplication by the conjugate)
    ("ComplexMulNoConj", "mul", "conjugate missing?"),
    ("AbsSquaredLinearRealGrad", "abs2", "real part only?")])
def test_wrong_twins_fail_the_gradient_checks_with_their_diagnosis(op, kind, diagnosis,
                                                                   dtype):
    result = run_case(op_case(f"complex:{op}", kind), dtype, timeout=None)
    assert result.status == "failed"
    for name in ("op.backward", "op.jacobian"):
        assert result.witness(name).status == "failed", name
        assert diagnosis in result.witness(name).diagnosis, name
    # (its outputs are right: only the gradients are wrong)
    assert result.witness("op.forward").status == "passed"


def test_a_twin_expected_to_fail_passes_when_caught():
    case = op_case("complex:ComplexMulNoConj", "mul", expect="fail")
    assert run_case(case, "float64", timeout=None).status == "passed"


# --------------------------------------------------------------------------- the boundary

def test_op_backward_at_the_boundary_is_torchs_complex_autograd():
    """What op.backward reads of a right op, in the layout, is view_as_real of the
    gradient torch's own autograd gives the same function for the complex cotangent
    view_as_complex(v): PyTorch's convention, unchanged by the boundary."""
    from gradcheck.checking.opcheck.process import OpProcess

    case = op_case("complex_ops:mul", "mul", FIXTURES)
    rng = np.random.default_rng(0)
    point = {n: rng.standard_normal((5, 2)) for n in ("z", "w")}
    v = rng.standard_normal((5, 2))
    with OpProcess(case, "float64") as op:
        (out,), leaves = op.forward(point)
        got = op.vjp([v])
    z, w = (torch.view_as_complex(torch.tensor(point[n])).requires_grad_() for n in "zw")
    y = z * w
    y.backward(torch.view_as_complex(torch.tensor(v)))
    assert out.shape == (5, 2)
    np.testing.assert_array_equal(out, torch.view_as_real(y.detach()).numpy())
    np.testing.assert_array_equal(got["z"], torch.view_as_real(z.grad).numpy())
    np.testing.assert_array_equal(got["w"], torch.view_as_real(w.grad).numpy())
    # (and the hand-written convention: grad_z = v conj(w))
    vc = torch.view_as_complex(torch.tensor(v))
    np.testing.assert_allclose(got["z"], torch.view_as_real(vc * w.detach().conj()))
    assert leaves["z"].dtype == "torch.complex128" and leaves["z"].shape == (5,)


@pytest.mark.parametrize("op, verdict", [("ComplexMul", "passed"),
                                         ("ComplexMulNoConj", "mismatch")])
def test_torchs_own_gradcheck_in_the_ops_process_takes_complex_leaves(op, verdict):
    """The bench's torch verdict (torch.autograd.gradcheck called in the op's process
    on the leaves it makes) checks the op on complex tensors too, and agrees."""
    from gradcheck.checking.opcheck.process import OpProcess

    rng = np.random.default_rng(1)
    point = {n: rng.standard_normal((5, 2)) for n in ("z", "w")}
    with OpProcess(op_case(f"complex:{op}", "mul"), "float64") as process:
        got = process.call("torch_gradcheck", point=point, settings={}, order=1, chars=200)
    assert got["verdict"] == verdict, got


@pytest.mark.parametrize("op, kind, words", [
    ("complex_ops:real_part", "mul",
     "returned a real tensor (float64) for output 0, where the reference"),
    ("complex_ops:complex_power", "abs2",
     "returned a complex tensor (complex128) for output 0, where the reference")],
    ids=["real-for-complex", "complex-for-real"])
def test_an_output_of_the_wrong_kind_is_an_error_naming_the_case(op, kind, words):
    case = op_case(op, kind, FIXTURES)
    complex_output = kind == "mul"
    result = run_case(case, "float64", timeout=None)
    assert result.status == "failed"
    assert f"case {case.name!r}: op {op.split(':')[1]} {words}" in result.message
    assert ("is complex" if complex_output else "is real") in result.message


def test_a_torch_library_op_on_complex_tensors_passes_its_registration():
    """torch.library.opcheck (op.registration) and the other checks on a custom op of
    complex tensors."""
    result = run_case(op_case("complex_ops:library_mul", "mul", FIXTURES), "float64",
                      timeout=None)
    passed_every_check(result, plain=True)
    registration = result.witness("op.registration")
    assert registration.status == "passed" and registration.checked > 0


def test_an_engine_op_on_complex_inputs_is_skipped_saying_why():
    case = op_case("complex_ops:EngineMul", "mul", FIXTURES)
    result = run_case(case, "float64", timeout=None)
    assert result.status == "skipped"
    assert "gradcheck.engine Function, which has no complex tensors" in result.message


# --------------------------------------------------------------------------- the spectral op

def _spectral():
    sys.path.insert(0, str(BUNDLED.parent))
    try:
        import complex as ops   # cases/ops/complex.py
    finally:
        sys.path.remove(str(BUNDLED.parent))
    return ops


@pytest.mark.parametrize("n", [16, 15])
def test_the_spectral_convolutions_backward_is_torchs(n):
    """The hand-written backward of irfft(rfft(x) * w, n=N) against torch.autograd.gradcheck
    on a complex w (N even and odd: the Nyquist bin counted once or absent), and the
    wrong normalisation caught by it."""
    ops = _spectral()
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(3, n, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(n // 2 + 1, dtype=torch.complex128, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(ops.SpectralConv1d.apply, (x, w))
    assert not torch.autograd.gradcheck(ops.SpectralConv1dUnnormalised.apply, (x, w),
                                        raise_exception=False)
    y = torch.fft.irfft(torch.fft.rfft(x) * w, n=n)
    g = torch.randn(3, n, dtype=torch.float64, generator=gen)
    want = torch.autograd.grad(y, (x, w), g)
    got = torch.autograd.grad(ops.SpectralConv1d.apply(x, w), (x, w), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_spectral_convolution_passes_every_check_and_its_twin_fails(dtype):
    """The FFT op through every op check (torch.fft under vmap and compile included);
    the twin's N-fold gradients are caught."""
    passed_every_check(run_case(op_case("complex:SpectralConv1d", "spectral"), dtype,
                                timeout=None))
    wrong = run_case(op_case("complex:SpectralConv1dUnnormalised", "spectral"), dtype,
                     timeout=None)
    assert wrong.status == "failed"
    assert wrong.witness("op.backward").status == "failed"
    assert "16 times the exact gradient" in wrong.message
    # w's axis has 9 bins: its 16 is read as the length of the formula's FFT
    assert ("w.grad is 16 times the exact gradient (16 = the length of an FFT of the "
            "formula): an FFT normalisation") in wrong.witness("op.backward").diagnosis


@pytest.mark.parametrize("op", ["ComplexMul", "AbsSquaredLinear"])
def test_the_bundled_products_backwards_are_torchs(op):
    ops = _spectral()
    gen = torch.Generator().manual_seed(1)
    shapes = [(5,), (5,)] if op == "ComplexMul" else [(3, 4), (4,)]
    args = [torch.randn(s, dtype=torch.complex128, generator=gen, requires_grad=True)
            for s in shapes]
    assert torch.autograd.gradcheck(getattr(ops, op).apply, args)
    twin = {"ComplexMul": "ComplexMulNoConj", "AbsSquaredLinear": "AbsSquaredLinearRealGrad"}
    assert not torch.autograd.gradcheck(getattr(ops, twin[op]).apply, args,
                                        raise_exception=False)
