"""Where the runs of a session run: in this process (:class:`Serial`), in a pool of worker
processes (``--jobs N``, :class:`Pool`) or on a Dask distributed cluster (``--scheduler
ADDRESS``, :class:`Dask`). Each is an :class:`Executor`: ``map(runs, timeout=...)``
yields ``(index, result)`` for each (case, dtype) run as it completes, and
:func:`gradcheck.runner.run` puts the results back in the runs' order, so a parallel run
gives the report a serial run gives.

What travels to a worker is a :class:`Task` holding the validated
:class:`~gradcheck.cases.Case` itself (pickled; its formula DAG is written out
iteratively, so a deep formula pickles too), with the run's overrides already applied:
workers never read a case file. Each calls :func:`gradcheck.checking.run_case`, the one
definition of how a case is run. Points and cotangents derive from (seed, case, dtype,
index) only, so a case gives the same result whichever process runs it. A case's op is
named by ``"module:attr"`` and imported in the worker from the folder of the case file,
so the op modules must be importable at the same path there.

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
from typing import Generator, Iterator, Protocol

from .cases import Case
from .checking import OP_CRASHED, TIMEOUT, case_base, op_failure, run_case
from .errors import GradcheckError
from .result import ERROR, CaseResult

__all__ = ["Executor", "Serial", "Pool", "Dask", "executor", "Task", "ParallelError",
           "execute"]

# A worker whose case runs this long past its time limit (the case is stuck where the
# SIGALRM of the limit cannot interrupt it, e.g. inside one long C call) is killed.
KILL_GRACE = 30.0
CONNECT_TIMEOUT = "10s"   # to reach a Dask scheduler


class ParallelError(GradcheckError):
    """A parallel or distributed run cannot start: Dask's distributed package is not
    installed, the scheduler cannot be reached, or ``--jobs`` off a POSIX system."""


class Executor(Protocol):
    """Runs (case, dtype) pairs; what :func:`gradcheck.runner.run` hands its runs to."""

    def map(self, runs: list[tuple[Case, str]], *, timeout: float | None
            ) -> Generator[tuple[int, CaseResult], None, None]:
        """``(index in runs, result)`` for every run, each as it completes; ``timeout``
        (seconds, None: none) is each run's time limit. Closing the generator early
        stops what is still running (the workers are killed)."""
        ...


def executor(jobs: int = 1, scheduler: str | None = None) -> Executor:
    """The executor of ``jobs`` worker processes (0: one per CPU; 1: this process), or
    of the Dask cluster at ``scheduler``.

    Raises:
        ValueError: ``jobs`` is negative.
    """
    if jobs < 0:
        raise ValueError(f"jobs must be 0 (one per CPU) or more, got {jobs}")
    if scheduler:
        return Dask(scheduler)
    return Serial() if jobs == 1 else Pool(jobs or _cpu_count())


class Serial:
    """In this process, one run after the other; a case's reference is built once for
    all its dtypes."""

    def map(self, runs, *, timeout):
        cache: dict = {}
        for index, (case, dtype) in enumerate(runs):
            yield index, run_case(case, dtype, cache=cache, timeout=timeout)


@dataclasses.dataclass(frozen=True)
class Task:
    """One (case, dtype) run, as a worker needs it."""

    run_id: str                  # worker-side caches live for one run
    index: int                   # position in the run list
    key: int                     # which case of the run: its dtypes share a reference
    case: Case                   # overridden; its file absolute (ops are found from it)
    file: str                    # the case file as the serial run names it (the report's)
    dtype: str
    timeout: float | None


def _tasks(runs: list[tuple[Case, str]], timeout: float | None) -> list[Task]:
    run_id = uuid.uuid4().hex
    keys: dict[int, tuple[int, Case]] = {}   # id(case) -> (key, the case as sent)
    tasks = []
    for index, (case, dtype) in enumerate(runs):
        if id(case) not in keys:
            # the worker's folder may differ: an op module is looked up from the case
            # file's folder, so the file travels absolute
            sent = dataclasses.replace(case, file=os.path.abspath(case.file))
            keys[id(case)] = (len(keys), sent)
        key, sent = keys[id(case)]
        tasks.append(Task(run_id, index, key, sent, case.file, dtype, timeout))
    return tasks


def _died(how: str) -> str:
    return f"the worker process died while running this case ({how}); the other cases ran on"


def _lost(task: Task, message: str, kind: str = "") -> CaseResult:
    """The result of a task whose worker could not give one: ``kind`` when known, else
    a crash (of the op, for a case with one)."""
    base = dict(case_base(task.case, task.dtype), file=task.file)
    if kind:
        return CaseResult(**base, status=ERROR, message=message, error_kind=kind)
    if task.case.op is not None:
        # a process dying inside a user's op (a segfault in its extension, an
        # os._exit) is most likely the op's doing: its failure, as a raise would be
        return op_failure(task.case, base, message, OP_CRASHED)
    return CaseResult(**base, status=ERROR, message=message,
                      error_kind="internal")   # anywhere else, gradcheck's


def _task_error(task: Task, message: str, kind: str) -> CaseResult:
    return CaseResult(name=task.case.name, file=task.file, line=task.case.line,
                      dtype=task.dtype, status=ERROR, message=message, error_kind=kind)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- in a worker

_LOCK = threading.Lock()   # Dask runs tasks in threads
_STATE: dict = {"run": None}


def _worker_case(task: Task) -> tuple[Case, dict]:
    """The case of ``task`` as this worker first received it in this run (its other
    dtypes then reuse its reference), and the reference cache that goes with it. The
    cases are kept for the run: the cache is keyed by their identity."""
    with _LOCK:
        if _STATE["run"] != task.run_id:   # a new run: forget the last one's cases
            _STATE.update(run=task.run_id, cases={}, refs={})
        case = _STATE["cases"].setdefault(task.key, task.case)
        return case, _STATE["refs"]


_PRELOAD = ("sympy", "torch", "gradcheck.reference", "gradcheck.backends.torch",
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
    """Run one task here (in a worker): :func:`gradcheck.checking.run_case` on its case."""
    try:
        _preload()
        case, refs = _worker_case(task)
        # the time limit holds in a Dask worker's thread too (see gradcheck.timelimit)
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

    from . import checking  # noqa: F401  (a broken install fails here, not in a case)

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


class Pool:
    """``jobs`` worker processes of our own (see the module's docstring)."""

    def __init__(self, jobs: int):
        self.jobs = jobs

    def map(self, runs, *, timeout):
        tasks = _tasks(runs, timeout)
        if not tasks:
            return
        if os.name != "posix":
            raise ParallelError("--jobs needs a POSIX system (Linux, macOS)")
        pending = deque(tasks)
        workers: list[_Worker] = []
        try:
            while pending or any(w.task for w in workers):
                self._dispatch(workers, pending)
                _wait_for(workers)
                for w in list(workers):
                    yield from _collect(w, workers)
        finally:
            interrupted = any(w.task for w in workers)
            for w in workers:
                w.stop(kill=interrupted)
            for w in workers:
                w.join()

    def _dispatch(self, workers: list, pending: deque) -> None:
        """Start the workers still wanted, and hand each idle ready one a task."""
        busy = sum(w.task is not None for w in workers)
        while len(workers) < min(self.jobs, len(pending) + busy):
            workers.append(_Worker())
        for w in workers:
            if w.ready and w.task is None and pending:
                w.send(pending.popleft())


def _wait_for(workers: list) -> None:
    """Until a worker says something, a case's kill deadline, or a second has passed."""
    from multiprocessing.connection import wait

    # wake up at least every second to notice a worker that died without its socket
    # saying so (a child of its own holding the socket open)
    deadlines = [w.since + w.task.timeout + KILL_GRACE for w in workers
                 if w.task is not None and w.task.timeout]
    wake = min([time.monotonic() + 1.0] + deadlines)
    wait([w.conn for w in workers], timeout=max(0.0, wake - time.monotonic()))


def _collect(w: _Worker, workers: list) -> Iterator[tuple[int, CaseResult]]:
    """What worker ``w`` has to say: its result, or the end of its case when it is past
    the kill deadline (it is killed) or dead (it is removed)."""
    for kind, payload in w.receive():
        if kind == "ready":
            w.ready = True
        elif kind == "result" and w.task is not None:
            yield w.task.index, payload
            w.task = None
    if (w.task is not None and w.task.timeout
            and time.monotonic() > w.since + w.task.timeout + KILL_GRACE):
        w.stop(kill=True)
        w.join()
        workers.remove(w)
        yield w.task.index, _lost(w.task, f"the case ran past its time limit of "
                                          f"{w.task.timeout:g} s and did not stop; its "
                                          "worker process was killed", TIMEOUT)
    elif w.dead():
        w.join()
        workers.remove(w)
        if not w.ready:
            raise RuntimeError(f"a gradcheck worker process failed to start "
                               f"({w.how()}); its error is above")
        if w.task is not None:
            yield w.task.index, _lost(w.task, _died(w.how()))


# --------------------------------------------------------------------------- Dask

class Dask:
    """The Dask distributed cluster whose scheduler is at ``address``."""

    def __init__(self, address: str):
        self.address = address

    def map(self, runs, *, timeout):
        tasks = _tasks(runs, timeout)
        if not tasks:
            return
        distributed, client = _connect(self.address)
        try:
            yield from _dask_results(distributed, client, tasks)
        finally:
            client.close()


def _connect(address: str):
    """Dask's distributed module and a client of the scheduler at ``address``."""
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
    return distributed, client


def _dask_results(distributed, client, tasks: list[Task]) -> Iterator[tuple[int, CaseResult]]:
    def gather(future, task: Task) -> CaseResult:
        try:
            return future.result()
        except distributed.KilledWorker:
            raise
        except Exception as exc:
            return _lost(task, f"the Dask task failed: {type(exc).__name__}: {exc}",
                         "internal")
        finally:
            future.release()   # forget it: a later worker death must not recompute it

    futures = {}
    for t in tasks:
        future = client.submit(execute, t, key=f"gradcheck-{t.run_id}-{t.index}",
                               pure=False)
        futures[future.key] = (future, t)
    # KilledWorker: the workers that ran the task died, as many times as the scheduler's
    # allowed-failures setting allows. It may also hit a case that was merely queued on
    # a dying worker, so each such case runs again afterwards, alone on the cluster,
    # where a death can only be its own.
    suspects = []
    for future in distributed.as_completed([f for f, _ in futures.values()],
                                           loop=client.loop):
        _, task = futures.pop(future.key)
        try:
            result = gather(future, task)
        except distributed.KilledWorker:
            suspects.append(task)
            continue
        yield task.index, result
    for task in suspects:
        future = client.submit(execute, task, pure=False,
                               key=f"gradcheck-{task.run_id}-{task.index}-alone")
        try:
            result = gather(future, task)
        except distributed.KilledWorker:
            result = _lost(task, _died("Dask's KilledWorker: it was run alone and its "
                                       "worker died"))
        yield task.index, result
