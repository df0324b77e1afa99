"""The safe expression parser (gradcheck.formula.parser.parse): valid syntax builds the right
formula DAG with the right shapes; hostile or wrong syntax fails fast with a located,
readable CaseFileError and never executes anything."""

from __future__ import annotations

import math

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import bounded_work
from gradcheck.base.errors import CaseFileError
from gradcheck.formula.parser import MAX_CHARS, MAX_DEPTH, MAX_EXPONENT, MAX_TREE_DEPTH, parse
from gradcheck.rules import BILINEAR, FUNCTIONS, POOLING, RULES, STRUCTURE
from gradcheck.formula.docs import example_nodes
from gradcheck.formula.tree import Node, walk

#: a safety bound, not a benchmark: hostile input must not hang the parser


def inp(name: str, *shape: int) -> Node:
    return Node("input", shape=tuple(shape), name=name)


@pytest.fixture
def names() -> dict[str, Node]:
    return {
        "s": inp("s"),                 # scalar
        "x": inp("x", 3),              # vector
        "y": inp("y", 3),
        "v": inp("v", 4),
        "M": inp("M", 2, 3),           # matrices
        "N": inp("N", 3, 5),
        "B": inp("B", 4, 2, 3),        # a batch of matrices
        "T": inp("T", 2, 3, 4),
        "col": inp("col", 2, 1),
    }


def fails(text: str, names: dict[str, Node], match: str, **where) -> CaseFileError:
    """Parse ``text``; it must raise a CaseFileError matching ``match`` with bounded work
    (conftest.bounded_work: Python calls, not seconds, so a busy machine is no failure)."""
    with bounded_work():
        with pytest.raises(CaseFileError, match=match) as info:
            parse(text, names, **where)
    return info.value


# --------------------------------------------------------------------------- valid input

@pytest.mark.parametrize("text, shape", [
    ("x + y", (3,)),
    ("x + 1", (3,)),
    ("s * M", (2, 3)),
    ("M + x", (2, 3)),          # (2, 3) + (3,) broadcasts
    ("col * x", (2, 3)),        # (2, 1) * (3,) -> (2, 3)
    ("B - M", (4, 2, 3)),
    ("x / (1 + s)", (3,)),
    ("x ** 2", (3,)),
    ("s ** x", (3,)),
    ("2", ()),
])
def test_elementwise_broadcasting(names, text, shape):
    assert parse(text, names).shape == shape


@pytest.mark.parametrize("text, op, nargs", [
    ("x + y", "add", 2), ("x - y", "sub", 2), ("x * y", "mul", 2), ("x / y", "div", 2),
    ("x ** y", "pow", 2), ("M @ N", "matmul", 2), ("-x", "neg", 1), ("sin(x)", "sin", 1),
    ("maximum(x, y)", "maximum", 2), ("minimum(x, 0)", "minimum", 2),
    ("where(x > 0, x, y)", "where", 3), ("sum(x)", "sum", 1), ("dot(x, y)", "dot", 1 + 1),
    ("transpose(M)", "transpose", 1), ("logsumexp(M, axis=1)", "logsumexp", 1),
])
def test_ops(names, text, op, nargs):
    node = parse(text, names)
    assert node.op == op
    assert len(node.args) == nargs


@pytest.mark.parametrize("fname", sorted(FUNCTIONS))
def test_every_function_of_the_rule_table_parses(names, fname):
    arity = RULES[fname].arity
    if fname == "where":
        text = "where(x > 0, x, y)"
    elif fname == "masked_fill":
        text = "masked_fill(x, x > 0, 0.5)"
    elif fname == "dot":
        text = "dot(x, y)"
    elif fname == "transpose":
        text = "transpose(M)"
    elif RULES[fname].domain_of(0) == "integer":   # one_hot: an integer input's labels
        names = dict(names, idx=Node("input", shape=(3,), name="idx", dtype="int64"))
        text = f"{fname}(idx, 4)"
    elif RULES[fname].family in (STRUCTURE, BILINEAR, POOLING) or fname in (
            "fft", "ifft", "irfft"):   # (dot: above)
        # a shape, a list of tensors, a subscript, an image and its kernel, a complex
        # input: the row's example, over its documented inputs
        text = RULES[fname].example
        names = example_nodes()
    else:   # a number parameter without a default (clamp's min=, max=) given, the others
        # left to defaults; a text parameter (einsum's subscripts) as "...", any shape
        params = RULES[fname].params
        given = [f"{p.name}=0.5" for p in params if p.kind == "number" and p.default is None]
        lead = ['"..."' for p in params if p.kind == "text"]
        text = f"{fname}({', '.join(lead + ['x'] * arity + given)})"
    node = parse(text, names)
    assert node.op == fname
    assert node.rule.arity == arity


def test_operands_are_the_named_nodes(names):
    node = parse("x * y + x", names)
    assert node.op == "add"
    mul, right = node.args
    assert right is names["x"]
    assert mul.op == "mul"
    assert mul.args[0] is names["x"] and mul.args[1] is names["y"]


def test_precedence_and_right_associative_power(names):
    node = parse("x + y * 2 ** s", names)
    assert node.op == "add"
    assert node.args[1].op == "mul"
    assert node.args[1].args[1].op == "pow"
    node = parse("s ** 2 ** 3", names)  # s ** (2 ** 3), folded to 8
    assert node.op == "pow"
    assert node.args[1].const == 8.0


@pytest.mark.parametrize("text, shape", [
    ("M @ N", (2, 5)),
    ("M @ x", (2,)),            # matrix @ vector
    ("x @ N", (5,)),            # vector @ matrix
    ("x @ y", ()),              # vector @ vector
    ("B @ N", (4, 2, 5)),       # batched @ matrix
    ("B @ x", (4, 2)),          # batched @ vector
    ("N @ transpose(N)", (3, 3)),
    ("transpose(M) @ M", (3, 3)),
])
def test_matmul_shapes(names, text, shape):
    node = parse(text, names)
    assert node.op == "matmul"
    assert node.shape == shape


@pytest.mark.parametrize("text, shapes", [
    ("M @ M", r"\[2, 3\] and \[2, 3\]"),
    ("x @ v", r"\[3\] and \[4\]"),
    ("M @ v", r"\[2, 3\] and \[4\]"),
])
def test_matmul_mismatch_names_the_shapes(names, text, shapes):
    fails(text, names, rf"matmul: .*{shapes}")


def test_matmul_of_a_scalar_fails(names):
    fails("s @ x", names, "at least one dimension")


@pytest.mark.parametrize("text, shape, axis", [
    ("sum(M)", (), (0, 1)),
    ("sum(M, axis=None)", (), (0, 1)),
    ("sum(M, axis=0)", (3,), (0,)),
    ("sum(M, axis=1)", (2,), (1,)),
    ("sum(M, axis=-1)", (2,), (1,)),
    ("sum(M, axis=-2)", (3,), (0,)),
    ("mean(T, axis=(0, 2))", (3,), (0, 2)),
    ("mean(T, axis=(-1, 0))", (3,), (0, 2)),     # normalised and sorted
    ("prod(T, axis=[1])", (2, 4), (1,)),
    ("max(M, axis=0, keepdims=True)", (1, 3), (0,)),
    ("min(M, axis=-1, keepdims=True)", (2, 1), (1,)),
    ("logsumexp(T, keepdims=True)", (1, 1, 1), (0, 1, 2)),
    ("sum(M, keepdims=False, axis=1)", (2,), (1,)),
    ("sum(x)", (), (0,)),
    ("sum(s)", (), ()),
])
def test_reductions(names, text, shape, axis):
    node = parse(text, names)
    assert node.shape == shape
    assert node.axis == axis
    assert node.keepdims == ("keepdims=True" in text)


@pytest.mark.parametrize("text, match", [
    ("sum(M, axis=2)", r"axis 2 is out of range for a tensor of 2 dimensions"),
    ("sum(M, axis=-3)", r"axis -3 is out of range"),
    ("sum(x, axis=1)", r"axis 1 is out of range for a tensor of 1 dimension"),
    ("sum(s, axis=0)", r"axis 0 is out of range for a tensor of 0 dimensions"),
    ("sum(M, axis=(0, -2))", r"repeats a dimension"),
    ("sum(M, axis=100)", r"axis= must be an integer"),
    ("sum(M, axis=1.0)", r"axis= must be an integer"),
    ("sum(M, axis=True)", r"axis= must be an integer"),
    ("sum(M, keepdims=1)", r"keepdims= must be True or False"),
    ("sum(M, axis=0, axis=1)", r"axis= twice|repeated"),
])
def test_reduction_argument_errors(names, text, match):
    fails(text, names, match)


def test_transpose_and_dot(names):
    assert parse("transpose(M)", names).shape == (3, 2)
    assert parse("transpose(T)", names).shape == (2, 4, 3)  # last two axes
    assert parse("dot(x, y)", names).shape == ()
    fails("transpose(x)", names, r"transpose needs at least two dimensions, got shape \[3\]")
    fails("dot(x, v)", names, r"dot needs two vectors.*\[3\] and \[4\]")
    fails("dot(M, x)", names, r"dot needs two vectors.*\[2, 3\] and \[3\]")


@pytest.mark.parametrize("cond, op", [("x > 0", "gt"), ("x >= y", "ge"), ("0 < x", "lt"),
                                      ("x <= s", "le")])
def test_where_with_comparisons(names, cond, op):
    node = parse(f"where({cond}, x, -x)", names)
    assert node.op == "where"
    assert node.args[0].op == op
    assert node.args[0].shape == (3,)
    assert node.shape == (3,)


@pytest.mark.parametrize("cond, op", [("x == 0", "eq"), ("x != y", "ne"), ("0 == x", "eq")])
def test_where_with_equality(names, cond, op):
    node = parse(f"where({cond}, x, -x)", names)
    assert node.args[0].op == op and node.args[0].shape == (3,)


@pytest.mark.parametrize("cond, tree", [
    ("(x > 0) & (y < 1)", ("logical_and", "gt", "lt")),
    ("(x > 0) | (x == s)", ("logical_or", "gt", "eq")),
    ("~(x > 0)", ("logical_not", "gt")),
    ("~((x > 0) & (y != 1)) | (x <= y)", ("logical_or", "logical_not", "le")),
    ("(x > 0) & (y < 1) & (x > y)", ("logical_and", "logical_and", "gt")),
])
def test_where_with_combined_conditions(names, cond, tree):
    node = parse(f"where({cond}, x, -x)", names)
    c = node.args[0]
    assert (c.op, *(a.op for a in c.args)) == tree
    assert c.shape == (3,) and node.shape == (3,)


def test_combined_conditions_broadcast(names):
    node = parse("where((col > 0) & (x < 1), M, 0)", names)
    assert node.args[0].op == "logical_and" and node.args[0].shape == (2, 3)


def test_where_broadcasts_all_three(names):
    assert parse("where(x > 0, M, 0)", names).shape == (2, 3)
    assert parse("where(col > x, s, 1)", names).shape == (2, 3)
    fails("where(x > 0, v, 0)", names, r"\[3\].*\[4\].*broadcast")


def test_constants_pi_and_e(names):
    pi = parse("pi", names)
    assert pi.op == "const" and pi.value == sympy.pi and pi.const == pytest.approx(math.pi)
    e = parse("E", names)
    assert e.op == "const" and e.value == sympy.E and e.const == pytest.approx(math.e)
    node = parse("2 * pi * x", names)
    assert node.shape == (3,)
    assert node.args[0].const == pytest.approx(2 * math.pi)


def test_decimal_literals_are_exact(names):
    node = parse("0.1", names)
    assert node.value == sympy.Rational(1, 10)
    assert node.const == 0.1


@pytest.mark.parametrize("text, value", [("-2", -2), ("- -2", 2), ("-(3)", -3),
                                         ("-0.5", sympy.Rational(-1, 2)), ("-pi", -sympy.pi),
                                         ("+-+2", -2)])
def test_unary_minus_folds_into_constants(names, text, value):
    node = parse(text, names)
    assert node.op == "const"
    assert node.value == value
    assert node.const == pytest.approx(float(value))


def test_unary_minus_on_tensors(names):
    node = parse("-x", names)
    assert node.op == "neg" and node.args[0] is names["x"] and node.shape == (3,)
    node = parse("--x", names)
    assert node.op == "neg" and node.args[0].op == "neg"
    assert parse("+x", names) is names["x"]   # unary plus is the identity


def test_constant_subexpressions_are_folded_into_const(names):
    node = parse("(1 + 2) * 3 ** 2", names)
    assert node.const == 27.0
    assert parse("x * 2", names).const is None


def test_let_names_are_shared_nodes(names):
    body = parse("tanh(M @ N)", names)
    h = Node("let", (body,), body.shape, name="h")
    scope = dict(names, h=h)
    node = parse("sum(h ** 2, axis=1) + sum(h, axis=1)", scope)
    assert node.shape == (2,)
    lets = [n for n in walk(node) if n.op == "let"]
    assert lets == [h]  # the same node object, once
    assert parse("h", scope) is h


def test_whitespace_and_newlines_inside_parentheses(names):
    node = parse("  (x +\n   y)  \n", names)
    assert node.op == "add" and node.shape == (3,)


def test_names_shadow_nothing_unexpected(names):
    # an input may not be called like a function
    fails("x(1)", names, r"unknown function 'x'")


# --------------------------------------------------------------------------- locations

def test_error_carries_file_case_and_line(names):
    err = fails("sum(foo(x))", names, "unknown function 'foo'", file="cases/a.toml",
                case="softplus", line=7)
    assert (err.file, err.case, err.line) == ("cases/a.toml", "softplus", 7)
    assert str(err).startswith("cases/a.toml:7: case 'softplus': ")


def test_error_line_within_a_multiline_expression(names):
    err = fails("(x +\n  y +\n  nope)", names, "unknown name 'nope'", file="f.toml",
                case="c", line=10)
    assert err.line == 12
    err = fails("(x +\n  y +\n  nope)", names, "unknown name 'nope'", file="f.toml",
                case="c", line=None)
    assert err.line is None


def test_error_line_skips_leading_blank_lines(names):
    err = fails("\n\n(x +\n  nope)", names, "unknown name 'nope'", line=10)
    assert err.line == 13


def test_syntax_error_line(names):
    err = fails("(x +\n  y +\n  * 2)", names, "invalid syntax", file="f.toml", case="c",
                line=3)
    assert err.line == 5


def test_error_without_location_still_reads(names):
    err = fails("bogus", names, "unknown name 'bogus'")
    assert err.file is None and err.case is None and err.line is None
    assert str(err).startswith("unknown name")


# --------------------------------------------------------------------------- hostile input

HOSTILE = [
    ("__import__('os')", r"unknown function '__import__'"),
    ("__import__('os').system('true')", r"not allowed|only functions"),
    ("x.T", r"attribute access is not allowed"),
    ("().__class__", r"attribute access is not allowed"),
    ("().__class__.__bases__[0].__subclasses__()", r"not allowed|only functions"),
    ("lambda: 1", r"lambda is not allowed"),
    ("(lambda q: q)(x)", r"only functions of the rule table can be called"),
    ("[a for a in x]", r"comprehension is not allowed"),
    ("{a for a in x}", r"comprehension is not allowed"),
    ("{a: a for a in x}", r"comprehension is not allowed"),
    ("sum(a for a in x)", r"generator expression is not allowed"),
    ("x[0.5]", r"an index must be an integer literal"),
    ("M[:, x]", r"x indexes only as an integer input"),
    ("M[1:y]", r"a slice's bounds and step must be integer literals"),
    ("f'{x}'", r"f-string is not allowed"),
    ("(q := x)", r"assignment \(:=\) is not allowed"),
    ("'abc'", r"literal 'abc' is not a number"),
    ("b'abc'", r"is not a number"),
    ("1e300j", r"number literal exceeds"),   # (2j is a complex constant)
    ("True", r"literal True is not a number"),
    ("None", r"literal None is not a number"),
    ("x if s else y", r"if-expression is not allowed"),
    ("x and y", r"and/or is not allowed"),
    ("not x", r"operator not is not allowed"),
    ("~x", r"~ negates a condition, only in the condition of where"),
    ("x % 2", r"operator % is not allowed"),
    ("x // 2", r"operator // is not allowed"),
    ("x << 1", r"operator << is not allowed"),
    ("[x, y]", r"an array literal holds numbers only"),
    ("(x, y)", r"not allowed"),
    ("{'a': 1}", r"not allowed"),
    ("...", r"is not a number"),
    ("x; y", r"invalid syntax"),
    ("import os", r"invalid syntax"),
    ("x = 1", r"invalid syntax"),
    ("sum(*[x])", r"\* and \*\* arguments are not allowed"),
    ("sum(x, **{'axis': 0})", r"\* and \*\* arguments are not allowed"),
    ("", r"expression is empty"),
    ("   \n ", r"expression is empty"),
]


@pytest.mark.parametrize("text, match", HOSTILE)
def test_hostile_syntax_is_rejected(names, text, match):
    fails(text, names, match)


def test_non_string_expression(names):
    fails(3, names, r"must be a string, not int")
    fails(["x"], names, r"must be a string, not list")


def test_exponent_tower(names):
    fails("2**2**2**2**2**2", names, rf"exponent .* exceeds {MAX_EXPONENT}")
    fails("x**2**2**2**2**2", names, rf"exponent .* exceeds {MAX_EXPONENT}")
    fails("x ** 1000", names, rf"exponent 1000 exceeds {MAX_EXPONENT}")
    fails("x ** -100", names, rf"exponent -100 exceeds {MAX_EXPONENT}")
    fails("9 ** 9 ** 9", names, r"exponent")
    assert parse("x ** 64", names).args[1].const == 64
    assert parse("x ** -2 ** 6", names).args[1].const == -64


def test_constant_overflow_and_division_by_zero(names):
    fails("1e15 ** 64", names, r"constant subexpression (fails|is out of range)")
    fails("(1e15 * 1e15) ** 30", names, r"constant subexpression")
    fails("1 / 0", names, r"constant subexpression fails")
    fails("x + 1 / (2 - 2)", names, r"constant subexpression fails")
    fails("(-8) ** 0.5", names, r"constant subexpression is out of range")
    fails("1e15 ** 20 * 1e15", names, r"constant subexpression is out of range")
    fails("0 ** -1", names, r"constant subexpression fails")


def test_huge_literals(names):
    fails("1" * 10**7, names, r"characters long|number literal")
    fails("1" * 41, names, r"number literal is longer than 40 characters")
    fails("x + " + "9" * 41 + ".0", names, r"number literal is longer than 40")
    fails("1e400", names, r"number literal exceeds 1e\+15 in magnitude")
    fails("1e16", names, r"number literal exceeds")
    fails("0x" + "f" * 30, names, r"number literal exceeds")
    fails("1e999999999", names, r"number literal exceeds")


def test_deep_nesting(names):
    fails("(" * 10000 + "x" + ")" * 10000, names, r"characters long|nests deeper")
    fails("(" * (MAX_DEPTH + 1) + "x" + ")" * (MAX_DEPTH + 1), names,
          rf"nests deeper than {MAX_DEPTH} levels")
    fails("sin(" * 100 + "x" + ")" * 100, names, r"nests deeper")
    assert parse("(" * MAX_DEPTH + "x" + ")" * MAX_DEPTH, names) is names["x"]


def test_unary_minus_storm(names):
    fails("-" * 100000 + "x", names, r"characters long|nests deeper")
    fails("-" * (MAX_TREE_DEPTH + 50) + "x", names, r"nests deeper than .* operations")


@pytest.mark.parametrize("terms", [300, 1000, 3000])
def test_long_operator_chain(names, terms):
    err = fails("+".join(["x"] * terms), names, r"nests deeper|syntax nodes")
    assert "let" in str(err)  # the message says how to fix it


def test_oversized_expression(names):
    fails("x" + " " * MAX_CHARS, names, rf"limit is {MAX_CHARS}")


def test_too_many_syntax_nodes(names):
    # wide rather than deep: sum(x, x, ...) style trees are bounded by node count
    text = "+".join(f"({'+'.join(['x'] * 50)})" for _ in range(120))
    fails(text, names, r"syntax nodes|nests deeper|characters long")


def test_huge_intermediate_tensors_are_refused():
    big = {"a": inp("a", 100000, 1), "b": inp("b", 100000)}
    fails("a + b", big, r"elements; the limit is")
    fails("a @ transpose(a)", big, r"elements; the limit is")
    assert parse("sum(a * a)", big).shape == ()


@pytest.mark.parametrize("text, match", [
    ("sin(x, axis=1)", r"sin\(\) got an unexpected keyword 'axis'"),
    ("exp(x, out=x)", r"unexpected keyword 'out'"),
    ("sum(x, axis=x)", r"axis= must be an integer or a tuple of integers"),
    ("sum(x, dim=0)", r"unexpected keyword 'dim'.*axis= and keepdims="),
    ("sum(x, keepdims=x)", r"keepdims= must be True or False"),
    ("where(x > 0, x, y, axis=0)", r"unexpected keyword 'axis'"),
])
def test_keyword_misuse(names, text, match):
    fails(text, names, match)


@pytest.mark.parametrize("text, match", [
    ("foo + x", r"unknown name 'foo' \(declared inputs and let names: .*M.*x"),
    ("z", r"unknown name 'z'"),
    ("foo(x)", r"unknown function 'foo'"),
    ("eval('1')", r"unknown function 'eval'"),
    ("exec('1')", r"unknown function 'exec'"),
    ("open('f')", r"unknown function 'open'"),
    ("pi(x)", r"unknown function 'pi'"),
    ("sin + x", r"sin is a function; call it as sin\(x\)"),
    ("Sin(x)", r"unknown function 'Sin'"),
    ("e", r"unknown name 'e'"),
])
def test_unknown_names_and_functions_are_named(names, text, match):
    fails(text, names, match)


def test_unknown_name_with_no_names_declared():
    fails("q", {}, r"unknown name 'q' \(declared inputs and let names: none\)")


@pytest.mark.parametrize("text, match", [
    ("x > 0", r"comparison may only be the condition of where"),
    ("x + (x > 0)", r"comparison may only be the condition of where"),
    ("sum(x > 0)", r"comparison may only be the condition of where"),
    ("where(x > 0, x > 1, x)", r"comparison may only be the condition"),
    ("where(x, x, y)", r"first argument of where\(\) must be a comparison"),
    ("where(0 < x < 1, x, y)", r"chained comparisons are not allowed; write \(0 < x\) & "),
    ("0 < x < 1", r"comparison may only be the condition"),
    ("x == 0", r"comparison may only be the condition of where"),
    ("where(x == 0, x, y) + (x != y)", r"comparison may only be the condition"),
    ("where(x in y, x, y)", r"comparison in is not allowed; use == != < <= > >="),
    ("where(x is y, x, y)", r"comparison is is not allowed"),
    # & | ~ combine conditions, inside where's condition only, each comparison in
    # parentheses (Python binds & | ~ tighter than comparisons)
    ("where(x > 0 & y < 1, x, y)", r"bind tighter than comparisons: parenthesise each"),
    ("where(x > 0 | y, x, y)", r"parenthesise each comparison, as in \(x > 0\) & \(y < 1\)"),
    ("where(~x > 0, x, y)", r"bind tighter than comparisons"),
    ("where(x > 0 and y < 1, x, y)", r"conditions combine with & \| ~, not and/or/not"),
    ("where(not x > 0, x, y)", r"not and/or/not"),
    ("where((x > 0) & y, x, y)", r"must be a comparison such as x > 0, or comparisons"),
    ("(x > 0) & (y < 1)", r"& combines conditions, only in the condition of where\(\)"),
    ("x | y", r"\| combines conditions, only in the condition of where"),
    ("~x", r"~ negates a condition, only in the condition of where"),
    ("where(x > 0, (x > 0) & (y > 0), x)", r"& combines conditions, only in the condition"),
    ("where((x > 0) & (1 > 0), x, y)", r"compares two constants"),
])
def test_comparisons_outside_where(names, text, match):
    fails(text, names, match)


@pytest.mark.parametrize("text, match", [
    ("sin(x, y)", r"sin\(\) takes 1 argument, got 2"),
    ("sin()", r"sin\(\) takes 1 argument, got 0"),
    ("maximum(x)", r"maximum\(\) takes 2 arguments, got 1"),
    ("where(x > 0, x)", r"where\(\) takes 3 arguments, got 2"),
    ("sum(x, 0, True, 1)",
     r"sum\(\) takes 1 argument \(then its parameters axis, keepdims\), got 4"),
    ("dot(x)", r"dot\(\) takes 2 arguments, got 1"),
])
def test_wrong_arity(names, text, match):
    fails(text, names, match)


@pytest.mark.parametrize("text, match", [
    ("max(x, M)", r"max\(\) takes 1 tensor argument.*did you mean maximum\(a, b\)\?"),
    ("min(x, x)", r"did you mean minimum\(a, b\)\?"),
    ("clip(x, 0, 1)", r"unknown function 'clip'; did you mean clamp\(x, min, max\)\?"),
    ("tanhh(x)", r"unknown function 'tanhh'; did you mean tanh\(x\)\?"),
    ("matmul(M, x)", r"unknown function 'matmul'; did you mean a @ b\?"),
    ("sum(x, axes=0)", r"unexpected keyword 'axes'.*did you mean axis=\?"),
    ("xx + 1", r"unknown name 'xx'.*did you mean x\?"),
])
def test_errors_suggest_the_name_that_exists(names, text, match):
    fails(text, names, match)


def test_parameters_may_be_positional_in_the_rows_order(names):
    """sum(x, 0) is sum(x, axis=0); clamp(x, 0, 1) is clamp(x, min=0, max=1), as
    NumPy and PyTorch bind them."""
    assert parse("sum(M, 0)", names).params == parse("sum(M, axis=0)", names).params
    assert parse("sum(M, 1, True)", names).shape == (2, 1)
    assert (parse("clamp(x, 0, 1)", names).params
            == parse("clamp(x, min=0, max=1)", names).params)
    fails("sum(M, 0, axis=1)", names, r"sum\(\) got axis= twice")


@pytest.mark.parametrize("text, match", [
    ("x + v", r"add: shapes \[3\], \[4\] do not broadcast together"),
    ("M * v", r"mul: shapes \[2, 3\], \[4\] do not broadcast"),
    ("maximum(M, v)", r"maximum: shapes \[2, 3\], \[4\]"),
    ("sin(x) - T", r"sub: shapes \[3\], \[2, 3, 4\]"),
])
def test_shape_mismatch_mentions_shapes(names, text, match):
    fails(text, names, match)


# --------------------------------------------------------------------------- no execution

PAYLOADS = [
    "__import__('os').system('touch {p}')",
    "__import__('pathlib').Path('{p}').touch()",
    "open('{p}', 'w')",
    "exec(\"open('{p}', 'w')\")",
    "eval(\"open('{p}', 'w')\")",
    "[open('{p}', 'w') for _ in (1,)]",
    "(lambda: open('{p}', 'w'))()",
    "(f := open('{p}', 'w'))",
    "sum(x) if open('{p}', 'w') else x",
    "x + open('{p}', 'w').write('1')",
    "().__class__.__base__.__subclasses__()[0]('{p}')",
    "f'{{open(\"{p}\", \"w\")}}'",
    "breakpoint()",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payloads_are_not_executed(names, tmp_path, payload):
    target = tmp_path / "pwned"
    text = payload.format(p=target)
    fails(text, names, r".")
    assert not target.exists(), f"{text!r} was executed"


# --------------------------------------------------------------------------- fuzzing

_ALPHABET = st.sampled_from(list("xyMs0123456789.eE+-*/@()<>=,_ ") +
                            ["sum", "sin", "where", "axis=", "keepdims=True", "**",
                             "pi", "dot", "transpose", "'", "[", "]", ":", "\n", "lambda",
                             ".T", "1e400", "9" * 20])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_fuzz_only_case_file_errors(text):
    names = {"x": inp("x", 3), "y": inp("y", 3), "M": inp("M", 2, 3), "s": inp("s")}
    with bounded_work():
        try:
            node = parse(text, names, file="fuzz.toml", case="fuzz", line=1)
        except CaseFileError as exc:
            assert exc.file == "fuzz.toml" and exc.case == "fuzz"
            assert exc.line is not None and exc.line >= 1
            assert exc.reason
        else:
            assert isinstance(node, Node)
            assert all(isinstance(n, int) and n > 0 for n in node.shape)
