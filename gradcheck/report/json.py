"""JSON report (schema: DESIGN.md section 4). The values are the run's, unscrubbed (a
machine reads them); :func:`gradcheck.report.scrub.json_safe` only writes a ``##[`` in a
string so that a CI runner reading the document finds no workflow command in it, and
:func:`~gradcheck.report.scrub.json_values` replaces a lone surrogate (not a character,
which ``jq`` refuses even escaped) with U+FFFD."""

from __future__ import annotations

import json

from .scrub import json_safe, json_values


def render_json(result) -> str:
    # indented: every line starts with a quote or a bracket, never with "::"
    return json_safe(json.dumps(json_values(result.to_dict()), indent=2,
                                allow_nan=False)) + "\n"
