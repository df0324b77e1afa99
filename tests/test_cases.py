"""Case files (gradcheck.cases): valid TOML and YAML load into Case objects with the
right fields; every invalid file or case is a CaseFileError that says what is wrong and
points at the right line; one bad case does not hide the good ones."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import Case, case_files, case_from_dict, load_cases, read_file, read_paths
from conftest import WORK_LIMIT, bounded_work
from gradcheck.base.errors import CaseFileError
from gradcheck.witnesses import registry


def write(tmp_path: Path, text: str, name: str = "cases.toml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, name: str = "cases.toml") -> list[Case]:
    """The cases of a file that must be entirely valid."""
    cases, errors = read_file(write(tmp_path, text, name))
    assert errors == [], [str(e) for e in errors]
    return cases


def error(tmp_path: Path, text: str, match: str, name: str = "cases.toml",
          line: int | None = None, work: int = WORK_LIMIT) -> CaseFileError:
    """The one error of a file holding one bad case (or a bad file); checks message and line.

    ``work``: the Python calls reading it may take (conftest.bounded_work), a bound
    against hangs and blow-ups that a busy machine cannot trip.
    """
    path = write(tmp_path, text, name)
    with bounded_work(work):
        cases, errors = read_file(path)
    assert cases == []
    assert len(errors) == 1, [str(e) for e in errors]
    err = errors[0]
    assert isinstance(err, CaseFileError)
    assert err.file == str(path)
    with pytest.raises(CaseFileError, match=match):
        raise err
    if line is not None:
        assert err.line == line, str(err)
        assert str(err).startswith(f"{path}:{line}: ")
    return err


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line of dedented ``text`` that contains ``needle``."""
    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    return next(i for i, s in enumerate(lines, 1) if needle in s)


# --------------------------------------------------------------------------- valid files

FULL_TOML = """
    # a comment
    [defaults]
    dtype = ["float64", "float32"]
    points = 5
    seed = 7
    atol = 1e-6

    [[case]]
    name = "softplus"
    expr = "sum(log(1 + exp(x)))"
    inputs.x = { shape = [4] }

    [[case]]
    name = "two-layer"
    description = "a small MLP"
    inputs.x = { shape = [4, 3], requires_grad = false }
    inputs.W = { shape = [3, 5], domain = "unit" }
    inputs.b = { shape = [5], domain = [-1, 1] }
    let.h = "tanh(x @ W + b)"
    let.g = "h * 2"
    expr = "sum(g**2, axis=1)"
    gradient = "random"
    retain_grad = ["h", "g"]
    dtype = "float32"
    points = 2
    seed = 3
    rtol = 0.01
    witnesses = ["numeric"]
    expect = "fail"

    [[case]]
    name = "pinned"
    inputs.a = { shape = [2], domain = "positive", value = [1.5, 2] }
    inputs.c = { shape = [2, 2], value = 0.5 }
    inputs.s = { domain = "nonzero" }
    expr = "a @ c * s"
    gradient = [1, -2]
"""


def test_a_cases_default_witnesses_are_the_registrys_when_the_case_is_made(monkeypatch):
    # read when needed, not copied at import: an entry added later (a plugin's) counts
    from gradcheck.formula.tree import Node

    monkeypatch.setitem(registry.REGISTRY, "extra", registry.REGISTRY["torch"])
    case = Case(name="c", file="f", line=None, expr="x", inputs=(), lets=(), nodes={},
                output=Node("input", shape=(), name="x"))
    assert case.witnesses == ("symbolic", "engine", "torch", "numeric", "extra", "op")


def test_full_toml(tmp_path):
    cases = load(tmp_path, FULL_TOML)
    path = str(tmp_path / "cases.toml")
    assert [c.name for c in cases] == ["softplus", "two-layer", "pinned"]
    soft, mlp, pinned = cases

    # defaults apply
    assert soft.file == path
    assert soft.line == line_of(FULL_TOML, 'name = "softplus"') - 1
    assert soft.expr == "sum(log(1 + exp(x)))"
    assert soft.dtypes == ("float64", "float32")
    assert (soft.points, soft.seed, soft.atol, soft.rtol) == (5, 7, 1e-6, None)
    assert soft.witnesses == registry.formula_names()
    assert soft.expect == "pass"
    assert soft.gradient == "scalar"          # scalar output
    assert soft.lets == () and soft.retain_grad == ()
    (x,) = soft.inputs
    assert (x.name, x.shape, x.domain, x.value, x.requires_grad) == ("x", (4,), "real",
                                                                     None, True)
    assert soft.output.shape == () and soft.output.op == "sum"

    # ... and are overridden per case
    assert mlp.description == "a small MLP"
    assert [i.name for i in mlp.inputs] == ["x", "W", "b"]   # file order
    assert mlp.input["x"].requires_grad is False
    assert mlp.input["x"].shape == (4, 3)
    assert mlp.input["W"].domain == "unit"
    assert mlp.input["b"].domain == (-1.0, 1.0)
    assert mlp.lets == (("h", "tanh(x @ W + b)"), ("g", "h * 2"))
    assert mlp.nodes["h"].op == "let" and mlp.nodes["h"].shape == (4, 5)
    assert mlp.nodes["g"].args[0].args[0] is mlp.nodes["h"]
    assert mlp.output.shape == (4,)
    assert mlp.gradient == "random"
    assert mlp.retain_grad == ("h", "g")
    assert mlp.dtypes == ("float32",)
    assert (mlp.points, mlp.seed, mlp.atol, mlp.rtol) == (2, 3, 1e-6, 0.01)
    assert "numeric" in mlp.witnesses and "torch" not in mlp.witnesses
    assert mlp.expect == "fail"

    a, c, s = pinned.inputs
    np.testing.assert_array_equal(a.value, [1.5, 2.0])
    assert a.domain == "positive"
    assert c.value.shape == (2, 2)
    np.testing.assert_array_equal(c.value, np.full((2, 2), 0.5))   # scalar broadcast
    assert s.shape == () and s.domain == "nonzero" and s.value is None
    assert pinned.output.shape == (2,)
    assert isinstance(pinned.gradient, np.ndarray)
    np.testing.assert_array_equal(pinned.gradient, [1.0, -2.0])


FULL_YAML = """
    defaults:
      dtype: float32
      points: 4
    case:
      - name: softplus
        expr: sum(log(1 + exp(x)))
        inputs:
          x: {shape: [4]}
      - name: two-layer
        inputs:
          x: {shape: [4, 3], requires_grad: false}
          W: [3, 5]
          b: {shape: [5], domain: [-1, 1]}
        let:
          h: tanh(x @ W + b)
          g: h * 2
        expr: sum(g**2, axis=1)
        gradient: ones
        retain_grad: h
        dtype: [float64, float32]
        points: 1
        atol: 0
        witnesses: [symbolic, torch]
      - name: scalar-gradient
        inputs: {s: {value: 0.25, domain: unit}}
        expr: |
          (s ** 2 +
           sin(s))
        gradient: 2.5
"""


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_full_yaml(tmp_path, suffix):
    cases = load(tmp_path, FULL_YAML, "cases" + suffix)
    soft, mlp, sg = cases
    assert soft.line == line_of(FULL_YAML, "name: softplus")
    assert soft.dtypes == ("float32",) and soft.points == 4
    assert soft.input["x"].shape == (4,)
    assert mlp.input["W"].shape == (3, 5)       # shape shorthand
    assert mlp.input["x"].requires_grad is False
    assert mlp.input["b"].domain == (-1.0, 1.0)
    assert mlp.lets == (("h", "tanh(x @ W + b)"), ("g", "h * 2"))
    assert mlp.gradient == "ones"
    assert mlp.retain_grad == ("h",)            # a single name is a list of one
    assert mlp.dtypes == ("float64", "float32")
    assert mlp.points == 1 and mlp.atol == 0.0
    assert "torch" in mlp.witnesses and "numeric" not in mlp.witnesses
    assert sg.input["s"].shape == ()
    assert float(sg.input["s"].value) == 0.25
    assert sg.output.shape == ()
    assert float(sg.gradient) == 2.5 and np.ndim(sg.gradient) == 0


def test_toml_subtables(tmp_path):
    text = """
        [[case]]
        name = "tables"
        expr = "sum(h)"

        [case.inputs.x]
        shape = [2, 2]
        domain = "nonnegative"

        [case.let]
        h = "sqrt(x)"
    """
    (case,) = load(tmp_path, text)
    assert case.input["x"].shape == (2, 2)
    assert case.input["x"].domain == "nonnegative"
    assert case.lets == (("h", "sqrt(x)"),)


def test_default_gradients(tmp_path):
    text = """
        [[case]]
        name = "vector-output"
        expr = "x * 2"
        inputs.x = { shape = [3] }

        [[case]]
        name = "ones"
        expr = "x * 2"
        inputs.x = [3]
        gradient = "ones"

        [[case]]
        name = "explicit-matrix"
        expr = "x * y"
        inputs.x = [2, 1]
        inputs.y = [3]
        gradient = [[1, 2, 3], [4, 5, 6]]
    """
    vec, ones, explicit = load(tmp_path, text)
    assert vec.gradient == "random"
    assert ones.gradient == "ones"
    assert explicit.gradient.shape == (2, 3)
    assert explicit.gradient.dtype == np.float64


def test_dtype_list_is_deduplicated_in_order(tmp_path):
    (case,) = load(tmp_path, """
        [[case]]
        name = "d"
        expr = "sum(x)"
        inputs.x = [2]
        dtype = ["float32", "float64", "float32"]
    """)
    assert case.dtypes == ("float32", "float64")


def test_empty_yaml_file_has_no_cases(tmp_path):
    assert read_file(write(tmp_path, "", "empty.yaml")) == ([], [])


# --------------------------------------------------------------------------- errors: keys

def test_unknown_case_key_points_at_it(tmp_path):
    text = """
        [[case]]
        name = "a"
        expr = "sum(x)"
        inputs.x = [3]
        tolerance = 1e-3
    """
    err = error(tmp_path, text, r"unknown key tolerance in case \(allowed: .*atol",
                line=5)
    assert err.case == "a"


def test_unknown_input_key_points_at_it(tmp_path):
    text = """
        [[case]]
        name = "a"
        expr = "sum(x)"

        [case.inputs.x]
        shape = [3]
        precision = "float32"
    """
    error(tmp_path, text, r"unknown key precision in input 'x' \(allowed: domain, dtype, "
          r"requires_grad", line=7)


def test_unknown_input_key_inline(tmp_path):
    error(tmp_path, """
        [[case]]
        name = "a"
        expr = "sum(x)"
        inputs.x = { shape = [3], grad = true }
    """, r"unknown key grad in input 'x'", line=4)


def test_unknown_default_key(tmp_path):
    err = error(tmp_path, """
        [defaults]
        points = 2
        expr = "x"

        [[case]]
        name = "a"
        expr = "sum(x)"
        inputs.x = [3]
    """, r"unknown key expr in \[defaults\]")
    assert err.case is None


def test_order_under_defaults_is_its_op_cases_order(tmp_path):
    """[defaults] order = 2 gives each op case order 2 (a case's own key wins; a
    formula case, which has no second order, keeps 1 and is not refused)."""
    cases = {c.name: c for c in load(tmp_path, """
        [defaults]
        order = 2

        [[case]]
        name = "op"
        op = "m:F"
        reference = "tanh(x)"
        second_order = "expanded"
        inputs.x = [3]

        [[case]]
        name = "first"
        op = "m:F"
        reference = "tanh(x)"
        inputs.x = [3]
        order = 1

        [[case]]
        name = "formula"
        expr = "sum(x)"
        inputs.x = [3]
    """)}
    assert (cases["op"].order, cases["op"].second_order) == (2, "expanded")
    assert cases["first"].order == 1 and cases["formula"].order == 1
    err = error(tmp_path, """
        [defaults]
        order = 3

        [[case]]
        name = "a"
        expr = "sum(x)"
        inputs.x = [3]
    """, r"order must be an integer from 1 to 2, got 3")
    assert err.case == "a"


def test_order_under_defaults_checks_double_backward(tmp_path):
    """The default order reaches the check: an op wrong at second order only passes at
    order 1 and is caught by op.double under [defaults] order = 2."""
    from gradcheck.checking.case import run_case

    fixtures = Path(__file__).resolve().parent / "fixtures"
    (tmp_path / "custom_ops.py").write_text((fixtures / "custom_ops.py").read_text())
    case = """
        [[case]]
        name = "detached"
        op = "custom_ops:TanhLinearDetached"
        reference = "tanh(x @ W + b)"
        inputs.x = [2, 3]
        inputs.W = [3, 2]
        inputs.b = [2]
        points = 1
    """
    (first,) = load(tmp_path, case)
    (second,) = load(tmp_path, "[defaults]\norder = 2\n" + case, name="two.toml")
    assert run_case(first, "float64", timeout=None).status == "passed"
    result = run_case(second, "float64", timeout=None)
    assert result.status == "failed" and result.witness("op.double").status == "failed"


def test_unknown_top_level_key(tmp_path):
    error(tmp_path, """
        [[cases]]
        name = "a"
    """, r"unknown key cases in the file's top level; did you mean 'case'\? \(allowed: "
          r"case, defaults\)", line=1)


def test_unknown_yaml_keys(tmp_path):
    text = """
        case:
          - name: a
            inputs:
              x: [3]
            expr: sum(x)
            expected: fail
    """
    error(tmp_path, text, r"unknown key expected in case", "c.yaml", line=6)


@pytest.mark.parametrize("body, match, needle", [
    ('expr = "sum(x)"\ninputs.x = [3]', r"a case needs a name", None),
    ('name = ""\nexpr = "sum(x)"\ninputs.x = [3]', r"a case needs a name", "name ="),
    ('name = 3\nexpr = "sum(x)"\ninputs.x = [3]', r"a case needs a name", "name ="),
    ('name = "a"\ninputs.x = [3]', r"case 'a': a case needs expr", None),
    ('name = "a"\nexpr = "1"', r"a case needs inputs", None),
    ('name = "a"\nexpr = "1"\ninputs = {}', r"a case needs inputs", "inputs ="),
])
def test_missing_keys(tmp_path, body, match, needle):
    text = "[[case]]\n" + body + "\n"
    error(tmp_path, text, match, line=line_of(text, needle) if needle else 1)


def test_case_that_is_not_a_table(tmp_path):
    error(tmp_path, "case:\n  - 3\n", r"each \[\[case\]\] must be a table", "c.yaml")


def test_case_that_is_not_a_list(tmp_path):
    error(tmp_path, "case = 3\n", r"case must be an array of tables")


def test_defaults_not_a_table(tmp_path):
    error(tmp_path, "defaults = 3\n", r"\[defaults\] must be a table")


def test_top_level_not_a_table(tmp_path):
    error(tmp_path, "- name: a\n", r"must be a table with \[\[case\]\] entries", "c.yaml")


# --------------------------------------------------------------------------- errors: names

DUPLICATES = """
    [[case]]
    name = "same"
    expr = "sum(x)"
    inputs.x = [3]

    [[case]]
    name = "other"
    expr = "sum(x)"
    inputs.x = [3]

    [[case]]
    expr = "sum(x)"
    name = "same"
    inputs.x = [3]
"""


def test_duplicate_case_names(tmp_path):
    cases, errors = read_file(write(tmp_path, DUPLICATES))
    assert [c.name for c in cases] == ["same", "other"]   # the first one still loads
    (err,) = errors
    assert err.case == "same"
    assert err.line == 13                                   # the second 'name = "same"'
    assert "duplicate case name (first defined on line 1)" in str(err)


@pytest.mark.parametrize("body, match, needle", [
    ('inputs.x = [3]\nlet.x = "x * 2"', r"let name 'x' is already an input", "let.x"),
    ('inputs.pi = [3]', r"'pi' is a built-in name and cannot be redefined", "inputs.pi"),
    ('inputs.E = []', r"'E' is a built-in name", "inputs.E"),
    ('inputs."a-b" = [3]', r"'a-b' is not a valid name", "inputs."),
    ('inputs."1x" = [3]', r"'1x' is not a valid name", "inputs."),
    ('inputs.x = [3]\nlet."h-h" = "x"', r"'h-h' is not a valid name", "let."),
])
def test_bad_and_colliding_names(tmp_path, body, match, needle):
    text = '[[case]]\nname = "a"\nexpr = "1"\n' + body + "\n"
    err = error(tmp_path, text, match, line=line_of(text, needle))
    assert err.case == "a"


def test_a_name_may_be_a_functions_name():
    """An input or let may be called var, norm or round (the language grows; case files
    written before must keep loading): written bare it is the name, called it is the
    function, as in Python."""
    case = case_from_dict({"name": "a", "expr": "sum(var(norm * var, axis=-1))",
                           "let": {"var": "exp(norm)"}, "inputs": {"norm": {"shape": [2, 3]}}})
    assert case.output.args[0].op == "var"
    assert case.output.args[0].args[0].args[1].op == "let"


def test_duplicate_input_toml(tmp_path):
    text = """
        [[case]]
        name = "a"
        expr = "sum(x)"
        inputs.x = [3]
        inputs.x = [4]
    """
    error(tmp_path, text, r"invalid TOML", line=5)


def test_duplicate_keys_yaml(tmp_path):
    text = """
        case:
          - name: a
            inputs:
              x: [3]
              x: [4]
            expr: sum(x)
    """
    error(tmp_path, text, r"invalid YAML: duplicate key 'x'", "c.yaml", line=5)


def test_duplicate_let_yaml(tmp_path):
    text = """
        case:
          - name: a
            inputs: {x: [3]}
            let:
              h: x * 2
              h: x * 3
            expr: sum(h)
    """
    error(tmp_path, text, r"duplicate key 'h'", "c.yaml", line=6)


def test_non_string_yaml_keys(tmp_path):
    error(tmp_path, """
        case:
          - name: a
            expr: sum(x)
            inputs: {1: [3]}
    """, r"1 is not a valid name", "c.yaml", line=4)
    error(tmp_path, "1: 2\ncase: []\n", r"unknown key 1 in the file's top level", "d.yaml")


# --------------------------------------------------------------------------- errors: inputs

@pytest.mark.parametrize("spec, match", [
    ("{ shape = [-1] }", r"shape must be a list of at most 8 positive integers, got \[-1\]"),
    ("{ shape = [0] }", r"shape must be a list of at most 8 positive integers"),
    ("{ shape = [2.5] }", r"positive integers, got \[2.5\]"),
    ("{ shape = [true] }", r"positive integers"),
    ('{ shape = "3" }', r"positive integers, got '3'"),
    ("{ shape = 3 }", r"positive integers, got 3"),
    ("{ shape = [1, 1, 1, 1, 1, 1, 1, 1, 1] }", r"at most 8"),
    ("{ shape = [10000, 10000] }", r"100000000 elements; the limit is 10000000"),
    ('{ shape = [3], domain = "positiv" }', r"unknown domain 'positiv'; use one of real"),
    ("{ shape = [3], domain = [1, 0] }", r"a domain is a name or \[lo, hi\] with finite "
                                         r"lo < hi, got \[1, 0\]"),
    ("{ shape = [3], domain = [1, 1] }", r"finite lo < hi"),
    ("{ shape = [3], domain = [0, inf] }", r"finite lo < hi, got \[0, inf\]"),
    ("{ shape = [3], domain = [nan, 1] }", r"finite lo < hi"),
    ("{ shape = [3], domain = [0] }", r"finite lo < hi"),
    ("{ shape = [3], domain = [0, 1, 2] }", r"finite lo < hi"),
    ('{ shape = [3], domain = ["a", "b"] }', r"finite lo < hi"),
    ("{ shape = [3], domain = 5 }", r"a domain is a name or \[lo, hi\]"),
    ("{ shape = [3], value = [1, 2] }", r"value has shape \[2\] but the input's shape is "
                                        r"\[3\]"),
    ("{ shape = [2, 2], value = [1, 2, 3, 4] }", r"value has shape \[4\] but .* \[2, 2\]"),
    ('{ shape = [3], domain = "positive", value = [1, -1, 2] }',
     r"value lies outside its domain 'positive'"),
    ('{ shape = [2], domain = "unit", value = [0, 1] }', r"outside its domain 'unit'"),
    ("{ shape = [2], domain = [0, 1], value = [0.5, 2] }", r"outside its domain \(0.0, 1.0\)"),
    ('{ shape = [2], value = [1, "a"] }', r"input 'x': expected numbers, found 'a'"),
    ("{ shape = [2], value = [1, true] }", r"expected numbers, found True"),
    ("{ shape = [2, 2], value = [[1, 2], [3]] }", r"rectangular"),
    ("{ shape = [2], value = [1, nan] }", r"numbers must be finite"),
    ("{ shape = [3], requires_grad = 1 }", r"requires_grad must be true or false"),
    ("3", r"input 'x' must be a table such as \{ shape = \[3\] \}"),
])
def test_bad_inputs(tmp_path, spec, match):
    text = f"""
        [[case]]
        name = "a"
        expr = "sum(y)"
        inputs.y = [2]
        inputs.x = {spec}
    """
    err = error(tmp_path, text, match, line=5)
    assert err.case == "a"


def test_bad_input_line_in_later_case(tmp_path):
    text = """
        [defaults]
        points = 1

        [[case]]
        name = "good"
        expr = "sum(x)"
        inputs.x = [3]

        [[case]]
        name = "bad"
        expr = "sum(x) + sum(w)"
        inputs.x = { shape = [3] }
        inputs.w = { shape = [3], domain = "sometimes" }
        inputs.z = [1]
    """
    path = write(tmp_path, text)
    cases, errors = read_file(path)
    assert [c.name for c in cases] == ["good"]
    (err,) = errors
    assert err.line == line_of(text, "inputs.w") == 13
    assert err.case == "bad"
    assert "unknown domain 'sometimes'" in str(err)


def test_bad_yaml_input_points_at_its_key(tmp_path):
    text = """
        case:
          - name: a
            expr: sum(x)
            inputs:
              x:
                shape: [3]
                domain: maybe
    """
    error(tmp_path, text, r"unknown domain 'maybe'", "c.yaml", line=5)


# --------------------------------------------------------------------------- errors: expr

def test_bad_expr_line(tmp_path):
    text = """
        [[case]]
        name = "one"
        inputs.x = { shape = [3] }
        expr = "sum(x)"

        [[case]]
        name = "two"
        inputs.x = { shape = [3] }
        # a comment between
        expr = "sum(frobnicate(x))"
    """
    path = write(tmp_path, text)
    cases, errors = read_file(path)
    assert [c.name for c in cases] == ["one"]
    (err,) = errors
    assert (err.file, err.case, err.line) == (str(path), "two", 10)
    assert str(err).startswith(f"{path}:10: case 'two': unknown function 'frobnicate'")


def test_bad_let_line(tmp_path):
    text = """
        [[case]]
        name = "a"
        inputs.x = [3]
        let.h = "x * 2"
        let.g = "h @ q"
        expr = "sum(g)"
    """
    error(tmp_path, text, r"case 'a': unknown name 'q' \(declared inputs and let names: h, x\)",
          line=5)


def test_let_used_before_definition(tmp_path):
    text = """
        [[case]]
        name = "a"
        inputs.x = [3]
        let.g = "h * 2"
        let.h = "x * 2"
        expr = "sum(g)"
    """
    error(tmp_path, text, r"unknown name 'h'", line=4)


def test_multiline_expr_line_toml(tmp_path):
    text = '''
        [[case]]
        name = "a"
        inputs.x = [3]
        expr = """
        sum(x +
            x * nope)"""
    '''
    error(tmp_path, text, r"unknown name 'nope'", line=6)


def test_multiline_expr_line_yaml(tmp_path):
    text = """
        case:
          - name: a
            inputs: {x: [3]}
            expr: |
              sum(x +
                  x * nope)
    """
    error(tmp_path, text, r"unknown name 'nope'", "c.yaml", line=6)


@pytest.mark.parametrize("expr, match", [
    ("x.T", r"attribute access is not allowed"),
    ("sum(x) > 0", r"comparison may only be the condition of where"),
    ("x + M", r"shapes \[3\], \[2, 2\] do not broadcast"),
    ("sum(M, axis=2)", r"axis 2 is out of range"),
    ("sin(x, axis=1)", r"unexpected keyword 'axis'"),
    ("2**2**2**2**2**2", r"exponent"),
    ("1e400", r"number literal exceeds"),
    ("'a'", r"is not a number"),
])
def test_bad_exprs_are_located(tmp_path, expr, match):
    text = f"[[case]]\nname = \"a\"\ninputs.x = [3]\ninputs.M = [2, 2]\nexpr = '''{expr}'''\n"
    error(tmp_path, text, match, line=5)


def test_expr_not_a_string(tmp_path):
    error(tmp_path, '[[case]]\nname = "a"\ninputs.x = [3]\nexpr = 3\n',
          r"an expression must be a string, not int", line=4)


# --------------------------------------------------------------------------- errors: options

BASE = '[[case]]\nname = "a"\ninputs.x = [3]\ninputs.s = []\nlet.h = "x * 2"\n'


@pytest.mark.parametrize("extra, match", [
    ('expr = "x * 2"\ngradient = "scalar"',
     r'gradient = "scalar" needs a scalar output, but expr has shape \[3\]'),
    ('expr = "x * 2"\ngradient = [1, 2]', r"gradient has shape \[2\] but expr has shape \[3\]"),
    ('expr = "sum(x)"\ngradient = [1]', r"gradient has shape \[1\] but expr has shape \[\]"),
    ('expr = "x * 2"\ngradient = "zeros"',
     r"gradient must be one of scalar, ones, random or numbers, got 'zeros'"),
    ('expr = "x * 2"\ngradient = [1, "a", 3]', r"gradient: expected numbers, found 'a'"),
    ('expr = "x * 2"\ngradient = [1, inf, 3]', r"gradient: numbers must be finite"),
    ('expr = "sum(h)"\nretain_grad = ["x"]', r"retain_grad names 'x', which is not a let name"),
    ('expr = "sum(h)"\nretain_grad = ["nope"]', r"retain_grad names 'nope'"),
    ('expr = "sum(h)"\nretain_grad = ["h", "h"]', r"retain_grad repeats a name"),
    ('expr = "sum(h)"\nretain_grad = 3', r"retain_grad must be a list of let names"),
    ('expr = "sum(h)"\nretain_grad = [3]', r"retain_grad names 3"),
    ('expr = "sum(x)"\ndtype = "float8"', r"dtype must be one of float64, float32, float16, "
                                          r"bfloat16 or a list of them, got \['float8'\]"),
    ('expr = "sum(x)"\ndtype = []', r"dtype must be one of"),
    ('expr = "sum(x)"\ndtype = 64', r"dtype must be one of .* got 64"),
    ('expr = "sum(x)"\ndtype = ["float64", "int32"]', r"dtype must be one of"),
    ('expr = "sum(x)"\npoints = 0', r"points must be an integer from 1 to 1000, got 0"),
    ('expr = "sum(x)"\npoints = 1001', r"points must be an integer from 1 to 1000, got 1001"),
    ('expr = "sum(x)"\npoints = 2.5', r"points must be an integer .* got 2.5"),
    ('expr = "sum(x)"\npoints = true', r"points must be an integer .* got True"),
    ('expr = "sum(x)"\npoints = "3"', r"points must be an integer .* got '3'"),
    ('expr = "sum(x)"\nseed = -1', r"seed must be an integer from 0 to"),
    ('expr = "sum(x)"\natol = -1e-3', r"atol must be a non-negative number, got -0.001"),
    ('expr = "sum(x)"\natol = inf', r"atol must be a non-negative number, got inf"),
    ('expr = "sum(x)"\nrtol = nan', r"rtol must be a non-negative number, got nan"),
    ('expr = "sum(x)"\nrtol = "tight"', r"rtol must be a non-negative number, got 'tight'"),
    ('expr = "sum(x)"\nrtol = false', r"rtol must be a non-negative number"),
    ('expr = "sum(x)"\nwitnesses = ["symbolic", "jax"]',
     r"witnesses must be a list drawn from symbolic, engine, torch, numeric"),
    ('expr = "sum(x)"\nwitnesses = 3', r"witnesses must be a list"),
    ('expr = "sum(x)"\nexpect = "maybe"', r'expect must be "pass" or "fail", got \'maybe\''),
    ('expr = "sum(x)"\nexpect = true', r'expect must be "pass" or "fail"'),
])
def test_bad_options_are_located(tmp_path, extra, match):
    text = BASE + extra + "\n"
    key = extra.splitlines()[-1].split(" =")[0]
    err = error(tmp_path, text, match, line=line_of(text, key + " ="))
    assert err.case == "a"


def test_bad_default_is_reported_for_each_case(tmp_path):
    text = """
        [defaults]
        points = 0

        [[case]]
        name = "a"
        expr = "sum(x)"
        inputs.x = [3]

        [[case]]
        name = "b"
        expr = "sum(x)"
        inputs.x = [3]
        points = 2
    """
    cases, errors = read_file(write(tmp_path, text))
    assert [c.name for c in cases] == ["b"]            # overridden, so fine
    (err,) = errors
    assert err.case == "a" and "points must be an integer from 1 to 1000, got 0" in str(err)


# --------------------------------------------------------------------------- errors: syntax

def test_invalid_toml_reports_line(tmp_path):
    text = """
        [[case]]
        name = "a"
        expr = "sum(x)"
        inputs.x = { shape = [3]
    """
    err = error(tmp_path, text, r"invalid TOML")
    assert err.line == 4


def test_invalid_toml_unterminated_string(tmp_path):
    err = error(tmp_path, '[[case]]\nname = "a"\n\n\nexpr = "sum(x)\n', r"invalid TOML")
    assert err.line == 5


def test_invalid_yaml_reports_line(tmp_path):
    text = """
        case:
          - name: a
            inputs: {x: [3]
            expr: sum(x)
    """
    err = error(tmp_path, text, r"invalid YAML", "c.yaml")
    assert err.line is not None and 4 <= err.line <= 5


def test_invalid_yaml_indentation(tmp_path):
    err = error(tmp_path, "case:\n  - name: a\n   expr: x\n", r"invalid YAML", "c.yml")
    assert err.line == 3


def test_unreadable_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_bytes(b"\xff\xfe\x00not utf-8")
    cases, errors = read_file(path)
    assert cases == [] and len(errors) == 1
    assert "cannot read" in str(errors[0])


# --------------------------------------------------------------------------- hostile files

def test_deeply_nested_toml(tmp_path):
    deep = "[" * 100000 + "]" * 100000
    err = error(tmp_path, f'[[case]]\nname = "a"\nexpr = "x"\ninputs.x = {{ value = {deep} }}\n',
                r"invalid TOML")
    assert "deep" in str(err)


def test_deeply_nested_yaml(tmp_path):
    # PyYAML's scanner is quadratic in flow nesting until Python's recursion limit stops
    # the composer (about 1-2 s here, 7e4 Python calls): bounded, not a hang
    deep = "[" * 100000 + "]" * 100000
    error(tmp_path, f"case:\n  - name: a\n    expr: x\n    inputs: {{x: {{value: {deep}}}}}\n",
          r"invalid YAML: nested too deeply", "c.yaml")


def test_yaml_billion_laughs_is_refused_quickly(tmp_path):
    levels = ["&a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"&{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    text = ("case:\n  - name: a\n    expr: sum(x)\n    inputs: {x: [3]}\n"
            "    description: [" + ", ".join(levels) + "]\n")
    error(tmp_path, text, r"aliases .* are not allowed", "c.yaml", line=5)


def test_yaml_python_tags_are_not_executed(tmp_path):
    target = tmp_path / "pwned"
    text = f"""
        case:
          - name: a
            expr: !!python/object/apply:os.system ["touch {target}"]
            inputs: {{x: [3]}}
    """
    error(tmp_path, text, r"invalid YAML", "c.yaml")
    assert not target.exists()


def test_expression_payloads_in_a_case_file_are_not_executed(tmp_path):
    target = tmp_path / "pwned"
    text = f"""
        [[case]]
        name = "a"
        inputs.x = [3]
        expr = "__import__('os').system('touch {target}')"

        [[case]]
        name = "b"
        inputs.x = [3]
        let.h = "open('{target}', 'w')"
        expr = "sum(x)"

        [[case]]
        name = "c"
        inputs.x = [3]
        expr = "[open('{target}', 'w') for _ in x]"
    """
    cases, errors = read_file(write(tmp_path, text))
    assert cases == []
    assert [e.case for e in errors] == ["a", "b", "c"]
    assert [e.line for e in errors] == [4, 9, 15]
    assert not target.exists()


# --------------------------------------------------------------------------- files and folders

GOOD = """
    [[case]]
    name = "{name}"
    expr = "sum(x)"
    inputs.x = [3]
"""


def test_one_bad_case_does_not_hide_the_others(tmp_path):
    text = """
        [[case]]
        name = "first"
        expr = "sum(x)"
        inputs.x = [3]

        [[case]]
        name = "broken"
        expr = "sum(x"
        inputs.x = [3]

        [[case]]
        name = "also-broken"
        expr = "sum(x)"
        inputs.x = { shape = [-3] }

        [[case]]
        name = "last"
        expr = "mean(x)"
        inputs.x = [3]
    """
    cases, errors = read_file(write(tmp_path, text))
    assert [c.name for c in cases] == ["first", "last"]
    assert [e.case for e in errors] == ["broken", "also-broken"]
    assert [e.line for e in errors] == [8, 14]
    assert "invalid syntax" in str(errors[0])


def test_one_bad_yaml_case_does_not_hide_the_others(tmp_path):
    text = """
        case:
          - name: first
            expr: sum(x)
            inputs: {x: [3]}
          - name: broken
            expr: sum(y)
            inputs: {x: [3]}
          - name: last
            expr: sum(x)
            inputs: {x: [3]}
    """
    cases, errors = read_file(write(tmp_path, text, "c.yaml"))
    assert [c.name for c in cases] == ["first", "last"]
    (err,) = errors
    assert (err.case, err.line) == ("broken", 6)


def test_case_files_in_folders(tmp_path):
    write(tmp_path, GOOD.format(name="a"), "b/a.toml")
    write(tmp_path, "case:\n  - {name: y, expr: sum(x), inputs: {x: [3]}}\n", "b/sub/deep/y.yaml")
    write(tmp_path, "case:\n  - {name: z, expr: sum(x), inputs: {x: [3]}}\n", "b/z.yml")
    write(tmp_path, "not a case file", "b/notes.txt")
    write(tmp_path, "{}", "b/data.json")
    write(tmp_path, GOOD.format(name="c"), "c.toml")
    files = case_files([tmp_path / "b"])
    assert sorted(f.relative_to(tmp_path).as_posix() for f in files) == [
        "b/a.toml", "b/sub/deep/y.yaml", "b/z.yml"]
    # a file named twice is read once; files and folders mix
    files = case_files([tmp_path / "c.toml", tmp_path / "b", tmp_path / "c.toml"])
    assert len(files) == 4
    assert files[0] == tmp_path / "c.toml"
    cases, errors = read_paths([tmp_path / "b", tmp_path / "c.toml"])
    assert errors == []
    assert sorted(c.name for c in cases) == ["a", "c", "y", "z"]


def test_case_files_missing_path(tmp_path):
    with pytest.raises(CaseFileError, match="no such file or folder") as info:
        case_files([tmp_path / "nope.toml"])
    assert info.value.file == str(tmp_path / "nope.toml")
    with pytest.raises(CaseFileError, match="no such file or folder"):
        read_paths([tmp_path / "missing-dir"])


def test_case_files_wrong_suffix(tmp_path):
    path = write(tmp_path, "x", "notes.txt")
    with pytest.raises(CaseFileError, match=r"not a case file \(expected .toml"):
        case_files([path])


def test_read_paths_collects_errors_of_every_file(tmp_path):
    write(tmp_path, GOOD.format(name="ok"), "d/ok.toml")
    write(tmp_path, "[[case]\n", "d/broken.toml")
    write(tmp_path, "case: [", "d/broken.yaml")
    cases, errors = read_paths([tmp_path / "d"])
    assert [c.name for c in cases] == ["ok"]
    assert sorted(Path(e.file).name for e in errors) == ["broken.toml", "broken.yaml"]
    assert all("invalid" in str(e) for e in errors)


def test_load_cases_is_strict(tmp_path):
    write(tmp_path, GOOD.format(name="ok"), "e/ok.toml")
    assert [c.name for c in load_cases(tmp_path / "e")] == ["ok"]
    write(tmp_path, '[[case]]\nname = "bad"\nexpr = "sum(q)"\ninputs.x = [3]\n', "e/z.toml")
    with pytest.raises(CaseFileError, match=r"z.toml:3: case 'bad': unknown name 'q'"):
        load_cases(tmp_path / "e")


def test_repository_case_files_are_valid():
    """The example case files shipped with the project load without errors."""
    root = Path(__file__).resolve().parent.parent / "cases"
    if not root.is_dir():
        pytest.skip("no cases/ folder")
    cases, errors = read_paths([root])
    assert errors == [], [str(e) for e in errors]
    assert cases
    assert len({(c.file, c.name) for c in cases}) == len(cases)


# --------------------------------------------------------------------------- pickling

def test_a_case_pickles_whole_with_its_shared_nodes(tmp_path):
    """What a --jobs or Dask worker receives: the same case, its lets still one node
    each however many parents use them, its pinned values and cotangent kept."""
    import dataclasses
    import pickle

    path = write(tmp_path, textwrap.dedent("""
        [[case]]
        name = "shared"
        inputs.x = { shape = [2, 3], value = [[0.5, 1, 2], [3, 4, 5]] }
        inputs.W = { shape = [3, 2] }
        let.h = "tanh(x @ W)"
        let.g = "h * h + h"
        expr = "g + h"
        gradient = [[1, 2], [3, 4]]
        retain_grad = ["h"]
        dtype = ["float64", "float32"]
        seed = 7
    """))
    (case,) = load_cases(path)
    back = pickle.loads(pickle.dumps(case))
    assert isinstance(back, Case) and back is not case
    plain = [f.name for f in dataclasses.fields(Case)
             if f.name not in ("nodes", "output", "outputs", "inputs", "gradient")]
    assert {n: getattr(back, n) for n in plain} == {n: getattr(case, n) for n in plain}
    assert [(s.name, s.shape, s.domain) for s in back.inputs] == \
        [(s.name, s.shape, s.domain) for s in case.inputs]
    np.testing.assert_array_equal(back.input["x"].value, case.input["x"].value)
    np.testing.assert_array_equal(back.gradient, case.gradient)
    assert repr(back.output) == repr(case.output) and back.output.shape == (2, 2)
    assert set(back.nodes) == set(case.nodes) == {"x", "W", "h", "g"}
    h, g = back.nodes["h"], back.nodes["g"]
    # g + h: the h of the sum is the h that g uses twice, and the one nodes names
    assert back.output.args[1] is h and back.output.args[0] is g
    assert g.args[0].args[0].args[0] is h and g.args[0].args[0].args[1] is h
    assert back.outputs == (back.output,)


def test_a_formula_deeper_than_pickle_follows_pickles():
    import pickle

    from gradcheck.cases import case_from_dict

    lets, previous = {}, "x"
    for i in range(20):   # 1000 nested sines, 50 to a let
        lets[f"a{i}"] = "sin(" * 50 + previous + ")" * 50
        previous = f"a{i}"
    case = case_from_dict({"name": "deep", "expr": f"sum({previous})",
                           "inputs": {"x": {"shape": [3]}}, "let": lets})
    back = pickle.loads(pickle.dumps(case))
    node, depth = back.output, 0
    while node.args:
        node, depth = node.args[0], depth + 1
    assert depth == 1 + 1000 + 20 and node is back.nodes["x"]


def test_a_searched_folder_leaves_out_what_is_never_a_case_file(tmp_path):
    """`gradcheck run .` in a project: its pyproject.toml, .github's workflows, a
    virtualenv's files are no case files; a file named on the command line is read."""
    case = '[[case]]\nname = "c"\nexpr = "sum(x)"\ninputs.x = { shape = [2] }\n'
    for name in ("cases/a.toml", "pyproject.toml", ".github/workflows/ci.yml",
                 ".venv/lib/x.toml", "node_modules/p/y.yaml", "deep/b.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(case if name.endswith(".toml") else "case: []\n")
    found = [p.relative_to(tmp_path).as_posix() for p in case_files([tmp_path])]
    assert found == ["cases/a.toml", "deep/b.yaml"]
    hidden = tmp_path / ".venv" / "lib" / "x.toml"
    assert case_files([hidden]) == [hidden]       # named: read, wherever it lies
