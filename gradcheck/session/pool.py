"""The pool of worker processes that runs the cases of ``gradcheck run`` (one worker by
default, ``--jobs N`` for more): the parent schedules, collects and writes; every case
runs in a worker.

A case that kills its process (``os._exit``, a segfault in an op's extension, SIGKILL,
the OOM killer) becomes, alone, an ``error`` result (for a case with an ``op``, that
op's failure, ``error_kind = "op crashed"``) naming the cause; a case stuck where the
SIGALRM of its time limit cannot reach (a long C call, an op that blocks or ignores
SIGALRM) is killed :func:`grace` seconds past its limit (``error_kind = "timeout"``).
Either way the next case runs in a fresh process. On Linux each worker is a supervisor
that forks the process its cases run in (:mod:`gradcheck.session.worker`): it sees such an
end, answers for the case and forks anew in milliseconds. The parent still watches the
worker itself (its death, and a deadline :data:`BACKSTOP` seconds later).

The pool is a small one of our own rather than ``ProcessPoolExecutor`` because one dead
process breaks a whole executor, and its futures cannot say which of them was running:
here each worker runs one task at a time, so a death names its case exactly, and only
that worker is replaced.

Workers die with the parent: each asks the kernel for SIGKILL when its parent exits
(Linux's ``PR_SET_PDEATHSIG``: even a parent killed by SIGKILL leaves no orphan), and
the parent kills its workers' process groups on every way out of :meth:`Pool.map` (an
interrupt, an error, a generator closed early). A worker's stdout is the parent's
stderr, so an op that prints cannot corrupt a JSON report written to stdout.
"""

from __future__ import annotations

import os
import signal
import time
from collections import deque
from typing import Iterator

from ..checking.case import TIMEOUT
from ..process.limits import worker_env
from ..base.result import CaseResult
from .tasks import ParallelError, Task, died, lost, tasks_of
from ..process.spawn import spawn, take
from .worker import FORKS, how_ended

__all__ = ["Pool", "grace", "KILL_GRACE", "MIN_GRACE"]

# A case that runs past its time limit gets this long to stop before its worker is
# killed: a tenth of the limit (a C call the SIGALRM arrived in may take that long to
# return), at least MIN_GRACE and at most KILL_GRACE seconds.
KILL_GRACE = 30.0
MIN_GRACE = 0.5
# The supervisor of a worker (gradcheck.session.worker) kills a stuck case itself; the parent
# kills the whole worker this much later only if that answer does not come.
BACKSTOP = 5.0


def grace(timeout: float) -> float:
    """Seconds past a case's time limit of ``timeout`` after which its worker is killed."""
    return min(KILL_GRACE, max(MIN_GRACE, timeout / 10))


# --------------------------------------------------------------------------- the pool

class _Worker:
    """One worker process and its end of a socket pair; it runs one task at a time."""

    def __init__(self, env: dict[str, str] | None = None):
        # the one ``gradcheck run`` started before reading its case files, else anew
        self.process, self.conn = take() or spawn(env)
        self.ready = False
        self.task: Task | None = None
        self.since = 0.0
        self.closed = False   # the socket said EOF: the process is gone or going

    def send(self, task: Task) -> None:
        self.task, self.since = task, time.monotonic()
        try:
            self.conn.send(task)
        except OSError:   # it died meanwhile: dead() notices, and the task is lost
            self.closed = True

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
        return how_ended(self.process.returncode)

    def stop(self, kill: bool = False) -> None:
        """Kill it (and what it started), or ask it to exit once its task is done;
        :meth:`join` waits."""
        if kill:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:   # gone already, or not its group's leader any more
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
        # each worker's default memory limit, a share of the machine's (computed once,
        # so every worker of the run gets the same)
        self.env = worker_env(jobs)

    def map(self, runs, *, timeout, started=None, formulas=True):
        tasks = tasks_of(runs, timeout, grace(timeout) if timeout else 0.0, formulas)
        if not tasks:
            return
        if os.name != "posix":
            raise ParallelError("worker processes need a POSIX system (Linux, macOS); "
                                "run with --in-process")
        pending = deque(tasks)
        workers: list[_Worker] = []
        finished = False
        try:
            while pending or any(w.task for w in workers):
                self._dispatch(workers, pending, started)
                _wait_for(workers)
                for w in list(workers):
                    yield from _collect(w, workers)
            finished = True
        finally:
            # any other way out (an interrupt, an error, the caller closing us early):
            # kill them all, the idle ones too; nothing of theirs is wanted any more
            for w in workers:
                w.stop(kill=not finished)
            for w in workers:
                w.join()

    def _dispatch(self, workers: list, pending: deque, started=None) -> None:
        """Start the workers still wanted, and hand each idle ready one a task: a worker
        holds one task at a time, so this is when its run starts (``started``)."""
        busy = sum(w.task is not None for w in workers)
        while len(workers) < min(self.jobs, len(pending) + busy):
            workers.append(_Worker(self.env))
        for w in workers:
            if w.ready and w.task is None and pending:
                task = pending.popleft()
                if started is not None:
                    started(task.index)
                w.send(task)


def _deadline(w: _Worker) -> float | None:
    """When the case of ``w`` is killed (None: it has no time limit, or no case)."""
    if w.task is None or not w.task.timeout:
        return None
    return w.since + w.task.timeout + w.task.grace + (BACKSTOP if FORKS else 0.0)


def _wait_for(workers: list) -> None:
    """Until a worker says something, a case's kill deadline, or a second has passed."""
    from multiprocessing.connection import wait

    # wake up at least every second to notice a worker that died without its socket
    # saying so (a child of its own holding the socket open)
    deadlines = [d for w in workers if (d := _deadline(w)) is not None]
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
    deadline = _deadline(w)
    if deadline is not None and time.monotonic() > deadline:
        w.stop(kill=True)
        w.join()
        workers.remove(w)
        yield w.task.index, lost(w.task, (
            f"the case ran past its time limit of {w.task.timeout:g} s and did not stop "
            "(it blocks or ignores SIGALRM, or is stuck in one long call); its worker "
            "process was killed"), TIMEOUT, time.monotonic() - w.since)
    elif w.dead():
        w.join()
        workers.remove(w)
        if not w.ready:
            raise RuntimeError(f"a gradcheck worker process failed to start "
                               f"({w.how()}); its error is above")
        if w.task is not None:
            yield w.task.index, lost(w.task, died(w.how()),
                                     seconds=time.monotonic() - w.since)
