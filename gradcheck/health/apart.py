"""``gradcheck doctor``'s factory run apart: in a fresh interpreter (:mod:`.child`) whose
environment has no CI control variables (:mod:`gradcheck.cienv`) and whose stdout and
stderr (file descriptors 1 and 2, so Python's ``print``, ``sys.stderr``,
``os.write(1, ...)``, C's ``printf`` and every process it starts) go to a pipe this
process reads: the factory's output reaches the report, scrubbed, never the terminal or
a CI log raw. A fresh interpreter rather than a fork: a forked child would keep this
process's initial environment in ``/proc/self/environ`` and its threads' state.

Only JSON comes back, checked field by field (:func:`report_of`); a factory that
forges it forges only its own report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..cienv import without_control
from .factory import FactoryError
from .findings import KINDS, DoctorReport, Finding

#: the bytes of the factory's output kept for the report (the rest counted, not kept)
KEEP = 64 * 1024
#: the bytes of the result document read at most (a report of every parameter of a
#: large model fits many times over)
RESULT_LIMIT = 64 * 1024 * 1024
#: seconds the pipes are read after the factory's process ended: a process it started
#: may hold them open; its session is then killed
GRACE = 2.0


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
    result_r, result_w = os.pipe()
    output_r, output_w = os.pipe()
    root = str(Path(__file__).resolve().parents[2])   # the folder holding gradcheck
    env = without_control(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        # -P: the working folder is not put on sys.path (a project's file named like a
        # module gradcheck imports is not imported); the factory is found as an op is
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "gradcheck.health.child", str(result_w), spec,
             *allowed], stdin=subprocess.DEVNULL, stdout=output_w, stderr=output_w,
            pass_fds=(result_w,), env=env, start_new_session=True)
    finally:
        os.close(result_w)
        os.close(output_w)
    kept, result = _Reader(output_r, KEEP), _Reader(result_r, RESULT_LIMIT)
    try:
        proc.wait()
    finally:
        _end_session(proc)
        for reader in (kept, result):
            reader.join(GRACE)
    output = Output(bytes(kept.data).decode("utf-8", "replace"), kept.size)
    return _reply(spec, bytes(result.data), proc.returncode, output), output


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
    """Kill what the factory started and left running (its session, which holds the
    pipes open); the factory's process itself has ended."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Reader(threading.Thread):
    """Reads a pipe to its end in the background, keeping the first ``limit`` bytes and
    counting the rest."""

    def __init__(self, fd: int, limit: int):
        super().__init__(daemon=True)
        self.fd, self.limit = fd, limit
        self.data, self.size = bytearray(), 0
        self.start()

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 65536):
                self.size += len(chunk)
                if len(self.data) < self.limit:
                    self.data += chunk[:self.limit - len(self.data)]
        except OSError:
            pass
        finally:
            os.close(self.fd)
