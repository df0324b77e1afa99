"""Array literals and the constructors (ones, zeros, full, eye, arange, ones_like,
zeros_like): the values torch's own constructors give, constants in every witness."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gradcheck.cases import case_from_dict
from gradcheck.formula.constructors import CONSTRUCTORS, MAX_LITERAL
from gradcheck.base.errors import CaseFileError
from gradcheck.formula.parser import parse
from gradcheck.formula.forward import evaluate
from gradcheck.checking.case import run_case
from gradcheck.formula.tree import Node, walk

NAMES = {"x": Node("input", shape=(3, 4), name="x"), "v": Node("input", shape=(4,), name="v"),
         "y": Node("input", shape=(3, 4), name="y")}

# each constant formula and what torch's own constructor gives for it
TORCH = [
    ("ones([3, 4])", torch.ones(3, 4)),
    ("zeros([2])", torch.zeros(2)),
    ("full([2, 3], 2.5)", torch.full((2, 3), 2.5)),
    ("full([2], -0.1)", torch.full((2,), -0.1, dtype=torch.float64)),
    ("eye(4)", torch.eye(4)),
    ("arange(5)", torch.arange(5)),
    ("arange(1, 8, 3)", torch.arange(1, 8, 3)),
    ("arange(5, 0, -2)", torch.arange(5, 0, -2)),
    ("[[0, -1], [1, 0]]", torch.tensor([[0.0, -1.0], [1.0, 0.0]])),
    ("[0.5, pi]", torch.tensor([0.5, np.pi], dtype=torch.float64)),
    ("ones_like(x)", torch.ones(3, 4)),
    ("zeros_like(v)", torch.zeros(4)),
]


@pytest.mark.parametrize("text, expected", TORCH, ids=[t for t, _ in TORCH])
def test_constants_equal_torchs_constructors(text, expected):
    node = parse(text, NAMES)
    value = evaluate(node, {})
    assert value.shape == tuple(expected.shape)
    np.testing.assert_array_equal(value, expected.double().numpy())


@pytest.mark.parametrize("expr", [
    "sum(x @ eye(4) * y)", "sum(v * arange(4) ** 2)", "sum(x * full([3, 1], 2.5) + zeros([4]))",
    "sum(x @ [[1, 0], [0, 1], [2, 3], [-1, 0.5]])", "sum(tanh(x) * ones_like(y))",
])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_formulas_with_constants_pass_every_witness(expr, dtype):
    inputs = {n: {"shape": list(NAMES[n].shape)} for n in "xyv" if n in expr}
    case = case_from_dict({"name": "c", "expr": expr, "inputs": inputs})
    result = run_case(case, dtype)
    assert result.status == "passed", result.message
    assert {w.witness for w in result.witnesses} >= {"engine", "torch"}


def test_the_gradient_through_a_constant_is_the_constant():
    """d/dv sum(v * arange(4)) = [0, 1, 2, 3]: the symbolic reference reads it."""
    from gradcheck.reference import Reference

    case = case_from_dict({"name": "c", "expr": "sum(v * arange(4))",
                           "inputs": {"v": {"shape": [4]}}})
    point = {"v": np.ones(4)}
    (got,) = Reference(case).evaluations([point], [np.array(1.0)])
    np.testing.assert_array_equal(got.grads["v"], [0.0, 1.0, 2.0, 3.0])


def test_constants_record_no_node():
    node = parse("eye(3)", {})
    assert all(n.op != "input" for n in walk(node))


@pytest.mark.parametrize("text, match", [
    ("[[1, 2], [3]]", r"stack: shapes \[2\], \[1\] do not fit"),
    ("[x, 1]", r"holds numbers only.*stack\(\[a, b\]\)"),
    ("[]", r"may not be empty"),
    ("ones([0, 2])", r"a shape is a list of positive sizes"),
    ("ones(3, 4)", r"ones\(shape\) takes 1 argument, got 2"),
    ("eye(2.5)", r"expected an integer literal"),
    ("arange(0)", r"arange\(\) gives 0 elements"),
    ("arange(1, 5, 0)", r"step must not be zero"),
    (f"arange({MAX_LITERAL + 1})", rf"the limit|1 to {MAX_LITERAL}"),
    ("full([2], x)", r"holds numbers only"),
    ("ones([3], dtype=1)", r"takes no keywords"),
])
def test_bad_constants_are_named(text, match):
    with pytest.raises(CaseFileError, match=match):
        parse(text, NAMES)


def test_every_constructors_example_parses():
    from gradcheck.formula.docs import EXAMPLE_INPUTS

    names = {n: Node("input", shape=s, name=n) for n, s in EXAMPLE_INPUTS.items()}
    for sig, example, _ in CONSTRUCTORS.values():
        assert parse(example, names).shape, example
