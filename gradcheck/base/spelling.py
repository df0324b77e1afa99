"""The name a misspelled one was meant to be: the "did you mean ...?" of every error that
names something unknown (a formula's function, a case file's key, a setting, an op's
module or class). The one place that decides how close two names must be."""

from __future__ import annotations

import difflib
from typing import Iterable


def closest(name: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The name of ``known`` closest to ``name`` (difflib's ratio at least ``cutoff``),
    None where none is close enough. ``name`` itself is never suggested."""
    known = [k for k in dict.fromkeys(map(str, known)) if k != name]
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """``"; did you mean 'reference'?"`` for the closest of ``known`` to ``name``, ``""``
    when none is close: appended to the message that says ``name`` is unknown."""
    close = closest(name, known, cutoff)
    return f"; did you mean {close!r}?" if close is not None else ""
