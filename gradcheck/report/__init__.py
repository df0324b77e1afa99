"""Renderers: each turns a RunResult into text of one format. They never compute."""

from __future__ import annotations

FORMATS = ("text", "json", "junit", "markdown", "html")


def render(result, fmt: str, *, color: bool = False, verbose: bool = False,
           quiet: bool = False) -> str:
    """``result`` rendered in ``fmt`` (one of :data:`FORMATS`). ``quiet`` (text only)
    leaves out the lines of the cases that passed: the failures and the summary."""
    if fmt == "json":
        from .json import render_json

        return render_json(result)
    if fmt == "text":
        from .text import render_text

        return render_text(result, color=color, verbose=verbose, quiet=quiet)
    if fmt == "junit":
        from .junit import render_junit

        return render_junit(result)
    if fmt == "markdown":
        from .markdown import render_markdown

        return render_markdown(result)
    if fmt == "html":
        from .html import render_html

        return render_html(result)
    raise ValueError(f"unknown format {fmt!r}")
