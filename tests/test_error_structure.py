"""The structure of a gradient's error (gradcheck.checking.diagnose.structure): from
whole Jacobians (a rank-one part per row block, cross terms, a transposed Jacobian) and
from vᵀJ along an axis (a constant per slice, a multiple of x); never claimed for a
right gradient or an error without that structure; and end to end for the bundled
fused RMSNorm pair (cases/ops/idioms.toml)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import load_cases
from gradcheck.checking.case import run_case
from gradcheck.checking.diagnose import Sample, diagnose_points, summarize
from gradcheck.checking.diagnose.structure import (Jacobian, jacobian_structure,
                                                   slice_structure)

RTOL, ATOL = 1e-7, 1e-9
ROWS, N = 3, 5


def _blockdiag(blocks: list[np.ndarray]) -> np.ndarray:
    m = sum(b.shape[0] for b in blocks)
    out, at = np.zeros((m, m)), 0
    for b in blocks:
        k = b.shape[0]
        out[at:at + k, at:at + k] = b
        at += k
    return out


def _rms_norm(x: np.ndarray, w: np.ndarray, projection: bool = True) -> np.ndarray:
    """d y / d x of y = x r w per row, r = 1/√(mean(x²) + ε): w_j (r δ_jk - x_j x_k r³
    / n); without ``projection``, r w_j δ_jk (r held constant)."""
    blocks = []
    for row in x:
        r = 1 / np.sqrt(np.mean(row ** 2) + 1e-6)
        b = np.diag(r * w)
        if projection:
            b -= np.outer(w * row, row) * r ** 3 / row.size
        blocks.append(b)
    return _blockdiag(blocks)


def _layer_norm(x: np.ndarray, mean_term: bool = True) -> np.ndarray:
    """d y / d x of y = (x - μ) rstd per row (unit weight); without ``mean_term``, the
    -1/n of the mean dropped."""
    blocks = []
    for row in x:
        n, c = row.size, row - row.mean()
        rstd = 1 / np.sqrt(np.mean(c ** 2) + 1e-6)
        xhat = c * rstd
        b = rstd * (np.eye(n) - np.outer(xhat, xhat) / n)
        if mean_term:
            b -= rstd / n
        blocks.append(b)
    return _blockdiag(blocks)


def _softmax(x: np.ndarray) -> np.ndarray:
    blocks = []
    for row in x:
        p = np.exp(row - row.max())
        p /= p.sum()
        blocks.append(np.diag(p) - np.outer(p, p))
    return _blockdiag(blocks)


def _jac(obtained, expected, x, point=0) -> Jacobian:
    return Jacobian(point, ((ROWS, N),), {"x": obtained}, {"x": expected}, {"x": x})


@pytest.fixture
def points():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((ROWS, N)) for _ in range(2)]


def _read(pairs) -> str | None:
    return jacobian_structure("x", [_jac(o, e, x, i) for i, (o, e, x) in enumerate(pairs)],
                              RTOL, ATOL)


def test_rms_norm_without_its_projection_term_is_rank_one_along_x(points):
    w = np.linspace(0.5, 1.5, N)
    found = _read([(_rms_norm(x, w, False), _rms_norm(x, w), x) for x in points])
    assert found is not None
    assert found.startswith("x.grad: its error is rank one (E = J_op - J ≈ a bᵀ)")
    assert f"{ROWS} per point at 2 points, each {N} outputs × {N} inputs" in found
    assert "a projection along x (b ∝ x) is missing or wrong" in found


def test_layer_norm_without_its_mean_term_is_rank_one_and_constant(points):
    found = _read([(_layer_norm(x, False), _layer_norm(x), x) for x in points])
    assert found is not None and "a mean term (b constant" in found


def test_dropped_cross_terms_with_a_right_diagonal(points):
    # softmax's backward keeping only p_i (1 - p_i): the diagonal right, E = p pᵀ off it
    found = _read([(np.diag(np.diag(_softmax(x))), _softmax(x), x) for x in points])
    assert found == ("x.grad: its diagonal (d out[i] / d x[i]) is right and only cross "
                     "terms (d out[i] / d x[j], i ≠ j) are wrong: they are missing (the "
                     "op's Jacobian is diagonal)")


def test_a_transposed_jacobian(points):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((ROWS * N, ROWS * N))
    found = _read([(a.T, a, points[0])])
    assert found is not None and "the op's Jacobian is the exact one transposed" in found
    # a symmetric Jacobian's transpose is no error, and names no structure
    assert _read([((a + a.T).T, a + a.T, points[0])]) is None


def test_no_structure_claimed_for_a_right_jacobian_or_an_arbitrary_error(points):
    w = np.linspace(0.5, 1.5, N)
    exact = [(_rms_norm(x, w), x) for x in points]
    assert _read([(e * (1 + 1e-12), e, x) for e, x in exact]) is None
    rng = np.random.default_rng(2)
    # a full-rank error in each block, and the rank-one one plus noise well above the
    # tolerance
    noisy = [(e + _blockdiag([rng.standard_normal((N, N)) for _ in range(ROWS)]), e, x)
             for e, x in exact]
    assert _read(noisy) is None
    near = [(_rms_norm(x, w, False) + 1e-3 * rng.standard_normal((ROWS * N,) * 2)
             * (_rms_norm(x, w) != 0), _rms_norm(x, w), x) for x in points]
    assert _read(near) is None


def test_a_weight_left_out_scales_each_row_by_its_reciprocal(points):
    # RMSNorm's x̄ computed from g, not g · w: J_op = diag(1/w) J, row by row
    w = np.linspace(0.5, 1.5, N)
    pairs = [(_rms_norm(x, w) / np.tile(w, ROWS)[:, None], _rms_norm(x, w), x)
             for x in points]
    jacobians = [Jacobian(i, ((ROWS, N),), {"x": o}, {"x": e}, {"x": x, "w": w})
                 for i, (o, e, x) in enumerate(pairs)]
    found = jacobian_structure("x", jacobians, RTOL, ATOL)
    assert found is not None
    assert "each output's row of its Jacobian is the exact one times a factor" in found
    assert found.endswith("D = 1/w, a factor w of grad_output left out of this gradient")
    # an elementwise op's Jacobian is diagonal: any wrong one is "rows scaled", which
    # says nothing, and is not said
    x = points[0]
    exact = np.diag(np.cos(x).reshape(-1))
    assert _read([(exact * np.diag(np.exp(x).reshape(-1)), exact, x)]) is None


def test_rank_one_is_not_claimed_for_blocks_too_small_to_tell():
    # 2 × 2 blocks: any error is rank at most two, one is no evidence
    x = np.array([[1.0, 2.0], [0.5, -1.0]])
    e = _rms_norm(x, np.ones(2))
    assert jacobian_structure("x", [Jacobian(0, ((2, 2),), {"x": _rms_norm(
        x, np.ones(2), False)}, {"x": e}, {"x": x})], RTOL, ATOL) is None


# --------------------------------------------------------------------------- vᵀJ slices

def _vjps(points, wrong):
    """(obtained, exact, values) of a layer-norm-like gradient for two v per point,
    ``wrong(v, x)`` added to the obtained one."""
    rng = np.random.default_rng(3)
    out = []
    for x in points:
        for _ in range(2):
            v = rng.standard_normal(x.shape)
            e = (v.reshape(-1) @ _layer_norm(x)).reshape(x.shape)
            out.append((e + wrong(v, x), e, {"x": x}))
    return out


def test_vjp_error_constant_along_the_rows_is_a_mean_term(points):
    pairs = _vjps(points, lambda v, x: np.broadcast_to(v.sum(1, keepdims=True) / N, x.shape))
    found = slice_structure("x", pairs, RTOL, ATOL)
    assert found is not None
    assert found.startswith("x.grad's error along axis 1 is the same for every element "
                            "of each slice: a mean term")


def test_vjp_error_along_x_is_a_projection(points):
    pairs = _vjps(points, lambda v, x: (v * x).sum(1, keepdims=True) * x / N)
    found = slice_structure("x", pairs, RTOL, ATOL)
    assert found is not None and "a multiple of x's own slice: a projection along x" in found
    centred = _vjps(points, lambda v, x: (x - x.mean(1, keepdims=True)) * v.sum(
        1, keepdims=True))
    assert "less its mean along the axis" in slice_structure("x", centred, RTOL, ATOL)


def test_vjp_no_structure_for_a_right_or_an_arbitrary_error(points):
    rng = np.random.default_rng(4)
    assert slice_structure("x", _vjps(points, lambda v, x: 0 * x), RTOL, ATOL) is None
    assert slice_structure("x", _vjps(points, lambda v, x: rng.standard_normal(x.shape)),
                           RTOL, ATOL) is None
    # along an axis of 2 elements nothing is said (a constant fits too easily): a
    # constant per row of 2, different in every row
    x = np.random.default_rng(5).standard_normal((ROWS, 2))
    pairs = [(0.5 * x + np.arange(1.0, ROWS + 1)[:, None], 0.5 * x, {"x": x})]
    assert slice_structure("x", pairs, RTOL, ATOL) is None


def test_the_structure_reaches_the_diagnosis_of_a_check(points):
    # through summarize: no single-point pattern fits, so the structure is what is said
    w = np.linspace(0.5, 1.5, N)
    rng = np.random.default_rng(6)
    samples, jacobians = [], []
    for i, x in enumerate(points):
        exact, wrong = _rms_norm(x, w), _rms_norm(x, w, False)
        v = rng.standard_normal(ROWS * N)
        samples.append(Sample(i, 0, {"x": (v @ wrong).reshape(x.shape)},
                              {"x": (v @ exact).reshape(x.shape)}, values={"x": x}))
        jacobians.append(_jac(wrong, exact, x, i))
    text = summarize(samples, jacobians=jacobians)
    assert "rank one" in text and "projection along x" in text
    # without the Jacobians, vᵀJ along the rows says the same (b ∝ x in every row)
    assert "a multiple of x's own slice" in " ".join(diagnose_points(samples))


# --------------------------------------------------------------------------- end to end

IDIOMS = Path(__file__).resolve().parent.parent / "cases" / "ops" / "idioms.toml"


@pytest.mark.parametrize("name, said", [
    ("rms-norm-no-projection", "a projection along x (b ∝ x) is missing or wrong"),
    ("rms-norm-eps-keyword", None),
])
def test_the_bundled_fused_rms_norm_pair(name, said):
    case, = [c for c in load_cases(IDIOMS) if c.name == name]
    case = dataclasses.replace(case, points=1, extreme_points=0, expect="pass")
    result = run_case(case, "float64", timeout=None)
    diagnoses = {w.diagnosis for w in result.witnesses if w.diagnosis}
    if said is None:
        assert result.status == "passed" and not diagnoses
        return
    assert result.status == "failed"
    backward = result.witness("op.backward").diagnosis
    assert "x.grad: its error is rank one" in backward and said in backward
