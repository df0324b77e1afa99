"""JUnit XML report, shaped as pytest's ``junit_family=xunit1`` writes it (the family
that keeps ``file`` and ``line``), so CI systems show one test per case and dtype: a
``<testsuites>`` around one ``<testsuite>`` with the counts, the time, the run's start
as ``timestamp`` (ISO 8601 local time with its offset) and the ``hostname``.

Case names and messages come from user files: they pass through the reports' scrubber
(:mod:`gradcheck.report.scrub`: an attribute on one line, a body's lines each with no
workflow command, every character that is not printable as its escape), ElementTree
escapes markup, and :func:`xml_text` shows every character XML 1.0 forbids (most control
characters, lone surrogates, U+FFFE/U+FFFF) by its code, with the scrubber's notation,
so the document is always well-formed whatever text it is given."""

from __future__ import annotations

import platform
import re
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import PurePosixPath

from ..base.result import APPROXIMATE, ERROR, FAILED, PASSED, SKIPPED, XFAIL, XPASS
from .details import full_text, headline, incomplete_line, skipped, title
from .scrub import escape_char, neutral, one_line, printable

SUITE = "gradcheck"

# Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
# (DEL and the C1 controls are allowed but discouraged by XML 1.0: escaped too.)
_NOT_XML = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value) -> str:
    """``value`` as text that XML 1.0 can hold (ElementTree escapes the markup)."""
    return _NOT_XML.sub(lambda m: escape_char(m.group()), str(value))


def classname(file: str) -> str:
    """``cases/ops/swish.toml`` -> ``cases.ops.swish``, as pytest names a module."""
    path = str(file or "").replace("\\", "/")
    parts = [p for p in PurePosixPath(path).parts if p not in ("/", ".", "")]
    if parts:
        parts[-1] = PurePosixPath(parts[-1]).stem or parts[-1]
    return ".".join(p.strip(".") or "_" for p in parts) or SUITE


def _seconds(s: float) -> str:
    return f"{max(float(s), 0.0):.3f}"


def _testcase(case, verbose: bool = False) -> ET.Element:
    attrs = {"classname": classname(case.file), "name": title(case),
             "file": case.file or ""}
    if case.line:
        attrs["line"] = str(case.line)
    attrs["time"] = _seconds(case.seconds)
    node = ET.Element("testcase", {k: xml_text(one_line(v)) for k, v in attrs.items()})
    if case.status == PASSED:
        # e.g. "XFAIL: caught as expected: torch", notes, witnesses that did not run in
        # the dtype; the contract notes (what PyTorch accepts as it is) with -v only
        message = f"XFAIL: {case.message}" if case.outcome == XFAIL else case.message
        extra = [message, *case.notes, *skipped(case),
                 *(f"contract note: {n}" for n in case.contract_notes if verbose)]
        if any(extra):
            out = ET.SubElement(node, "system-out")
            out.text = xml_text(printable("\n".join(extra).strip()))
        return _with_output(node, case)
    if case.status == APPROXIMATE:
        # a passed test (it fails nothing unless strict), the warning in its output
        out = ET.SubElement(node, "system-out")
        out.text = xml_text(printable("WARNING: " + full_text(case)))
        return _with_output(node, case)
    tag = {FAILED: "failure", ERROR: "error", SKIPPED: "skipped"}[case.status]
    head = f"XPASS: {headline(case)}" if case.outcome == XPASS else headline(case)
    child = ET.SubElement(node, tag, message=xml_text(one_line(head)))
    if case.status == FAILED:
        child.set("type", "gradcheck.GradientMismatch")
    elif case.status == ERROR:
        child.set("type", f"gradcheck.{case.error_kind or 'internal'}_error")
    else:
        child.set("type", "gradcheck.skip")
    child.text = xml_text(printable(full_text(case)))
    return _with_output(node, case)


def _with_output(node: ET.Element, case) -> ET.Element:
    """``node`` with the op's output in its ``system-out``, scrubbed."""
    if case.output:
        out = node.find("system-out")
        if out is None:
            out = ET.SubElement(node, "system-out")
        text = printable(f"op output:\n{case.output}")
        out.text = xml_text(f"{out.text}\n{text}" if out.text else text)
    return node


def started(result, now: float | None = None) -> float:
    """When the run began, in seconds since the epoch: the result's ``started`` where it
    records one, else ``now`` (the time of rendering) less the run's duration, which is
    the start for a report rendered as the run ends (what ``gradcheck run`` does)."""
    if result.started:   # (0: not recorded, as in a result read back from JSON)
        return float(result.started)
    return (time.time() if now is None else now) - max(float(result.seconds), 0.0)


def timestamp(seconds: float) -> str:
    """ISO 8601 local time with its UTC offset, as pytest's junitxml writes a suite's
    ``timestamp`` (``2026-12-01T22:50:03.123456+01:00``)."""
    return datetime.fromtimestamp(seconds, timezone.utc).astimezone().isoformat()


def render_junit(result, *, now: float | None = None, verbose: bool = False) -> str:
    """The JUnit XML of ``result``; ``now`` (seconds since the epoch, default the
    clock's) is the time it is rendered at (:func:`started`); ``verbose`` adds the
    contract notes to a passed case's output. An expected failure that was caught
    (XFAIL) is a passed test, one that was not (XPASS) a failure, its message saying
    so."""
    s = result.summary
    suite = ET.Element("testsuite", {
        "name": SUITE, "errors": str(s["errored"]),
        "failures": str(s["failed"] + s.get("xpassed", 0)),
        "skipped": str(s["skipped"]), "tests": str(len(result.cases)),
        "time": _seconds(result.seconds),
        # as pytest: the machine's network name (the job's runner, in a CI log)
        "timestamp": timestamp(started(result, now)),
        "hostname": xml_text(one_line(platform.node()))})
    if result.incomplete:   # the suite's properties come first, as pytest writes them
        props = ET.SubElement(suite, "properties")
        for name, value in (("incomplete", "true"), ("interrupted", result.interrupted),
                            ("not_run", str(result.not_run))):
            ET.SubElement(props, "property", name=name, value=value)
    for case in result.cases:
        suite.append(_testcase(case, verbose))
    if result.incomplete:
        ET.SubElement(suite, "system-err").text = incomplete_line(result)
    root = ET.Element("testsuites", name=SUITE)
    root.append(suite)
    ET.indent(root)
    # neutral: the net under the fields' scrubbing (no two fields form a command)
    return neutral('<?xml version="1.0" encoding="utf-8"?>\n'
                   + ET.tostring(root, encoding="unicode") + "\n")
