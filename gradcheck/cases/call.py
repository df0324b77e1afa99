"""``call = "op(x, w, eps=1e-6)"``: exactly what a custom op receives, parsed as the
formula parser parses (:mod:`gradcheck.formula.parser`: Python's ``ast`` under a whitelist, the
same bounds on size, nesting and literals, nothing ever evaluated).

An argument is an input's name (the op gets that input's tensor) or a literal: a number
(negative too), a list of numbers (nested lists too), ``True``, ``False``, ``None`` or a
string; keywords take the same. Inputs the call does not pass are reference-only: the
reference differentiates them, the op's backward is not checked for them.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Sequence

from ..base.errors import CaseFileError
from ..formula.parser import MAX_CHARS, MAX_DEPTH, MAX_LITERAL, MAX_LITERAL_DIGITS, MAX_NODES
from ..formula.suggestions import suggest
from .model import OpArgument

MAX_STRING = 200          # characters of a string literal in a call
MAX_LIST = 4096           # numbers in one list literal

Call = tuple[tuple[OpArgument, ...], tuple[tuple[str, OpArgument], ...]]


class _Fail(Exception):
    def __init__(self, message: str, node: ast.AST | None = None):
        super().__init__(message)
        self.node = node


def parse_call(text: Any, inputs: Sequence[str], *, file: str | None = None,
               case: str | None = None, line: int | None = None, callee: str = "op",
               key: str = "call") -> Call:
    """The positional and keyword arguments of ``text``, ``op(...)`` over the input
    names ``inputs`` (``callee``: the name the call is spelled with, ``ref`` in a
    ``reference_call``, ``f`` in an ``expr_call``; ``key``: the case-file key, for the
    messages).

    Raises:
        CaseFileError: the text is not a bounded call of ``op`` on input names and
            literals (a misspelled input name gets a suggestion).
    """
    def fail(message: str, lineno: int | None = None) -> CaseFileError:
        at = line if lineno is None or line is None else line + lineno - 1
        return CaseFileError(f"{key}: {message}", file=file, case=case, line=at)

    if not isinstance(text, str):
        raise fail(f"{key} must be a string such as \"{callee}(x, w, eps=1e-6)\", not "
                   f"{type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise fail(f"{len(text)} characters long; the limit is {MAX_CHARS}")
    if _depth(text) > MAX_DEPTH or _longest_number(text) > MAX_LITERAL_DIGITS:
        raise fail("nests too deep, or has too long a number literal")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise fail(f"invalid syntax: {getattr(exc, 'msg', exc)}",
                   getattr(exc, "lineno", None)) from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise fail(f"more than {MAX_NODES} syntax nodes")
    try:
        return _Reader(list(inputs), callee).call(tree.body)
    except _Fail as exc:
        raise fail(str(exc), getattr(exc.node, "lineno", None)) from None


def _depth(text: str) -> int:
    depth = best = 0
    for ch in text:
        depth += (ch in "([{") - (ch in ")]}")
        best = max(best, depth)
    return best


def _longest_number(text: str) -> int:
    run = best = 0
    for ch in text:
        run = run + 1 if ch.isdigit() or ch in "._" else 0
        best = max(best, run)
    return best


class _Reader:
    """The whitelisted syntax of a call, read into :class:`OpArgument` s."""

    def __init__(self, inputs: list[str], callee: str = "op"):
        self.inputs, self.callee = inputs, callee

    def call(self, node: ast.AST) -> Call:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == self.callee):
            what = "the op" if self.callee == "op" else self.callee
            raise _Fail(f"must be {what} applied to its arguments, such as "
                        f"{self.callee}(x, w, eps=1e-6)", node)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            raise _Fail("* and ** arguments are not allowed", node)
        positional = tuple(self.argument(a) for a in node.args)
        keywords: dict[str, OpArgument] = {}
        for kw in node.keywords:
            if kw.arg in keywords:
                raise _Fail(f"keyword {kw.arg}= is given twice", kw.value)
            keywords[kw.arg] = self.argument(kw.value)
        return positional, tuple(keywords.items())

    def argument(self, node: ast.AST) -> OpArgument:
        if isinstance(node, ast.Name):
            if node.id in self.inputs:
                return OpArgument(input=node.id)
            known = ", ".join(self.inputs)
            same = [n for n in self.inputs if n.lower() == node.id.lower()]
            hint = f"; did you mean {same[0]}?" if same else suggest(node.id, self.inputs, "")
            raise _Fail(f"unknown input {node.id!r} (the inputs: {known}){hint}", node)
        return OpArgument(value=self.literal(node))

    def literal(self, node: ast.AST, depth: int = 0) -> Any:
        if isinstance(node, ast.Constant):
            value = node.value
            if value is None or isinstance(value, bool):
                return value
            if isinstance(value, str):
                if len(value) > MAX_STRING:
                    raise _Fail(f"a string longer than {MAX_STRING} characters", node)
                return value
            if isinstance(value, (int, float)):
                return self.number(value, node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
                and isinstance(node.operand, ast.Constant) \
                and type(node.operand.value) in (int, float):
            sign = -1 if isinstance(node.op, ast.USub) else 1
            return self.number(sign * node.operand.value, node)
        if isinstance(node, ast.List) and depth < 4:
            if len(node.elts) > MAX_LIST:
                raise _Fail(f"a list of more than {MAX_LIST} items", node)
            if any(not isinstance(e, (ast.Constant, ast.UnaryOp, ast.List))
                   for e in node.elts):
                raise _Fail("a list may hold numbers (and lists of numbers) only", node)
            items = [self.literal(e, depth + 1) for e in node.elts]
            if not all(isinstance(i, (int, float, list)) and not isinstance(i, bool)
                       for i in items):
                raise _Fail("a list may hold numbers (and lists of numbers) only", node)
            return items
        raise _Fail(f"{_what(node)} is not an argument an op can be given here (input "
                    "names, numbers, lists of numbers, True, False, None and strings "
                    "are)", node)

    @staticmethod
    def number(value, node: ast.AST):
        if not math.isfinite(value) or abs(value) > MAX_LITERAL:
            raise _Fail(f"a number literal beyond {MAX_LITERAL:g} in magnitude", node)
        return value


def _what(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return "a call"
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return "arithmetic"
    if isinstance(node, ast.Attribute):
        return "attribute access"
    if isinstance(node, ast.Tuple):
        return "a tuple (write a list)"
    if isinstance(node, ast.Subscript):
        return "indexing"
    return type(node).__name__
