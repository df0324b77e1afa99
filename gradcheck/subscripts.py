"""Subscripts in a formula, for the parser (:mod:`gradcheck.expr`): ``x[0]``,
``x[:, 1:3]``, ``x[..., ::-1]``, ``x[:, None]`` (the ``index`` row, its key as written:
:mod:`gradcheck.rules.keys`), and ``split(x, [2, 3], axis=1)[0]``, the one piece a row
of several outputs gives when it is indexed by a constant integer.

Only literals may index: integers (possibly negated), slices of them, ``None`` and
``...``; the row's shape rule checks them against the operand (in range, not too many).
"""

from __future__ import annotations

import ast

from .rules import KEY, RULES
from .rules.keys import Slice


def keyed_row(node: ast.AST) -> str | None:
    """The row a call names when it is one of several outputs, taken by a subscript
    (``split``: a row whose parameters include a ``key`` beside others)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        rule = RULES.get(node.func.id)
        kinds = [p.kind for p in rule.params] if rule is not None else []
        if KEY in kinds and any(k != KEY for k in kinds):
            return rule.name
    return None


def subscript(builder, node: ast.Subscript, fail):
    """The node of ``value[key]``: ``builder`` is the parser's (its ``build``,
    ``visit_Call`` and ``apply``), ``fail`` the exception it raises at a syntax node."""
    row = keyed_row(node.value)
    if row is not None:
        piece = _integer(node.slice)
        if piece is None:
            raise fail(f"{row}(...) gives several pieces: take one with a constant "
                       f"integer, as in {RULES[row].example}", node.slice)
        name = next(p.name for p in RULES[row].params if p.kind == KEY)
        return builder.visit_Call(node.value, {name: piece})
    base = builder.build(node.value)
    return builder.apply("index", [base], node, {"key": _key(node.slice, fail)})


def _integer(node: ast.AST) -> int | None:
    """An integer literal, possibly negated, or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _integer(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _key(node: ast.AST, fail):
    """The subscript as data: a tuple's entries, or the one entry."""
    if isinstance(node, ast.Tuple):
        return tuple(_entry(e, fail) for e in node.elts)
    return _entry(node, fail)


def _entry(node: ast.AST, fail):
    if isinstance(node, ast.Slice):
        parts = []
        for part in (node.lower, node.upper, node.step):
            value = None if part is None else _integer(part)
            if part is not None and value is None:
                raise fail("a slice's bounds and step must be integer literals", part)
            parts.append(value)
        return Slice(*parts)
    if isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis):
        return node.value
    value = _integer(node)
    if value is None:
        raise fail("an index must be an integer literal, a slice such as 1:3 or ::-1, "
                   "None (a new axis) or ... (the other axes)", node)
    return value
