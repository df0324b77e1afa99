"""Workloads measured in a fresh interpreter: the parent sends a job as JSON on the
child's stdin (:func:`run_child`), the child (:func:`main`) runs it from
:mod:`gradcheck.cli.bench.jobs` and prints its answer as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_RESULT = "BENCH-RESULT "  # prefix of a child process's answer line
#: the child's command line: this module's :func:`main`
_ENTRY = "from gradcheck.cli.bench.child import main; main()"


def run_child(job: dict, timeout: float, env: dict | None = None) -> dict:
    """Run ``job`` in a fresh interpreter (see :func:`main`); its answer, or
    ``{"capped": True, "killed": True}`` when it ran past ``timeout`` seconds. ``env``:
    variables set for the child besides this process's (thread counts, read by the
    libraries as they load); a None value removes the variable."""
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    # the folder that holds the gradcheck package, so the child imports this very copy
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.run([sys.executable, "-c", _ENTRY], input=json.dumps(job),
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"capped": True, "killed": True}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT):
            return json.loads(line[len(_RESULT):])
    raise RuntimeError(f"bench child {job['job']} exited with {proc.returncode}: "
                       f"{proc.stderr.strip()[-2000:]}")


def main() -> None:
    """Entry point of a child process: reads a job as JSON on stdin, prints the answer
    (the one line the parent reads back: a child's answer is its output)."""
    from .jobs import JOBS

    job = json.loads(sys.stdin.read())
    answer = JOBS[job["job"]](job)
    print(_RESULT + json.dumps(answer), flush=True)
