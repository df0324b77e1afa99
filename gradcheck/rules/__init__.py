"""The rule table (:mod:`.table`) and what a row is (:mod:`.row`).

Importing this package costs only NumPy: SymPy, SciPy and torch are imported when a
column that needs them is first called, so parsing and listing cases stay instant.
"""

from .columns import sympy_scalar_constant
from .row import (AXIS, BACKENDS, BILINEAR, BOOL, CHOICE, COMPARISON, COMPOSITE, DOMAINS,
                  ELEMENTWISE, FAMILIES, INT, INTS, KEY, NUMBER, POOLING, REDUCTION, STRUCTURE,
                  TEXT, EngineRule, Param, Rule, TensorRule, param_values)
from .table import FUNCTIONS, OPERATORS, RULES

__all__ = ["Rule", "EngineRule", "TensorRule", "Param", "RULES", "FUNCTIONS", "OPERATORS", "BACKENDS",
           "DOMAINS", "FAMILIES", "ELEMENTWISE", "COMPARISON", "REDUCTION", "BILINEAR",
           "STRUCTURE", "POOLING", "COMPOSITE", "AXIS", "BOOL", "NUMBER", "INT", "INTS",
           "CHOICE", "TEXT", "KEY",
           "param_values", "sympy_scalar_constant"]
