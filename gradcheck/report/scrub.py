"""The one scrubber of the reports. Names, paths and messages come from case files and
ops; printed, they must never drive a terminal, a log viewer or a rendered comment (ANSI
escapes, bidi overrides, NUL, bells), and never be read as a GitHub Actions workflow
command: the runner reads every line a step prints, on stdout and stderr, and runs it

- when, after leading whitespace, it starts with ``::`` (``::error::``, ``::add-mask::``,
  ``::stop-commands::``), or
- when it holds ``##[`` anywhere (the older form, ``##[error]``).

What every renderer guarantees, through this module:

- **One physical line per logical line.** A character that is not printable is shown
  as its escape, the way Python writes it: ``\\n``, ``\\r``, ``\\t``, ``\\xNN``,
  ``\\uNNNN`` (a bidi override U+202E is ``\\u202e``, a line separator U+2028
  ``\\u2028``). A name or a path (:func:`one_line`) has no line break left at all;
  a message (:func:`printable`) keeps its ``\\n`` (``\\r\\n`` becomes ``\\n``), and every
  line it starts is neutralised as below. The escapes are for reading, not reversible: a
  backslash that was in the text stays a single backslash.
- **Valid UTF-8.** A lone surrogate (an op's exception text can hold one) is shown as
  its escape by :func:`printable`, and is U+FFFD in the JSON report
  (:func:`json_values`), whose readers (``jq``) refuse the ``\\ud800`` escape.
- **No workflow command.** ``::`` at the start of a line (after whitespace) becomes
  ``:\\:``, and every ``##[`` becomes ``#\\#[`` (:func:`neutral`); each renderer also
  passes its whole document through :func:`neutral`, so text it composed from two
  fields cannot form one either. The JSON report writes the ``#`` of a ``##[`` as
  ``\\u0023`` (:func:`json_safe`): the parsed values are those of the run, unchanged.

Each renderer then escapes what its own format needs (XML's forbidden characters in
JUnit, Markdown punctuation and HTML, workflow-command ``%`` escapes in annotations).
Markdown also needs :func:`unlinked`: GitHub turns a URL, ``www.`` or an e-mail
address in plain text into a link (GFM's autolink extension), inside ``<code>`` too.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# what str.splitlines() breaks at: a superset of what the runner (and any viewer) does
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# "::" at a line's start, after whitespace (Python's \s: a superset of .NET's TrimStart)
_COMMAND_START = re.compile(f"(\\A|[{_BREAKS}])(\\s*):(?=:)")
_V1 = "##["


def escape_char(ch: str) -> str:
    """``ch`` as Python writes it in a string literal: ``\\n``, ``\\x1b``, ``\\u202e``."""
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def neutral(text) -> str:
    """``text`` with no workflow command in any of its lines: ``::`` starting a line
    becomes ``:\\:``, ``##[`` becomes ``#\\#[``. Applying it twice changes nothing."""
    text = str(text).replace(_V1, "#\\#[")
    return _COMMAND_START.sub(lambda m: f"{m.group(1)}{m.group(2)}:\\", text)


def printable(text, keep: str = "\n") -> str:
    """``text`` with every character that is not printable, except those in ``keep``
    (newlines by default), shown as its escape, and every line :func:`neutral`."""
    text = str(text)
    if "\n" in keep and "\r" not in keep:
        text = text.replace("\r\n", "\n")
    return neutral("".join(ch if ch.isprintable() or ch in keep else escape_char(ch)
                           for ch in text))


def one_line(text) -> str:
    """``text`` on one line: every character that is not printable (line breaks
    included) shown as its escape, and :func:`neutral` (for names, paths, titles)."""
    return printable(text, keep="")


def split_lines(text) -> list[str]:
    """``text``'s lines, broken at ``\\n`` and ``\\r\\n`` only (``str.splitlines`` would
    also break at U+2028 and the like, which a report shows as escapes instead)."""
    text = str(text)
    if not text:
        return []
    lines = re.split(r"\r?\n", text)
    return lines[:-1] if lines[-1] == "" else lines


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_values(value):
    """``value`` (the dicts, lists and strings of a report) with every lone surrogate
    (``"\\ud800"`` from an exception message; not a character, and ``jq`` refuses the
    ``\\ud800`` escape JSON would write for it) replaced by U+FFFD, the replacement
    character, as a strict UTF-8 decoder does; a surrogate pair written as two code
    points becomes its one character. Anything else is returned as it is."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {json_values(k): json_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_values(v) for v in value]
    return value


def json_safe(document: str) -> str:
    """A JSON document whose ``##[`` (only ever inside a string) are written
    ``\\u0023#[``: the same values once parsed, no command for the runner. (An indented
    document's lines start with a quote or a bracket, never with ``::``.)"""
    return document.replace(_V1, "\\u0023#[")


# What GFM's autolink extension links in text (cmark-gfm's autolink.c): a scheme before
# "://" (http, https, ftp; any other is broken too), "www." at a word's start, an e-mail
# address (its "@" with a local part before it), and mailto: / xmpp:; javascript:,
# vbscript: and data: are broken as well, though GFM links none of them.
_SCHEME = re.compile(r"(?i)([a-z][a-z0-9+.\-]*(?=://)|\b(?:mailto|xmpp|javascript|vbscript"
                     r"|data)(?=:)|www(?=\.))")
#: a zero-width space as an HTML entity: invisible once rendered, plain ASCII in the file
ZERO_WIDTH = "&#8203;"


def unlinked(text: str, mark: str = ZERO_WIDTH) -> str:
    """``text`` (already escaped for Markdown and HTML) with ``mark`` after every URL
    scheme and ``www`` that GitHub would link, and before every ``@``: it reads the
    same once rendered, and GitHub links none of it (``http&#8203;://evil.com``,
    ``www&#8203;.evil.com``, ``a&#8203;@evil.com``). Bare domains (``evil.com``) are
    not linked by GitHub, and stay as they are."""
    return _SCHEME.sub(lambda m: m.group(1) + mark, text).replace("@", mark + "@")
