"""HTML report: one self-contained page (being built: see issue 16)."""

from __future__ import annotations


def render_html(result) -> str:
    raise NotImplementedError("the HTML report is not built yet")
