"""Parallel and distributed runs: a pool of worker processes (``--jobs N``) or a Dask
distributed cluster (``--scheduler ADDRESS``), giving the report a serial run gives.

What travels to a worker is a small :class:`Task` (the case file's path, the case's name,
the dtype and the run's overrides), not the :class:`~gradcheck.cases.Case`: each worker
reads the case file itself (once per run) and calls :func:`gradcheck.runner.run_case`,
the one definition of how a case is run. Points and cotangents derive from (seed, case,
dtype, index) only, so a case gives the same result whichever process runs it, and the
results are put back in the serial order.

A worker that dies (killed, ``os._exit``, a segfault in an op's extension) turns the case
it was running, and only that one, into an ``error`` result (for a case with an ``op``,
that op's failure, ``error_kind = "op crashed"``); the other cases still run.
The pool below is a small one of our own rather than ``ProcessPoolExecutor`` because one
dead process breaks a whole executor, and its futures cannot say which of them was
running: here each worker runs one task at a time, so a death names its case exactly,
and only that worker is replaced.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import signal
import threading
import time
import uuid
from collections import deque
from typing import Callable

from .errors import GradcheckError
from .result import ERROR, CaseResult

# A worker whose case runs this long past its time limit (the case is stuck where the
# SIGALRM of the limit cannot interrupt it, e.g. inside one long C call) is killed.
KILL_GRACE = 30.0
CONNECT_TIMEOUT = "10s"   # to reach a Dask scheduler


class ParallelError(GradcheckError):
    """A parallel or distributed run cannot start: Dask's distributed package is not
    installed, the scheduler cannot be reached, or ``--jobs`` off a POSIX system."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One (case, dtype) run, as a worker needs it: small and plain, so it pickles."""

    run_id: str                  # worker-side caches live for one run
    index: int                   # position in the run list
    path: str                    # the case file, absolute: the worker's folder may differ
    file: str                    # the case file as the serial run names it (the report's)
    name: str
    line: int | None
    dtype: str
    overrides: tuple             # ((key, value), ...) of runner.override's keywords
    timeout: float | None


def run_parallel(runs: list, overrides: dict, *, timeout: float | None, jobs: int = 0,
                 scheduler: str | None = None,
                 progress: Callable[[int, int, CaseResult], None] | None = None
                 ) -> list[CaseResult]:
    """Run ``runs`` (the (case, dtype) pairs of :func:`gradcheck.runner.select`) in worker
    processes, or on the Dask cluster at ``scheduler``; the results in ``runs``' order.

    ``overrides`` are the keywords of :func:`gradcheck.runner.override` that made the
    cases of ``runs``; workers apply them to the cases they read. ``jobs`` = 0 means one
    worker per CPU.

    Raises:
        ParallelError: ``scheduler`` is given and cannot be used.
        ValueError: ``jobs`` is negative.
    """
    if jobs < 0:
        raise ValueError(f"jobs must be 0 (one per CPU) or more, got {jobs}")
    run_id = uuid.uuid4().hex
    plain = tuple((k, tuple(v) if k == "witnesses" and v else v)
                  for k, v in sorted(overrides.items()) if v is not None)
    tasks = [Task(run_id, i, os.path.abspath(case.file), case.file, case.name, case.line,
                  dtype, plain, timeout) for i, (case, dtype) in enumerate(runs)]
    results: list[CaseResult | None] = [None] * len(tasks)
    count = [0]

    def done(task: Task, result: CaseResult) -> None:
        results[task.index] = result
        count[0] += 1
        if progress is not None:
            progress(count[0], len(tasks), result)

    def error(task: Task, message: str, kind: str = "") -> CaseResult:
        case, dtype = runs[task.index]
        if kind:
            return _error(case, dtype, message, kind)
        if case.op is not None:
            # a process dying inside a user's op (a segfault in its extension, an
            # os._exit) is most likely the op's doing: its failure, as a raise would be
            from .runner import OP_CRASHED, op_failure

            return op_failure(case, _base(case, dtype), message, OP_CRASHED)
        return _error(case, dtype, message, "internal")   # anywhere else, gradcheck's

    if not tasks:
        return []
    if scheduler:
        _run_dask(tasks, scheduler, done, error)
    else:
        _run_pool(tasks, jobs or _cpu_count(), done, error)
    return results  # type: ignore[return-value]


def _died(how: str) -> str:
    return f"the worker process died while running this case ({how}); the other cases ran on"


def _base(case, dtype: str) -> dict:
    return dict(name=case.name, file=case.file, line=case.line, dtype=dtype,
                expect=case.expect, points=case.points, seed=case.seed)


def _error(case, dtype: str, message: str, kind: str) -> CaseResult:
    return CaseResult(**_base(case, dtype), status=ERROR, message=message, error_kind=kind)


def _task_error(task: Task, message: str, kind: str) -> CaseResult:
    return CaseResult(name=task.name, file=task.file, line=task.line, dtype=task.dtype,
                      status=ERROR, message=message, error_kind=kind)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- in a worker

_LOCK = threading.Lock()   # Dask runs tasks in threads
_STATE: dict = {"run": None}


def _worker_case(task: Task):
    """The (overridden) case ``task`` names, read once per run and worker, and the
    reference cache that goes with it; None if the file no longer holds the case."""
    from .cases import read_file
    from .runner import override

    with _LOCK:
        if _STATE["run"] != task.run_id:   # a new run: forget the last one's files
            _STATE.update(run=task.run_id, files={}, cases={}, refs={})
        files, cases = _STATE["files"], _STATE["cases"]
        if task.path not in files:
            files[task.path] = {c.name: c for c in read_file(task.path)[0]}
        key = (task.path, task.name)
        if key not in cases and task.name in files[task.path]:
            cases[key] = override(files[task.path][task.name], **dict(task.overrides))
        return cases.get(key), _STATE["refs"]


_PRELOAD = ("sympy", "torch", "gradcheck.symbolic", "gradcheck.backends.torch",
            "gradcheck.backends.engine", "gradcheck.opcheck")


def _preload() -> None:
    """Import what nearly every case needs, once per process, before the first case's
    time limit starts (a serial run pays this inside its first case, under a limit of
    minutes; here it would eat a short limit in every new worker). A module that fails
    to import is left for the cases that need it to report."""
    if _STATE.get("preloaded"):
        return
    for module in _PRELOAD:
        try:
            importlib.import_module(module)
        except Exception:
            pass
    _STATE["preloaded"] = True


def execute(task: Task) -> CaseResult:
    """Run one task here (in a worker): :func:`gradcheck.runner.run_case` on the case."""
    from .runner import run_case

    try:
        _preload()
        case, refs = _worker_case(task)
        if case is None:
            return _task_error(task, f"case {task.name!r} is no longer in {task.file}: "
                                     "the file changed during the run", "case")
        # the time limit holds in a Dask worker's thread too (see runner._time_limit)
        result = run_case(case, task.dtype, cache=refs, timeout=task.timeout)
    except Exception as exc:
        import traceback

        return _task_error(task, f"{type(exc).__name__}: {exc}\n"
                                 f"{traceback.format_exc(limit=-3)}", "internal")
    return dataclasses.replace(result, file=task.file)


def _worker_main(fd: int) -> None:
    """A pool worker (``python -c`` started by :class:`_Worker`): says it is ready on the
    socket ``fd``, then runs the tasks it is sent, one at a time, until it is sent None
    or the socket closes."""
    from multiprocessing.connection import Connection

    from . import runner  # noqa: F401  (a broken install fails here, not in a case)

    _preload()
    conn = Connection(fd)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(("result", execute(task)))


# --------------------------------------------------------------------------- the pool

# The worker is a fresh interpreter (the spawn start method's safety: no fork of a
# process that holds torch's threads), started with subprocess rather than
# multiprocessing so that the caller's __main__ is not imported again: a plain script
# calling gradcheck.run(..., jobs=2) needs no ``if __name__ == "__main__"`` guard.
_BOOT = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
         "from gradcheck.parallel import _worker_main; _worker_main(int(sys.argv[2]))")


class _Worker:
    """One worker process and its end of a socket pair; it runs one task at a time."""

    def __init__(self):
        import json
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        mine, theirs = socket.socketpair()
        with theirs:
            path = json.dumps([str(p) for p in sys.path])
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, path, str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                # its own session: Ctrl-C reaches the parent only, which stops the workers
                start_new_session=True)
        self.conn = Connection(mine.detach())
        self.ready = False
        self.task: Task | None = None
        self.since = 0.0
        self.closed = False   # the socket said EOF: the process is gone or going

    def send(self, task: Task) -> None:
        self.task, self.since = task, time.monotonic()
        self.conn.send(task)

    def receive(self) -> list:
        """The messages waiting, until the socket is empty or closed."""
        out = []
        try:
            while self.conn.poll():
                out.append(self.conn.recv())
        except (EOFError, OSError):
            self.closed = True
        return out

    def dead(self) -> bool:
        if self.closed:   # it has closed its end, so it is exiting: reap it
            self.join()
        return self.process.poll() is not None

    def how(self) -> str:
        code = self.process.returncode
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def stop(self, kill: bool = False) -> None:
        """Kill it, or ask it to exit once its task is done; :meth:`join` waits."""
        if kill:
            self.process.kill()
            return
        try:
            self.conn.send(None)
        except OSError:
            pass

    def join(self) -> None:
        try:
            self.process.wait(timeout=5)
        except Exception:
            self.process.kill()
            self.process.wait()
        self.conn.close()


def _run_pool(tasks: list[Task], jobs: int, done, error) -> None:
    from multiprocessing.connection import wait

    from .runner import TIMEOUT

    if os.name != "posix":
        raise ParallelError("--jobs needs a POSIX system (Linux, macOS)")
    pending = deque(tasks)
    workers: list[_Worker] = []
    try:
        while pending or any(w.task for w in workers):
            busy = sum(w.task is not None for w in workers)
            while len(workers) < min(jobs, len(pending) + busy):
                workers.append(_Worker())
            for w in workers:
                if w.ready and w.task is None and pending:
                    w.send(pending.popleft())
            # wake up at least every second to notice a worker that died without its
            # socket saying so (a child of its own holding the socket open)
            deadlines = [w.since + w.task.timeout + KILL_GRACE for w in workers
                         if w.task is not None and w.task.timeout]
            wake = min([time.monotonic() + 1.0] + deadlines)
            wait([w.conn for w in workers], timeout=max(0.0, wake - time.monotonic()))
            for w in list(workers):
                for kind, payload in w.receive():
                    if kind == "ready":
                        w.ready = True
                    elif kind == "result" and w.task is not None:
                        done(w.task, payload)
                        w.task = None
                if (w.task is not None and w.task.timeout
                        and time.monotonic() > w.since + w.task.timeout + KILL_GRACE):
                    w.stop(kill=True)
                    w.join()
                    workers.remove(w)
                    done(w.task, error(w.task, f"the case ran past its time limit of "
                                               f"{w.task.timeout:g} s and did not stop; its "
                                               "worker process was killed", TIMEOUT))
                elif w.dead():
                    w.join()
                    workers.remove(w)
                    if not w.ready:
                        raise RuntimeError(f"a gradcheck worker process failed to start "
                                           f"({w.how()}); its error is above")
                    if w.task is not None:
                        done(w.task, error(w.task, _died(w.how())))
    finally:
        interrupted = any(w.task for w in workers)
        for w in workers:
            w.stop(kill=interrupted)
        for w in workers:
            w.join()


# --------------------------------------------------------------------------- Dask

def _run_dask(tasks: list[Task], address: str, done, error) -> None:
    try:
        import distributed
    except ImportError:
        raise ParallelError("--scheduler needs Dask's distributed package: "
                            "pip install 'gradcheck[distributed]'") from None
    try:
        # a malformed address or unknown host fails here at once (the Client would
        # leave a half-made client behind that hangs on exit)
        distributed.comm.resolve_address(address)
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except Exception as exc:
        raise ParallelError(f"cannot reach the Dask scheduler at {address!r}: "
                            f"{type(exc).__name__}: {exc}") from None

    def gather(future, task: Task) -> CaseResult:
        try:
            return future.result()
        except distributed.KilledWorker:
            raise
        except Exception as exc:
            return error(task, f"the Dask task failed: {type(exc).__name__}: {exc}",
                         "internal")
        finally:
            future.release()   # forget it: a later worker death must not recompute it

    try:
        futures = {}
        for t in tasks:
            future = client.submit(execute, t, key=f"gradcheck-{t.run_id}-{t.index}",
                                   pure=False)
            futures[future.key] = (future, t)
        # KilledWorker: the workers that ran the task died, as many times as the
        # scheduler's allowed-failures setting allows. It may also hit a case that was
        # merely queued on a dying worker, so each such case runs again afterwards,
        # alone on the cluster, where a death can only be its own.
        suspects = []
        for future in distributed.as_completed([f for f, _ in futures.values()],
                                               loop=client.loop):
            _, task = futures.pop(future.key)
            try:
                done(task, gather(future, task))
            except distributed.KilledWorker:
                suspects.append(task)
        for task in suspects:
            future = client.submit(execute, task, pure=False,
                                   key=f"gradcheck-{task.run_id}-{task.index}-alone")
            try:
                result = gather(future, task)
            except distributed.KilledWorker:
                result = error(task, _died("Dask's KilledWorker: it was run alone and its "
                                           "worker died"))
            done(task, result)
    finally:
        client.close()
