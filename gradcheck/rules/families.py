"""What a row of each family must fill (:data:`NEEDS`): the places a new primitive is
written, declared as data, so that a test (``tests/test_rule_families.py``) fails when a
row lacks one, and the design's table of "how to add a row" reads from one list.

A row's ``family`` (:data:`gradcheck.rules.row.FAMILIES`) decides which of these it
needs. Three kinds of place:

- ``fields``: columns of the row itself that must be given (not None, not empty): the
  ``engine`` and ``tensor`` columns hold one VJP per operand;
- ``registries``: tables outside the row, keyed by the row's name, that must hold it,
  as ``"module:NAME"`` (a composite row's rounding bound; a pooling's templates, whose
  images the drawn inputs lack). They are named, not imported: some live in layers
  above the rule table (``gradcheck.generate``), and the test resolves each, failing
  loudly on a name that no longer exists;
- ``files``: the files a new row of the family is written in, its family's folder first
  (the rows, then each column's functions), then the places outside ``rules/`` that
  know the family's rows by name (each says what it holds for the row) and the test
  entry every row has (``tests/test_rules.py``'s ``ROW_CASES``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .row import BILINEAR, COMPARISON, COMPOSITE, ELEMENTWISE, POOLING, REDUCTION, STRUCTURE

#: The family of the complex table's rows (gradcheck.rules.complex), beside the real
#: table's :data:`gradcheck.rules.row.FAMILIES`.
COMPLEX = "complex"

#: Every row's SymPy meaning, float forward, torch call and engine rule.
COLUMNS = ("sympy", "numpy", "torch", "engine")
#: The test entry every row has: a formula using it, checked by every witness.
ROW_CASE = "tests/test_rules.py (ROW_CASES)"


@dataclass(frozen=True)
class Needs:
    """The places a row of one family must fill (see the module docstring)."""

    fields: tuple[str, ...]
    registries: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


NEEDS: dict[str, Needs] = {
    # SymPy differentiates the sympy column: no tensor column; a library function's own
    # rounding beyond ρ is the row's Terms (rules/terms.py), data of the row
    ELEMENTWISE: Needs(COLUMNS, files=(
        "gradcheck/rules/elementwise/rows.py (or activation/rows.py)",
        "gradcheck/rules/elementwise/columns.py (a SymPy or NumPy function a lambda "
        "cannot say)", "gradcheck/rules/elementwise/vjps.py (likewise, the VJP)",
        ROW_CASE)),
    # a condition of where(): spelled by its operator, not differentiable
    COMPARISON: Needs(COLUMNS + ("symbol",), files=(
        "gradcheck/rules/elementwise/rows.py", ROW_CASE)),
    REDUCTION: Needs(COLUMNS + ("tensor", "params"), files=(
        "gradcheck/rules/reduction/rows.py", "gradcheck/rules/reduction/columns.py",
        "gradcheck/rules/reduction/vjps.py", "gradcheck/rules/reduction/tensor.py",
        "gradcheck/bounds/elementwise.py (_reduction_bound: the sum's own rounding, by "
        "name; a selection, as max, adds none)", ROW_CASE)),
    BILINEAR: Needs(COLUMNS + ("tensor",), files=(
        "gradcheck/rules/bilinear/rows.py (a product; a convolution: conv/rows.py)",
        "gradcheck/rules/bilinear/columns.py (conv/columns.py: with conv_terms, the "
        "terms of its sums)", "gradcheck/rules/bilinear/vjps.py (conv/vjps.py)",
        "gradcheck/rules/bilinear/tensor.py (conv/tensor.py)",
        "gradcheck/bounds/summation.py (terms: a product's sums, by name; a convolution's "
        "are conv_terms)",
        "gradcheck/generate/templates.py (a convolution's _WINDOWED templates)", ROW_CASE)),
    # an exact map: the drawn formulas are its example's variations
    STRUCTURE: Needs(COLUMNS + ("tensor", "example"), files=(
        "gradcheck/rules/structure/rows.py", "gradcheck/rules/structure/columns.py "
        "(take.py: by an integer input's indices)", "gradcheck/rules/structure/vjps.py",
        "gradcheck/rules/structure/tensor.py",
        "gradcheck/engine/structure.py (BY_HAND: only a row PyTorch records as views)",
        ROW_CASE)),
    POOLING: Needs(COLUMNS + ("tensor", "params"),
                   registries=("gradcheck.generate.templates:SPECIAL",), files=(
        "gradcheck/rules/conv/rows.py", "gradcheck/rules/conv/columns.py (pool_terms: "
        "the terms of its sums)", "gradcheck/rules/conv/vjps.py",
        "gradcheck/rules/conv/tensor.py",
        "gradcheck/generate/templates.py (_WINDOWED: templates over images)", ROW_CASE)),
    # the row's rounding column is its own first-order bound, BOUNDS[name]
    COMPOSITE: Needs(COLUMNS + ("tensor",),
                     registries=("gradcheck.rules.composite.bounds:BOUNDS",), files=(
        "gradcheck/rules/composite/rows.py", "gradcheck/rules/composite/columns.py",
        "gradcheck/rules/composite/vjps.py", "gradcheck/rules/composite/tensor.py",
        "gradcheck/rules/composite/bounds.py (BOUNDS: its rounding bound; an FFT's "
        "columns, VJPs, tensor column and bound: in rules/spectral/)", ROW_CASE)),
    # a row of the complex table (gradcheck.rules.complex): lowered to real rows, its
    # torch column the operation on complex tensors, which its test compares against
    COMPLEX: Needs(("expand", "torch", "doc", "example"), files=(
        "gradcheck/rules/complex/rows.py", "gradcheck/rules/complex/expand.py",
        "gradcheck/formula/complexes.py (what an expansion builds with: parts, pack, "
        "promotion of a real operand)",
        "tests/test_complex_rows.py (ROW_CASES: its torch column against the lowered "
        "formula's reference gradient, and every witness)")),
}


def missing(rule, registries: dict[str, object]) -> list[str]:
    """The places of :data:`NEEDS` that ``rule`` lacks: its empty fields, a VJP column
    without one VJP per operand, the registries (``registries``: each of
    ``NEEDS[...].registries`` resolved to its table) without the row's name."""
    needs = NEEDS[rule.family]
    out = [f for f in needs.fields if getattr(rule, f) in (None, "", ())]
    for column in ("engine", "tensor"):   # (a comparison's engine column has none)
        vjps = getattr(getattr(rule, column, None), "vjps", None)
        if column in needs.fields and vjps is not None and rule.family != COMPARISON \
                and len(vjps) != rule.arity:
            out.append(f"{column} (one VJP per operand)")
    return out + [r for r in needs.registries if rule.name not in registries[r]]
