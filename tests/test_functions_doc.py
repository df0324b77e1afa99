"""Every function of the expression language is documented with an example that parses,
and the function table of docs/functions.md is the one the rows generate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradcheck.formula.parser import parse
from gradcheck.rules import RULES
from gradcheck.formula.docs import complex_only, example, example_nodes, markdown
from gradcheck.formula.tree import Node, walk

FUNCTIONS_PAGE = (Path(__file__).parent.parent / "docs" / "functions.md").read_text()


def _inputs() -> dict[str, Node]:
    return example_nodes()


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_rows_example_parses_and_uses_the_row(name):
    root = parse(example(RULES[name]), _inputs())
    assert name in {node.op for node in walk(root)}


@pytest.mark.parametrize("row", complex_only(), ids=lambda r: r.name)
def test_every_complex_functions_example_parses_and_is_listed(row):
    # conj, real, view_as_complex...: no real row names them; their examples parse (to
    # the real rows they are lowered to) and the listing marks them
    assert parse(row.example, _inputs()).shape
    assert row.name not in RULES
    line = next(ln for ln in markdown().splitlines() if ln.startswith(f"| `{row.name}("))
    assert f"`{row.example}`" in line and "| only |" in line


def test_the_listing_says_which_rows_take_a_complex_operand():
    def cell(name):
        line = next(ln for ln in markdown().splitlines() if f"| `{name}(" in ln)
        return line.split(" | ")[3]

    assert [cell(n) for n in ("exp", "fft", "rfft", "sum", "tanh", "maximum")] == [
        "yes", "yes", "yes", "yes", "", ""]
    assert {r.name for r in complex_only()} == {"real", "imag", "conj", "angle",
                                                 "view_as_real", "view_as_complex"}


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
