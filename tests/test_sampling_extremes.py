"""Extreme points (gradcheck.sampling.points.case_points, issue 10 part 6): after the bulk
points, points at large and small magnitudes, seeded, inside the domains, off the kinks,
within the dtype's ceiling, with pinned values untouched."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
import torch

import gradcheck
from gradcheck.sampling import points as sampling
from gradcheck.cases import case_from_dict, in_domain
from gradcheck.cli.main import main
from gradcheck.base.errors import CaseFileError
from gradcheck.formula.forward import evaluate, hazard_distances
from gradcheck.rules import COMPOSITE, ELEMENTWISE, REDUCTION, RULES
from gradcheck.checking.case import run_case
from gradcheck.session.runner import RunOptions, override
from gradcheck.formula.tree import walk

from conftest import make_case


def points(case, dtype="float64"):
    return list(sampling.case_points(case, dtype))


def extremes(case, dtype="float64"):
    """(large, small): the first two extreme points."""
    return points(case, dtype)[case.points:case.points + 2]


# --------------------------------------------------------------------------- the bulk

def _digest(pts) -> str:
    h = hashlib.sha256()
    for p in pts:
        for name in sorted(p.values):
            h.update(np.ascontiguousarray(p.values[name], dtype=np.float64).tobytes())
    return h.hexdigest()


GOLDEN = dict(name="golden", expr="sum(abs(x) * y + log(z)) + sum(w)", seed=5,
              inputs={"x": {"shape": [40]}, "y": {"shape": [40], "domain": [-1, 3]},
                      "z": {"shape": [40], "domain": "positive"},
                      "w": {"shape": [2], "value": [0.5, 1.0]}})


@pytest.mark.parametrize("dtype, digest", [
    # the points of the sampler before extreme points existed (commit 40c14b5): a case
    # whose kinks make settle redraw whole points
    ("float64", "621f4c1eb17b25147106dd1a3395d6f3285e131d478c1c762b0137f286d930c3"),
    ("float32", "664beb392075a3e54f39fa9cfce8aa5e1fc92ffb5debe6ed62881ded82aeec6d"),
])
def test_extreme_points_0_gives_exactly_the_old_points(dtype, digest):
    off = case_from_dict({**GOLDEN, "extreme_points": 0, "kink_points": 0})
    assert len(points(off, dtype)) == off.points == 3
    assert _digest(points(off, dtype)) == digest
    # with extreme points on, the bulk is the same and the extremes come after it, then
    # the kink points (abs's: gradcheck.sampling.kinks)
    on = case_from_dict(GOLDEN)
    assert on.extreme_points == 2
    assert _digest(points(on, dtype)[:3]) == digest
    assert len(points(on, dtype)) == 7
    assert _digest(points(case_from_dict({**GOLDEN, "extreme_points": 0}), dtype)[:3]) \
        == digest


def test_points_are_reproducible_per_seed_and_do_not_depend_on_points():
    case = make_case("sum(x * y)", {"x": [16], "y": [16]}, seed=3)
    again = make_case("sum(x * y)", {"x": [16], "y": [16]}, seed=3)
    other = make_case("sum(x * y)", {"x": [16], "y": [16]}, seed=4)
    more = make_case("sum(x * y)", {"x": [16], "y": [16]}, seed=3, points=5)
    a, b, c, d = (extremes(k) for k in (case, again, other, more))
    for p, q, r, s in zip(a, b, c, d):
        for name in ("x", "y"):
            assert np.array_equal(p.values[name], q.values[name])
            assert np.array_equal(p.values[name], s.values[name])  # renumbered only
            assert not np.array_equal(p.values[name], r.values[name])
    assert [p.notes[0].split(" is ")[0] for p in d] == ["point 5", "point 6"]


# --------------------------------------------------------------------------- magnitudes

@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_magnitudes_span_the_bands(dtype):
    case = make_case("sum(x)", {"x": [64]})
    large, small = (np.abs(p.values["x"]) for p in extremes(case, dtype))
    largest, low = sampling.largest_extreme(dtype), 2.0 * sampling.reach(dtype)
    # 32 elements of each sign stratified over each band's logarithm: one in every
    # 32nd of it
    assert 2.0 * 0.99 <= large.min() <= 2.0 * (largest / 2.0) ** (1 / 32)
    assert largest * (2.0 / largest) ** (1 / 32) <= large.max() <= largest * 1.01
    assert low * 0.99 <= small.min() <= low * (0.2 / low) ** (1 / 32)
    assert 0.2 * (low / 0.2) ** (1 / 32) <= small.max() <= 0.2 * 1.01
    # both signs, as many of each, and log-spread: about as many per decade
    assert (extremes(case, dtype)[0].values["x"] > 0).sum() == 32
    assert np.isclose(np.median(np.log(large)), (math.log(2) + math.log(largest)) / 2,
                      atol=0.1 * math.log(largest / 2))


def test_the_reach_is_documented_in_numbers():
    assert sampling.largest_extreme("float32") == pytest.approx(44.36, abs=0.01)
    # see the rules
    assert sampling.largest_extreme("float64") == sampling.largest_extreme("float32")
    assert sampling.largest_extreme("float16") == pytest.approx(math.log(math.sqrt(65504.0)))
    assert sampling.reach("float64") == pytest.approx(math.sqrt(2.0 ** -52))
    assert sampling.reach("float32") == sampling.reach("bfloat16") == 1e-4


def test_each_extreme_point_says_what_it_sampled():
    case = make_case("sum(x * y)", {"x": [8], "y": {"shape": [8], "domain": [1, 100]}})
    large, small = extremes(case, "float32")
    assert large.notes[0].startswith("point 3 is an extreme point, large magnitudes: |x| ")
    assert "y " in large.notes[0] and " from 100 " in large.notes[0]
    assert small.notes[0].startswith("point 4 is an extreme point, small magnitudes: |x| ")
    assert " from 1 " in small.notes[0]
    lo, hi = (float(v) for v in
              large.notes[0].split("|x| ")[1].split(";")[0].split(" to "))
    x = np.abs(large.values["x"])
    assert (lo, hi) == (float(f"{x.min():.2g}"), float(f"{x.max():.2g}"))
    # and the report of a run keeps these notes
    result = run_case(case, "float32", timeout=None)
    assert sum("is an extreme point" in n for n in result.notes) == 2


# --------------------------------------------------------------------------- domains

@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_points_stay_in_their_domains(dtype):
    inputs = {"r": [32], "p": {"shape": [32], "domain": "positive"},
              "n": {"shape": [32], "domain": "nonnegative"},
              "z": {"shape": [32], "domain": "nonzero"}, "u": {"shape": [32], "domain": "unit"},
              "i": {"shape": [32], "domain": [-30, 30]}, "j": {"shape": [32], "domain": [1, 100]}}
    case = make_case("sum(r + p + n + z + u + i + j)", inputs)
    large, small = extremes(case, dtype)
    for point in (large, small):
        for spec in case.inputs:
            assert in_domain(point.values[spec.name], spec.domain).all(), spec.name
    assert (large.values["p"] >= 3 * 0.99).all() and (small.values["p"] <= 0.3 * 1.01).all()
    assert (np.abs(large.values["u"]) >= 0.8 - 1e-3).all()        # toward the ends
    assert (np.abs(small.values["u"]) <= 0.1 * 1.01).all()        # toward 0
    assert (np.abs(large.values["i"]) >= 24 - 1e-3).all()         # toward -30 and 30
    assert (large.values["i"] < 0).any() and (large.values["i"] > 0).any()
    assert (np.abs(small.values["i"]) <= 3 * 1.01).all()          # toward 0, inside
    assert (large.values["j"] >= 100 - 9.9 * 1.01).all()          # the end far from 0
    assert (small.values["j"] <= 1 + 9.9 * 1.01).all()            # the end near 0


@pytest.mark.parametrize("expr, inputs", [
    ("sum(abs(x))", {"x": [200]}),
    ("sum(log(x) * y)", {"x": {"shape": [50], "domain": "positive"}, "y": [50]}),
    ("sum(relu(x @ W))", {"x": [4, 3], "W": [3, 2]}),
    ("sum(atanh(u))", {"u": {"shape": [50], "domain": "unit"}}),
])
def test_extreme_points_keep_the_margin_from_kinks(expr, inputs):
    case = make_case(expr, inputs)
    for point in extremes(case, "float32"):
        assert not [n for n in point.notes if "kink" in n]
        for node, distance in hazard_distances(case.output, point.values):
            assert distance.min() >= sampling.MARGIN, node


def test_pinned_values_are_never_changed():
    case = make_case("sum(exp(x) * y)", {"x": {"shape": [3], "value": [0.5, -1, 2]},
                                          "y": [3]})
    for point in extremes(case, "float32"):
        assert point.values["x"].tolist() == [0.5, -1.0, 2.0]
    assert np.abs(extremes(case)[0].values["y"]).min() >= 2.0 * 0.99
    every = make_case("sum(x)", {"x": {"shape": [2], "value": [1.0, 2.0]}})
    assert len(points(every)) == every.points    # nothing to move: no extreme points


# --------------------------------------------------------------------------- the ceiling

@pytest.mark.parametrize("seed", range(10))
def test_exp_in_float32_never_samples_past_overflow(seed):
    big = float(np.finfo(np.float32).max)
    elementwise = make_case("sum(exp(x))", {"x": [64]}, seed=seed)
    mixing = make_case("sum(exp(x @ W))", {"x": [4, 8], "W": [8, 3]}, seed=seed)
    for point in extremes(elementwise, "float32"):
        x = point.values["x"].astype(np.float32)
        assert x.max() <= math.log(math.sqrt(big))       # 44: exp and its gradient
        assert np.isfinite(np.exp(x) * np.exp(x)).all()  # room even for a square
    assert (np.abs(extremes(elementwise, "float32")[0].values["x"]) > 20).any()
    for point in extremes(mixing, "float32"):
        x, w = (point.values[n].astype(np.float32) for n in ("x", "W"))
        with np.errstate(over="raise"):
            z = x @ w
            assert np.isfinite(np.exp(z)).all() and z.max() <= 44.4
    # pulled in as a whole, not thrown back into the bulk
    assert np.abs(extremes(mixing, "float32")[0].values["x"]).max() > 2


def test_the_reference_of_sigmoid_and_softplus_stays_finite():
    """Their values are bounded where the reference's exp(-x) is not."""
    from gradcheck.reference import Reference

    case = make_case("sum(sigmoid(x @ w) + softplus(-(x @ w)))", {"x": [6, 3], "w": [3]})
    ref = Reference(case)
    for point in extremes(case):
        e = ref.evaluate(point.values, np.ones(()))
        assert np.isfinite(e.value).all()
        assert all(np.isfinite(g).all() for g in e.grads.values())
        z = point.values["x"] @ point.values["w"]
        assert np.abs(z).max() <= math.log(sampling.ceiling("float64"))


def test_every_exponential_row_is_listed():
    """EXPONENTIAL is the rows whose SymPy column goes through exp, sinh, cosh or expm1
    (the rule table is the truth; a new such row must be listed, or the reference may
    overflow where the forward's values do not)."""
    import sympy
    from sympy.codegen import cfunctions

    t = sympy.Symbol("t", real=True)
    found = set()
    for name, rule in RULES.items():
        if rule.selector is not None or rule.domain_of(0) == "integer":
            continue   # max, min: a one-hot of the argument; one_hot: integer labels
        # the row's parameters at their defaults (axis 0), number parameters given
        given = {p.name: 0.5 for p in rule.params if p.kind == "number"}
        if rule.family in (REDUCTION, COMPOSITE) and not rule.variadic:   # along an axis
            # (of two pairs: the FFTs of a complex operand take the view_as_real layout)
            form = rule.call("sympy", [np.array([[t, 2 * t], [-t, 3 * t]], dtype=object)],
                             rule.bind([(2, 2)], given))
        elif rule.family == ELEMENTWISE and rule.arity == 1:
            form = rule.call("sympy", [t], rule.bind([()], given))
        else:
            continue
        if any(sympy.sympify(f).has(sympy.exp, sympy.sinh, sympy.cosh, cfunctions.expm1)
               for f in np.asarray(form, dtype=object).flat):   # (softmax's: an array)
            found.add(name)
    assert found == set(sampling.EXPONENTIAL)


# --------------------------------------------------------------------------- catching

class GuardedSoftplus(torch.autograd.Function):
    """softplus with PyTorch's overflow guard at x > 20; ``WRONG`` scales the guard
    branch's gradient (1: right)."""

    WRONG = 1.0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        guard = x > 20    # there x + log1p(exp(-x)): exact, where exp(x) could overflow
        return torch.where(guard, x + torch.log1p(torch.exp(-x)), torch.log1p(torch.exp(x)))

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.where(x > 20, cls.WRONG * torch.sigmoid(x), torch.sigmoid(x))


class HalvedGuard(GuardedSoftplus):
    WRONG = 0.5


def test_a_wrong_overflow_guard_is_caught_only_with_extreme_points():
    def check(op, **keys):
        return gradcheck.check_op(op, "log(1 + exp(x))", {"x": (8,)}, **keys)

    assert check(HalvedGuard, extreme_points=0).status == "passed"   # [-2, 2] only
    caught = check(HalvedGuard)
    assert caught.status == "failed"
    backward = caught.witness("op.backward")
    assert backward.status == "failed" and backward.worst.point == 3   # the large point
    assert "point 3" in backward.message
    assert check(GuardedSoftplus).status == "passed", check(GuardedSoftplus).message


# --------------------------------------------------------------------------- the key

def test_extreme_points_is_a_case_and_defaults_key():
    assert make_case("sum(x)", {"x": [2]}).extreme_points == 2
    assert make_case("sum(x)", {"x": [2]}, extreme_points=0).extreme_points == 0
    table = {"name": "t", "expr": "sum(x)", "inputs": {"x": [2]}}
    assert case_from_dict(table, defaults={"extreme_points": 5}).extreme_points == 5
    for bad in (-1, 1001, 2.5, True, "2"):
        with pytest.raises(CaseFileError, match=r"extreme_points must be an integer from "
                                                r"0 to 1000, got"):
            case_from_dict({**table, "extreme_points": bad})


def test_override_and_the_command_line(tmp_path, capsys):
    case = make_case("sum(x)", {"x": [2]})
    assert override(case, RunOptions(extreme_points=0)).extreme_points == 0
    assert override(case, RunOptions()) is case
    path = tmp_path / "c.toml"
    path.write_text('[defaults]\nextreme_points = 1\n\n[[case]]\nname = "sq"\n'
                    'expr = "sum(x**2)"\ninputs.x = { shape = [3] }\npoints = 2\n')

    def checked(*flags) -> int:
        code = main(["run", str(path), "--format", "json", *flags])
        assert code == 0
        [c] = json.loads(capsys.readouterr().out)["cases"]
        return c["witnesses"]["torch"]["checked"]

    # 1 value + 3 gradient elements per point
    assert checked() == (2 + 1) * 4                       # from [defaults]
    assert checked("--extreme-points", "0") == 2 * 4
    assert checked("--extreme-points", "3") == (2 + 3) * 4
    assert main(["run", str(path), "--extreme-points", "-1"]) == 2
    assert "--extreme-points must be from 0 to 1000" in capsys.readouterr().err


def test_every_node_is_seen_by_the_ceiling():
    """The ceiling reads every applied primitive of the formula, lets included."""
    case = make_case("sum(h * 2)", {"x": [4]}, let={"h": "cosh(x)"})
    for point in extremes(case, "float16"):
        values = []
        evaluate(case.output, point.values, on_node=lambda n, a, v: values.append(v))
        assert len(values) == len([n for n in walk(case.output)
                                   if n.op not in ("input", "const", "let")])
        assert max(np.abs(v).max() for v in values) <= sampling.ceiling("float16")


def _passes(monkeypatch) -> list:
    """The forward passes the sampling makes to find hazards (one per call)."""
    calls = []
    real = sampling._too_close

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sampling, "_too_close", counted)
    return calls


def test_a_mixing_point_past_the_ceiling_even_at_the_bulks_scale_is_drawn_from_the_bulk(
        monkeypatch):
    """A formula that mixes elements redraws whole inputs: where its large extreme point
    passes the ceiling even with every element at the bulk's scale (λ = 0: softmax of
    scaled sums of 300 products), no draw of the band can keep it. The pull asks λ = 1
    and λ = 0 (not a bisection of PULL_STEPS passes), the point is drawn from the bulk
    at once with no ceiling rounds, and its notes say so and what stays beyond."""
    case = make_case("sum(softmax((x @ W) * 100, axis=-1) * (x @ W))",
                     {"x": [4, 300], "W": [300, 4]}, extreme_points=1)
    calls, pulls, evaluations = _passes(monkeypatch), [], []
    real, evaluate = sampling._beyond, sampling.evaluate
    monkeypatch.setattr(sampling, "_beyond", lambda *a: pulls.append(1) or real(*a))
    monkeypatch.setattr(sampling, "evaluate",
                        lambda *a, **k: evaluations.append(1) or evaluate(*a, **k))
    point = sampling.extreme(case, "float64", 0, case.points)
    assert len(pulls) == 2, len(pulls)
    # settle's one pass, which also reads what it could not fix (the ceiling, the
    # range, the kinks): no pass of their own after it (there were two)
    assert len(calls) == 1 and not evaluations, (len(calls), len(evaluations))
    assert any("drawn from the bulk" in n for n in point.notes), point.notes
    assert any("keeps a value beyond" in n for n in point.notes), point.notes
    assert 1.0 < np.abs(point.values["x"]).max() <= 2.0     # (a bulk draw: [-2, 2])


def test_a_mixing_point_past_the_ceiling_stops_after_one_bulk_draw(monkeypatch):
    """The small extreme point of a normalised formula sits near sqrt's singularity at
    every draw of the band (mean(x²) < MARGIN, at every row): two passes in a row
    that find it so send the redraws to the bulk (not EXTREME_ROUNDS of them); the
    first draw from the bulk keeps the kinks away but passes the ceiling (logits of
    2000). The ceiling is the band's: a bulk point keeps none, so it stops there,
    not after more bulk draws or MAX_ROUNDS forward passes."""
    case = make_case("sum(softmax((x @ W) * 100 / sqrt(mean(x ** 2, axis=-1, "
                     "keepdims=True)), axis=-1))", {"x": [4, 300], "W": [300, 4]},
                     extreme_points=2)
    calls = _passes(monkeypatch)
    point = sampling.extreme(case, "float64", 1, case.points + 1)
    # settle's first pass, one band round and one bulk round (there were 11 passes)
    assert len(calls) <= 3, len(calls)
    assert sampling.CEILING_ROUNDS == sampling.EXTREME_ROUNDS + 1
    assert any("keeps a value beyond" in n for n in point.notes), point.notes
    assert not point.near


def test_the_band_gives_way_to_the_bulk_only_where_every_element_stays_near_twice():
    """_band_rounds: a kink near every element of one node in two passes in a row (a
    new round between them) ends the band's redraws, for good; near at every element
    once, or at some elements only, does not; an elementwise formula, fixed element
    by element, keeps the band for EXTREME_ROUNDS whatever its passes find."""
    case = make_case("sum(sqrt(x))", {"x": [3]})
    node = case.output.args[0]
    every, some = np.ones(3, dtype=bool), np.array([True, False, True])
    seen = {"kinks": [(node, every)]}
    banded = sampling._band_rounds(seen, elementwise=False)
    assert banded(0) and banded(0)            # (once: a draw's chance, perhaps)
    seen["kinks"] = [(node, some)]
    assert banded(1)
    seen["kinks"] = [(node, every)]
    assert banded(2)
    assert not banded(3) and seen["from_bulk"]   # (every element, twice in a row)
    seen["kinks"] = []
    assert not banded(4)                      # (for good)
    elementwise = {"kinks": [(node, every)]}
    banded = sampling._band_rounds(elementwise, elementwise=True)
    assert all(banded(r) for r in range(sampling.EXTREME_ROUNDS))
    assert not banded(sampling.EXTREME_ROUNDS) and not elementwise.get("from_bulk")


def test_a_redraw_that_moves_nothing_makes_no_forward_pass(monkeypatch):
    """Redraws that hand back the values they replace find the hazards the last pass
    found: settle evaluates nothing again (the rounds still count)."""
    case = make_case("sum(exp((x @ W) * 100))", {"x": [2, 3], "W": [3, 2]})
    values = {"x": np.full((2, 3), 2.0), "W": np.full((3, 2), 2.0)}
    free = list(case.inputs)
    calls = _passes(monkeypatch)
    sampling.settle(case, values, free, np.random.default_rng(0), "float64",
                    draw=lambda spec, _round: values[spec.name].copy(), limit=1e3)
    assert len(calls) == 1
    assert np.all(values["x"] == 2.0)
