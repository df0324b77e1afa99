"""Constant tensors in a formula: array literals ``[[0, -1], [1, 0]]`` and the
constructors ``ones zeros full eye arange ones_like zeros_like``.

Each is written in the rows the table already has, so every witness computes it as it
computes any formula: a filled tensor is a constant expanded to its shape
(``expand(1, [3, 4])``), ``eye(n)`` the diagonal of one (``triu(tril(ones))``), a literal
or ``arange`` a stack of its constants. Nothing here requires a gradient, so torch and
the engine record no node for them; the exact values are the constants' own (decimal
text, as every constant of a formula). Sizes are bounded: :data:`MAX_LITERAL` elements
for a literal or ``arange`` (one constant node each), the parser's element limit for a
filled tensor.
"""

from __future__ import annotations

import ast
from typing import Callable

from .tree import Node

MAX_LITERAL = 1024   # elements of one array literal, eye or arange

#: name -> (signature, example, what it builds), for ``gradcheck functions``.
CONSTRUCTORS: dict[str, tuple[str, str, str]] = {
    "ones": ("ones(shape)", "x * ones([3, 4])", "a tensor of ones"),
    "zeros": ("zeros(shape)", "x + zeros([4])", "a tensor of zeros"),
    "full": ("full(shape, value)", "x * full([3, 1], 2.5)", "a tensor filled with value"),
    "eye": ("eye(n)", "x @ eye(4)", "the n×n identity"),
    "arange": ("arange(stop) or arange(start, stop, step)", "v * arange(4)",
               "the integers start, start + step, ... below stop"),
    "ones_like": ("ones_like(x)", "y * ones_like(x)", "ones of x's shape (x unused)"),
    "zeros_like": ("zeros_like(x)", "y + zeros_like(x)", "zeros of x's shape (x unused)"),
    "[...]": ("[[a, b], [c, d]]", "x @ [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], "
              "[0, 0, 0, 1, 0]]", "an array literal of numbers"),
}


class Constructing:
    """Builds constructor calls and literals for the parser's builder ``b`` (its
    ``apply`` and ``build``), failing with ``fail(message, syntax)``."""

    def __init__(self, b, fail: Callable[..., Exception]):
        self.b, self.fail = b, fail

    def const(self, syntax: ast.AST) -> Node:
        node = self.b.build(syntax)
        if node.op != "const":
            raise self.fail("an array literal holds numbers only (a tensor of tensors "
                            "is stack([a, b]))", syntax)
        return node

    def literal(self, syntax: ast.AST) -> Node:
        """``[[0, -1], [1, 0]]``: a stack of stacks of constants."""
        count = _count(syntax)
        if count > MAX_LITERAL:
            raise self.fail(f"an array literal of {count} elements; the limit is "
                            f"{MAX_LITERAL}", syntax)
        return self._stacked(syntax)

    def _stacked(self, syntax: ast.AST) -> Node:
        if not isinstance(syntax, (ast.List, ast.Tuple)):
            return self.const(syntax)
        if not syntax.elts:
            raise self.fail("an array literal may not be empty", syntax)
        parts = [self._stacked(e) for e in syntax.elts]
        return self.b.apply("stack", parts, syntax, {"axis": 0})

    def filled(self, value: Node, shape, syntax: ast.AST) -> Node:
        return self.b.apply("expand", [value], syntax, {"shape": tuple(shape)})

    def call(self, name: str, node: ast.Call) -> Node:
        if node.keywords:
            raise self.fail(f"{name}() takes no keywords", node)
        args = node.args
        if name in ("ones_like", "zeros_like"):
            if len(args) != 1:
                raise self.fail(f"{name}() takes 1 argument, got {len(args)}", node)
            like = self.b.build(args[0])
            return self.filled(_number(name == "ones_like"), like.shape, node)
        if name in ("ones", "zeros", "full"):
            want = 2 if name == "full" else 1
            if len(args) != want:
                raise self.fail(f"{CONSTRUCTORS[name][0]} takes {want} argument"
                                f"{'s' if want > 1 else ''}, got {len(args)}", node)
            value = self.const(args[1]) if name == "full" else _number(name == "ones")
            return self.filled(value, self.shape(args[0]), node)
        if name == "eye":
            n = self.integers(args, 1, 1, node)[0]
            square = self.filled(_number(1), (n, n), node)
            lower = self.b.apply("tril", [square], node, {"k": 0})
            return self.b.apply("triu", [lower], node, {"k": 0})
        return self.arange(args, node)

    def arange(self, args, node: ast.Call) -> Node:
        values = self.integers(args, 1, 3, node)
        start, stop, step = (0, values[0], 1) if len(values) == 1 else (
            *values[:2], values[2] if len(values) == 3 else 1)
        if step == 0:
            raise self.fail("arange() step must not be zero", node)
        items = list(range(start, stop, step))
        if not items or len(items) > MAX_LITERAL:
            raise self.fail(f"arange() gives {len(items)} elements; it needs 1 to "
                            f"{MAX_LITERAL}", node)
        return self.b.apply("stack", [_number(i) for i in items], node, {"axis": 0})

    def shape(self, syntax: ast.AST) -> tuple[int, ...]:
        dims = syntax.elts if isinstance(syntax, (ast.List, ast.Tuple)) else [syntax]
        shape = tuple(self.integer(d) for d in dims)
        if any(n < 1 for n in shape) or len(shape) > 16:
            raise self.fail("a shape is a list of positive sizes, e.g. [3, 4]", syntax)
        return shape

    def integers(self, args, low: int, high: int, node: ast.Call) -> list[int]:
        if not low <= len(args) <= high:
            raise self.fail(f"{node.func.id}() takes {low} to {high} integer arguments, "
                            f"got {len(args)}", node)
        return [self.integer(a) for a in args]

    def integer(self, syntax: ast.AST) -> int:
        sign = 1
        while isinstance(syntax, ast.UnaryOp) and isinstance(syntax.op, ast.USub):
            sign, syntax = -sign, syntax.operand
        if isinstance(syntax, ast.Constant) and type(syntax.value) is int and abs(
                syntax.value) <= 1 << 24:
            return sign * syntax.value
        raise self.fail("expected an integer literal", syntax)


def _number(value) -> Node:
    return Node("const", exact=str(int(value)), const=float(value))


def _count(syntax: ast.AST) -> int:
    if isinstance(syntax, (ast.List, ast.Tuple)):
        return sum(_count(e) for e in syntax.elts) if syntax.elts else 0
    return 1


def is_constructor(name: str) -> bool:
    return name in CONSTRUCTORS and name != "[...]"


__all__ = ["CONSTRUCTORS", "Constructing", "MAX_LITERAL", "is_constructor"]
