"""Complex operations in a formula, for the parser (:mod:`gradcheck.formula.parser`): an
operation on a complex operand (``Node.complex``), or a function of complex values
(``conj``, ``fft``...), is lowered at parse time to rows of the real table, by its row
of the complex table (:mod:`gradcheck.rules.complex`). The lowered rows are built through
the parser's own ``apply``, so shapes, limits and error locations are the real rows';
every witness then checks a real program.

A complex value is the real array ``torch.view_as_real`` holds: its shape ends in an
axis of 2 (real part, imaginary part), its node marked ``complex``.
"""

from __future__ import annotations

import ast
import dataclasses

from ..base.shapes import ShapeError, broadcast
from ..rules import RULES
from ..rules.complex import COMPLEX
from .tree import Node


_SUBSCRIPTS = ("index", "take")   # rows written as z[...], not called by name


def lower(builder, op: str, args: list[Node], syntax: ast.AST, given: dict, fail) -> Node:
    """The node of ``op`` applied to ``args`` (one of them complex, or ``op`` a function
    of complex values), lowered by its complex row. ``builder`` is the parser's (its
    ``apply_row``), ``fail`` the exception it raises at a syntax node."""
    row = COMPLEX.get(op)
    if row is None:
        spelled = RULES[op].symbol or op if op in RULES else op
        names = ", ".join(sorted(n for n, r in COMPLEX.items()
                                 if r.symbol is None and n not in _SUBSCRIPTS))
        symbols = " ".join(dict.fromkeys(r.symbol for r in COMPLEX.values() if r.symbol))
        raise fail(f"{spelled} does not take a complex operand; the operations on complex "
                   f"values are {symbols}, subscripts and {names}", syntax)
    b = Lowering(builder, syntax, fail, op)
    try:
        return row.expand(b, list(args), dict(given))
    except ShapeError as exc:
        raise fail(f"{op}: {exc}", syntax) from None


def constant(builder, value: complex, syntax: ast.AST, fail) -> Node:
    """A complex literal (Python's ``2j``; ``1 + 2j`` is a sum): its parts, stacked."""
    b = Lowering(builder, syntax, fail, "constant")
    return b.pack(b.const(value.real), b.const(value.imag))


class Lowering:
    """What a row's ``expand`` builds with: real rows through the parser, a complex
    node's parts, and a complex node from its parts."""

    def __init__(self, builder, syntax: ast.AST, fail, op: str):
        self.builder, self.syntax, self.fail_type, self.op = builder, syntax, fail, op
        self.max_exponent = builder.max_exponent

    def fail(self, message: str) -> Exception:
        return self.fail_type(f"{self.op}: {message}", self.syntax)

    def row(self, op: str, args: list[Node], **given) -> Node:
        """The real table's row ``op`` on ``args`` (never lowered again)."""
        return self.builder.apply_row(op, list(args), self.syntax, given)

    @staticmethod
    def has(op: str) -> bool:
        return op in RULES

    @staticmethod
    def const(value: float) -> Node:
        text = repr(float(value)) if value != int(value) else str(int(value))
        return Node("const", exact=text, const=float(value))

    @staticmethod
    def complex(node: Node) -> Node:
        """``node`` (a real array in the layout) marked as the complex value it holds."""
        return dataclasses.replace(node, complex=True)

    @staticmethod
    def real_node(node: Node) -> Node:
        """The complex ``node`` as the real array in the layout that holds it."""
        return dataclasses.replace(node, complex=False)

    @staticmethod
    def shape(z: Node) -> tuple[int, ...]:
        """The complex shape of ``z`` (a real node's own)."""
        return z.shape[:-1] if z.complex else z.shape

    def ndim(self, z: Node) -> int:
        return len(self.shape(z))

    @staticmethod
    def axis(axis: int, ndim: int) -> int:
        """``axis`` of the complex shape (``ndim`` axes), non-negative: the same axis of
        the layout, whose last axis is the (re, im) pair."""
        if not isinstance(axis, int) or not -ndim <= axis < ndim:
            raise ShapeError(f"axis {axis} is out of range for a complex tensor of "
                             f"{ndim} dimension{'s' if ndim != 1 else ''}")
        return axis % ndim

    def part(self, z: Node, k: int) -> Node:
        """The real (k = 0) or imaginary (k = 1) part of the complex ``z``: ``z[..., k]``,
        once per node (a part read twice is one node)."""
        parts = self.builder.parts.setdefault(id(z), [z, None, None])
        if parts[k + 1] is None:
            parts[k + 1] = self.row("index", [z], key=(Ellipsis, k))
        return parts[k + 1]

    def re(self, z: Node) -> Node:
        return self.part(z, 0)

    def im(self, z: Node) -> Node:
        return self.part(z, 1)

    def pack(self, re: Node, im: Node) -> Node:
        """The complex value re + i im (the parts broadcast against each other)."""
        shape = broadcast(re.shape, im.shape)
        re, im = (p if p.shape == shape else self.row("expand", [p], shape=shape)
                  for p in (re, im))
        return self.complex(self.row("stack", [re, im], axis=-1))

    def lift(self, x: Node) -> Node:
        """``x`` as a complex value: a real one with a zero imaginary part."""
        return x if x.complex else self.pack(x, self.const(0))

    def col(self, x: Node) -> Node:
        """A real ``x`` broadcasting against a layout as it does against the complex
        shape (``x[..., None]``: both parts scaled alike); a complex one as it is."""
        if x.complex or not x.shape:
            return x
        return self.row("unsqueeze", [x], axis=-1)
