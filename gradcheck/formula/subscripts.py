"""Subscripts in a formula, for the parser (:mod:`gradcheck.formula.parser`): ``x[0]``,
``x[:, 1:3]``, ``x[..., ::-1]``, ``x[:, None]`` (the ``index`` row, its key as written:
:mod:`gradcheck.rules.keys`), ``x[idx]``, ``x[:, idx]``, ``x[..., idx]`` with an integer
input ``idx`` (the ``take`` row along that axis), and ``split(x, [2, 3], axis=1)[0]``,
the one piece a row of several outputs gives when it is indexed by a constant integer.

Literals index: integers (possibly negated), slices of them, ``None`` and ``...``; the
row's shape rule checks them against the operand (in range, not too many). An integer
input indexes alone, the other entries whole axes (``:``) or ``...``: NumPy and
PyTorch place the result's axes differently when it is mixed with ints or slices.
"""

from __future__ import annotations

import ast

from ..rules import KEY, RULES
from ..rules.keys import Slice
from .tree import Node


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
    key = _key(node.slice, fail, builder.names)
    tensors = [e for e in (key if isinstance(key, tuple) else (key,)) if isinstance(e, Node)]
    if not tensors:
        return builder.apply("index", [base], node, {"key": key})
    return builder.apply("take", [base, tensors[0]], node,
                         {"axis": _tensor_axis(key, len(base.shape) - base.complex, fail,
                                               node.slice)})   # (a complex one's axes)


def _tensor_axis(key, ndim: int, fail, where) -> int:
    """The axis an integer input indexes in ``key`` (the others whole axes or ``...``)."""
    es = key if isinstance(key, tuple) else (key,)
    at = next(k for k, e in enumerate(es) if isinstance(e, Node))
    whole = all(e is Ellipsis or e == Slice() for k, e in enumerate(es) if k != at)
    if not whole or sum(e is Ellipsis for e in es) > 1 or sum(e is not Ellipsis
                                                              for e in es) > ndim:
        raise fail("an integer input indexes alone: the other entries are whole axes (:) "
                   "or ..., as in x[:, idx]; index the result again for the rest", where)
    if any(e is Ellipsis for e in es[:at]):
        return ndim - (len(es) - at)
    return at


def _integer(node: ast.AST) -> int | None:
    """An integer literal, possibly negated, or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _integer(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _key(node: ast.AST, fail, names):
    """The subscript as data: a tuple's entries, or the one entry."""
    if isinstance(node, ast.Tuple):
        return tuple(_entry(e, fail, names) for e in node.elts)
    return _entry(node, fail, names)


def _entry(node: ast.AST, fail, names):
    if isinstance(node, ast.Name) and node.id in names:   # x[idx]: an integer input
        tensor = names[node.id]
        if tensor.dtype in ("int64", "int32"):
            return tensor
        raise fail(f"{node.id} indexes only as an integer input (dtype int64 or int32)"
                   + ("; a boolean mask picks a number of elements that depends on its "
                      "values: use where(mask, x, 0)" if tensor.dtype == "bool" else ""),
                   node)
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
