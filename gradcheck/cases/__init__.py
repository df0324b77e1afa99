"""Case files (TOML, or YAML with the same keys) -> validated :class:`Case` objects.

Every problem is a :class:`CaseFileError` naming the file, the case and the line.
The contract is section 7 of docs/design.md; docs/case-files.md documents the keys.

The parts: :mod:`.vocabulary` (the values a key may take, the default counts),
:mod:`.model` (the :class:`Case` and what its keys may hold), :mod:`.files` (TOML and
YAML text to data, and the line of every key), :mod:`.scan` (the text's budgets),
:mod:`.reader` (one case's table validated), :mod:`.load` (files and folders of them),
:mod:`.memory` (a case's memory against the budget).

The public names below are imported on first use: importing one light part (the
vocabulary, for the command line's help) must not load NumPy and the rule table.
"""

from __future__ import annotations

import importlib

_LAZY = {
    **{name: "load" for name in ("read_file", "read_paths", "read_entries", "case_files",
                                 "load_cases", "case_from_dict")},
    **{name: "model" for name in ("Case", "InputSpec", "in_domain", "DOMAINS")},
    **{name: "vocabulary" for name in ("DTYPES", "DEVICES", "GRADIENTS", "SUFFIXES",
                                       "MAX_POINTS", "EXTREME_POINTS")},
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'gradcheck.cases' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
