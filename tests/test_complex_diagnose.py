"""Complex inputs in diagnoses and reports: the readings particular to complex numbers
(conjugate missing, real or imaginary part only, an FFT's normalisation) fire where they
hold and stay silent elsewhere; a complex gradient's elements are named by complex index
and part in every report; the ``{ modulus = [lo, hi] }`` domain draws |z| in it and the
phase all round, and a bad one is an error at its line."""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap

import numpy as np
import pytest
import torch

from conftest import make_case
from gradcheck.base.errors import CaseFileError
from gradcheck.base.result import RunResult, Worst
from gradcheck.cases import read_file
from gradcheck.checking.compare import NotFiniteReference, Tally
from gradcheck.checking.diagnose import Sample, diagnose, diagnose_points, summarize
from gradcheck.report import render
from gradcheck.rules import RULES
from gradcheck.sampling.points import case_points

RNG = np.random.default_rng(7)


def layout(z: np.ndarray) -> np.ndarray:
    """A complex array as the check holds it: torch.view_as_real's (re, im) pairs."""
    return np.stack([z.real, z.imag], axis=-1)


def complex_normal(*shape) -> np.ndarray:
    return RNG.normal(size=shape) + 1j * RNG.normal(size=shape)


# --------------------------------------------------------------------------- torch's convention

def test_torch_gives_the_realified_gradient_the_layout_holds():
    # L = Re(sum(z * w)): dL/d re(z) = re(w), dL/d im(z) = -im(w), and torch's z.grad is
    # dL/d re(z) + i dL/d im(z) = conj(w): the conjugate a wrong backward misses
    z, w = complex_normal(5), complex_normal(5)
    zt = torch.tensor(z, requires_grad=True)
    (zt * torch.tensor(w)).sum().real.backward()
    assert np.allclose(torch.view_as_real(zt.grad).numpy(), layout(np.conj(w)))
    # a complex output w = z * c, backward(v): the realified vᵀJ with view_as_real(v) as
    # cotangent (dL = Re(sum(conj(v) dw))), i.e. conj(c) v
    c, v = complex_normal(5), complex_normal(5)
    zt = torch.tensor(z, requires_grad=True)
    (zt * torch.tensor(c)).backward(torch.tensor(v))
    assert np.allclose(zt.grad.numpy(), np.conj(c) * v)


# --------------------------------------------------------------------------- readings

def one(messages, *words):
    assert len(messages) == 1, messages
    for w in words:
        assert w in messages[0], (w, messages)
    return messages[0]


@pytest.mark.parametrize("shape", [(6,), (3, 4)])
def test_a_missing_conjugate_is_read(shape):
    e = complex_normal(*shape)
    got = diagnose({"z": layout(np.conj(e))}, {"z": layout(e)}, complex={"z"})
    one(got, "z.grad is the conjugate of the exact gradient", "conjugate missing?",
        "dL/d re(z) + i dL/d im(z)")


@pytest.mark.parametrize("part, kept, word", [
    ("real", lambda e: e.real + 0j, "real part only?"),
    ("imaginary", lambda e: 1j * e.imag, "imaginary part only?")])
def test_a_lost_part_is_read(part, kept, word):
    e = complex_normal(4, 3)
    one(diagnose({"z": layout(kept(e))}, {"z": layout(e)}, complex={"z"}), "z.grad", word)


def test_the_readings_are_silent_where_they_do_not_hold():
    e = complex_normal(8)
    exact = {"z": layout(e)}
    # right (to rounding): no message at all
    assert diagnose({"z": layout(e * (1 + 1e-14))}, exact, complex={"z"}) == []
    # an unrelated wrong gradient: none of the complex readings
    for m in diagnose({"z": layout(complex_normal(8))}, exact, complex={"z"}):
        assert "conjugate" not in m and "part only" not in m, m
    # one element conjugated, the rest right: the reading must hold at every element
    wrong = e.copy()
    wrong[3] = np.conj(wrong[3])
    for m in diagnose({"z": layout(wrong)}, exact, complex={"z"}):
        assert "conjugate" not in m, m
    # a real exact gradient is its own conjugate and real part: nothing to tell apart
    real = layout(e.real + 0j)
    assert diagnose({"z": real * [1, -1]}, {"z": real}, complex={"z"}) == []


def test_a_real_input_never_gets_a_complex_reading():
    e = layout(complex_normal(8))   # the same numbers, an input not marked complex
    for o in (e * [1, -1], e * [1, 0], e * [0, 1]):
        for m in diagnose({"x": o}, {"x": e}):
            assert "conjugate" not in m and "part only" not in m, m


def test_a_scale_of_the_fft_length_is_named_on_the_complex_shape():
    e = complex_normal(8)
    exact = {"z": layout(e)}
    one(diagnose({"z": layout(e / 8)}, exact, complex={"z"}),
        "z.grad is 1/8 of the exact gradient (8 = the size of axis 0 of z)",
        "an FFT normalisation, or mean instead of sum?")
    one(diagnose({"z": layout(e * 8)}, exact, complex={"z"}), "8 times",
        "an FFT normalisation, or sum instead of mean?")
    one(diagnose({"z": layout(e / math.sqrt(8))}, exact, complex={"z"}),
        "z.grad is 1/√8 = 0.353553 times the exact gradient (8 = the size of axis 0 of z)",
        'an FFT normalisation (norm="ortho")?')
    # (on the layout, 16 elements and an axis of 2: neither is an FFT length of z)
    for m in diagnose({"z": layout(e / 16)}, exact, complex={"z"}):
        assert "16 =" not in m, m
    # any other real constant is quoted
    one(diagnose({"z": layout(e * 2.5)}, exact, complex={"z"}), "5/2 times")


def test_a_real_input_gets_the_square_root_reading_and_keeps_its_mean_reading():
    e = RNG.normal(size=(3, 8))
    one(diagnose({"x": e * math.sqrt(24)}, {"x": e}), "√24 = 4.89898 times",
        "(24 = the number of elements of x)", "FFT normalisation")
    m = one(diagnose({"x": e / 8}, {"x": e}), "1/8 of", "mean instead of sum?")
    assert "FFT" not in m


def test_an_ops_samples_are_read_and_named_by_part():
    # the op-check path: summarize() over one sample per point, as the op driver keeps
    # them (the op's gradient in the layout, engineer C's complex op returning it)
    exact = [complex_normal(6) for _ in range(3)]
    samples = [Sample(p, 0, {"z": layout(np.conj(e))}, {"z": layout(e)})
               for p, e in enumerate(exact)]
    assert "z.grad is the conjugate" in summarize(samples, complex={"z"})
    # an element wrong at every point is named by complex index and part
    off = []
    for p, e in enumerate(exact):
        o = layout(e)
        o[2, 1] += 1.0
        off.append(Sample(p, 0, {"z": o}, {"z": layout(e)}))
    text = "; ".join(diagnose_points(off, complex={"z"}))
    assert "z.grad[2] (imaginary part)" in text and "z.grad[2,1]" not in text, text


# --------------------------------------------------------------------------- element names

def test_an_element_of_a_complex_quantity_is_named_by_index_and_part():
    w = Worst("z.grad", (2, 1, 1), 1.0, 2.0, 1e-9, 0).in_parts()
    assert (w.index, w.part, w.label) == ((2, 1), "imaginary", "z.grad[2,1] (imaginary part)")
    assert Worst.from_dict(json.loads(json.dumps(w.to_dict()))) == w
    real = Worst("x.grad", (3,), 1.0, 2.0, 1e-9, 0)
    assert real.label == "x.grad[3]" and "part" not in real.to_dict()


def test_a_tally_names_the_elements_of_its_complex_quantities_and_its_trials_too():
    tally = Tally("w", "float64", complex={"z.grad"})
    e = np.zeros((3, 2))
    o = e.copy()
    o[1, 1] = 1.0
    trial = tally.fresh()   # (a trial judged apart, then merged in)
    trial.add_quantities({"z.grad": o}, {"z.grad": e}, 0, {"z.grad": np.full((3, 2), 1e-9)})
    tally.merge(trial)
    result = tally.result()
    assert (result.worst.index, result.worst.part) == ((1,), "imaginary")
    assert "worst z.grad[1] (imaginary part) at point 0" in result.message
    # a reference that is not finite is named so as well
    e[2, 0] = np.nan
    with pytest.raises(NotFiniteReference, match=r"the exact z.grad\[2\] \(real part\) is nan"):
        tally.add_quantities({"z.grad": o}, {"z.grad": e}, 1, {"z.grad": np.zeros((3, 2))})


class _SubMissingMinus(torch.autograd.Function):
    """a - b whose backward returns +g for b: a backward that drops a sign."""

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, g):
        return g, g


@pytest.fixture
def conjugating_torch(monkeypatch):
    # Re(z * w) on the layout: re(z) re(w) - im(z) im(w); the torch witness's sub loses
    # its minus in the backward, so its z.grad is conj(w), the conjugate of the exact one
    monkeypatch.setitem(RULES, "sub", dataclasses.replace(
        RULES["sub"], torch=lambda a, b: _SubMissingMinus.apply(a, b)))
    z = {"shape": [4], "dtype": "complex"}
    case = make_case("sum(real(z) * real(w) - imag(z) * imag(w))",
                     {"z": z, "w": z}, name="conj", points=2, extreme_points=0,
                     witnesses=["torch"])
    from gradcheck.checking.case import run_case

    return run_case(case, "float64", timeout=None)


def test_a_failing_complex_case_names_its_elements_in_every_report(conjugating_torch):
    result = conjugating_torch
    torch_result = result.witness("torch")
    assert torch_result.status == "failed"
    assert "z.grad is the conjugate of the exact gradient" in torch_result.diagnosis
    assert "w.grad is the conjugate" in torch_result.diagnosis
    # the values are right; only the imaginary parts of the gradients are wrong
    assert torch_result.worst_elements and all(
        w.part == "imaginary" and len(w.index) == 1 for w in torch_result.worst_elements)
    assert "(imaginary part)" in torch_result.message
    run = RunResult((result,), seconds=0.1)
    text = render(run, "text", verbose=True)
    assert "z.grad[" in text and "] (imaginary part)" in text, text
    assert "(real part)" not in text
    worst = json.loads(render(run, "json"))["cases"][0]["witnesses"]["torch"]
    assert worst["worst"]["part"] == "imaginary" and len(worst["worst"]["index"]) == 1
    assert worst["worst_index"].endswith("] (imaginary part)")
    for fmt in ("markdown", "html", "junit"):
        assert "(imaginary part)" in render(run, fmt), fmt


# --------------------------------------------------------------------------- modulus domain

def test_the_modulus_domain_draws_the_modulus_in_it_and_the_phase_all_round():
    case = make_case("sum(real(z) * imag(z))", {"z": {
        "shape": [256], "dtype": "complex", "domain": {"modulus": [0.5, 2]}}},
        points=3, extreme_points=2)
    points = list(case_points(case, "float64"))
    assert len(points) == 5
    for p in points:
        z = p.values["z"]
        r = np.hypot(z[..., 0], z[..., 1])
        assert z.shape == (256, 2) and np.all((0.5 <= r) & (r <= 2))
    bulk = np.concatenate([p.values["z"] for p in points[:3]])
    r, phase = np.hypot(bulk[:, 0], bulk[:, 1]), np.arctan2(bulk[:, 1], bulk[:, 0])
    # |z| uniform in [0.5, 2] (not the area's 2D law), the phase uniform all round
    assert abs(np.mean(r) - 1.25) < 0.05 and r.max() - r.min() > 1.4
    assert np.histogram(phase, bins=4, range=(-np.pi, np.pi))[0].min() > 150
    # the extreme points go to the ends of |z|'s interval: large near 2, small near 0.5
    large, small = (np.hypot(*points[k].values["z"].T) for k in (3, 4))
    assert large.min() > 1.8 and small.max() < 0.7
    assert "large magnitudes: |z| " in points[3].notes[0] and " from 2 " in points[3].notes[0]


def test_hypothesis_points_keep_the_modulus_domain():
    from hypothesis import given, settings

    from gradcheck.strategies import points

    case = make_case("sum(real(z) * imag(z))", {"z": {
        "shape": [6], "dtype": "complex", "domain": {"modulus": [0.5, 1]}}})

    @settings(max_examples=10, deadline=None, database=None)
    @given(points(case))
    def drawn(values):
        r = np.hypot(values["z"][..., 0], values["z"][..., 1])
        assert np.all((0.5 <= r) & (r <= 1))

    drawn()


def test_pulling_in_moves_the_modulus_toward_its_middle_and_keeps_the_phase():
    from gradcheck.sampling.domains import toward

    spec = make_case("sum(real(z))", {"z": {
        "shape": [3], "dtype": "complex", "domain": {"modulus": [0, 4]}}}).input["z"]
    z = np.array([4.0, 1j, 0.0])
    pulled = toward(spec, layout(z), 0.5)
    assert np.allclose(pulled, layout(np.array([3.0, 1.5j, 1.0])))
    # an extreme point of a mixing formula that overflows (placed at λ = 0, then
    # redrawn pair by pair) stays in the domain
    case = make_case("sum(exp(real(z) @ imag(z)))", {"z": {
        "shape": [4, 4], "dtype": "complex", "domain": {"modulus": [0, 200]}}},
        points=1, extreme_points=1)
    large = list(case_points(case, "float64"))[1].values["z"]
    assert np.all(np.hypot(large[..., 0], large[..., 1]) <= 200)


def test_a_modulus_from_zero_reaches_small_magnitudes():
    case = make_case("sum(real(z) * imag(z))", {"z": {
        "shape": [64], "dtype": "complex", "domain": {"modulus": [0, 1]}}},
        points=1, extreme_points=2)
    small = list(case_points(case, "float64"))[2].values["z"]
    assert np.hypot(small[:, 0], small[:, 1]).min() < 1e-3


def test_a_pinned_value_must_lie_in_the_modulus_domain():
    spec = {"shape": [2], "dtype": "complex", "domain": {"modulus": [0.5, 2]}}
    make_case("sum(z)", {"z": dict(spec, value=[[1, 1], [0, -0.5]])})
    with pytest.raises(CaseFileError, match=r"outside its domain \{ modulus = \[0.5, 2\] \}"):
        make_case("sum(z)", {"z": dict(spec, value=[[2, 1], [0, 1]])})


@pytest.mark.parametrize("domain, message", [
    ("{ modulus = [2, 1] }", r"0 <= lo < hi"),
    ("{ modulus = [-1, 1] }", r"0 <= lo < hi"),
    ("{ modulus = [0, inf] }", r"finite"),
    ("{ modulus = 1 }", r"\{ modulus = \[lo, hi\] \}"),
    ("{ modulus = [0, 1], phase = [0, 1] }", r"unknown key 'phase'"),
    ("{ radius = [0, 1] }", r"unknown key 'radius'"),
])
def test_a_bad_modulus_table_is_an_error_at_its_line(tmp_path, domain, message):
    path = tmp_path / "cases.toml"
    path.write_text(textwrap.dedent(f"""\
        [[case]]
        name = "m"
        expr = "sum(real(z))"
        inputs.z = {{ shape = [3], dtype = "complex", domain = {domain} }}
        """))
    cases, errors = read_file(path)
    assert cases == [] and len(errors) == 1
    assert errors[0].line == 4, str(errors[0])
    with pytest.raises(CaseFileError, match=message):
        raise errors[0]


def test_a_real_input_takes_no_modulus():
    with pytest.raises(CaseFileError, match=r"a domain is a name or \[lo, hi\]"):
        make_case("sum(x)", {"x": {"shape": [3], "domain": {"modulus": [0, 1]}}})
