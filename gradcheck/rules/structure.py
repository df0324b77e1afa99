"""Structural rows: shape, indexing and combining (reshape, x[...], concat...): exact linear maps.

The rows are appended to the table by :mod:`.table` (``ROWS``, in table order).
"""

from __future__ import annotations

from .row import Rule

ROWS: list[Rule] = []
