"""Values of command-line arguments that nest (``gradcheck explain --gradient``'s JSON
list), read within the bounds a case file's values have: a nesting deeper than
:data:`~gradcheck.process.budgets.MAX_DEPTH` is refused before it is decoded (JSON's decoder
recurses once per bracket, to a RecursionError at about a thousand), and a long value
is quoted cut in the message. Argparse reports the ``ArgumentTypeError`` as a usage
error (exit 2)."""

from __future__ import annotations

__all__ = ["gradient_argument", "shown"]


def gradient_argument(text: str):
    """``--gradient``: "ones", "random", or a JSON list of numbers, nested at most
    :data:`~gradcheck.process.budgets.MAX_DEPTH` deep (an output has at most 8 dimensions; a
    deeper text is refused before it is decoded, which would recurse per bracket)."""
    import argparse
    import json

    from ..process.budgets import MAX_DEPTH

    if text in ("ones", "random"):
        return text
    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise argparse.ArgumentTypeError(
            f"a list nested {depth:,} deep, at most {MAX_DEPTH} is read, got "
            f"{shown(text)}")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, list):
        raise argparse.ArgumentTypeError(f"expected ones, random or a list of numbers, "
                                         f"got {shown(text)}")
    return value


def _depth(text: str) -> int:
    """How deeply the brackets of ``text`` nest (the most open at once)."""
    depth = most = 0
    for ch in text:
        if ch == "[":
            depth += 1
            most = max(most, depth)
        elif ch == "]":
            depth -= 1
    return most


def shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters with its length."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"
