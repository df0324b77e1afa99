"""Every function of the expression language is documented with an example that parses,
and the function table of docs/functions.md is the one the rows generate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradcheck.formula.parser import parse
from gradcheck.rules import RULES
from gradcheck.formula.docs import EXAMPLE_DTYPES, EXAMPLE_INPUTS, example, markdown
from gradcheck.formula.tree import Node, walk

FUNCTIONS_PAGE = (Path(__file__).parent.parent / "docs" / "functions.md").read_text()


def _inputs() -> dict[str, Node]:
    out = {}
    for name, shape in EXAMPLE_INPUTS.items():
        dtype = EXAMPLE_DTYPES.get(name)
        extra = {"dtype": dtype} if dtype and "dtype" in Node.__dataclass_fields__ else {}
        out[name] = Node("input", shape=shape, name=name, **extra)
    return out


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_rows_example_parses_and_uses_the_row(name):
    root = parse(example(RULES[name]), _inputs())
    assert name in {node.op for node in walk(root)}


def test_the_function_table_is_generated_from_the_rows():
    found = re.search(r"<!-- functions:[^\n]*-->\n(.*?)<!-- /functions -->", FUNCTIONS_PAGE, re.S)
    assert found, "docs/functions.md's function table is missing its markers"
    assert found.group(1) == markdown(), (
        "docs/functions.md's function table is stale: paste `gradcheck functions --format markdown`")


def test_cli_lists_the_functions(capsys):
    from gradcheck.cli.main import main

    assert main(["functions"]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"\b{re.escape(n)}\(", out) for n in ("tanh", "sum", "clamp"))
