"""A case's formula written as PyTorch code: ``reference_function``, ``forward_function``
(op cases) and ``expr_function`` (formula cases) name ``module:function``; the function
is traced (:mod:`gradcheck.tracing.apart`: in a child process, for a case file) and its
translation becomes the case's formula text and lets, read by the same safe parser as a
written ``reference``/``forward``/``expr`` and ``let.*``.

``reference_call = "ref(q, k, mask=m, causal=True)"`` (``expr_call = "f(x,
approximate='tanh')"``) says how the function is called, parsed as ``call`` is
(:mod:`.call`); without it the function gets every input positionally, in the case's
order. A library caller's own callable (never from a case file: TOML holds none) is
traced in their process; what follows is the same.
"""

from __future__ import annotations

import re
from typing import Callable

#: the key naming the function -> the key of its call and the callee's spelling there
FUNCTION_KEYS = {"reference_function": ("reference_call", "ref"),
                 "forward_function": ("reference_call", "ref"),
                 "expr_function": ("expr_call", "f")}
_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_STRING = re.compile(r"(\"[^\"]*\"|'[^']*')")
_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?!\w)")


def translation(key: str, raw: dict, inputs, file: str, fail: Callable,
                call_line: int | None, case: str | None) -> dict:
    """The translation of the function ``raw[key]`` names, over the case's ``inputs``
    (:class:`~.model.InputSpec`); ``fail(message, key)`` makes the case's error."""
    from ..tracing.apart import (TraceFailed, kind_of_dtype, translate_callable,
                                 translate_named)
    from ..tracing.trace import Argument
    from .call import parse_call

    spec = raw[key]
    call_key, callee = FUNCTION_KEYS[key]
    call = None
    if call_key in raw:
        call = parse_call(raw[call_key], [s.name for s in inputs], file=file, case=case,
                          line=call_line, callee=callee, key=call_key)
    arguments = [Argument(s.name, tuple(s.shape), kind_of_dtype(s.dtype)) for s in inputs]
    try:
        if isinstance(spec, str):
            if not _SPEC.match(spec):
                raise fail(f"{key} must be \"package.module:function\", got {spec!r}", key)
            return translate_named(spec, file if not file.startswith("<") else "",
                                   arguments, call)
        if callable(spec):   # (a library call's own function)
            return translate_callable(spec, arguments, call)
    except TraceFailed as exc:
        shown = spec if isinstance(spec, str) else getattr(spec, "__name__", "function")
        raise fail(f"{key} {shown!r} cannot be written as a formula: {exc}", key) from None
    raise fail(f"{key} must be \"package.module:function\", got {spec!r}", key)


def renamed(t: dict, taken: set[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The translation's outputs and lets with every let renamed that would take a name
    of ``taken`` (the case's inputs and lets; a trace's own lets are added to it)."""
    mapping: dict[str, str] = {}
    for name, _ in t["lets"]:
        new = name
        while new in taken:
            new += "_"
        taken.add(new)
        if new != name:
            mapping[name] = new
    lets = [(mapping.get(n, n), _rename(text, mapping)) for n, text in t["lets"]]
    return [_rename(o, mapping) for o in t["outputs"]], lets


def _rename(text: str, mapping: dict[str, str]) -> str:
    """``text`` with the names of ``mapping`` replaced, outside string literals."""
    if not mapping:
        return text
    parts = _STRING.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = _NAME.sub(lambda m: mapping.get(m.group(1), m.group(1)), parts[i])
    return "".join(parts)

