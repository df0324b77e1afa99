"""The composite rows (softmax, log_softmax, var, std, norm, cumsum, cumprod, sort, topk,
einsum) against PyTorch itself: values, gradients, the grad_fn graph and the second
backward of the engine (einsum's decomposition included, node by node and stride by
stride), PyTorch's conventions at the special points, the parser's messages, the
rounding bound over torch's own float64/float32/bfloat16/float16 kernels, and wrong
backward formulas caught by a check."""

from __future__ import annotations

import dataclasses
import math
import random
import sys

import numpy as np
import pytest
import torch

import gradcheck.engine as E
from conftest import check, make_case
from gradcheck.cases import case_from_dict
from gradcheck.base.dtypes import round_to, unit_roundoff
from gradcheck.base.errors import CaseFileError
from gradcheck.bounds.point import error_bounds
from gradcheck.reference import Reference
from gradcheck.rules import RULES
from gradcheck.sampling.points import MARGIN, sample
from test_engine import parity, structure, uniform

INF = math.inf
M = (4, 3)

# (row, operand shapes, the row's parameters in order, as the table's columns take them)
ROW_PARAMS = [
    ("softmax", [M], ((1,),)), ("softmax", [(2, 3, 4)], ((0,),)),
    ("log_softmax", [M], ((1,),)), ("log_softmax", [(2, 3, 4)], ((1,),)),
    ("var", [M], ((1,), 1, False)), ("var", [M], ((0, 1), 0, True)),
    ("var", [(2, 3, 4)], ((0, 2), 2, False)),
    ("std", [M], ((1,), 1, True)), ("std", [M], ((0, 1), 0, False)),
    ("norm", [M], (2.0, (1,), False)), ("norm", [M], (1.0, (0, 1), True)),
    ("norm", [M], (INF, (0,), False)), ("norm", [M], (3.0, (1,), False)),
    ("norm", [M], (1.5, (0, 1), False)),
    ("cumsum", [M], ((1,),)), ("cumsum", [(2, 3, 4)], ((0,),)),
    ("cumprod", [M], ((1,),)), ("cumprod", [(2, 3, 4)], ((2,),)),
    ("sort", [M], ((1,), False)), ("sort", [(2, 3, 4)], ((1,), True)),
    ("topk", [M], (2, (1,))), ("topk", [(2, 5, 3)], (4, (1,))),
]


@pytest.mark.parametrize("row, shapes, params", ROW_PARAMS,
                         ids=[f"{r}-{p}" for r, _, p in ROW_PARAMS])
def test_row_is_indistinguishable_from_torch(row, shapes, params):
    names = [f"a{i}" for i in range(len(shapes))]
    parity(lambda s, **a: s.op(row, *[a[n] for n in names], *params),
           {n: uniform(s) for n, s in zip(names, shapes)})


def test_grad_fn_names_are_torchs():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    e = E.Tensor(x.detach().numpy(), requires_grad=True)
    for row, params in [("softmax", ((1,),)), ("log_softmax", ((1,),)),
                        ("var", ((1,), 1, False)), ("std", ((1,), 1, False)),
                        ("norm", (2.0, (1,), False)), ("cumsum", ((1,),)),
                        ("cumprod", ((1,),)), ("sort", ((1,), False)), ("topk", (2, (1,)))]:
        want = type(RULES[row].torch(x, *params).grad_fn).__name__
        assert getattr(E, row)(e, *params).grad_fn.name() == want, row


# PyTorch's conventions where the derivative has a kink or a singularity: the engine
# gives what torch gives (its backward formulas), the reference keeps off these points.
SPECIAL = [
    ("norm", np.array([[0.0, 0.0, 0.0], [1.0, -3.0, 3.0]]), (2.0, (1,), False)),
    ("norm", np.array([[0.0, 0.0, 0.0], [1.0, -3.0, 3.0]]), (INF, (1,), False)),
    ("norm", np.array([[0.0, 0.0, 0.0], [1.0, -3.0, 3.0]]), (1.0, (1,), False)),
    ("norm", np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 3.0]]), (3.0, (1,), False)),
    ("norm", np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 3.0]]), (1.5, (1,), False)),
    ("std", np.array([[2.0, 2.0, 2.0], [1.0, 0.0, 3.0]]), ((1,), 1, False)),
    ("cumprod", np.array([[0.0, 2.0, 3.0], [1.5, 0.0, 0.0]]), ((1,),)),
    ("sort", np.array([[1.0, 3.0, 1.0], [2.0, 2.0, 2.0]]), ((1,), False)),
    ("sort", np.array([[1.0, 3.0, 1.0], [2.0, 2.0, 2.0]]), ((1,), True)),
    ("topk", np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), (2, (1,))),
]


@pytest.mark.parametrize("row, x, params", SPECIAL, ids=[f"{r}-{p}" for r, _, p in SPECIAL])
def test_special_points_follow_torch(row, x, params):
    parity(lambda s, x: s.op(row, x, *params), {"x": x})


# --------------------------------------------------------------------------- einsum

EQUATIONS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]), ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ij->", [(3, 4)]), ("ij", [(3, 4)]), ("ij->ji", [(3, 4)]), ("bij->jb", [(2, 3, 4)]),
    ("ij,j", [(3, 4), (4,)]), ("i,j->ij", [(3,), (4,)]), ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->i", [(3, 4), (3, 4)]), ("i,i->", [(4,), (4,)]), ("...j,j->...", [(2, 3, 4), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("abc,cd->abd", [(2, 1, 3), (3, 4)]), ("ij,jk", [(3, 1), (1, 5)]),
    ("aB,Bc->ca", [(2, 3), (3, 4)]), ("ij,kl->jl", [(2, 3), (4, 5)]), (",ij->ij", [(), (3, 4)]),
    ("fc,efd->ec", [(2, 3), (4, 2, 5)]),
]


def _einsum(equation):
    def program(s, **a):
        ops = [a[k] for k in sorted(a)]
        return E.einsum(equation, *ops) if s.name == "engine" else torch.einsum(equation, *ops)

    return program


@pytest.mark.parametrize("equation, shapes", EQUATIONS, ids=[e for e, _ in EQUATIONS])
@pytest.mark.parametrize("grads", ["all", "first only"])
def test_einsum_records_torchs_decomposition(equation, shapes, grads):
    inputs = {f"a{i}": uniform(s) for i, s in enumerate(shapes)}
    rg = {"a1": False} if grads == "first only" else {}
    parity(_einsum(equation), inputs, requires_grad=rg)


def test_einsum_of_a_transposed_operand_records_torchs_reshapes():
    # the operand's layout decides whether sumproduct_pair's reshape is a view, an alias
    # or a copy (the graphs are compared node by node)
    for equation in ("ji,jk->ik", "ji,kj->ik", "ij,jk->ki"):
        def program(s, a, b):
            a = s.op("transpose", a)
            return E.einsum(equation, a, b) if s.name == "engine" else torch.einsum(
                equation, a, b)

        other = {"ji,jk->ik": (4, 5), "ji,kj->ik": (5, 4), "ij,jk->ki": (3, 5)}[equation]
        parity(program, {"a": uniform((3, 4)), "b": uniform(other)})


def _random_equation(rng: random.Random, operands=(1, 2)):
    labels = rng.sample("abcdeAB", rng.randint(1, 5))
    terms = [rng.sample(labels, rng.randint(0, len(labels)))
             for _ in range(rng.choice(operands))]
    # (sizes 2 and 3: where a label has size 1 the engine's elementwise layout can differ
    # from TensorIterator's in the strides of size-1 axes; EQUATIONS has such labels)
    sizes = {label: rng.randint(2, 3) for label in labels}
    used = sorted(set().union(*map(set, terms)))
    out = [label for label in used if rng.random() < 0.5]
    rng.shuffle(out)
    arrow = "" if rng.random() < 0.25 else "->" + "".join(out)
    return ",".join("".join(t) for t in terms) + arrow, [[sizes[l] for l in t] for t in terms]


def test_einsum_graphs_and_layouts_match_torch_on_random_equations():
    rng = random.Random(3)
    for _ in range(150):
        equation, shapes = _random_equation(rng)
        arrays = [np.random.default_rng(len(equation)).standard_normal(s) for s in shapes]
        tl = [torch.tensor(a, requires_grad=True) for a in arrays]
        el = [E.Tensor(a, requires_grad=True) for a in arrays]
        t, e = torch.einsum(equation, *tl), E.einsum(equation, *el)
        assert structure(e, {id(x): f"a{i}" for i, x in enumerate(el)}) == structure(
            t, {id(x): f"a{i}" for i, x in enumerate(tl)}), equation
        np.testing.assert_allclose(e.data, t.detach().numpy(), rtol=1e-12, atol=1e-14)
        big = [d for d, n in enumerate(t.shape) if n > 1]
        assert [e.data.strides[d] // 8 for d in big] == [t.stride(d) for d in big], equation


MANY = [("bij,bjk,k->bi", [(2, 3, 4), (2, 4, 5), (5,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        ("i,ij,j", [(3,), (3, 4), (4,)]), ("ab,c,bc,d->ad", [(2, 3), (4,), (3, 4), (2,)]),
        ("...i,i,...i->...", [(2, 3), (3,), (2, 3)])]


#: equations whose opt_einsum path is not left to right's pairs, under every strategy
REORDERED = [("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("ab,c,bc,d->ad", MANY[3][1]),
             ("i,ij,jkl,k->l", [(6,), (6, 4), (4, 5, 3), (5,)]),
             ("i,ij,kj,k->ik", [(3,), (3, 4), (2, 4), (2,)]), MANY[0]]
LEFT_TO_RIGHT = "left to right"


@pytest.fixture(params=[LEFT_TO_RIGHT, "auto", "greedy", "optimal"])
def einsum_order(request):
    """torch.einsum's order for the test: opt_einsum off, or on with a strategy (skipped
    without opt_einsum, which the test extra installs); torch's flags restored after."""
    on = request.param != LEFT_TO_RIGHT
    if on and not torch.backends.opt_einsum.is_available():
        pytest.skip("opt_einsum is not installed")
    with torch.backends.opt_einsum.flags(enabled=on, strategy=request.param if on else None):
        yield request.param


def _path(equation, shapes, strategy):
    oe = torch.backends.opt_einsum.get_opt_einsum()
    return [tuple(p) for p in oe.contract_path(equation, *[np.empty(s) for s in shapes],
                                               optimize=strategy)[0]]


def test_einsum_of_three_or_more_operands_contracts_in_torchs_order(einsum_order):
    for equation, shapes in REORDERED:
        if einsum_order != LEFT_TO_RIGHT:
            # (the old engine, left to right whatever torch did, fails here)
            assert _path(equation, shapes, einsum_order) != [(0, 1)] * (len(shapes) - 1)
        parity(_einsum(equation), {f"a{i}": uniform(s) for i, s in enumerate(shapes)})
    # MANY holds a path of (0, 1)s ("...i,i,...i->..." under auto): appended, each
    # result is the next pair's right operand, where left to right makes it the left
    for equation, shapes in MANY:
        parity(_einsum(equation), {f"a{i}": uniform(s) for i, s in enumerate(shapes)})
    rng = random.Random(5)
    for _ in range(60):
        equation, shapes = _random_equation(rng, (3, 4))
        arrays = [np.random.default_rng(len(equation)).standard_normal(s) for s in shapes]
        tl = [torch.tensor(a, requires_grad=True) for a in arrays]
        el = [E.Tensor(a, requires_grad=True) for a in arrays]
        t, e = torch.einsum(equation, *tl), E.einsum(equation, *el)
        assert structure(e, {id(x): f"a{i}" for i, x in enumerate(el)}) == structure(
            t, {id(x): f"a{i}" for i, x in enumerate(tl)}), equation
        np.testing.assert_allclose(e.data, t.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_einsum_order_without_torch_loaded_is_torchs_default(monkeypatch):
    # the engine runs without torch: it takes the order importing torch would give
    from gradcheck.rules.composite.einsum import pairs

    equation, shapes = REORDERED[3]
    flags = torch.backends.opt_einsum
    with flags.flags(enabled=flags.is_available(),
                     strategy="auto" if flags.is_available() else None):
        expected = pairs(equation, shapes)
    monkeypatch.delitem(sys.modules, "torch")
    assert pairs(equation, shapes) == expected


def test_einsum_steps_are_the_pairwise_contractions(einsum_order):
    from gradcheck.rules.composite.einsum import back_steps, steps

    assert steps("ij,jk->ik", [(3, 4), (4, 5)]) == [4]
    assert steps("ij->", [(3, 4)]) == [12]
    shapes = [(2, 3, 4), (2, 4, 5), (5,)]
    if einsum_order == LEFT_TO_RIGHT:
        assert steps("bij,bjk,k->bi", shapes) == [4, 5]
        assert steps("i,j,ij->", [(3,), (4,), (3, 4)]) == [1, 12]
        # u's gradient: ḡ[b, i] times (a b)[b, i, k] over b and i; a's: ḡ u over
        # nothing, then times b over k
        assert [back_steps("bij,bjk,k->bi", shapes, k) for k in range(3)] == [
            [1, 5], [1, 3], [6]]
    else:
        # opt_einsum's path: (b u)[b, j] first (over k), then a (b u) over j
        assert steps("bij,bjk,k->bi", shapes) == [5, 4]
        # a's gradient: ḡ (b u) over nothing; b's: ḡ a over i, then times u over
        # nothing; u's: ḡ a over i, then times b over b and j
        assert [back_steps("bij,bjk,k->bi", shapes, k) for k in range(3)] == [
            [1], [3, 1], [3, 8]]


def test_einsum_bound_covers_torchs_error_in_its_order(einsum_order):
    for expr, shapes, domain in BOUND_CASES:
        if expr.startswith("einsum"):
            for dtype in ("float64", "float32", "bfloat16", "float16"):
                test_bound_covers_torchs_and_the_engines_actual_error(expr, shapes, domain,
                                                                       dtype)


def test_einsum_row_vjps_are_torchs_gradients():
    # the row's own VJPs (the rounding model's) and its tensor adjoints agree with torch
    rng = np.random.default_rng(0)
    rule = RULES["einsum"]
    for equation, shapes in EQUATIONS + MANY:
        args = [rng.standard_normal(s) for s in shapes]
        params = rule.bind(shapes, {"subscripts": equation})
        ts = [torch.tensor(a, requires_grad=True) for a in args]
        y = torch.einsum(equation, *ts)
        g = rng.standard_normal(tuple(y.shape))
        y.backward(torch.tensor(g))
        for k, tk in enumerate(ts):
            got = rule.vjp(k, g, y.detach().numpy(), args, params)
            np.testing.assert_allclose(got, tk.grad.numpy(), rtol=1e-12, atol=1e-13)


# --------------------------------------------------------------------------- the parser

ERRORS = [
    ('einsum("ii->i", x)', "repeats in operand 0 (a diagonal)"),
    ('einsum("ij,jk->ik", x, x)', "label 'j' has size 4 and 3 in operand 1"),
    ('einsum("ij,jk,kl->il", x, t, t)', "label 'k' has size 5 and 4 in operand 2"),
    ('einsum("ij->k", x)', "output label 'k' is in no operand"),
    ('einsum("i2->i", x)', "'2' in operand 0 is not a letter"),
    ('einsum("ijk->i", x)', "operand 0 has 2 dimensions"),
    ('einsum("ij,jk->ik", x)', "2 operand terms for 1 operand"),
    ("einsum(x, t)", "takes its subscripts first"),
    ('einsum("i...,...->i", x, v)', "'...' covers"),
    ("var(s)", "over 1 element with correction=1"),
    ("std(x, axis=1, correction=5)", "divides by -1"),
    ("topk(x, 5)", "takes 1 <= k <= 4 along axis 1, got k=5"),
    ("norm(x, ord=0.5)", "takes ord >= 1"),
    ("softmax(x, axis=(0, 1))", "works along one axis"),
    ("cumsum(x, axis=None)", "works along one axis"),
]


@pytest.mark.parametrize("text, message", ERRORS, ids=[t for t, _ in ERRORS])
def test_errors_say_what_is_wrong(text, message):
    with pytest.raises(CaseFileError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        make_case(text, {"x": [3, 4], "t": [4, 5], "v": [2], "s": []})


def test_inf_is_a_parameter_literal_only():
    case = make_case("norm(x, inf) + norm(x, ord=inf)", {"x": [3]})
    assert [n.param("ord") for n in case.output.args] == [INF, INF]
    with pytest.raises(CaseFileError, match="unknown name 'inf'"):
        make_case("x * inf", {"x": [3]})


# --------------------------------------------------------------------------- sampling

@pytest.mark.parametrize("expr", ["sort(x)", "topk(x, 3)", "norm(x, ord=inf, axis=1)",
                                  "norm(x, ord=1, axis=1)", "std(x, axis=1)",
                                  "norm(x - 1.9, axis=1)"])
def test_points_keep_off_ties_zeros_and_constant_slices(expr):
    from gradcheck.formula.forward import hazard_distances

    case = make_case(expr, {"x": [3, 8]}, points=4)
    for i in range(4):
        point = sample(case, "float64", i)
        assert not point.notes
        for node, distance in hazard_distances(case.output, point.values):
            assert np.all(distance >= MARGIN), (expr, node)


# --------------------------------------------------------------------------- rounding

BOUND_CASES = [
    ("softmax(x)", {"x": [4, 16]}, (-30, 30)), ("softmax(x, axis=0)", {"x": [64, 3]}, (-2, 2)),
    ("log_softmax(x)", {"x": [4, 16]}, (-30, 30)), ("log_softmax(x)", {"x": [2, 200]}, (-3, 3)),
    ("var(x, axis=1)", {"x": [4, 64]}, (0.5, 2)), ("var(x, axis=1, correction=0)", {"x": [4, 64]},
                                                    (10, 11)),
    ("std(x)", {"x": [100]}, (100, 101)), ("std(x, axis=1)", {"x": [4, 64]}, (-2, 2)),
    ("norm(x, axis=1)", {"x": [4, 64]}, (-2, 2)), ("norm(x, ord=1, axis=1)", {"x": [4, 64]}, (-2, 2)),
    ("norm(x, ord=inf, axis=1)", {"x": [4, 6]}, (-2, 2)), ("norm(x, ord=3)", {"x": [64]}, (-2, 2)),
    ("cumsum(x)", {"x": [4, 64]}, (-2, 2)), ("cumsum(x, axis=0)", {"x": [300, 2]}, (-2, 2)),
    ("cumprod(x)", {"x": [4, 16]}, (0.5, 1.5)), ("cumprod(x)", {"x": [4, 16]}, (-1.5, 1.5)),
    ("sort(x)", {"x": [4, 16]}, (-2, 2)), ("topk(x, 5)", {"x": [4, 16]}, (-2, 2)),
    ('einsum("bij,bjk->bik", a, b)', {"a": [2, 8, 16], "b": [2, 16, 4]}, (-2, 2)),
    ('einsum("ij,kj", a, b)', {"a": [8, 32], "b": [5, 32]}, (-2, 2)),
    ('einsum("bij,bjk,k->bi", a, b, u)', {"a": [2, 3, 4], "b": [2, 4, 8], "u": [8]},
     (-2, 2)),
    ('einsum("i,ij,jkl,k->l", u, a, b, c)', {"u": [6], "a": [6, 4], "b": [4, 5, 3],
                                             "c": [5]}, (-2, 2)),
    ("sum(softmax(x @ W) * y) + var(tanh(x), axis=1) * norm(x)", {"x": [4, 8], "W": [8, 6],
                                                                   "y": [6]}, (-2, 2)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("expr, shapes, domain", BOUND_CASES, ids=[c[0] for c in BOUND_CASES])
def test_bound_covers_torchs_and_the_engines_actual_error(expr, shapes, domain, dtype):
    """As tests/test_tolerance_model.py's: PyTorch's own kernels (and the engine's, in
    the dtypes it runs in) err less than the bound, without the safety factor."""
    from gradcheck.witnesses.engine import run as engine_run
    from gradcheck.witnesses.torch import run as torch_run

    case = case_from_dict({"name": "b", "expr": expr, "gradient": "random",
                           "inputs": {k: {"shape": s} for k, s in shapes.items()}})
    rng = np.random.default_rng(0)
    point = {k: round_to(rng.uniform(*domain, s), dtype) for k, s in shapes.items()}
    v = round_to(rng.standard_normal(case.output.shape), dtype)
    exact = Reference(case).evaluate(point, v).quantities()
    both = 1 + unit_roundoff("float64") / unit_roundoff(dtype)
    bounds = {q: both * b for q, b in error_bounds(case, point, v, dtype).items()}
    runs = [torch_run(case, point, v, dtype)]
    if dtype in ("float64", "float32"):
        runs.append(engine_run(case, point, v, dtype))
    for got in runs:
        for q, e in exact.items():
            err = np.abs(got.quantities()[q] - e)
            assert np.all(err <= bounds[q]), (q, float(np.max(err - bounds[q])))


# well-conditioned cases (the others above: a mean far from 0, a scan of 300 terms)
TIGHT = [c for c in BOUND_CASES if c[2] in ((-2, 2), (-3, 3), (-30, 30), (0.5, 2))
         and "cumsum(x, axis=0)" not in c[0]]


@pytest.mark.parametrize("expr, shapes, domain", TIGHT, ids=[c[0] for c in TIGHT])
def test_bounds_are_tight_enough_to_matter(expr, shapes, domain):
    """In float32 the bound of these rows is at most a few hundred units of u relative
    to the exact value, at the median element (a 1% error is 10^5 u): a tolerance that
    still catches a wrong gradient."""
    case = case_from_dict({"name": "b", "expr": expr, "gradient": "random",
                           "inputs": {k: {"shape": s} for k, s in shapes.items()}})
    rng = np.random.default_rng(1)
    point = {k: round_to(rng.uniform(*domain, s), "float32") for k, s in shapes.items()}
    v = round_to(rng.standard_normal(case.output.shape), "float32")
    exact = Reference(case).evaluate(point, v).quantities()
    u = unit_roundoff("float32")
    for q, b in error_bounds(case, point, v, "float32").items():
        scale = np.abs(exact[q]) + 1e-3 * np.max(np.abs(exact[q]))
        ratio = np.median(b / scale) / u
        assert ratio < LOOSER.get(expr, 1000), (q, ratio)


#: opt_einsum's path (torch's default where it is installed) sums j and k, 20 terms, in
#: one step, where left to right sums i, j, k (6, 4, 5) in turn: the bound, which follows
#: torch's order, has γ(6) + γ(20) where it had γ(6) + γ(4) + γ(5), 1.9x as large
LOOSER = {'einsum("i,ij,jkl,k->l", u, a, b, c)': 2000}


def _torch_backward(forward, backward):
    """A torch column computing ``forward`` with ``backward(g, x, y)`` as its gradient."""
    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, *params):
            y = forward(x, *params)
            ctx.save_for_backward(x, y)
            ctx.params = params
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return (backward(g, x, y, *ctx.params), *([None] * len(ctx.params)))

    return Op.apply


WRONG = {
    # softmax's VJP without its − Σ y ⊙ ḡ term
    "softmax": ("sum(softmax(x, axis=1) * y)", lambda g, x, y, axis: y * g),
    # cumsum's VJP not reversed: the cumulative sum of ḡ
    "cumsum": ("cumsum(x, axis=1) * y", lambda g, x, y, axis: torch.cumsum(g, axis[0])),
    # var's VJP with n for n - correction
    "var": ("var(x, axis=1) * 3", lambda g, x, y, axis, c, keep: 2 / x.shape[1] * (
        g[:, None] * (x - x.mean(1, keepdim=True)))),
}


@pytest.mark.parametrize("row", sorted(WRONG))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_wrong_backward_is_caught_by_a_check(monkeypatch, row, dtype):
    expr, backward = WRONG[row]
    case = make_case(expr, {"x": [3, 5], "y": [5]}, points=2, gradient="random")
    assert check(case, dtype).status == "passed"
    monkeypatch.setitem(RULES, row, dataclasses.replace(
        RULES[row], torch=_torch_backward(RULES[row].torch, backward)))
    result = check(case, dtype)
    assert result.witness("torch").status == "failed"
    assert result.witness("torch").worst.quantity == "x.grad"
    assert result.witness("numeric").status == "passed"


# --------------------------------------------------------------------------- one_hot

LABELS = {"shape": [3], "dtype": "int64", "domain": [0, 4]}


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_one_hot_of_integer_labels_in_every_witness(dtype):
    # cross-entropy with class labels: -sum(log_softmax(x) * one_hot(labels, n))
    case = make_case("-sum(log_softmax(x, axis=1) * one_hot(labels, 4), axis=1) "
                     "+ sum(one_hot(labels, 4) @ W, axis=1)",
                     {"x": [3, 4], "labels": LABELS, "W": [4, 2]}, points=3)
    result = check(case, dtype)
    assert result.status == "passed", result.message
    assert sum(w.checked for w in result.witnesses) > 0


def test_one_hot_matches_torch_and_the_expanded_reference():
    from gradcheck.reference import ExpandedReference, TensorReference

    labels = np.array([0, 3, 1, 3])
    for side in ("engine", "torch"):
        t = (E.Tensor(labels) if side == "engine" else torch.tensor(labels))
        out = getattr(E, "one_hot")(t, 4) if side == "engine" else RULES["one_hot"].torch(t, 4)
        assert str(out.dtype).endswith("int64") and out.grad_fn is None
        np.testing.assert_array_equal(np.asarray(out.data if side == "engine" else out),
                                      np.eye(4, dtype=np.int64)[labels])
    case = make_case("sum(one_hot(labels, 4) * exp(x), axis=0)",
                     {"labels": LABELS, "x": [3, 4]}, gradient="random")
    point = sample(case, "float64", 0).values
    v = np.linspace(-1, 1, 4)
    tensor = TensorReference(case).evaluate(point, v)
    expanded = ExpandedReference(case).evaluate(point, v)
    np.testing.assert_allclose(tensor.grads["x"], expanded.grads["x"], rtol=1e-13)
    assert "labels" not in tensor.grads


@pytest.mark.parametrize("text, message", [
    ("one_hot(x, 4)", "takes an integer input \\(dtype int64\\) as operand 1"),
    ("one_hot(labels)", "takes the number of classes n >= 1"),
    ("one_hot(labels, 0)", "takes the number of classes n >= 1"),
])
def test_one_hot_errors(text, message):
    with pytest.raises(CaseFileError, match=message):
        make_case(text, {"x": [3], "labels": LABELS})
