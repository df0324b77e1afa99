"""The checks a case file's text passes before its parser builds anything: each is a
linear scan, so that a small hostile file is refused in milliseconds rather than taking
the parser minutes and gigabytes (tomllib's work grows with the square of a dotted
key's parts; PyYAML's composer and constructor recurse and build an object per node).
The limits are :mod:`gradcheck.process.budgets`'; each refusal is a :class:`CaseFileError`
naming the file and the line.

TOML is scanned with one regular expression that steps over strings and comments and
matches only what matters: brackets and braces (their nesting), strings (their length)
and dotted keys of too many parts. YAML is scanned through its parser's event stream,
which both libyaml and PyYAML produce iteratively (a state machine with a stack of its
own, no recursion), one event at a time, before anything is composed: the scan stops at
the first event past a limit. After parsing, :func:`check_depth` bounds how deeply the
data nests (a TOML header and dotted keys inside inline tables add up)."""

from __future__ import annotations

import itertools
import operator
import re
import sys
from typing import Any

from ..process import budgets
from ..base.errors import CaseFileError

# A string that is never closed runs to the end of its line (of the text, for a
# multi-line one) rather than failing: a failed match would be tried again at the next
# quote, and text like "\\"\\"\\"... would cost the square of its length. The loops are
# unrolled (a run of plain characters is one step, not one per character) and
# possessive where Python has them (3.11): the regular expression engine keeps no
# state to backtrack into, which for a 2 MB string was 350 MB.
_P = "+" if sys.version_info >= (3, 11) else ""
_STRING = "|".join([
    r'"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*' + _P + r'(?:""""{0,2}|\\?\Z)',
    r"'''[\s\S]*?(?:''''{0,2}|\Z)",                                  # multi-line literal
    r'"[^"\\\n]*(?:\\.[^"\\\n]*)*' + _P + r'(?:"|\\?(?=\n)|\\?\Z)',  # basic
    r"'[^'\n]*(?:'|(?=\n)|\Z)"])                                         # literal
_WORD = r"[A-Za-z0-9_-]+"
# a key of more than MAX_KEY_PARTS parts (its quoted parts are a plain word once the
# strings are replaced); starting only where a word starts, not after a dot, so that a
# run of letters or of dotted parts is tried once, not at each of its characters
_KEY = r"(?<![A-Za-z0-9_.-])%s(?:[ \t]*\.[ \t]*%s){%d}" % (_WORD, _WORD,
                                                          budgets.MAX_KEY_PARTS)
# The fast pass runs in C: no Python code per token. Group 1: a string (a comment
# matches with it empty).
_STRINGS = re.compile(f"({_STRING})|#[^\\n]*")
_LONG_KEY = re.compile(_KEY)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SPAN = operator.methodcaller("span", 1)
# The exact pass, one token at a time: only to find the line of a problem found. Its
# key is tried before a string, where a quoted part may start it.
_PART = (r"""(?:[A-Za-z0-9_-]+|"[^"\\\n]*(?:\\.[^"\\\n]*)*""" + _P
         + r"""(?:")|'[^'\n]*')""")
_TOKENS = re.compile(
    r"(?P<key>(?<![A-Za-z0-9_.\-\"'])%s(?:[ \t]*\.[ \t]*%s){%d})"
    % (_PART, _PART, budgets.MAX_KEY_PARTS)
    + "|(?P<string>" + _STRING + r")|(?P<comment>#[^\n]*)|(?P<brackets>[\[\]{}]+)")


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def check_size(size: int, file: str) -> None:
    """Refuse a file of ``size`` bytes over :data:`~gradcheck.process.budgets.MAX_FILE_BYTES`."""
    if size > budgets.MAX_FILE_BYTES:
        raise CaseFileError(
            f"the file is {budgets.format_size(size)}, over the limit of "
            f"{budgets.format_size(budgets.MAX_FILE_BYTES)} for a case file: split it",
            file=file)


def scan_toml(text: str, file: str) -> None:
    """Refuse TOML text whose brackets nest, keys have parts or strings run past the
    limits (its syntax is left for tomllib to judge)."""
    shortest = min(itertools.starmap(operator.sub, map(_SPAN, _STRINGS.finditer(text))),
                   default=0)   # start - end: minus the longest string's length
    stripped = _STRINGS.sub("s", text)
    brackets = _NOT_BRACKET.sub("", stripped)
    depth = max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)
    problems = {"string": -shortest > budgets.MAX_STRING_CHARS,
                "key": _LONG_KEY.search(stripped) is not None,
                "open": depth > budgets.MAX_NESTING}
    if any(problems.values()):
        kind, at, size = _locate(text)
        kind = kind if problems.get(kind) else next(k for k, v in problems.items() if v)
        line = _line(text, at) if at is not None else None
        raise CaseFileError(_PROBLEMS[kind] if kind != "string" else
                            _long_string(size or -shortest), file=file, line=line)


_PROBLEMS = {
    "open": f"invalid TOML: brackets and braces nest deeper than {budgets.MAX_NESTING} "
            "levels",
    "key": f"invalid TOML: a dotted key of more than {budgets.MAX_KEY_PARTS} parts"}


def _depths(run: str, depth: int):
    """The depth before, and after each bracket of, the run of brackets ``run``."""
    return itertools.accumulate(map(_STEP.__getitem__, run), initial=depth)


def _locate(text: str) -> tuple[str | None, int | None, int]:
    """(kind, offset, size) of the first problem in ``text``, token by token."""
    depth = 0
    for m in _TOKENS.finditer(text):
        kind = m.lastgroup
        if kind == "brackets":   # a run of them at once: `[][][]...` is one token
            run = m.group()
            if max(_depths(run, depth)) > budgets.MAX_NESTING:
                # one step at a time: the first depth past the limit is the limit + 1
                deep = operator.indexOf(_depths(run, depth), budgets.MAX_NESTING + 1)
                return "open", m.start() + deep - 1, 0
            depth += sum(map(_STEP.__getitem__, run))
        elif kind == "key":
            return kind, m.start(), 0
        elif kind == "string" and m.end() - m.start() > budgets.MAX_STRING_CHARS:
            return kind, m.start(), m.end() - m.start()
    return None, None, 0


def _long_string(size: int) -> str:
    return (f"a string of {size:,} characters, over the limit of "
            f"{budgets.MAX_STRING_CHARS:,}")


def scan_yaml(text: str, file: str, loader) -> None:
    """Refuse YAML text with aliases, or whose collections nest, nodes number or
    scalars run past the limits. Its syntax errors are raised as they come
    (``yaml.YAMLError``), for the caller to report."""
    import yaml

    depth = nodes = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise CaseFileError("invalid YAML: aliases (*name) are not allowed in case "
                                "files", file=file, line=event.start_mark.line + 1)
        if not isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            if isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            continue
        nodes += 1
        line = event.start_mark.line + 1
        if nodes > budgets.MAX_YAML_NODES:
            raise CaseFileError(f"invalid YAML: more than {budgets.MAX_YAML_NODES:,} "
                                "values in one file: split it", file=file, line=line)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > budgets.MAX_NESTING:
                raise CaseFileError(f"invalid YAML: nested too deeply (more than "
                                    f"{budgets.MAX_NESTING} levels of lists and "
                                    "mappings)", file=file, line=line)
        elif len(event.value) > budgets.MAX_STRING_CHARS:
            raise CaseFileError(_long_string(len(event.value)), file=file, line=line)


def check_depth(data: Any, file: str) -> None:
    """Refuse parsed data nested deeper than :data:`~gradcheck.process.budgets.MAX_DEPTH` (and
    count the cases). Iterative; each list's items are looked at by type in bulk."""
    stack = [(data, 1)] if isinstance(data, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > budgets.MAX_DEPTH:
            raise CaseFileError(f"the file's tables and lists nest deeper than "
                                f"{budgets.MAX_DEPTH} levels", file=file)
        values = item.values() if isinstance(item, dict) else item
        if isinstance(item, list) and not {list, dict} & set(map(type, item)):
            continue   # a list of numbers or strings: nothing deeper
        stack.extend((v, depth + 1) for v in values if isinstance(v, (dict, list)))
    cases = data.get("case") if isinstance(data, dict) else None
    if isinstance(cases, list) and len(cases) > budgets.MAX_CASES:
        raise CaseFileError(f"the file holds {len(cases):,} cases, over the limit of "
                            f"{budgets.MAX_CASES:,}: split it", file=file)
