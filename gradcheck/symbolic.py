"""The symbolic reference under its first name: :mod:`gradcheck.reference` holds it
(``Reference(case)`` builds the kind that fits the formula), :mod:`gradcheck.lowering`
the formula's translation to SymPy."""

from .reference import EXPANSION_LIMIT, ElementwiseReference, ExpandedReference, Reference

__all__ = ["EXPANSION_LIMIT", "ElementwiseReference", "ExpandedReference", "Reference"]
