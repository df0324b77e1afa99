"""Second order (``order = 2``) at tensor level for every row of the table (issue 30):
each row has a tensor-level double backward (the test iterates the table, as
tests/test_rules.py does for the other columns), the rows that had none (cumsum, cumprod,
sort, topk) agree with the element-expanded reference, a selection's magnitudes are those
of what it picks, and the expanded reference stands in only where a case asks for it or
the inputs are tiny, within SymPy's budget: otherwise the case's error, never a hang.
The two examples of the issue (a one-hot pick by an integer, entmax 1.5) pass with a
right op and fail with a wrong double backward, in float64 and float32
(cases/ops/idioms.toml)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from conftest import make_case
from gradcheck.process import budgets
from gradcheck.cases import case_from_dict, load_cases
from gradcheck.base.errors import CaseFileError, UnsupportedOpError
from gradcheck.reference import ExpandedReference, TensorReference, mode_of
from gradcheck.reference.second import Hessian
from gradcheck.rules import RULES
from gradcheck.rules.composite import tensor as composite_tensor
from gradcheck.checking.case import run_case
from gradcheck.sampling.points import sample
from gradcheck.strategies import formulas
from test_rules import ROW_CASES
from test_second_order import _assert_agree

#: rows without a tensor-level second derivative, each with its reason (none today)
NO_TENSOR_SECOND: dict[str, str] = {}


def _mixed(name: str):
    """The row's case of tests/test_rules.py, times its own sum: a formula that mixes
    elements, so that even an elementwise row is differentiated twice at tensor level."""
    expr, inputs = ROW_CASES[name]
    return make_case(f"({expr}) * sum({expr})", inputs, gradient="random")


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_row_has_a_tensor_level_second_order(name):
    if name in NO_TENSOR_SECOND:
        assert NO_TENSOR_SECOND[name], name     # a stated reason
        return
    case = _mixed(name)
    assert mode_of(case) == "tensor"
    tensor = TensorReference(case)
    second = tensor._second()
    assert isinstance(second, Hessian), name   # no expansion
    rng = np.random.default_rng(0)
    point = sample(case, "float64", 0).values
    u = {n: rng.standard_normal(case.input[n].shape) for n in tensor.wrt}
    v = rng.standard_normal(case.output.shape)
    for h in [*tensor.hvp(point, v, u).values(), tensor.jvp(point, u)]:
        assert np.all(np.isfinite(h)), name


# ------------------------------------------------------------------ the rows it adds

NEW_ROWS = [
    ("cumsum(x * y, axis=1) * sin(cumsum(x, 0))", {"x": [2, 3], "y": [3]}),
    ("cumprod(x, axis=1) ** 2 * y", {"x": [2, 3], "y": [3]}),
    ("sum(cumprod(x * y, 0) * tanh(x), axis=0)", {"x": [3, 2], "y": [2]}),
    ("sort(x * y, axis=1, descending=True) * sin(x)", {"x": [2, 3], "y": [3]}),
    ("sort(x ** 2, axis=0) * x", {"x": [3, 2]}),
    ("topk(tanh(x) * y, 2) ** 2", {"x": [2, 3], "y": [3]}),
    ("cumsum(sort(x, axis=1), axis=1) * topk(x * x, 3)", {"x": [2, 3]}),
]


@pytest.mark.parametrize("expr, inputs", NEW_ROWS)
def test_the_new_rows_agree_with_the_expanded_reference(expr, inputs):
    case = make_case(expr, inputs, gradient="random")
    assert mode_of(case) == "tensor"
    tensor = _assert_agree(case)
    assert isinstance(tensor._second(), Hessian)


@pytest.mark.parametrize("piece, expr", [
    ("cumprod_second", "cumprod(x, axis=1) ** 2 * y"),
    ("cumprod_jvp", "cumprod(x, axis=1) ** 2 * y"),
    ("resort", "sort(x * y, axis=1, descending=True) * sin(x)"),
])
def test_a_wrong_second_order_piece_is_caught(monkeypatch, piece, expr):
    """Mutation test: a row's second-order piece 1% off disagrees with the expanded
    reference."""
    real = getattr(composite_tensor, piece)
    monkeypatch.setattr(composite_tensor, piece, lambda *a, **k: 1.01 * real(*a, **k))
    with pytest.raises(AssertionError):
        _assert_agree(make_case(expr, {"x": [2, 3], "y": [3]}, gradient="random"))


def test_cumprod_twice_is_exact_at_zeros():
    """cumprod's second derivatives by running sums, no division: exact where elements
    are 0 (one zero, two zeros in a row), as SymPy's products are."""
    case = make_case("cumprod(x, axis=1) * y", {"x": [2, 4], "y": [2, 4]}, gradient="random")
    tensor, expanded = TensorReference(case), ExpandedReference(case)
    rng = np.random.default_rng(3)
    point = {"x": np.array([[1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 3.0, -1.0]]),
             "y": rng.standard_normal((2, 4))}
    u = {n: rng.standard_normal((2, 4)) for n in point}
    v = rng.standard_normal((2, 4))
    got, want = tensor.hvp(point, v, u), expanded.hvp(point, v, u)
    for n in point:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tensor.jvp(point, u), expanded.jvp(point, u), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("functions", [
    ["cumsum", "sin", "mul", "sum"],
    ["sort", "tanh", "add", "mean"],
    ["topk", "exp", "mul", "cumprod"],
])
def test_random_formulas_over_the_new_rows_agree(functions):
    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
    @given(formulas(depth=2, functions=functions))
    def agree(table):
        case = case_from_dict(table)
        assume(mode_of(case) == "tensor")
        assume(sum(int(np.prod(s.shape)) for s in case.inputs) <= 16)
        _assert_agree(case)

    agree()


def test_a_protected_square_root_stays_finite_twice():
    """where(d > 0, sqrt(where(d > 0, d, 1)), 7): the kernel's second partials keep the
    inner where (SymPy's evaluation folded it into sqrt(d), whose derivative at d < 0,
    times the zero of the branch not taken, was NaN)."""
    case = make_case("sum(where(d > 0, sqrt(where(d > 0, d, 1)), 7) * y, axis=0) * sum(y)",
                     {"d": [3, 2], "y": [3, 2]}, gradient="random")
    tensor, expanded = TensorReference(case), ExpandedReference(case)
    rng = np.random.default_rng(0)
    point = {"d": np.array([[-1.0, 2], [-3, 4], [5, -6]]), "y": rng.standard_normal((3, 2))}
    u = {n: rng.standard_normal((3, 2)) for n in point}
    v = rng.standard_normal(2)
    got, want = tensor.hvp(point, v, u), expanded.hvp(point, v, u)
    for n in point:
        assert np.all(np.isfinite(got[n]))
        np.testing.assert_allclose(got[n], want[n], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("expr, w", [("sort(x) @ W", [2, 1]),
                                     ("min(x, axis=1, keepdims=True) @ W", [1, 1])])
def test_a_selection_is_as_large_as_what_it_picks(expr, w):
    """The magnitude of sort(x) and min(x) in op.double's tolerance is that of the
    element picked at the values (|-5| for the smallest of [-5, 1]), not the row on the
    magnitudes (sort(|x|) = [1, 5], min(|x|) = 1, too small where -5 is picked): J u
    along W is sort(x) @ u_W, whose size is a matmul of the magnitudes."""
    case = make_case(expr, {"x": [1, 2], "W": w}, gradient="random")
    tensor = TensorReference(case)
    point = {"x": np.array([[-5.0, 1.0]]), "W": np.full(w, 0.5)}
    u = {"x": np.zeros((1, 2)), "W": np.zeros(w)}
    u["W"][0] = 1.0
    exact = tensor.jvp(point, u)
    size = tensor.jvp(point, u, absolute=True)
    assert np.abs(exact).item() == 5.0
    assert np.all(size >= np.abs(exact))


# ------------------------------------------------------------------ no silent expansion

@pytest.fixture
def no_sort_adjoint(monkeypatch):
    """sort's tensor column without its second-order piece (a row added without one)."""
    monkeypatch.setattr(composite_tensor.unsort, "adjoint", None)


def test_a_row_without_a_second_order_is_expanded_only_for_tiny_inputs(no_sort_adjoint):
    tiny = make_case("sort(x, axis=1) * y", {"x": [2, 3], "y": [3]}, gradient="random")
    tensor = _assert_agree(tiny)
    assert isinstance(tensor._second(), ExpandedReference)
    large = make_case("sort(x, axis=1) * y", {"x": [50, 6], "y": [6]}, gradient="random")
    with pytest.raises(UnsupportedOpError) as caught:
        TensorReference(large).prepare_second()
    text = str(caught.value)
    assert text.startswith("order = 2: the row sort has no tensor-level second derivative")
    assert "306" in text and f"{budgets.EXPANDED_SECOND_ELEMENTS} elements" in text
    assert 'second_order = "expanded"' in text


def test_the_error_of_an_op_case_comes_before_the_op_runs(no_sort_adjoint):
    calls = []

    def op(x):
        calls.append(1)
        import torch
        return torch.sort(x, dim=1).values

    from gradcheck.testing import check_op

    result = check_op(op, "sort(x, axis=1)", {"x": [20, 6]}, order=2)
    assert result.status == "error" and "the row sort" in result.message
    assert calls == []


SPARSEMAX = {
    "op": "m:f", "let": {"z": "sort(x, axis=1, descending=True)", "cs": "cumsum(z, axis=1)",
            "m": "where(1 + arange(1, 7) * z > cs, 1, 0)",
            "kk": "sum(m, axis=1, keepdims=True)",
            "s": "sum(m * z, axis=1, keepdims=True)", "tau": "(s - 1) / kk"},
    "reference": "relu(x - tau)", "inputs": {"x": {"shape": [3, 6]}}, "order": 2,
    "gradient": "random"}


def test_a_case_may_ask_for_the_expanded_reference():
    case = case_from_dict({"name": "c", "op": "m:f", "reference": "tanh(x @ W)",
                           "inputs": {"x": [2, 2], "W": [2, 2]}, "gradient": "random",
                           "order": 2, "second_order": "expanded"})
    tensor = TensorReference(case)
    assert isinstance(tensor._second(), ExpandedReference)
    assert isinstance(TensorReference(dataclasses.replace(case, second_order="tensor"))
                      ._second(), Hessian)


def test_the_expanded_reference_past_its_budget_is_the_cases_error(monkeypatch):
    """sparsemax over [3, 6] asked of the expanded reference: SymPy's lowering alone runs
    for minutes; a budget of SymPy's calls stops it (lowered here to keep the test
    short), with the case's error, in place of the hang."""
    monkeypatch.setattr(budgets, "EXPANDED_SECOND_CALLS", 200_000)
    case = case_from_dict({"name": "sparsemax", **SPARSEMAX, "second_order": "expanded"})
    with pytest.raises(budgets.BudgetError) as caught:
        TensorReference(case).prepare_second()
    text = str(caught.value)
    assert "element-expanded reference" in text and "200,000 steps of SymPy" in text
    assert "leave second_order out" in text
    # at tensor level, the same formula's second order is built at once
    plain = case_from_dict({"name": "sparsemax", **SPARSEMAX})
    with budgets.sympy_work("sparsemax at tensor level", 2_000_000):
        assert isinstance(TensorReference(plain)._second(), Hessian)


def test_the_work_budget_counts_calls_and_nests():
    import sys

    import sympy

    before = sys.getprofile()
    x = sympy.Symbol("x")
    with budgets.sympy_work("outer", 10**9) as outer:
        with budgets.sympy_work("inner", 10) as inner:
            sympy.diff(sympy.sin(x) * sympy.exp(x ** 2), x, 3)
        assert inner is outer and outer[0] > 10   # counted against the outer budget
    with pytest.raises(budgets.BudgetError, match="^a chain took more than 100 steps"):
        with budgets.sympy_work("a chain", 100):
            sympy.diff(sympy.sin(x) * sympy.exp(x ** 2), x, 3)
    assert sys.getprofile() is before


class _Finalized:
    def __del__(self):   # Python calls where the budget may run out, and be swallowed
        str(1), repr(2), len("3")


def test_a_budget_that_runs_out_inside_a_finalizer_still_refuses():
    """An _Exceeded raised in a __del__ is swallowed and CPython unsets the raising
    profile hook; the block runs on uncounted, but is refused at its end all the same;
    the cyclic collector (which runs finalizers of earlier code) is off inside it."""
    import gc
    import sys

    before = sys.getprofile()
    with pytest.raises(budgets.BudgetError, match="^finalized took more than"):
        with budgets.sympy_work("finalized", 1) as count:
            assert not gc.isenabled()
            item = _Finalized()
            del item   # (the budget's second call is in its __del__)
            assert sys.getprofile() is before and count[0] == 2   # unset, uncounted
            len("the work goes on")
    assert gc.isenabled() and sys.getprofile() is before


@pytest.mark.parametrize("raw, message", [
    ({"second_order": "symbolic", "order": 2}, 'second_order must be "tensor" or '
                                               '"expanded"'),
    ({"second_order": "expanded"}, "it needs order = 2"),
])
def test_second_order_is_read_with_order_2(raw, message):
    with pytest.raises(CaseFileError, match=message):
        case_from_dict({"name": "c", "op": "m:f", "reference": "x @ W",
                        "inputs": {"x": [2, 2], "W": [2, 2]}, **raw})


# ------------------------------------------------------------------ the examples

IDIOMS = Path(__file__).resolve().parent.parent / "cases" / "ops" / "idioms.toml"
EXAMPLES = {"one-hot-pick-double-backward": "one-hot-pick-detached-grad-output",
            "entmax15-double-backward": "entmax15-sqrt-of-output",
            "sparsemax-double-backward": None}


@pytest.fixture(scope="module")
def examples():
    cases = {c.name: c for c in load_cases(IDIOMS)}
    cache: dict = {}
    return {(n, d): run_case(cases[n], d, cache=cache, timeout=None)
            for n in (*EXAMPLES, *filter(None, EXAMPLES.values()))
            for d in cases[n].dtypes}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("right", list(EXAMPLES))
def test_the_examples_pass_right_and_fail_wrong_at_second_order(examples, right, dtype):
    good = examples[right, dtype]
    assert good.status == "passed", good.message
    double = good.witness("op.double")
    assert double.status == "passed" and double.checked > 0
    wrong = EXAMPLES[right]
    if wrong is None:
        return
    bad = examples[wrong, dtype]
    assert bad.status == "passed" and bad.message.startswith("caught as expected")
    assert [w.witness for w in bad.witnesses if w.status == "failed"] == ["op.double"]
