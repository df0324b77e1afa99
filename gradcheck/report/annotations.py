"""GitHub Actions annotations: one ``::error`` workflow command per case that failed or
errored, and one ``::warning`` per case that is approximate (within float32's tolerance,
not float64's: no failure), so the check shows up on the case file's line in the pull
request.

Escaping follows the runner's rules: in the message ``%`` ``\\r`` ``\\n`` become ``%25``
``%0D`` ``%0A``; in a property value ``:`` and ``,`` also become ``%3A`` and ``%2C``.
A newline therefore never ends the command, so case text cannot start a command of its
own. Before that, user text passes through the reports' scrubber
(:func:`gradcheck.report.scrub.printable`): other control characters (which could drive
the log viewer) are shown as escapes, and each line of the message is neutralised, so
the annotation reads ``:\\:error`` and ``#\\#[`` where the text had a command; the file and
the title are one line each."""

from __future__ import annotations

import os

from ..base.result import APPROXIMATE, ERROR, FAILED
from .details import title
from .mismatch import failing
from .scrub import one_line, printable


def escape_data(text) -> str:
    """A workflow command's message."""
    return (printable(text, keep="\r\n\t").replace("%", "%25").replace("\r", "%0D")
            .replace("\n", "%0A"))


def escape_property(text) -> str:
    """A workflow command's property value (``file=``, ``line=``, ``title=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _message(case) -> str:
    lines = [case.message] if case.message else []
    for m in failing(case.witnesses):   # a skipped witness is no part of a failure
        if m.message and m.message not in case.message:
            lines.append(f"{m.witness}: {m.message}")
        if m.worst is not None:
            lines.append(f"{m.witness} worst {m.worst_line}")
        if m.diagnosis and m.diagnosis not in case.message:
            lines.append(f"{m.witness} diagnosis: {m.diagnosis}")
    return "\n".join(lines) or case.status


def workspace_path(file: str, environ=None) -> str:
    """``file`` as GitHub resolves an annotation's: relative to the repository's
    checkout (``$GITHUB_WORKSPACE``) where it lies under it, so that a run from a
    subfolder, whose paths are absolute or ``../`` ones, annotates the same lines."""
    environ = os.environ if environ is None else environ
    root = environ.get("GITHUB_WORKSPACE", "")
    if not root or file.startswith("<"):   # (<string>, <check_op>: no file)
        return file
    full, base = os.path.realpath(file), os.path.realpath(root)
    if os.path.commonpath([full, base]) != base:
        return file
    return os.path.relpath(full, base)


def github_annotations(result) -> list[str]:
    """The ``::error`` (and ``::warning``) lines for ``result`` (without newlines), in
    report order."""
    out = []
    for case in result.cases:
        if case.status not in (FAILED, ERROR, APPROXIMATE):
            continue
        command = "warning" if case.status == APPROXIMATE else "error"
        props = []
        if case.file:
            props.append(f"file={escape_property(one_line(workspace_path(case.file)))}")
        if case.line:
            props.append(f"line={int(case.line)}")
        props.append(f"title={escape_property(one_line('gradcheck ' + title(case)))}")
        out.append(f"::{command} {','.join(props)}::{escape_data(_message(case))}")
    return out
