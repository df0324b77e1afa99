"""A doctor report as text for a terminal, or as JSON. Every text from the user's setup
(a parameter's or module's name, messages that quote them, the factory's output) goes
through the one scrubber (:mod:`gradcheck.report.scrub`): no line of either format can
be a terminal escape or a GitHub Actions workflow command."""

from __future__ import annotations

import json

from ..report.scrub import json_safe, neutral, one_line, printable, split_lines

#: the characters of the factory's output the text report shows at most
SHOWN = 8000


def text(report, output=None) -> str:
    """``report`` for a terminal; ``output`` (:class:`.apart.Output`): what the factory
    printed, shown after the findings."""
    if not report.findings:
        lines = ["healthy: no findings"]
    else:
        lines = [f"{len(report.findings)} finding(s):"]
    for f in report.findings:
        shape = "" if f.shape is None else f" {list(f.shape)}"
        lines += [f"{one_line(f.kind)}: {one_line(f.name)}{shape}",
                  f"  {one_line(f.message)}", f"  fix: {one_line(f.fix)}"]
    lines += _output_lines(output)
    return neutral("\n".join(lines) + "\n")


def to_json(report, output=None) -> str:
    """``report`` as JSON (``findings``; ``output``: ``text`` scrubbed, ``bytes``, when
    the factory printed anything)."""
    data = report.to_dict()
    if output is not None and output.size:
        data["output"] = {"text": printable(output.text), "bytes": output.size}
    return json_safe(json.dumps(data, indent=2)) + "\n"


def _output_lines(output) -> list[str]:
    if output is None or not output.size:
        return []
    shown = output.text[:SHOWN]
    cut = output.size > len(shown.encode("utf-8", "replace"))
    head = (f"output of the factory ({output.size} bytes"
            + (", the start shown):" if cut else "):"))
    return ["", head] + [f"  | {line}" for line in split_lines(printable(shown))]
