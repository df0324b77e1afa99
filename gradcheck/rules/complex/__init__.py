"""The complex table: one row per complex primitive (:mod:`.row`, :mod:`.rows`), each
lowered to rows of the real table over ``torch.view_as_real``'s layout (:mod:`.expand`),
so that the real table stays the single place a primitive is computed."""

from .row import ComplexRow
from .rows import ROWS

#: The complex rows by name (the real table's name where they extend its operation).
COMPLEX: dict[str, ComplexRow] = {row.name: row for row in ROWS}

#: The functions of complex values alone, lowered whatever their operands.
COMPLEX_ONLY: frozenset[str] = frozenset(n for n, row in COMPLEX.items() if row.only)

__all__ = ["ComplexRow", "COMPLEX", "COMPLEX_ONLY", "ROWS"]
