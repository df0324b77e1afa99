"""Renderers: each turns a RunResult into text of one format. They never compute.

:data:`FORMATS` is the one list of report formats: the command line's ``--format`` and
``--report FMT:PATH`` choices, the settings file's ``format`` and ``reports``, and
:func:`render` all read it. A new format is its renderer module and one row here."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["Format", "FORMATS", "render"]


@dataclass(frozen=True)
class Format:
    """One report format."""

    name: str
    #: ``module:function``, the module relative to this package when it starts with a
    #: dot; imported when first used, so ``gradcheck --help`` imports no renderer
    renderer: str
    #: the options of :func:`render` it is given (every renderer takes the result)
    options: tuple[str, ...] = ()
    #: it shows the gradients' formulas of a case that passed, which the run then
    #: builds for every case (the text report does with ``verbose`` only)
    formulas: bool = False


#: name -> :class:`Format`, in the order the command line lists them.
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("text", ".text:render_text", ("color", "verbose", "quiet", "width")),
    Format("json", ".json:render_json", formulas=True),
    Format("junit", ".junit:render_junit", ("verbose",)),
    Format("markdown", ".markdown:render_markdown"),
    Format("html", ".html:render_html"),
)}


def render(result, fmt: str, *, color: bool = False, verbose: bool = False,
           quiet: bool = False, width: int = 80) -> str:
    """``result`` rendered in ``fmt`` (one of :data:`FORMATS`); each renderer is given
    the options its row names. ``quiet`` (text only) leaves out the lines of the cases
    that went as expected: the failures and the summary; ``width`` (text only): the
    most characters a line has (the terminal's, where there is one).

    Raises:
        ValueError: ``fmt`` is no format of :data:`FORMATS`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    entry = FORMATS[fmt]
    module, function = entry.renderer.split(":")
    given = {"color": color, "verbose": verbose, "quiet": quiet, "width": width}
    renderer = getattr(importlib.import_module(module, __name__), function)
    return renderer(result, **{k: given[k] for k in entry.options})
