"""The structural rows (reshape, permute, x[...], pad, concat, split, x[idx], gather...):
the subscripts and their errors, the engine's graph against PyTorch's for every drawn
spelling at many shapes and layouts (views, aliases and copies decide matmul's nodes),
the rounding bound as the map applied to the bound, and an op with several outputs
checked against split's pieces. Every parity claim runs PyTorch itself."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest
import torch

import gradcheck.engine as E
from conftest import check, make_case
from gradcheck.witnesses import engine as engine_witness
from gradcheck.witnesses import torch as torch_witness
from gradcheck.cases import case_from_dict
from gradcheck.checking.diagnose.points import _text
from gradcheck.base.errors import CaseFileError
from gradcheck.formula.parser import parse
from gradcheck.bounds.point import error_bounds
from gradcheck.rules import RULES, keys
from gradcheck.rules.keys import Slice
from gradcheck.generate.templates import TEMPLATES
from gradcheck.testing import check_op
from gradcheck.formula.tree import Node

STRUCTURAL = sorted(n for n, r in RULES.items() if r.family == "structure")


def _chain(t) -> list[str]:
    """grad_fn names from the result down the first edges (views take one tensor)."""
    out, fn = [], t.grad_fn
    while fn is not None and type(fn).__name__ != "AccumulateGrad":
        out.append(type(fn).__name__)
        fn = fn.next_functions[0][0] if fn.next_functions else None
    return out


# --------------------------------------------------------------------------- subscripts

def _random_key(rng: random.Random):
    entries = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.25:
            entries.append(rng.randint(-4, 3))
        elif r < 0.4:
            entries.append(None)
        elif r < 0.5:
            entries.append(Ellipsis)
        else:
            entries.append(Slice(rng.choice([None, 0, 1, -2, -5, 4]),
                                 rng.choice([None, 0, 2, 4, 5, 7, -1]),
                                 rng.choice([None, 1, 2, -1, -2])))
    return tuple(entries) if len(entries) > 1 or rng.random() < 0.5 else entries[0]


def test_subscripts_record_torchs_views_values_and_gradients():
    """x[key] on the engine against PyTorch (the torch column: a flip first where a
    step is negative, as a user writes it): the same grad_fn chain (select, slice,
    unsqueeze, alias), value and x.grad, for a thousand random subscripts."""
    rng, data = random.Random(0), np.random.default_rng(0).standard_normal((3, 4, 5))
    checked = 0
    for _ in range(1000):
        key = _random_key(rng)
        try:
            RULES["index"].result_shape([data.shape], RULES["index"].bind([data.shape],
                                                                         {"key": key}))
        except ValueError:
            continue
        xe, xt = E.Tensor(data.copy(), requires_grad=True), torch.tensor(data,
                                                                         requires_grad=True)
        ye, yt = E.index(xe, key), RULES["index"].torch(xt, key)
        assert _chain(ye) == _chain(yt), key
        np.testing.assert_array_equal(ye.data, yt.detach().numpy())
        v = np.arange(ye.data.size, dtype=float).reshape(ye.shape) + 1
        ye.backward(E.Tensor(v))
        yt.backward(torch.tensor(v))
        np.testing.assert_array_equal(xe.grad.data, xt.grad.numpy())
        checked += 1
    assert checked > 500


def test_the_plan_is_pytorchs_own_indexing():
    """Without negative steps, keys.plan names the views torch's x[key] records."""
    names = {"select": "SelectBackward0", "slice": "SliceBackward0",
             "unsqueeze": "UnsqueezeBackward0", "alias": "AliasBackward0"}
    rng = random.Random(1)
    x = torch.zeros((3, 4, 5), requires_grad=True)
    for _ in range(500):
        key = _random_key(rng)
        if any(isinstance(e, Slice) and (e.step or 1) < 0 for e in keys.entries(key)):
            continue
        try:
            shape = keys.shape(tuple(x.shape), key)
        except ValueError:
            continue
        y = x[keys.numpy_key(key)]
        assert tuple(y.shape) == shape
        assert _chain(y)[::-1] == [names[s[0]] for s in keys.plan(key, tuple(x.shape))]


NAMES = {"x": Node("input", shape=(3, 4), name="x"), "v": Node("input", shape=(4,), name="v"),
         "w": Node("input", shape=(3, 4), name="w", dtype="bool"),
         "i": Node("input", shape=(2,), name="i", dtype="int64")}


@pytest.mark.parametrize("text, shape", [
    ("x[0]", (4,)), ("x[-1, ::-1]", (4,)), ("x[:, 1:3]", (3, 2)), ("x[..., ::2]", (3, 2)),
    ("x[:, None]", (3, 1, 4)), ("x[None, ..., None]", (1, 3, 4, 1)), ("(x * 2)[1:]", (2, 4)),
    ("x[::-2, 5:0:-3]", (2, 1)), ("x[i]", (2, 4)), ("x[:, i]", (3, 2)), ("x[..., i]", (3, 2)),
    ("split(x, [1, 3], axis=1)[1]", (3, 3)), ("split(x, [2, 1])[-1][0]", (4,)),
    ("concat([x, x, x], axis=0)", (9, 4)), ("stack([v, v])", (2, 4)),
    ("reshape(x, [2, -1])", (2, 6)), ("flatten(x)", (12,)), ("expand(v, [2, 3, -1])", (2, 3, 4)),
    ("pad(x, [[1, 0], [0, 2]], value=0.5)", (4, 6)), ("transpose(x, 1, 0)", (4, 3)),
])
def test_spellings_parse_to_their_shapes(text, shape):
    node = parse(text, NAMES)
    assert node.shape == shape
    spelled = _text(node)                      # as a diagnosis prints it: parses back
    assert parse(spelled, NAMES).shape == shape and _text(parse(spelled, NAMES)) == spelled


@pytest.mark.parametrize("text, message", [
    ("x[3]", r"index: index 3 is out of range for axis 0 of size 3"),
    ("x[0, 0, 0]", r"too many indices for a tensor of 2 dimensions: 3"),
    ("x[..., 0, ...]", r"at most one ellipsis"),
    ("x[::0]", r"a slice step cannot be zero"),
    ("x[0.5]", r"an index must be an integer literal"),
    ("x[1:v]", r"a slice's bounds and step must be integer literals"),
    ("x[v]", r"v indexes only as an integer input"),
    ("x[w]", r"a boolean mask picks a number of elements that depends on its values"),
    ("x[0, i]", r"an integer input indexes alone"),
    ("x[i, i]", r"an integer input indexes alone"),
    ("split(x, [1, 3], axis=1)", r"split\(\) is written with a subscript"),
    ("split(x, [1, 3], axis=1)[i]", r"take one with a constant integer"),
    ("split(x, [1, 3], 1, 0)[0]", r"piece is written as the subscript"),
    ("split(x, [1, 2], axis=1)[0]", r"sizes \[1, 2\] must add up to the size of axis 1, 4"),
    ("split(x, [1, 3], axis=1)[2]", r"2 pieces have no piece 2"),
    ("index(x)", r"index\(\) is written with a subscript: x\[:, 1:3\]"),
    ("reshape(x, [5, -1])", r"cannot reshape \[3, 4\] \(12 elements\) to \[5, -1\]"),
    ("reshape(x, [-1, -1])", r"at most one size -1"),
    ("permute(x, [0, 0])", r"\[0, 0\] is not an order of the 2 axes"),
    ("expand(x, [3, 5])", r"cannot expand \[3, 4\] to \[3, 5\]"),
    ("squeeze(x, 0)", r"axis 0 has size 3, not 1"),
    ("unsqueeze(x, 3)", r"axis 3 is out of range for a tensor of 3 dimensions"),
    ("pad(x, [1, 2])", r"one \[before, after\] pair of sizes >= 0 per axis \(2 here\)"),
    ("pad(x, [[0, 0], [-1, 0]])", r"pair of sizes >= 0"),
    ("concat([x, v])", r"shapes \[3, 4\], \[4\] do not fit"),
    ("stack([x, v])", r"shapes \[3, 4\], \[4\] do not fit"),
    ("roll(x, [1, 2], 0)", r"as many shifts as axes"),
    ("tril(v)", r"needs at least two dimensions"),
    ("take(x, v)", r"takes an integer input"),
    ("gather(x, i)", r"as many dimensions"),
])
def test_mistakes_are_clear_errors_at_their_line(text, message):
    with pytest.raises(CaseFileError, match=message) as caught:
        parse(text, NAMES, file="ops.toml", case="c", line=7)
    assert "ops.toml" in str(caught.value) and "c" in str(caught.value)
    assert caught.value.line == 7


# --------------------------------------------------------------------------- the engine

SHAPES = [(), (3,), (2, 3), (2, 1), (1, 3), (2, 3, 4)]


def _run(case, point, v):
    e = engine_witness.run(case, point, v, "float64")
    try:
        t = torch_witness.run(case, point, v, "float64")
    except Exception as exc:   # noqa: BLE001 - what torch refuses, the parser must too
        raise AssertionError(f"torch refuses {case.output!r}: {exc}") from exc
    return e, t


@pytest.mark.parametrize("row", STRUCTURAL)
def test_every_drawn_spelling_matches_torch_at_every_shape(row):
    """Each template of the row (as the generators draw it) at each shape that parses,
    on a contiguous operand and a transposed one: the engine's value, gradients and
    grad_fn graph are PyTorch's, and PyTorch accepts what the parser accepts."""
    rng = np.random.default_rng(3)
    ran = 0
    for template in TEMPLATES[row]:
        others = [n for n, _ in template.inputs] or ["b"]
        for shape, first, other in itertools.product(SHAPES, ["a", "transpose(a)"], others):
            if first != "a" and len(shape) < 2:
                continue
            text = template.text.format(first, other, other)
            tables = {"a": list(shape), "b": list(shape), **{
                n: {"shape": list(s), "dtype": "int64", "domain": [0, 1]}
                for n, s in template.inputs}}
            used = {n: t for n, t in tables.items() if re.search(rf"\b{n}\b", text)}
            try:
                case = case_from_dict({"name": "t", "expr": text, "inputs": used,
                                       "gradient": "random"})
            except CaseFileError:
                continue
            point = {s.name: (np.zeros(s.shape, dtype=np.int64) if s.dtype else
                              rng.standard_normal(s.shape)) for s in case.inputs}
            e, t = _run(case, point, rng.standard_normal(case.output.shape))
            assert e.grad_fn == t.grad_fn, text
            np.testing.assert_allclose(e.value, t.value, rtol=1e-14, atol=1e-15)
            for name, g in t.grads.items():
                np.testing.assert_allclose(e.grads[name], g, rtol=1e-13, atol=1e-15)
            ran += 1
    assert ran > 0, f"{row}: no template parsed at any shape"


@pytest.mark.parametrize("expr, inputs", [
    # reshape and flatten: a view, an alias with computed strides, or a copy, by layout
    ("reshape(transpose(x), [-1])", {"x": [3, 4]}),
    ("reshape(transpose(x), [4, 3])", {"x": [3, 4]}),
    ("flatten(permute(z, [2, 0, 1]), 1, 2)", {"z": [2, 3, 4]}),
    ("flatten(permute(z, [2, 0, 1]), 0, 1)", {"z": [2, 3, 4]}),
    ("reshape(x[:, ::2], [-1])", {"x": [3, 4]}),
    ("flatten(x, 1, 1) * 2", {"x": [3, 4]}),
    ("flatten(s)", {"s": []}),
    # layouts that decide matmul's own nodes (fold or bmm, view or copy)
    ("permute(z, [0, 2, 1]) @ W", {"z": [2, 3, 4], "W": [3, 2]}),
    ("expand(v, [2, 3, 4]) @ W", {"v": [4], "W": [4, 2]}),
    ("x[:, None] @ W", {"x": [3, 4], "W": [4, 2]}),
    ("transpose(z, 0, 1) @ W", {"z": [2, 3, 4], "W": [4, 2]}),
    ("z[:, ::2] @ W", {"z": [2, 4, 4], "W": [4, 2]}),
    ("split(z, [1, 3], axis=2)[1] @ W", {"z": [2, 3, 4], "W": [3, 2]}),
    ("unsqueeze(x, 1) @ W + squeeze(unsqueeze(x, 0)) @ W2", {"x": [3, 4], "W": [4, 2],
                                                          "W2": [4, 2]}),
])
def test_layouts_record_torchs_graph(expr, inputs):
    case = make_case(expr, inputs, gradient="random")
    rng = np.random.default_rng(0)
    point = {s.name: rng.standard_normal(s.shape) for s in case.inputs}
    e, t = _run(case, point, rng.standard_normal(case.output.shape))
    assert e.grad_fn == t.grad_fn
    for name, g in t.grads.items():
        np.testing.assert_allclose(e.grads[name], g, rtol=1e-13, atol=1e-15)


def test_a_second_backward_needs_retain_graph_only_where_torch_saves_indices():
    """A view saves no tensor (a second backward works); x[idx] saves the indices, so
    a second backward without retain_graph raises, in PyTorch's words."""
    data, idx = np.arange(12.0).reshape(3, 4), np.array([0, 2, 0])

    def twice(y):
        y.sum().backward()
        try:
            y.sum().backward()
            return None
        except RuntimeError as exc:
            return str(exc)

    for key in [(Slice(), Slice(1, 3)), idx]:
        xe, xt = E.Tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        if isinstance(key, tuple):
            engine, theirs = twice(E.index(xe, key)), twice(xt[:, 1:3])
        else:
            engine, theirs = twice(E.take(xe, E.Tensor(key), 0)), twice(xt[torch.tensor(key)])
        assert engine == theirs
        assert (engine is None) == isinstance(key, tuple)


# --------------------------------------------------------------------------- rounding

def _bounds(expr, inputs, dtype, v=None):
    case = make_case(expr, inputs, gradient="random")
    rng = np.random.default_rng(0)
    point = {s.name: rng.uniform(0.5, 2, s.shape) for s in case.inputs}
    v = rng.standard_normal(case.output.shape) if v is None else v
    return case, point, error_bounds(case, point, v, dtype)


def test_a_structural_map_carries_the_bound_of_its_operand():
    """flip(exp(x)): the bound of each element is exp's bound of the element it came
    from; a pad's constant 0.1, which float32 cannot hold, carries u·0.1; an exact one
    (0.5) nothing."""
    _, point, inner = _bounds("exp(x)", {"x": [3, 4]}, "float32")
    _, _, flipped = _bounds("flip(exp(x), axis=1)", {"x": [3, 4]}, "float32")
    np.testing.assert_array_equal(flipped["value"], np.flip(inner["value"], 1))
    _, _, padded = _bounds("pad(exp(x), [[0, 0], [1, 0]], value=0.1)", {"x": [3, 4]},
                           "float32")
    u = 2.0 ** -24
    np.testing.assert_allclose(padded["value"][:, 0], u * 0.1, rtol=1e-12)
    np.testing.assert_array_equal(padded["value"][:, 1:], inner["value"])
    _, _, exact = _bounds("pad(exp(x), [[0, 0], [1, 0]], value=0.5)", {"x": [3, 4]},
                          "float32")
    assert not exact["value"][:, 0].any()


def test_adding_at_indices_bounds_the_sum_of_what_lands_on_one_element():
    """scatter_add(x, j, y): x[0, 0] receives y's 3 elements of row 0 (j all 0), a sum
    of 4 terms, γ(4)·u·(|x| + Σ|y|); an element that receives nothing is exact."""
    case = make_case("scatter_add(x, j, y, axis=1)", {
        "x": [2, 3], "y": [2, 3], "j": {"shape": [2, 3], "dtype": "int64", "domain": [0, 1]}},
        gradient="random")
    point = {"x": np.ones((2, 3)), "y": np.full((2, 3), 2.0), "j": np.zeros((2, 3), int)}
    b = error_bounds(case, point, np.ones((2, 3)), "float32")
    u = 2.0 ** -24
    np.testing.assert_allclose(b["value"][:, 0], 3 * u * 7, rtol=1e-12)
    assert not b["value"][:, 1:].any()


def test_expands_cotangent_sums_its_copies():
    """expand(v, [3, 4]) * 1: v.grad sums 3 cotangents, γ(3)·u·Σ|ḡ| per element; the
    index row's cotangent, one term per element, is exact."""
    ones = np.ones((3, 4))
    _, _, b = _bounds("expand(v, [3, -1])", {"v": [4]}, "float32", v=ones)
    np.testing.assert_allclose(b["v.grad"], 2 * 2.0 ** -24 * 3, rtol=1e-12)
    _, _, c = _bounds("x[:, 1:3]", {"x": [3, 4]}, "float32", v=np.ones((3, 2)))
    assert not c["x.grad"].any()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("expr, shapes", [
    ("sum(expand(v, [64, -1]) * x, axis=0)", {"v": [8], "x": [64, 8]}),
    ("concat([exp(x), sin(x)], axis=1)[:, ::-2] * pad(x, [[0, 0], [2, 2]])[:, 2:-2]",
     {"x": [4, 16]}),
    ("gather(tanh(x), idx, axis=1) * take(x, idx, axis=0)[:, 0]", {"x": [4, 16]}),
    # 16 terms sent to 4 places per row: sums of about 5 terms, each rounding
    ("scatter_add(exp(x), idx, tanh(x) * 3, axis=1)", {"x": [4, 16]}),
    ("index_add(x[:4], jdx, exp(x) * 3, axis=0)", {"x": [16, 16]}),
])
def test_the_bound_covers_torchs_actual_error(expr, shapes, dtype):
    from gradcheck.base.dtypes import round_to, unit_roundoff
    from gradcheck.reference import Reference

    inputs = dict(shapes)
    if "idx" in expr:
        inputs["idx"] = {"shape": [4, 16], "dtype": "int64", "domain": [0, 4]}
    if "jdx" in expr:
        inputs["jdx"] = {"shape": [16], "dtype": "int64", "domain": [0, 4]}
    case = make_case(expr, inputs, gradient="random")
    rng = np.random.default_rng(0)
    point = {s.name: (rng.integers(0, 4, s.shape) if s.dtype else
                      round_to(rng.uniform(-2, 2, s.shape), dtype)) for s in case.inputs}
    v = round_to(rng.standard_normal(case.output.shape), dtype)
    exact = Reference(case).evaluate(point, v).quantities()
    got = torch_witness.run(case, point, v, dtype).quantities()
    both = 1 + unit_roundoff("float64") / unit_roundoff(dtype)
    bounds = error_bounds(case, point, v, dtype)
    for q, e in exact.items():
        if e is not None:
            assert np.all(np.abs(got[q] - e) <= both * bounds[q]), q


# --------------------------------------------------------------------------- several outputs

class _Halves(torch.autograd.Function):
    """x cut into its first column and the rest, with a hand-written backward."""

    @staticmethod
    def forward(ctx, x):
        return x[:, :1].clone(), x[:, 1:].clone()

    @staticmethod
    def backward(ctx, g0, g1):
        return torch.cat([g0, g1], dim=1)


class _SwappedHalves(_Halves):
    @staticmethod
    def backward(ctx, g0, g1):   # the pieces' cotangents in the wrong places
        return torch.cat([g1[:, :1], torch.cat([g0, g1[:, 1:]], dim=1)], dim=1)


def test_an_op_with_several_outputs_is_checked_against_splits_pieces():
    reference = ["split(x, [1, 3], axis=1)[0]", "split(x, [1, 3], axis=1)[1]"]
    right = check_op(_Halves, reference, {"x": [3, 4]})
    assert right.status == "passed", right.message
    wrong = check_op(_SwappedHalves, reference, {"x": [3, 4]})
    assert wrong.status == "failed" and wrong.witness("op.backward").status == "failed"


def test_every_structural_row_is_checked_end_to_end():
    # the row cases of tests/test_rules.py cover each row against torch and finite
    # differences; here, one formula of them all, at once, through every witness
    case = make_case("sum(tanh(concat([flip(x, axis=1), roll(x, 1, axis=0)], axis=1)"
                     "[:, ::-2]) * pad(x, [[0, 0], [0, 0]])[:, None, :][:, 0])",
                     {"x": [3, 4]})
    result = check(case)
    assert result.status == "passed", result.message


def _op_views(x):
    return (torch.sum(torch.tanh(x.flip(1)[1:, None]) * torch.cat([x, x * x], 1)[:, 1:5][1:, None])
            + torch.sum(torch.sin(torch.nn.functional.pad(x, (0, 0, 1, 0))) ** 2))


def _op_indices(x, i, j, k):
    return (torch.sum(torch.sin(torch.gather(x, 1, i)) * x[:, :2]) + torch.sum(torch.tanh(x[j]) ** 2)
            + torch.sum(torch.sin(torch.take_along_dim(x, k, 1)) ** 2))


def _op_combined(x, v):
    return torch.sum(torch.sin(torch.stack([x, x * 2], 1)) * v.expand(3, 2, 4)
                     + torch.split(x, [1, 3], 1)[1][:, None, :1])


INDICES = {"i": {"shape": [3, 2], "dtype": "int64", "domain": [0, 4]},
           "j": {"shape": [4], "dtype": "int64", "domain": [-3, 3]},
           "k": {"shape": [1, 3], "dtype": "int64", "domain": [0, 4]}}


@pytest.mark.parametrize("op, reference, inputs", [
    (_op_views, "sum(tanh(x[:, ::-1][1:, None]) * concat([x, x * x], axis=1)[:, 1:5][1:, None])"
                " + sum(sin(pad(x, [[1, 0], [0, 0]])) ** 2)", {"x": [3, 4]}),
    (_op_indices, "sum(sin(gather(x, i, axis=1)) * x[:, :2]) + sum(tanh(x[j]) ** 2)"
                  " + sum(sin(take_along_axis(x, k, axis=1)) ** 2)", {"x": [3, 4], **INDICES}),
    (_op_combined, "sum(sin(stack([x, x * 2], axis=1)) * expand(v, [3, 2, 4])"
                   " + split(x, [1, 3], axis=1)[1][:, None, :1])", {"x": [3, 4], "v": [4]}),
], ids=["views", "indices", "combined"])
def test_double_backward_through_the_structural_rows(op, reference, inputs):
    """order = 2 at tensor level: the adjoints' own adjoints (x[key]'s embed is indexed
    back, a scatter of repeated indices gathers)."""
    result = check_op(op, reference, inputs, order=2)
    assert result.status == "passed", result.message
    assert result.witness("op.double").status == "passed"
