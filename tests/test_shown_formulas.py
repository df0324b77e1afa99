"""Every printed formula (explain's exact gradients and graph, the reports' formulas) is
in the rows' own spelling: no SymPy internals, for every row of the rule table; a row
whose SymPy meaning is a stable rewriting (sigmoid's Piecewise) prints by its name, and
its declared derivative (``Rule.shown``) is the derivative of what is computed."""

from __future__ import annotations

import re

import pytest
import sympy

from gradcheck.base.errors import CaseFileError
from gradcheck.cases import case_from_dict
from gradcheck.formula.docs import EXAMPLE_DTYPES, EXAMPLE_INPUTS, example
from gradcheck.reference import TensorReference
from gradcheck.reference.shown import derivative, function
from gradcheck.rules import ELEMENTWISE, RULES
from gradcheck.rules.row import CHOICE

# What SymPy would print of its own making: none is a word of the formula language.
# (re( and im( as whole words: where( ends in re(.)
INTERNALS = [r"Piecewise", r"Heaviside", r"\bITE\(", r"\bre\(", r"\bim\(", r"\bMax\(",
             r"\bMin\(", r"\bAbs\(", r"\bEq\(", r"\bNe\(", r"exp_polar", r"\bzoo\b",
             r"\boo\b", r"\bnan\b", r"Subs\(", r"Derivative\(", r"DiracDelta", r"Dummy",
             r"_0b\d", r"shown_", r"\d{7,}/\d{7,}",   # a float as its binary fraction
             r"\d\.\d{12,}0\b"]                        # a Float as SymPy prints it
# Rows whose example needs integer inputs in range (indices, class labels).
_DOMAINS = {"idx": [0, 3], "idx2": [0, 3]}


def formulas_of(text: str) -> str:
    """Every formula the tensor reference prints for ``sum(text)`` (explain's exact
    gradients and its graph's, the reports'), shared lines included."""
    return "\n".join(f"{k} = {v}" for k, v in TensorReference(case_of(text)).formulas().items())


def case_of(text: str):
    inputs = {}
    for name, shape in EXAMPLE_INPUTS.items():
        if re.search(rf"\b{name}\b", text):
            spec = inputs[name] = {"shape": list(shape)}
            if name in EXAMPLE_DTYPES:
                spec.update(dtype=EXAMPLE_DTYPES[name], domain=_DOMAINS.get(name))
                if spec["domain"] is None:
                    del spec["domain"]
    return case_from_dict({"name": "row", "expr": f"sum({text})", "inputs": inputs})


def _formulas() -> list[str]:
    """Each row's example; an elementwise row applied to x, and once per choice of a
    choice parameter (gelu's approximate)."""
    out, more = [], []
    for rule in RULES.values():
        out.append(example(rule))
        if rule.family == ELEMENTWISE and rule.arity == 1 and rule.symbol is None:
            more.append(f"{rule.name}(x)")
            more += [f'{rule.name}(x, {p.name}="{c}")' for p in rule.params
                     if p.kind == CHOICE for c in p.choices]
    for text in more:   # (but where the row needs a parameter, or has no gradient)
        try:
            case_of(text)
        except CaseFileError:
            continue
        out.append(text)
    return list(dict.fromkeys(out))


@pytest.mark.parametrize("text", _formulas())
def test_every_row_prints_in_the_languages_own_spelling(text):
    shown = formulas_of(text)
    found = [p for p in INTERNALS if re.search(p, shown)]
    assert not found, f"{text}: {found} in\n{shown}"


@pytest.mark.parametrize("text, grad", [
    ("sigmoid(x)", "(1 - sigmoid(x))*sigmoid(x)"),
    ("softplus(x)", "sigmoid(x)"),
    ("silu(x)", "(x*(1 - sigmoid(x)) + 1)*sigmoid(x)"),
    ("relu(x)", "where(x > 0, 1, 0)"),
    ("logaddexp(x, y)", "sigmoid(x - y)"),
    ("leaky_relu(x, slope=0.1)", "0.45*sign(x) + 0.55"),
    ("sigmoid(x) * softplus(x)", "(1 - sigmoid(x))*sigmoid(x)*softplus(x) + sigmoid(x)**2"),
])
def test_a_stable_rewriting_prints_as_the_row_and_its_derivative(text, grad):
    assert f"x.grad = ḡ ⊙ ({grad})" in formulas_of(text)


def test_explain_prints_sigmoids_derivative_by_name():
    from gradcheck.explanation import explain

    shown = explain("sum(sigmoid(x))", {"x": (3,)})
    assert shown.formulas["x.grad"] == "ḡ ⊙ ((1 - sigmoid(x))*sigmoid(x))"


def _meaning(expr):
    """``expr`` with every row printed by name replaced by the row's sympy meaning (what
    is computed)."""
    return expr.replace(lambda e: hasattr(type(e), "row"),
                        lambda e: RULES[type(e).row].call("sympy", e.args,
                                                          type(e).row_params))


def _declared() -> list[tuple[str, tuple]]:
    """(row, parameters) of each row with a ``shown`` form: its defaults, and each
    choice of a choice parameter."""
    out = []
    for rule in RULES.values():
        if rule.shown:
            defaults = tuple((p.name, p.default) for p in rule.params)
            out.append((rule.name, defaults))
            out += [(rule.name, tuple((q.name, c if q is p else q.default)
                                      for q in rule.params))
                    for p in rule.params if p.kind == CHOICE for c in p.choices]
    return list(dict.fromkeys(out))


@pytest.mark.parametrize("name, params", _declared())
def test_a_declared_derivative_is_the_derivative_of_what_is_computed(name, params):
    rule = RULES[name]
    xs = sympy.symbols("a b", real=True)[: rule.arity]
    computed = rule.call("sympy", xs, params)
    for k in range(rule.arity):
        shown = _meaning(derivative(name, params, k, xs))
        exact = sympy.diff(computed, xs[k])
        for point in ((-2.3, 0.7), (-0.4, -1.9), (0.6, 2.2), (1.9, -0.3)):
            at = dict(zip(xs, point))
            assert float(shown.subs(at).evalf()) == pytest.approx(
                float(exact.subs(at).evalf()), rel=1e-12, abs=1e-14), (name, k, point)
    assert function(name, params)(*xs) is not None
