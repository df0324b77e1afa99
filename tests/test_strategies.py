"""gradcheck.strategies: drawn formulas parse and pass the full check, the knobs restrict
what is drawn, failures shrink to small formulas, drawn points stay in their domains and
away from kinks."""

from __future__ import annotations

import dataclasses
import doctest
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra.numpy import array_shapes

import gradcheck.strategies
from conftest import check
from gradcheck.cases import case_from_dict, in_domain
from gradcheck.formula.forward import counted_hazards
from gradcheck.rules import COMPARISON, RULES
from gradcheck.checking.case import run_case
from gradcheck.sampling.points import MARGIN
from gradcheck.strategies import DEFAULT_FUNCTIONS, GUARDS, formulas, functions_for, points
from gradcheck.generate.templates import TEMPLATE_INPUTS
from gradcheck.formula.tree import walk

COMPARISONS = {n for n, r in RULES.items() if r.family == COMPARISON}


def ops(table) -> set[str]:
    """The rule-table rows a drawn formula applies."""
    case = case_from_dict(table)
    return {n.op for n in walk(case.output)} - {"input", "const", "let"}


# --------------------------------------------------------------------------- formulas

@settings(max_examples=50)
@given(formulas())
def test_drawn_formulas_parse_and_pass_the_full_check(table):
    assert set(table) == {"name", "expr", "inputs", "points", "seed"}
    # (a convolution's or pooling's own image and kernel beside the default inputs)
    assert table["inputs"] and set(table["inputs"]) <= {"x", "y", "s", *TEMPLATE_INPUTS}
    result = check(case_from_dict(table))
    assert result.status == "passed", (table["expr"], result.message, result.notes)
    assert {w.witness for w in result.witnesses} == {"engine", "torch", "numeric"}
    # the sampler found points away from every kink (the extreme points' notes say
    # what they sampled); only the kink points come near one, on purpose
    from gradcheck.sampling.kinks import CONVENTION

    assert not [n for n in result.notes
                if "kink" in n and "is a kink point" not in n and n != CONVENTION]


def test_the_default_functions_are_every_row_but_the_comparisons():
    assert DEFAULT_FUNCTIONS == {n for n, r in RULES.items() if r.family != COMPARISON}
    assert GUARDS <= DEFAULT_FUNCTIONS


@settings(max_examples=30)
@given(formulas(functions=["sin"]))
def test_functions_sin_gives_only_sin(table):
    used = ops(table)
    assert used <= {"sin"}
    assert used or table["expr"] in {"x", "y", "s"}


@pytest.mark.parametrize("name", sorted(RULES))
def test_each_row_of_the_table_is_drawn_alone_and_nothing_else(name):
    # Every row of gradcheck.rules.RULES, a new one included, is drawn by formulas()
    # with no generator table to edit (a comparison comes with where, its condition).
    functions = functions_for(name)
    allowed = functions | GUARDS | (COMPARISONS if functions & {"where", "masked_fill"}
                                    else set())

    @settings(max_examples=15)
    @given(formulas(functions=functions))
    def only(table):
        assert ops(table) <= allowed, table["expr"]

    only()
    assert name in ops(find(formulas(functions=functions), lambda t: name in ops(t)))


@settings(max_examples=20)
@given(formulas(functions=["maximum", "sum", "dot"], depth=2))
def test_a_subset_of_functions(table):
    assert ops(table) <= {"maximum", "sum", "dot"} | GUARDS


def test_no_functions_gives_bare_inputs():
    @settings(max_examples=10)
    @given(formulas(functions=[]))
    def bare(table):
        assert table["expr"] in {"x", "y", "s"}

    bare()


@settings(max_examples=20)
@given(formulas(depth=0))
def test_depth_zero_is_a_bare_input(table):
    assert table["expr"] in {"x", "y", "s"}
    assert table["inputs"] == {table["expr"]: {"x": [3], "y": [2, 3], "s": []}[table["expr"]]}


@settings(max_examples=30)
@given(formulas(functions=["sin"], depth=2))
def test_depth_bounds_the_nesting(table):
    assert table["expr"].count("sin(") <= 2


@settings(max_examples=30)
@given(formulas(depth=gradcheck.strategies.MAX_DEPTH))
def test_the_deepest_formulas_still_parse(table):
    case_from_dict(table)


@settings(max_examples=10)
@given(formulas(inputs={"a": [4], "B": {"shape": [2, 4], "domain": "positive"},
                        "c": {"shape": [], "requires_grad": False}}))
def test_custom_inputs_are_honoured(table):
    declared = {"a": [4], "B": {"shape": [2, 4], "domain": "positive"},
                "c": {"shape": [], "requires_grad": False}}
    assert table["inputs"] and set(table["inputs"]) <= set(declared)
    assert set(table["inputs"]) != {"c"}  # something to differentiate
    for name, value in table["inputs"].items():
        assert value == declared[name]
    result = check(case_from_dict(table))
    assert result.status == "passed", (table["expr"], result.message)


@settings(max_examples=10)
@given(formulas(shapes=[[2], [2, 2]]))
def test_a_list_of_shapes_names_the_inputs_x_y(table):
    assert set(table["inputs"]) <= {"x", "y"}
    for name, shape in table["inputs"].items():
        assert shape == {"x": [2], "y": [2, 2]}[name]
    result = check(case_from_dict(table))
    assert result.status == "passed", (table["expr"], result.message)


@settings(max_examples=20)
@given(formulas(shapes=array_shapes(min_dims=0, max_dims=2, max_side=3), depth=2))
def test_a_strategy_of_shapes_draws_the_inputs(table):
    assert set(table["inputs"]) <= {"x", "y", "z"}
    assert all(len(s) <= 2 and all(1 <= n <= 3 for n in s)
               for s in table["inputs"].values())
    result = check(case_from_dict(table))
    assert result.status == "passed", (table["expr"], table["inputs"], result.message)


def test_a_strategy_of_shapes_varies_the_shapes():
    found = find(formulas(shapes=array_shapes(max_dims=2, max_side=3)),
                 lambda t: [2, 2] in t["inputs"].values())
    assert [2, 2] in found["inputs"].values()


@pytest.mark.parametrize("kwargs", [
    {"depth": -1}, {"depth": gradcheck.strategies.MAX_DEPTH + 1}, {"depth": "3"},
    {"depth": True}, {"functions": "sin"}, {"functions": ["gt"]}, {"functions": ["nope"]},
    {"inputs": {}}, {"inputs": {"sin": [3]}}, {"inputs": {"axis": [3]}},
    {"inputs": {"x": [0]}}, {"inputs": {"x": "3"}},
    {"inputs": {"x": {"shape": [3], "requires_grad": False}}},
    {"inputs": {"x": [3]}, "shapes": [[3]]}, {"shapes": [3]}, {"shapes": []},
])
def test_bad_knobs_are_refused_at_once(kwargs):
    with pytest.raises(InvalidArgument):
        formulas(**kwargs)


# --------------------------------------------------------------------------- shrinking

def test_shrinks_to_one_function_of_one_input():
    found = find(formulas(), lambda t: "sin" in t["expr"])
    assert "sin" in found["expr"] and len(found["expr"]) <= len("sin(x)")
    assert find(formulas(), lambda t: True)["expr"] == "x"
    two = find(formulas(), lambda t: len(t["inputs"]) == 2)
    assert len(two["expr"]) <= len("(x) + (y)"), two["expr"]


def test_a_broken_vjp_shrinks_to_the_smallest_formula_using_it(monkeypatch):
    rule = RULES["tanh"]
    monkeypatch.setitem(RULES, "tanh", dataclasses.replace(rule, engine=dataclasses.replace(
        rule.engine, vjps=(lambda g, ans, x: g * (1 - ans),))))  # forgot the square

    def engine_disagrees(table):
        case = case_from_dict(dict(table, witnesses=["engine"]))
        return run_case(case, "float64", timeout=None).status == "failed"

    found = find(formulas(), engine_disagrees, settings=settings(max_examples=200))
    assert found["expr"] in {"tanh(x)", "tanh(y)", "tanh(s)"}, found["expr"]


# --------------------------------------------------------------------------- points

def _case(expr, **inputs):
    return case_from_dict({"name": "t", "expr": expr, "inputs": inputs})


@settings(max_examples=50)
@given(points(_case("sum(abs(x))", x=[6])))
def test_points_keep_away_from_the_kink_of_abs(point):
    assert set(point) == {"x"} and point["x"].shape == (6,)
    assert point["x"].dtype == np.float64
    assert np.all(np.abs(point["x"]) >= MARGIN)


@settings(max_examples=50)
@given(points(_case("sum(log(x))", x=[6])))
def test_points_stay_inside_the_domain_of_log(point):
    assert np.all(point["x"] > 0) and np.all(point["x"] >= MARGIN)


@settings(max_examples=30)
@given(points(_case("sum(maximum(x, y)) + sum(max(y, axis=-1))", x=[3], y=[2, 3])))
def test_points_keep_away_from_ties(point):
    assert np.all(np.abs(point["x"] - point["y"]) >= MARGIN)
    top2 = -np.sort(-point["y"], axis=-1)[:, :2]
    assert np.all(top2[:, 0] - top2[:, 1] >= MARGIN)


@settings(max_examples=30)
@given(points(_case("max(x @ transpose(y), axis=-1)", x=[2, 3], y=[2, 3])))
def test_points_of_a_formula_that_mixes_elements(point):
    prod = point["x"] @ point["y"].T
    top2 = -np.sort(-prod, axis=-1)
    assert np.all(top2[:, 0] - top2[:, 1] >= MARGIN)


DOMAINS = {"p": "positive", "n": "nonnegative", "z": "nonzero", "u": "unit",
           "r": [-0.5, 0.25]}


@settings(max_examples=30)
@given(points(case_from_dict({
    "name": "domains", "expr": " + ".join(f"sum(sqrt(1 + {n}**2))" for n in DOMAINS)
    + " + sum(w)",
    "inputs": {**{n: {"shape": [4], "domain": d} for n, d in DOMAINS.items()},
               "w": {"shape": [2], "value": [0.0, 7.0]}}})))
def test_points_stay_in_every_domain_and_keep_pinned_values(point):
    for name, domain in DOMAINS.items():
        assert np.all(in_domain(point[name], tuple(domain) if isinstance(domain, list)
                                else domain)), (name, point[name])
    assert point["w"].tolist() == [0.0, 7.0]


@settings(max_examples=20)
@given(points({"name": "t", "expr": "sum(abs(x))", "inputs": {"x": {"shape": [5],
               "domain": [0.1, 0.3]}}}, dtype="float32"))
def test_points_in_float32_are_representable_and_in_range(point):
    x = point["x"]
    assert x.dtype == np.float64
    assert np.array_equal(x.astype(np.float32).astype(np.float64), x)
    assert np.all((0.1 <= x) & (x <= 0.3))


@settings(max_examples=50)
@given(formulas().flatmap(lambda t: st.tuples(st.just(t), points(t))))
def test_points_of_drawn_formulas_are_away_from_every_hazard(pair):
    table, point = pair
    case = case_from_dict(table)
    assert set(point) == {s.name for s in case.inputs}
    for node, distance in counted_hazards(case.output, point):   # (as sampling counts)
        assert np.all(distance >= MARGIN), (table["expr"], node, point)


def test_points_refuse_bad_arguments():
    with pytest.raises(InvalidArgument):
        points(_case("x", x=[3]), dtype="float8")
    with pytest.raises(InvalidArgument):
        points("x")


# --------------------------------------------------------------------------- the module

def test_the_docstring_examples_run():
    result = doctest.testmod(gradcheck.strategies, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_gradcheck_does_not_import_hypothesis():
    code = ("import sys, gradcheck, gradcheck.cases, gradcheck.session.runner, gradcheck.cli.main, "
            "gradcheck.sampling.points; gradcheck.check; "
            "assert 'hypothesis' not in sys.modules, 'hypothesis imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
