"""What the translation of a traced graph passes between ATen ops: a tensor as formula
text with its shape and kind (:class:`Traced`), and the small helpers every mapping
shares (how a number, an axis list or a broadcast is written in the formula language)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_UNSIGNED = re.compile(r"[0-9]+(\.[0-9]*)?(e[+-]?[0-9]+)?|inf")


class TraceError(Exception):
    """A function that cannot be written as a formula: an ATen op with no mapping, an
    argument a mapping does not take, a tracing failure. ``where`` is the line of the
    user's function that produced the op (``file:line: code``) when it is known."""

    def __init__(self, message: str, op: str = "", where: str = ""):
        super().__init__(message + (f" (from {where})" if where else ""))
        self.op, self.where = op, where


class NoFormula(str):
    """The text of an output no row can write (sort's indices): its reason. An op
    that reads it, or the function returning it, is a :class:`TraceError`."""


def unreadable(values) -> "NoFormula | None":
    """The first :class:`NoFormula` among ``values`` (tensors, lists of them)."""
    for value in values:
        if isinstance(value, (list, tuple)):
            found = unreadable(value)
            if found is not None:
                return found
        elif isinstance(value, Traced) and isinstance(value.text, NoFormula):
            return value.text
    return None


@dataclass(frozen=True)
class Traced:
    """A tensor of the traced function, as formula text: ``text`` (an input's or a let's
    name, or an expression), its ``shape``, and ``kind``: "float", "int" or "bool"."""

    text: str
    shape: tuple[int, ...]
    kind: str = "float"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return self.text


def number(value) -> str:
    """A Python number as formula text: ``0.125``, ``-3``, ``inf``, ``-inf``."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if math.isnan(value):
        raise TraceError("a NaN constant has no formula")
    return repr(value)


def paren(text: str) -> str:
    """``text`` parenthesised unless it is a name, a number or a call already."""
    if text.replace("_", "").isalnum() or _UNSIGNED.fullmatch(text) \
            or (text.endswith(")") and _balanced_call(text)):
        return text
    return f"({text})"


def _balanced_call(text: str) -> bool:
    """``f(...)`` whose first ``(`` closes at the end (not ``f(a) + g(b)``)."""
    start = text.find("(")
    if start <= 0 or not text[:start].replace("_", "").replace(".", "").isalnum():
        return False
    depth = 0
    for i, ch in enumerate(text[start:], start):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(text) - 1
    return False


def axes(dims, ndim: int) -> tuple[int, ...]:
    """ATen's dims (an int, a list, None or [] for every axis) as non-negative axes."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted(int(d) % max(ndim, 1) for d in dims))


def axis_text(dims: tuple[int, ...]) -> str:
    return str(dims[0]) if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def shape_text(shape) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"
