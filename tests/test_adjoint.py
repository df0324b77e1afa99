"""The reverse-mode derivatives (gradcheck.adjoint) equal sympy.diff's, exactly.

Random formulas are built from every elementwise row of the rule table (its ``sympy``
column), nested and with shared subexpressions; both derivatives are evaluated at
random rational points with 40 significant digits, so only a real difference (not
float rounding) can separate them.
"""

from __future__ import annotations

import random

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcheck.reference import adjoint
from gradcheck.reference.adjoint import Program, inline
from gradcheck.formula.parser import CONDITION_AT
from gradcheck.rules import RULES

XS = sympy.symbols("x0:4", real=True)
UNARY = [n for n, r in RULES.items() if r.family == "elementwise" and r.arity == 1]
# (masked_fill's second operand is a condition: drawn with where's)
BINARY = [n for n, r in RULES.items() if r.family == "elementwise" and r.arity == 2
          and n not in CONDITION_AT]
COMPARISONS = [n for n, r in RULES.items() if r.family == "comparison"
               and r.symbol not in ("&", "|", "~")]
LOGICAL = [n for n, r in RULES.items() if r.symbol in ("&", "|", "~")]   # of comparisons
DIGITS = 40
# Arguments kept inside each row's real domain, so that every value and condition is real:
# mapped as gradcheck.strategies maps them, from the row's domain (constants exact).


def _into_domain(name, k=0):
    from gradcheck.strategies import into_domain

    a = sympy.Symbol("_a", real=True)
    mapped = sympy.sympify(into_domain(RULES[name], k, "_a"), locals={"_a": a},
                           rational=True)
    return lambda e: mapped.xreplace({a: e})


DOMAIN = {name: _into_domain(name) for name in UNARY}
# a binary row's second argument (xlogy's y > 0); pow and div are drawn as they were
SECOND = {name: _into_domain(name, 1) for name in BINARY if name not in ("pow", "div")}


def meaning(name, *args):
    """The row's SymPy meaning of ``args``, number parameters given (clamp's min=-1/2,
    max=1/2), the others at their defaults."""
    rule = RULES[name]
    numbers = iter((-0.5, 0.5))
    given = {p.name: next(numbers) for p in rule.params if p.kind == "number"}
    return rule.call("sympy", args, rule.bind([()] * len(args), given))


@st.composite
def formulas(draw, depth: int = 3):
    """A SymPy formula over XS from the table's rows; earlier subformulas are reused,
    so the expression is a DAG and not only a tree."""
    pool = list(XS)

    def build(d):
        if d == 0 or draw(st.integers(0, 5)) == 0:
            return draw(st.sampled_from(pool))
        kind = draw(st.sampled_from(["unary", "binary", "where", "const"]))
        if kind == "unary":
            name = draw(st.sampled_from(UNARY))
            e = meaning(name, DOMAIN.get(name, lambda a: a)(build(d - 1)))
        elif kind == "binary":
            name = draw(st.sampled_from(BINARY))
            a, b = build(d - 1), SECOND.get(name, lambda e: e)(build(d - 1))
            if name == "pow":  # a real power: positive base, small exponent
                b = draw(st.sampled_from([2, 3, -1, sympy.Rational(1, 2), b]))
                a = 1 + a ** 2
            e = RULES[name].sympy(a, b)
        elif kind == "where":
            # Conditions over the inputs only: SymPy simplifies conditions that nest
            # functions and Piecewise (through periodicity()), which can take minutes.
            a = draw(st.sampled_from(XS))
            b = draw(st.sampled_from(XS)) * draw(st.sampled_from([1, -2]))
            cond = RULES[draw(st.sampled_from(COMPARISONS))].sympy(a, b)
            if draw(st.booleans()):   # combined with another comparison, or negated
                rule = RULES[draw(st.sampled_from(LOGICAL))]
                other = RULES[draw(st.sampled_from(COMPARISONS))].sympy(b, a * 3)
                cond = rule.sympy(*[cond, other][: rule.arity])
            e = (meaning("masked_fill", build(d - 1), cond) if draw(st.booleans()) else
                 RULES["where"].sympy(cond, build(d - 1), build(d - 1)))
        else:
            e = build(d - 1) * draw(st.sampled_from([2, sympy.Rational(-3, 7), 5]))
        pool.append(e)
        return e

    return build(depth)


def _clean(e):
    from gradcheck.reference.derivatives import clean
    return clean(e)


def _at(expr, point):
    return complex(sympy.N(expr.xreplace(point), DIGITS))


def assert_same_gradient(f, point):
    program = Program(_clean)
    grads = program.gradient(f, XS)
    for x in XS:
        mine = _at(inline(program, grads.get(x, sympy.S.Zero)), point)
        theirs = _at(_clean(sympy.diff(f, x)), point)
        if any(map(lambda z: z != z or abs(z) == float("inf"), (mine, theirs))):
            continue  # a singular point of the formula: nothing to compare
        assert abs(mine - theirs) <= 1e-25 * max(1.0, abs(theirs)), (f, x, mine, theirs)


points = st.lists(st.fractions(min_value=-3, max_value=3, max_denominator=97),
                  min_size=len(XS), max_size=len(XS)).map(
    lambda q: {x: sympy.Rational(v.numerator, v.denominator) + sympy.Rational(1, 1009)
               for x, v in zip(XS, q)})


@settings(max_examples=200)
@given(formulas(), points)
def test_adjoint_gradient_equals_sympy_diff(f, point):
    assert_same_gradient(f, point)


def test_every_elementwise_row_is_differentiated_like_sympy():
    point = {x: sympy.Rational(k + 2, 7) for k, x in enumerate(XS)}
    x, y, z = XS[:3]
    for name in UNARY:
        inner = DOMAIN.get(name, lambda a: a)(x * y / 3)
        assert_same_gradient(meaning(name, inner), point)
    for name in BINARY:
        assert_same_gradient(RULES[name].sympy(1 + x * y, sympy.sin(z) + 2), point)
    for name in COMPARISONS + LOGICAL:   # (& | ~ combine comparisons)
        sides = [x * y > z, x < y] if name in LOGICAL else [x * y, z]
        cond = RULES[name].sympy(*sides[: RULES[name].arity])
        assert_same_gradient(RULES["where"].sympy(cond, sympy.exp(x * z), y ** 2), point)
        assert_same_gradient(meaning("masked_fill", sympy.exp(x * z), cond), point)


def test_wrong_local_rule_is_caught(monkeypatch):
    """The property can fail: a product rule that forgets one factor is seen."""
    real = adjoint._local_derivative

    def wrong(rebuilt, s):
        d = real(rebuilt, s)
        return d * 2 if isinstance(rebuilt, sympy.Mul) else d

    monkeypatch.setattr(adjoint, "_local_derivative", wrong)
    x, y = XS[:2]
    with pytest.raises(AssertionError):
        assert_same_gradient(sympy.sin(x * y), {x: sympy.Rational(1, 3),
                                                 y: sympy.Rational(2, 5)})


def _deep(depth: int, rng: random.Random, xs):
    """The nested formulas on which sympy.diff swells: +, *, sin, exp(a/(1+a²)),
    log(1+a²), tanh."""
    if depth == 0:
        return rng.choice(xs)
    a = _deep(depth - 1, rng, xs)
    k = rng.randrange(6)
    if k == 0:
        return a + _deep(depth - 1, rng, xs)
    if k == 1:
        return a * _deep(depth - 1, rng, xs)
    return [sympy.sin(a), sympy.exp(a / (1 + a ** 2)), sympy.log(1 + a ** 2),
            sympy.tanh(a)][k - 2]


def test_program_is_linear_in_the_dag():
    """Assignments grow with the number of distinct subexpressions, not the tree."""
    xs = sympy.symbols("y0:8", real=True)
    for seed in range(5):
        f = _deep(8, random.Random(seed), xs)
        nodes = set(sympy.preorder_traversal(f))
        program = Program(_clean)
        program.gradient(f, xs)
        assert len(program.assignments) <= 4 * len(nodes)


def test_shared_subexpression_is_one_assignment():
    x = XS[0]
    s = sympy.sin(x)
    f = sympy.exp(s) * s + sympy.tanh(s)
    program = Program(_clean)
    program.value(f)
    assert sum(1 for _, e in program.assignments if e.func == sympy.sin) == 1


def test_retained_symbol_gets_its_own_gradient():
    x = XS[0]
    h = sympy.Symbol("_h", real=True)
    program = Program(_clean)
    program.define(h, sympy.sin(x))
    grads = program.gradient(h ** 2 + x, [h, x])
    assert inline(program, grads[h]) == 2 * sympy.sin(x)
    assert grads[x] == 1  # the path through h is not differentiated through


def test_compiled_program_matches_sympy_lambdify():
    import numpy as np

    f = _deep(6, random.Random(3), XS)
    program = Program(_clean)
    grads = program.gradient(f, XS)
    fn = program.lambdify(list(XS), [program.value(f)] + [grads.get(x, 0) for x in XS])
    point = [0.3, -0.7, 1.1, 0.05]
    expected = [float(sympy.N(e.xreplace(dict(zip(XS, point))), 30))
                for e in [f] + [_clean(sympy.diff(f, x)) for x in XS]]
    assert np.allclose(np.asarray(fn(*point), dtype=float), expected, rtol=1e-12, atol=1e-14)


def test_conditions_holding_an_if_then_else_compile_and_evaluate():
    """SymPy turns a Piecewise nested in a condition into an ITE; the program prints it
    as an elementwise where (SymPy's own printer would simplify_logic it first)."""
    import numpy as np

    x, y = XS[:2]
    cond = sympy.ITE(x > 0, y > 0, y < -1)
    f = sympy.Piecewise((x * y, cond), (-x, True))
    program = Program(_clean)
    grads = program.gradient(f, [x, y])
    fn = program.lambdify([x, y], [program.value(f), grads[x], grads[y]])
    xs = np.array([1.0, 1.0, -1.0, -1.0])
    ys = np.array([2.0, -2.0, -2.0, 0.5])
    value, dx, dy = (np.broadcast_to(r, xs.shape) for r in fn(xs, ys))
    chosen = np.where(xs > 0, ys > 0, ys < -1)
    np.testing.assert_array_equal(value, np.where(chosen, xs * ys, -xs))
    np.testing.assert_array_equal(dx, np.where(chosen, ys, -1.0))
    np.testing.assert_array_equal(dy, np.where(chosen, xs, 0.0))


def _own_rule(rebuilt, s) -> bool:
    """Whether _local_derivative differentiates ``rebuilt`` by ``s`` with the node's own
    rule (its last branch), not a sum's, product's, function's or Piecewise's shortcut."""
    if isinstance(rebuilt, (sympy.Add, sympy.Piecewise)):
        return False
    if isinstance(rebuilt, sympy.Mul) and list(rebuilt.args).count(s) == 1:
        return False
    return not (isinstance(rebuilt, sympy.Function) and rebuilt.args == (s,))


@settings(max_examples=80)
@given(formulas())
def test_a_nodes_own_rule_is_sympy_diff_term_for_term(f):
    """x**-1, x**y, atan2, Max...: the node's own derivative rule, called without
    Derivative's zero test, gives sympy.diff's very expression (the same arguments in
    the same order: the same printed code)."""
    program = Program(_clean)
    program.value(f)
    for node, rebuilt in program._rebuilt.items():
        for operand in program.operands(node):
            s = program._value[operand]
            if isinstance(s, sympy.Symbol) and _own_rule(rebuilt, s):
                mine = adjoint._local_derivative(rebuilt, s)
                assert mine == sympy.diff(rebuilt, s), (rebuilt, s, mine)


@settings(max_examples=25)
@given(formulas())
def test_outputs_printed_beforehand_give_lambdifys_own_code(f):
    """Program.lambdify hands lambdify its outputs already printed by the same printer:
    the code is the one lambdify prints from the expressions themselves."""
    import inspect

    from gradcheck.reference.derivatives import MODULES

    program = Program(_clean)
    grads = program.gradient(f, XS)
    outputs = [program.value(f)] + [grads.get(x, 0) for x in XS]
    mine = program.lambdify(list(XS), outputs, modules=MODULES)
    needed, kept = set().union(*(sympy.sympify(o).free_symbols for o in outputs)), []
    for symbol, expr in reversed(program.assignments):
        if symbol in needed:
            kept.append((symbol, expr))
            needed |= expr.free_symbols
    plain = sympy.lambdify(list(XS), outputs, cse=lambda exprs: (kept[::-1], exprs),
                           printer=adjoint._printer(MODULES), modules=MODULES,
                           docstring_limit=0)
    assert inspect.getsource(mine) == inspect.getsource(plain)


def test_a_functions_partial_taken_unevaluated_is_sympys_own():
    """The partial of a function of one symbol is taken while the program is rebuilt
    (unevaluated): the same expression as SymPy's evaluated derivative, and never for
    a step, whose derivative the evaluated path cleans."""
    from gradcheck.reference.adjoint import _early_fdiff

    x = sympy.Symbol("x", real=True)
    for f in (sympy.tanh, sympy.exp, sympy.sin, sympy.atan, sympy.erf, sympy.log):
        program = Program()
        program.value(f(x))
        (rebuilt,) = program._fdiff
        assert sympy.simplify(program._fdiff[rebuilt] - sympy.diff(f(x), x)) == 0
        (operand, d), = program.partials(f(x))
        t = program.value(f(x))
        assert sympy.simplify(d - sympy.diff(f(x), x).subs(f(x), t)) == 0
    found: dict = {}
    for step in (sympy.sign(x), sympy.Heaviside(x)):
        with sympy.core.parameters.evaluate(False):
            _early_fdiff(step.func(x), found)
    assert found == {}
