"""``gradcheck doctor``'s factory run apart: in a fresh interpreter (:mod:`.child`) whose
environment has no CI control variables (:mod:`gradcheck.process.cienv`) and whose stdout and
stderr (file descriptors 1 and 2, so Python's ``print``, ``sys.stderr``,
``os.write(1, ...)``, C's ``printf`` and every process it starts) go to a capture this
process reads once it is done (:class:`gradcheck.process.children.Capture`, as an op's do): the
factory's output reaches the report, scrubbed, never the terminal or a CI log raw. A fresh interpreter rather than a fork: a forked child would keep this
process's initial environment in ``/proc/self/environ`` and its threads' state.

Only JSON comes back, checked field by field (:func:`report_of`); a factory that
forges it forges only its own report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..process.cienv import without_control
from ..process.children import OUTPUT_KEPT as KEEP
from ..process.children import Capture
from .factory import FactoryError
from .findings import KINDS, DoctorReport, Finding

#: the bytes of the result document read at most (a report of every parameter of a
#: large model fits many times over)
RESULT_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class Output:
    """What the factory's process wrote on stdout and stderr: the first :data:`KEEP`
    bytes decoded (``text``; undecodable bytes replaced) and how many there were."""

    text: str
    size: int


def run(spec: str, allowed: tuple[str, ...] = ()) -> tuple[DoctorReport, Output]:
    """The doctor's report on the factory ``spec`` (``module:function``), with what the
    factory printed; raises :class:`FactoryError` (its message ends with that output)
    when the factory cannot be loaded or its setup raises."""
    output, result = Capture("gradcheck-doctor-output"), Capture("gradcheck-doctor-result")
    root = str(Path(__file__).resolve().parents[2])   # the folder holding gradcheck
    env = without_control(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        # -P: the working folder is not put on sys.path (a project's file named like a
        # module gradcheck imports is not imported); the factory is found as an op is
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "gradcheck.health.child", str(result.fd), spec,
             *allowed], stdin=subprocess.DEVNULL, stdout=output.fd, stderr=output.fd,
            pass_fds=(result.fd,), env=env, start_new_session=True)
        try:
            proc.wait()
        finally:
            _end_session(proc)
        data, size = output.read(KEEP)
        document, _ = result.read(RESULT_LIMIT)
    finally:
        output.close()
        result.close()
    shown_output = Output(data.decode("utf-8", "replace"), size)
    return _reply(spec, document, proc.returncode, shown_output), shown_output


def _reply(spec: str, data: bytes, returncode: int, output: Output) -> DoctorReport:
    import json

    try:
        message = json.loads(data.decode("utf-8"))
    except ValueError:
        message = None
    if isinstance(message, dict) and isinstance(message.get("error"), str):
        raise FactoryError(message["error"] + shown(output))
    report = report_of(message.get("report")) if isinstance(message, dict) else None
    if report is None:
        how = (f"was killed by signal {-returncode}" if returncode < 0
               else f"exited with {returncode}")
        raise FactoryError(f"{spec}: the factory's process {how} and sent no report"
                           + shown(output))
    return report


def report_of(data) -> DoctorReport | None:
    """The report ``data`` (a parsed JSON document) holds, or None where it is not one:
    every field of the type a finding has, every kind one of :data:`KINDS`."""
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        return None
    findings = []
    for f in data["findings"]:
        if not isinstance(f, dict) or set(f) != {"kind", "name", "shape", "message",
                                                 "fix"}:
            return None
        shape = f["shape"]
        if (f["kind"] not in KINDS
                or not all(isinstance(f[k], str) for k in ("name", "message", "fix"))
                or not (shape is None or isinstance(shape, list) and all(
                    isinstance(n, int) and not isinstance(n, bool) for n in shape))):
            return None
        findings.append(Finding(f["kind"], f["name"],
                                None if shape is None else tuple(shape), f["message"],
                                f["fix"]))
    return DoctorReport(findings)


def shown(output: Output) -> str:
    """The factory's output as the end of an error message (scrubbed where printed)."""
    if not output.size:
        return ""
    return f"\noutput of the factory ({_amount(output)}):\n{output.text}"


def _amount(output: Output) -> str:
    return (f"{output.size} bytes" if output.size <= KEEP
            else f"{output.size} bytes, the first {KEEP} shown")


def _end_session(proc: subprocess.Popen) -> None:
    """Kill what the factory started and left running (its session, which could go on
    writing to the capture); the factory's process itself has ended."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
