"""A doctor report as text for a terminal, or as JSON."""

from __future__ import annotations

import json


def text(report) -> str:
    if not report.findings:
        return "healthy: no findings\n"
    lines = [f"{len(report.findings)} finding(s):"]
    for f in report.findings:
        shape = "" if f.shape is None else f" {list(f.shape)}"
        lines += [f"{f.kind}: {f.name}{shape}", f"  {f.message}", f"  fix: {f.fix}"]
    return "\n".join(lines) + "\n"


def to_json(report) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"
