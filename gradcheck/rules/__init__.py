"""The rule table (:mod:`.table`), what a row is (:mod:`.row`) and what a row of each
family must fill (:mod:`.families`); each family's rows and columns in its own folder.

Importing this package costs only NumPy: SymPy, SciPy and torch are imported when a
column that needs them is first called, so parsing and listing cases stay instant.
"""

from .columns import sympy_scalar_constant
from .row import (AXIS, BACKENDS, BILINEAR, BOOL, CHOICE, COMPARISON, COMPOSITE, DOMAINS,
                  ELEMENTWISE, FAMILIES, INT, INTS, KEY, NUMBER, POOLING, REDUCTION, STRUCTURE,
                  TEXT, EngineRule, Param, Rule, TensorRule, param_values)
from .table import FUNCTIONS, OPERATORS, RULES

__all__ = ["Rule", "EngineRule", "TensorRule", "Param", "RULES", "FUNCTIONS", "OPERATORS",
           "BACKENDS", "DOMAINS", "FAMILIES", "ELEMENTWISE", "COMPARISON", "REDUCTION",
           "BILINEAR", "STRUCTURE", "POOLING", "COMPOSITE", "AXIS", "BOOL", "NUMBER", "INT",
           "INTS", "CHOICE", "TEXT", "KEY", "param_values", "sympy_scalar_constant"]
