"""The heart: on random formulas over the rule table, the symbolic reference, torch and
finite differences agree (each witness is compared with the reference element by
element, values and vector-Jacobian products alike)."""

from __future__ import annotations

from hypothesis import given, settings

from conftest import check
from gradcheck.cases import case_from_dict
from gradcheck.strategies import formulas


@settings(max_examples=300)
@given(formulas())
def test_random_formulas_agree_across_witnesses(table):
    case = case_from_dict({"name": "random", **table})
    result = check(case)
    assert result.status == "passed", (table["expr"], result.message, result.notes)
    assert {w.witness for w in result.witnesses} == {"engine", "torch", "numeric"}


@settings(max_examples=100)
@given(formulas(depth=2))
def test_random_formulas_with_a_retained_intermediate(table):
    # The formula becomes a let; a wrapper uses it twice, so h.grad sums two paths.
    table = dict(table, let={"h": table["expr"]}, expr="h * sin(h) + h",
                 retain_grad=["h"])
    result = check(case_from_dict({"name": "random-let", **table}))
    assert result.status == "passed", (table["let"], result.message, result.notes)
