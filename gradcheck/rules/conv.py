"""Convolutions and pooling (conv1d, conv2d, avg_pool2d, max_pool2d): rows of the rule table.

The rows are appended to the table by :mod:`.table` (``ROWS``, in table order).
"""

from __future__ import annotations

from .row import Rule

ROWS: list[Rule] = []
