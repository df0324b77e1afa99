"""gradcheck.checking.diagnose: each pattern triggers on its synthetic bug, naming the right input,
and nothing triggers on correct gradients (up to rounding) or on unrelated arrays."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcheck.checking.diagnose import Sample, diagnose, diagnose_points, summarize
from gradcheck.formula.parser import parse
from gradcheck.formula.tree import Node

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
               f"({64 - wrong} of 64 elements) and wrong elsewhere")
    assert "; wrong:" not in msg  # too many wrong elements to list
    # without a reference to line the wrong elements up with, no branch is named
    assert "branch" not in msg


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


# --------------------------------------------------------------------------- across samples
# As OpCheck records them: 3 points, 2 cotangents each, x's gradient elementwise.

def formula(text, shape=(16,)):
    return parse(text, {"x": Node("input", shape=shape, name="x")})


def samples(wrong, *, points=3, draws=2, shape=(16,), low=-2.0, high=2.0, seed=20,
            ones=True):
    """Samples of x.grad = v * 3 * x**2 (x drawn uniformly in [low, high]); ``wrong(o, x,
    point, draw)`` returns the obtained gradient from the exact one."""
    rng = np.random.default_rng(seed)
    out = []
    for p in range(points):
        x = rng.uniform(low, high, shape)
        for d in range(draws):
            e = rng.normal(size=shape) * 3 * x ** 2
            out.append(Sample(p, d, {"x": wrong(e.copy(), x, p, d)}, {"x": e},
                              {"x": 3 * x ** 2} if ones else None, {"x": x}))
    return out


def test_points_are_numbered_as_points_not_samples():
    def last(o, x, p, d):
        if (p, d) == (2, 1):
            o[4] = 0.0
        return o
    msg = only(diagnose_points(samples(last)), "x.grad is right at 2 of 3 points",
               "(95 of 96 elements)", "; wrong: x.grad[4] at point 2 (got 0")
    assert "point 5" not in msg and "branch" not in msg


@pytest.mark.parametrize("indices, text", [
    ([15], "only x.grad[15] is wrong, at every point: an off-by-one?"),
    ([0, 15], "only x.grad[0] and x.grad[15] are wrong, at every point"),
])
def test_fixed_wrong_indices(indices, text):
    def missed(o, x, p, d):
        o[indices] = 0.0
        return o
    only(diagnose_points(samples(missed)), text)


def test_fixed_wrong_index_where_one_point_cannot_show_it():
    # at a point of tiny inputs the exact gradient there is about 0, which the missed
    # element's 0 matches: still the same index at every point that can show it
    def missed(o, x, p, d):
        o[15] = 0.0
        return o
    tiny = samples(missed, points=1, low=-1e-5, high=1e-5)
    s = tiny + [dataclasses.replace(smp, point=smp.point + 1) for smp in samples(missed)]
    only(diagnose_points(s), "only x.grad[15] is wrong, at every point: an off-by-one?")


def test_wrong_indices_that_move_are_not_fixed():
    def moving(o, x, p, d):
        o[p] = 0.0
        return o
    msg = only(diagnose_points(samples(moving)), "x.grad is right at 90 of 96 elements")
    assert "off-by-one" not in msg
    # one point is no evidence that the index is fixed
    msg = only(diagnose_points(samples(moving, points=1)), "right at 30 of 32 elements")
    assert "off-by-one" not in msg


@pytest.mark.parametrize("error, text", [(1e-3, "0.1% off everywhere"),
                                         (-2.5e-2, "2.5% off everywhere"),
                                         (2e-5, "0.002% off everywhere")])
def test_small_systematic_relative_error(error, text):
    msg = only(diagnose_points(samples(lambda o, x, p, d: o * (1 + error))), text,
               f"obtained/exact ≈ {1 + error:.6g}", "an approximation or a wrong constant?")
    # the single-sample factor pattern leaves it to the view across points
    assert "times the exact gradient" not in msg
    assert diagnose(samples(lambda o, x, p, d: o * (1 + error))[0].obtained,
                    samples(lambda o, x, p, d: o)[0].expected) == []


def test_points_that_agreed_and_were_not_kept_count_against_every_point_patterns():
    """A large point where every comparison agreed keeps no sample (memory), only a
    count: no pattern then holds "at every point" or "everywhere", and the points it
    counts are among those told."""
    def missed(o, x, p, d):
        o[15] = 0.0
        return o
    assert "at every point" in diagnose_points(samples(missed))[0]
    msg = only(diagnose_points(samples(missed), unkept=1),
               "x.grad is right at 1 of 4 points")
    assert "at every point" not in msg
    scaled = samples(lambda o, x, p, d: o * (1 + 1e-3))
    assert "0.1% off everywhere" in summarize(scaled)
    assert "off everywhere" not in summarize(scaled, unkept=2)

    def overflow(o, x, p, d):
        o[x > 1.5] = np.nan
        return o
    assert "(at 3 of 5 points, where x > 1.5)" in diagnose_points(samples(overflow),
                                                                 unkept=2)[0]


def test_wrong_points_past_those_kept_are_counted_as_wrong():
    """Large points that disagreed past the first few kept (memory) are counted among
    the wrong points, and no pattern is then said to hold at every point."""
    def last(o, x, p, d):
        if (p, d) == (2, 1):
            o[4] = 0.0
        return o
    only(diagnose_points(samples(last), unseen=2), "x.grad is right at 2 of 5 points")

    def missed(o, x, p, d):
        o[15] = 0.0
        return o
    assert "at every point" not in diagnose_points(samples(missed), unseen=1)[0]

    def overflow(o, x, p, d):
        o[x > 1.5] = np.nan
        return o
    assert "(at 3 of the 3 points examined, 4 more wrong, where x > 1.5)" in (
        diagnose_points(samples(overflow), unseen=4)[0])


def test_varying_or_large_relative_error_is_not_systematic():
    # an approximation whose error grows with |x| is not "off everywhere" by one amount
    assert summarize(samples(lambda o, x, p, d: o * (1 + 1e-2 * x))) == ""
    # a 10% error is no rounding-sized constant: the factor pattern names it per sample
    assert "off everywhere" not in summarize(samples(lambda o, x, p, d: o * 1.1))


@pytest.mark.parametrize("bad, kind", [(np.nan, "NaN"), (np.inf, "inf")])
def test_nonfinite_where_the_exact_gradient_is_finite(bad, kind):
    def overflow(o, x, p, d):
        o[x > 1.5] = bad
        return o
    s = samples(overflow)
    n = sum(int((smp.values["x"] > 1.5).sum()) for smp in s[::2])
    only(diagnose_points(s), f"x.grad is {kind} at {n} elements where the exact gradient is "
                             "finite (at 3 of 3 points, where x > 1.5): overflow?")


def test_wrong_beyond_a_magnitude():
    def guard(o, x, p, d):
        o[np.abs(x) > 20] = 0.0
        return o
    msg = only(diagnose_points(samples(guard, low=-40, high=40)),
               "x.grad is wrong where |x| > 20 and right elsewhere")
    assert "branch" not in msg
    def one_sided(o, x, p, d):
        o[x < -20] *= -1
        return o
    only(diagnose_points(samples(one_sided, low=-40, high=40)), "wrong where x < -20")


def test_wrong_on_repeated_backward_only():
    s = samples(lambda o, x, p, d: o)
    # a repeat of each point's first call, and the second v also came after a backward
    s = [dataclasses.replace(smp, repeat=smp.draw > 0) for smp in s]
    s += [dataclasses.replace(smp, repeat=True, obtained={"x": 2 * smp.obtained["x"]})
          for smp in s if smp.draw == 0]
    s = [dataclasses.replace(smp, obtained={"x": 3 * smp.obtained["x"]}) if smp.draw else smp
         for smp in s]
    text = ("x.grad is right on the first backward and wrong on repeats (6 of 6 later "
            "backward calls through the same graph): state modified in place?")
    assert summarize(s) == text
    # wrong on the first call too: not a state bug
    first_wrong = [dataclasses.replace(smp, obtained={"x": 3 * smp.obtained["x"]}) for smp in s]
    assert "state modified" not in summarize(first_wrong)


def test_cross_terms_only_when_the_jacobian_is_right():
    s = samples(lambda o, x, p, d: o + np.roll(o, 1))
    text = ("x.grad: the Jacobian is right (every one-hot v) but vᵀJ is wrong when several "
            "outputs have non-zero cotangents: cross terms?")
    assert summarize(s, jacobian_right=True) == text
    assert "cross terms" not in summarize(s)


def test_wrong_branch_only_where_the_reference_branches():
    def negative_side(o, x, p, d):
        o[x <= 0] = 0.0
        return o
    s = samples(negative_side)
    right = sum(int((smp.values["x"] > 0).sum()) for smp in s)
    leaky = formula("where(x > 0, x, 0.1 * x)")
    only(diagnose_points(s, reference=[leaky]),
         f"x.grad is wrong where x <= 0 and right where x > 0 ({right} of 96 elements "
         "right): a wrong branch of a piecewise?")
    # a branch elsewhere than the wrong elements is not named
    msg = only(diagnose_points(s, reference=[formula("relu(x - 1) + x")]), "where x < 0")
    assert "branch" not in msg and "x - 1" not in msg
    for ref in ([formula("x**3")], []):  # no branch at all: said as it is
        msg = only(diagnose_points(s, reference=ref), "x.grad is wrong where x < 0")
        assert "branch" not in msg
    # relu, abs and maximum branch too (on the sign of their argument, on which wins)
    only(diagnose_points(s, reference=[formula("relu(x) + abs(x)")]),
         "wrong where x <= 0 and right where x > 0")
    only(diagnose_points(s, reference=[formula("maximum(x, 0 * x)")]),
         "wrong where x <= 0 * x and right where x > 0 * x")


def test_wrong_elements_off_the_branch_are_not_a_branch():
    rng = np.random.default_rng(21)
    picked = rng.random((3, 16)) < 0.3  # wrong at random elements, each point its own

    def scattered(o, x, p, d):
        o[picked[p] & (x <= 0)] *= 2
        o[picked[p] & (x > 0)] *= -1
        return o
    msg = only(diagnose_points(samples(scattered), reference=[formula("where(x > 0, x, 0)")]),
               "x.grad is right at")
    assert "branch" not in msg and "off-by-one" not in msg and "where x" not in msg


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["float64", "float32"]))
def test_no_diagnosis_across_samples_of_correct_gradients(seed, dtype):
    rng = np.random.default_rng(seed)
    rel = 5e-7 if dtype == "float64" else 5e-5

    def rounded(o, x, p, d):
        return o * (1 + rng.uniform(-rel, rel, o.shape))
    s = samples(rounded, seed=seed, low=-40, high=40)
    s += [dataclasses.replace(smp, repeat=True) for smp in s]
    ref = [formula("where(x > 0, x**3, relu(-x))")]
    assert summarize(s, dtype, reference=ref) == ""
    assert summarize(s, dtype, reference=ref, jacobian_right=True) == ""


# --------------------------------------------------------------------------- formula witnesses

def test_formula_witness_diagnosis_sees_branches_and_points(monkeypatch):
    """A witness wrong on one branch of the formula: the runner's diagnosis names that
    branch (it passes the reference and each point's values along)."""
    import gradcheck
    import gradcheck.checking.case as runner

    real = runner.witness

    def wrong_on_the_left(name):
        compute = real(name)
        if name != "torch":
            return compute

        def call(case, point, v, dtype, **hints):
            got = compute(case, point, v, dtype, **hints)
            return dataclasses.replace(got, grads={
                n: np.where(point["x"] <= 0, 0.0, g) for n, g in got.grads.items()})
        return call

    monkeypatch.setattr(runner, "witness", wrong_on_the_left)
    result = gradcheck.check("sum(where(x > 0, x**2, -x))", {"x": (16,)},
                             witnesses=["symbolic", "torch"], points=3)
    torch_result = result.witness("torch")
    assert torch_result.status == "failed"
    assert torch_result.diagnosis.startswith("x.grad is wrong where x <= 0 and right where "
                                             "x > 0 (")
    assert torch_result.diagnosis.endswith("elements right): a wrong branch of a piecewise?")


def test_a_pattern_seen_at_one_point_only_is_not_the_diagnosis():
    # a guard taken at every element of one (extreme) point looks like "zero" there
    def guard(o, x, p, d):
        o[np.abs(x) > 20] = 0.0
        return o
    extreme = samples(guard, points=1, low=25, high=40)
    s = [dataclasses.replace(smp, point=smp.point + 1)
         for smp in samples(guard, low=-40, high=40)]
    assert diagnose(extreme[0].obtained, extreme[0].expected) == [
        "x.grad is zero but the exact gradient is not"]
    text = summarize(extreme + s)
    assert text.startswith("x.grad is wrong where |x| > 20 and right elsewhere"), text
    # the same pattern at every point where x is wrong is said as at one point
    flipped = samples(lambda o, x, p, d: -o if p else o)
    assert summarize(flipped) == "x.grad has its sign flipped: it equals minus the exact gradient"


def test_the_package_keeps_its_names_and_splits_its_two_jobs():
    import gradcheck.checking.diagnose as d
    from gradcheck.checking.diagnose import gradient, points, summary

    assert d.diagnose is gradient.diagnose and d.summarize is summary.summarize
    assert d.Sample is points.Sample and d.diagnose_points is points.diagnose_points
    # a float32 sample is judged by float32's pattern tolerance (1e-4 relative): 1.00005
    # times the exact gradient is right there, and wrong in float64
    s = [Sample(0, 0, {"x": np.array([1.00005, 2.0001])}, {"x": np.array([1.0, 2.0])})]
    assert summarize(s, "float32") == ""
    assert summarize(s, "float64") != ""


def test_the_diagnosis_calls_wrong_what_the_verdict_did(monkeypatch):
    """A backward 2e-5 off where x > 1 in float32: the verdict's tolerance (rounding,
    about 1e-6) calls those elements wrong, the patterns' looser one (1e-4) would not;
    the diagnosis reads the verdict's, so its counts are the message's (with the
    patterns' it had none to give)."""
    import dataclasses
    import re

    import torch

    from gradcheck import check
    from gradcheck.rules import RULES

    class Sin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.cos(x) * torch.where(x > 1, 1 + 2e-5, 1.0)

    monkeypatch.setitem(RULES, "sin", dataclasses.replace(RULES["sin"], torch=Sin.apply))
    torch_w = check("sum(sin(x) * y)", {"x": [40], "y": [40]},
                    dtype="float32").witness("torch")
    assert torch_w.status == "failed"
    wrong = int(re.match(r"(\d+) / ", torch_w.message).group(1))
    right, total = map(int, re.search(r"\((\d+) of (\d+) elements",
                                      torch_w.diagnosis).groups())
    assert total - right == wrong
