"""``gradcheck run`` as a user runs it, in a fresh process (:func:`run_cli`): its wall
time and its JSON report (each case's ``peak_memory`` among it); and the case files it
runs, written from plain data (:func:`case_toml`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ...process.threads import VARIABLES

#: what a row timing one ``gradcheck run`` (:func:`run_cli`) measures
CLI_WALL = ("wall time of `gradcheck run` in a fresh process (start-up, imports, parsing, "
            "the reference's compile, the check)")
#: every thread pool of the child on one thread, as the rest of the bench measures
_ONE_THREAD = {k: "1" for k in VARIABLES}


@dataclass(frozen=True)
class CliRun:
    """One ``gradcheck run``. ``report``: its JSON report (None when it wrote none: it
    crashed, or ran past the cap: ``capped``); a case's memory is in it
    (``peak_memory``)."""

    seconds: float
    returncode: int | None
    capped: bool
    report: dict | None
    stderr: str

    def case(self, name: str | None = None) -> dict | None:
        """The report's entry of the case ``name`` (default: the first)."""
        cases = (self.report or {}).get("cases") or []
        return next((c for c in cases if name is None or c["name"] == name), None)


def _env(cache: bool) -> dict:
    env = dict(os.environ, **_ONE_THREAD)
    if cache:   # the bench runs with the kernel memo off; the run that measures it, on
        env.pop("GRADCHECK_NO_CACHE", None)
    # the run as it comes: in a worker's case process, which measures a case's memory
    # (the test suite sets GRADCHECK_IN_PROCESS for its own runs)
    env.pop("GRADCHECK_IN_PROCESS", None)
    # the folder that holds the gradcheck package, so the child runs this very copy
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def run_cli(args: list[str], *, timeout: float, cache: bool = False) -> CliRun:
    """``python -m gradcheck run ARGS --format json --output FILE`` in a fresh process
    with one thread per pool; killed after ``timeout`` seconds (``capped``).
    ``cache``: with the memo of compiled kernels on (the bench turns it off for every
    other run)."""
    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-") as tmp:
        out = Path(tmp) / "report.json"
        killed = threading.Event()
        with open(Path(tmp) / "stderr", "w+", encoding="utf-8") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "gradcheck", "run", *args, "--format", "json",
                 "--output", str(out)], stdout=subprocess.DEVNULL, stderr=err,
                # run from the folder it writes in: a run writes only inside its project
                # (gradcheck.project.confine), and the case paths it is given are absolute
                env=_env(cache), cwd=tmp)

            def kill():
                killed.set()
                proc.kill()

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                code = proc.wait()
            finally:
                timer.cancel()
            seconds = time.perf_counter() - start
            err.seek(0)
            stderr = err.read()[-2000:]
        report = (json.loads(out.read_text(encoding="utf-8"))
                  if out.exists() and not killed.is_set() else None)
    return CliRun(seconds, code, killed.is_set(), report, stderr)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # strings, numbers and lists of them read the same in TOML


def case_toml(cases: list[dict]) -> str:
    """A TOML case file of ``cases``: each a mapping of a case's keys (``name``,
    ``expr``, ...), ``let`` and ``inputs`` as mappings by name."""
    out = []
    for case in cases:
        out.append("[[case]]")
        for key, value in case.items():
            if key in ("let", "inputs"):
                out += [f"{key}.{name} = {_toml(v)}" for name, v in value.items()]
            else:
                out.append(f"{key} = {_toml(value)}")
        out.append("")
    return "\n".join(out)
