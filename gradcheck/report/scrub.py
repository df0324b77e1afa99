"""The one control-character scrubber of the reports: names and messages come from case
files and ops, and must never drive a terminal, a log viewer or a rendered comment
(ANSI escapes, bidi overrides, NUL, bells). Every renderer passes user text through
:func:`printable`; each then escapes what its own format needs (XML's forbidden
characters in JUnit, Markdown punctuation and HTML, workflow-command ``%`` escapes).
"""

from __future__ import annotations


def printable(text, keep: str = "\n") -> str:
    """``text`` with every character that is not printable, except those in ``keep``
    (newlines by default), replaced by ``?``."""
    return "".join(ch if ch.isprintable() or ch in keep else "?" for ch in str(text))


def one_newline(text) -> str:
    """``\\r\\n`` and a lone ``\\r`` as ``\\n``."""
    return str(text).replace("\r\n", "\n").replace("\r", "\n")
