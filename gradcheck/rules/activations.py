"""Elementwise functions of activations and rounding (gelu, silu, elu, floor...): rows of the rule table.

The rows are appended to the table by :mod:`.table` (``ROWS``, in table order).
"""

from __future__ import annotations

from .row import Rule

ROWS: list[Rule] = []
