"""JSON report (schema: DESIGN.md section 4)."""

from __future__ import annotations

import json


def render_json(result) -> str:
    return json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n"
