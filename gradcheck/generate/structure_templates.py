"""How the formula generators spell the structural rows (reshape, x[...], concat...),
derived from each row's data: its ``example`` (the row's node in it, its parameters as
written there) and its parameters' kinds, which give the variants (an ``int`` at its
default, 0, -1 or 1; an axis at -1 or all; a subscript from :data:`KEYS`; the others
as the example has them). A variant that does not fit a drawn operand's shape is
skipped at draw time (:mod:`gradcheck.strategies` asks the parser). Each text has the
drawn operand ``{0}`` in one position and inputs ``{1}``... in the others.
"""

from __future__ import annotations

import functools
import itertools

from ..formula.parser import parse
from ..rules import AXIS, INT, INTS, KEY
from ..formula.docs import example_nodes
from ..rules.keys import Slice
from ..formula.tree import Node, walk

#: The subscripts drawn for ``x[...]``: an int (negative too), slices (steps, negative
#: ones), a new axis, an ellipsis, and a tuple that keeps an axis whole.
KEYS = (0, -1, Slice(1, None, None), Slice(None, None, -1), (Ellipsis, Slice(None, None, 2)),
        (Slice(None, None, None), None), None, (Ellipsis, 0), (Slice(None, None, 2), -1),
        (Slice(1, None, None), Slice(None, None, -2)), Ellipsis)
#: The pieces drawn for a row of several outputs (``split(...)[i]``).
PIECES = (0, -1)


@functools.lru_cache(maxsize=None)
def _example_node(rule) -> Node:
    return next(n for n in walk(parse(rule.example, example_nodes())) if n.op == rule.name)


def _values(param, written, is_piece: bool) -> list:
    """The drawn values of one parameter, the example's first."""
    if param.kind == KEY:
        return list(PIECES if is_piece else KEYS)
    if param.kind == AXIS:
        return [written, (-1,), None]
    if param.kind == INT:
        return [written, param.default, 0, -1, 1]
    return [written, param.default] if param.kind == INTS else [written]


def structural_texts(rule) -> list[str]:
    """The template texts of a structural row (see the module docstring)."""
    node = _example_node(rule)
    is_piece = any(p.kind != KEY for p in rule.params)
    options = [_values(p, v, is_piece) for p, (_, v) in zip(rule.params, node.params)]
    n = len(node.args)
    texts: list[str] = []
    for combo in itertools.product(*options):
        params = tuple((p.name, v) for p, v in zip(rule.params, combo)
                       if not (p.kind == AXIS and v is None))   # (omitted: every axis)
        for k in range(n):
            if rule.domain_of(k) == "integer":   # (indices come from integer inputs)
                continue
            others = iter(range(1, n))
            operands = ["{0}" if j == k else f"{{{next(others)}}}" for j in range(n)]
            text = rule.spell(operands, rule.keywords(params))
            if text not in texts:
                texts.append(text)
    return texts
