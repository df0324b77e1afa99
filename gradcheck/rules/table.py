"""The primitive table: one row per primitive, the single place a primitive is defined.

Each row (:class:`gradcheck.rules.row.Rule`) holds a primitive's family, columns (SymPy,
NumPy, torch, the engine's VJPs), parameters, spelling, domain and shape rule. Each
family's rows and their columns' functions live in the family's folder (``elementwise/``,
``reduction/``, ``bilinear/``, ``structure/``, ``composite/``, ``conv/``: convolutions and
pooling; ``activation/``: more elementwise rows; ``spectral/``: the FFTs, composite
rows); this module puts their ``ROWS`` in the table's order, which listings and drawn
formulas follow. Axes reaching the array-valued columns are already normalised to a
tuple of non-negative ints (``None`` never reaches them; the FFTs' ``axis`` is an INT
parameter, kept as written: it counts a complex shape's axes). What a row of each family must fill is :data:`gradcheck.rules.families.NEEDS`.
"""

from __future__ import annotations

from .activation.rows import ROWS as ACTIVATION_ROWS
from .bilinear.rows import ROWS as BILINEAR_ROWS
from .composite.rows import ROWS as COMPOSITE_ROWS
from .conv.rows import ROWS as CONV_ROWS
from .elementwise.rows import ROWS as ELEMENTWISE_ROWS
from .reduction.rows import ROWS as REDUCTION_ROWS
from .row import Rule
from .spectral.rows import ROWS as SPECTRAL_ROWS
from .structure.rows import ROWS as STRUCTURE_ROWS, TRANSPOSE

# (transpose, the oldest structural row, keeps its place after the matrix products)
_ROWS: list[Rule] = (ELEMENTWISE_ROWS + REDUCTION_ROWS + BILINEAR_ROWS + [TRANSPOSE]
                     + ACTIVATION_ROWS + STRUCTURE_ROWS + COMPOSITE_ROWS + CONV_ROWS
                     + SPECTRAL_ROWS)

RULES: dict[str, Rule] = {rule.name: rule for rule in _ROWS}

#: Names callable as functions in an expression (operators have their own syntax).
FUNCTIONS: frozenset[str] = frozenset(name for name, rule in RULES.items()
                                      if rule.symbol is None)

#: The row each operator spells, by (symbol, number of operands).
OPERATORS: dict[tuple[str, int], str] = {(rule.symbol, rule.arity): name
                                         for name, rule in RULES.items() if rule.symbol}
