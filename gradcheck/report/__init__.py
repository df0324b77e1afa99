"""Renderers: each turns a RunResult into text of one format. They never compute."""

from __future__ import annotations

FORMATS = ("text", "json", "junit", "markdown")


def render(result, fmt: str, *, color: bool = False, verbose: bool = False) -> str:
    """``result`` rendered in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        from .json import render_json

        return render_json(result)
    if fmt == "text":
        from .text import render_text

        return render_text(result, color=color, verbose=verbose)
    if fmt == "junit":
        from .junit import render_junit

        return render_junit(result)
    if fmt == "markdown":
        from .markdown import render_markdown

        return render_markdown(result)
    raise ValueError(f"unknown format {fmt!r}")
