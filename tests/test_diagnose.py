"""gradcheck.diagnose: each pattern triggers on its synthetic bug, naming the right input,
and nothing triggers on correct gradients (up to rounding) or on unrelated arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcheck.diagnose import diagnose, diagnose_points

SHAPES = [(), (5,), (3, 4), (2, 3, 4)]


def grads(shape, seed=0, names=("x", "y")):
    rng = np.random.default_rng(seed)
    return {n: rng.normal(size=shape) for n in names}


def only(messages, *words):
    """The single message, which names every word."""
    assert len(messages) == 1, messages
    for w in words:
        assert w in messages[0], (w, messages)
    return messages[0]


# --------------------------------------------------------------------------- sign flip

@pytest.mark.parametrize("shape", SHAPES)
def test_sign_flip(shape):
    e = grads(shape)
    msg = only(diagnose({"x": e["x"], "y": -e["y"]}, e), "y.grad", "sign flipped")
    assert "x.grad" not in msg and "times" not in msg and "factor" not in msg


def test_sign_flip_of_zero_gradient_is_not_reported():
    e = {"x": np.zeros((3, 2)), "y": np.array([0.0, 1e-12])}
    assert diagnose({n: -v for n, v in e.items()}, e) == []


def test_sign_flip_with_some_zero_elements():
    e = {"x": np.array([0.0, 1.5, -2.0, 0.0])}
    only(diagnose({"x": -e["x"]}, e), "x.grad", "sign flipped")


# --------------------------------------------------------------------------- factor

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("factor, text", [(2.0, "2 times"), (0.5, "1/2 of"),
                                          (-2.0, "-2 times"), (1.5, "3/2 times"),
                                          (-0.5, "-1/2 times")])
def test_simple_factor(shape, factor, text):
    e = grads(shape, seed=1)
    only(diagnose({"x": factor * e["x"], "y": e["y"]}, e), "x.grad ", text)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_arbitrary_factor(shape):
    e = grads(shape, seed=2)
    only(diagnose({"x": e["x"], "y": 1.2345 * e["y"]}, e), "y.grad", "1.2345 times")


def test_arbitrary_factor_of_a_scalar_is_not_reported():
    # any wrong scalar is some factor times the right one: only simple factors say anything
    e = grads((), seed=3)
    assert diagnose({"x": 1.2345 * e["x"], "y": e["y"]}, e) == []


def test_zero_gradient():
    e = grads((3, 4), seed=4)
    only(diagnose({"x": np.zeros((3, 4)), "y": e["y"]}, e), "x.grad is zero")


def test_factor_rule_excludes_plus_and_minus_one():
    e = grads((4,), seed=5)
    assert diagnose(dict(e), e) == []
    msg = only(diagnose({"x": -e["x"], "y": e["y"]}, e), "sign flipped")
    assert "-1 times" not in msg


@pytest.mark.parametrize("shape, n, where", [((3, 4), 4, "axis 1 of x"),
                                             ((5,), 5, "axis 0 of x"),
                                             ((3, 4), 12, "number of elements of x")])
def test_mean_instead_of_sum(shape, n, where):
    e = grads(shape, seed=6)
    msg = only(diagnose({"x": e["x"] / n, "y": e["y"]}, e), "x.grad", f"1/{n} of",
               where, "mean instead of sum?")
    assert "y.grad" not in msg
    only(diagnose({"x": e["x"] * n, "y": e["y"]}, e), f"{n} times", where,
         "sum instead of mean?")


def test_mean_instead_of_sum_over_broadcast_axis():
    rng = np.random.default_rng(7)
    e = {"x": rng.normal(size=(3,)), "w": rng.normal(size=(4, 3))}
    only(diagnose({"x": e["x"] / 4, "w": e["w"]}, e), "x.grad is 1/4 of",
         "number of times x is broadcast", "mean instead of sum?")


# --------------------------------------------------------------------------- swapped

@pytest.mark.parametrize("shape", SHAPES)
def test_swapped_both_ways(shape):
    e = grads(shape, seed=8, names=("a", "b", "c"))
    only(diagnose({"a": e["a"], "b": e["c"], "c": e["b"]}, e),
         "b.grad and c.grad are swapped")


@pytest.mark.parametrize("shape", SHAPES)
def test_swapped_one_way(shape):
    e = grads(shape, seed=9)
    only(diagnose({"x": e["x"], "y": e["x"]}, e), "y.grad is the exact gradient of x",
         "gradient for x was returned for y")


def test_swap_of_identical_gradients_is_not_reported():
    g = np.random.default_rng(10).normal(size=(3,))
    e = {"x": g, "y": g.copy()}
    assert diagnose({"x": e["y"], "y": e["x"]}, e) == []


# --------------------------------------------------------------------------- transpose

@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 3, 4)])
def test_transpose(shape):
    e = grads(shape, seed=11)
    t = np.swapaxes(e["y"], -1, -2)
    msg = only(diagnose({"x": e["x"], "y": t}, e), "y.grad is the transpose")
    assert ("instead of" in msg) == (t.shape != shape)


def test_transpose_of_symmetric_matrix_is_not_reported():
    a = np.random.default_rng(12).normal(size=(4, 4))
    e = {"x": a + a.T}
    assert diagnose({"x": e["x"].T}, e) == []


# --------------------------------------------------------------------------- broadcasting

@pytest.mark.parametrize("full, shape, axes", [
    ((4, 3), (3,), "sum over axis 0)"),
    ((4, 3), (4, 1), "sum over axis 1 keeping axis 1 as size 1"),
    ((2, 4, 3), (4, 1), "sum over axes 0, 2 keeping axis 2 as size 1"),
    ((5,), (), "sum over axis 0)"),
])
def test_broadcast_not_summed_back(full, shape, axes):
    rng = np.random.default_rng(13)
    g = rng.normal(size=full)                       # the cotangent of the broadcast x
    e = {"x": g.sum(axis=tuple(range(len(full) - len(shape))))
         .sum(axis=tuple(d for d, n in enumerate(shape) if n == 1), keepdims=True)
         .reshape(shape), "y": rng.normal(size=full)}
    only(diagnose({"x": g, "y": e["y"]}, e), "x.grad has shape", "broadcasting not summed",
         axes)


# --------------------------------------------------------------------------- grad_output

@pytest.mark.parametrize("shape", SHAPES)
def test_grad_output_ignored(shape):
    rng = np.random.default_rng(14)
    d = {"x": rng.normal(size=shape), "y": rng.normal(size=shape)}  # dy/dinput, elementwise
    v = rng.normal(size=shape)
    e = {n: v * g for n, g in d.items()}
    only(diagnose({"x": e["x"], "y": d["y"]}, e, ones_vjp=d), "y.grad ignores grad_output")


def test_grad_output_ones_is_not_reported():
    e = grads((3,), seed=15)
    assert diagnose(dict(e), e, ones_vjp=e) == []


# --------------------------------------------------------------------------- None

def test_missing_and_unexpected_gradients():
    e = grads((3,), seed=16)
    msgs = diagnose({"x": None, "y": e["y"], "k": np.ones(3)}, e)
    assert msgs == ["x.grad is None, but x needs a gradient (a differentiable path reaches "
                    "the output)",
                    "k.grad should be None: no differentiable path from k reaches the output"]
    assert "x.grad is None" in diagnose({"y": e["y"]}, e)[0]


def test_most_specific_first_and_one_message_per_input():
    e = grads((3, 4), seed=17, names=("a", "b", "c", "d"))
    msgs = diagnose({"a": None, "b": 3 * e["b"], "c": -e["c"], "d": e["d"]}, e)
    assert len(msgs) == 3
    assert "a.grad is None" in msgs[0]
    assert "c.grad has its sign flipped" in msgs[1]
    assert "b.grad is 3 times" in msgs[2]


# --------------------------------------------------------------------------- no false alarms

@st.composite
def correct_up_to_rounding(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    names = ["x", "y", "z"][:draw(st.integers(1, 3))]
    elements = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    expected = {}
    for n in names:  # sometimes the same gradient twice (an exact swap)
        if expected and draw(st.booleans()):
            expected[n] = expected[names[0]].copy()
        else:
            expected[n] = draw(hnp.arrays(float, shape, elements=elements))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    obtained = {}
    for n, e in expected.items():
        if draw(st.booleans()):
            obtained[n] = e.astype(np.float32).astype(float)
        else:
            scale = max(1.0, float(np.max(np.abs(e))))
            obtained[n] = (e * (1 + rng.uniform(-5e-7, 5e-7, shape))
                           + rng.uniform(-5e-10, 5e-10, shape) * scale)
    ones = {n: rng.normal(size=shape) for n in names}
    return obtained, expected, ones


@settings(max_examples=300)
@given(correct_up_to_rounding())
def test_no_pattern_on_correct_gradients(case):
    obtained, expected, ones = case
    assert diagnose(obtained, expected, ones_vjp=ones) == []
    assert diagnose_points([(obtained, expected)] * 2) == []


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1), st.sampled_from(SHAPES))
def test_no_pattern_on_unrelated_arrays(seed, shape):
    rng = np.random.default_rng(seed)
    expected = {n: rng.normal(size=shape) for n in "xy"}
    obtained = {n: rng.normal(size=shape) * rng.uniform(0.1, 10) for n in "xy"}
    ones = {n: rng.normal(size=shape) for n in "xy"}
    assert diagnose(obtained, expected, ones_vjp=ones) == []


# --------------------------------------------------------------------------- diagnose_points

def test_right_at_some_points_only():
    rng = np.random.default_rng(18)
    pairs = []
    for p in range(4):
        e = {"x": rng.normal(size=(4, 4)), "y": rng.normal(size=(3,))}
        o = dict(e)
        if p % 2:  # the negative branch has the wrong derivative
            o["x"] = np.where(e["x"] < 0, 3 * e["x"], e["x"])
        pairs.append((o, e))
    wrong = sum(int((e["x"] < 0).sum()) for o, e in pairs[1::2])
    msg = only(diagnose_points(pairs), "x.grad is right at 2 of 4 points",
               f"({64 - wrong} of 64 elements)", "wrong branch of a piecewise?")
    assert "; wrong:" not in msg  # too many wrong elements to list


def test_right_at_some_elements_lists_the_few_wrong_ones():
    e = {"x": np.array([[1.0, -2.0], [3.0, 4.0]])}
    o = {"x": np.array([[1.0, 0.0], [3.0, 4.0]])}
    msg = only(diagnose_points([(o, e)]), "x.grad is right at 3 of 4 elements")
    assert msg.endswith("; wrong: x.grad[0,1] at point 0 (got 0, expected -2)")


def test_scalar_right_at_some_points():
    pairs = [({"x": np.float64(1.0)}, {"x": np.float64(1.0)}),
             ({"x": np.float64(0.0)}, {"x": np.float64(2.0)})]
    msg = only(diagnose_points(pairs), "x.grad is right at 1 of 2 points (1 of 2 elements)")
    assert "x.grad at point 1 (got 0, expected 2)" in msg


def test_uniform_error_is_not_partial_even_where_the_gradient_is_zero():
    rng = np.random.default_rng(19)
    pairs = []
    for _ in range(3):
        e = rng.normal(size=(5,))
        e[::2] = 0.0  # these match any sign flip or factor: no evidence
        pairs.append(({"x": -e}, {"x": e}))
        pairs.append(({"x": 0.5 * e}, {"x": e}))
    assert diagnose_points(pairs) == []


def test_none_at_every_point_is_not_partial():
    e = {"x": np.ones(3)}
    assert diagnose_points([({"x": None}, e), ({"x": None}, e)]) == []
    # right at one point, None at the other: partial, elements not listed
    msg = only(diagnose_points([({"x": np.ones(3)}, e), ({"x": None}, e)]),
               "right at 1 of 2 points (3 of 6 elements)")
    assert "; wrong:" not in msg
