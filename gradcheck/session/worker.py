"""One worker process of :class:`gradcheck.session.pool.Pool`, as it runs.

The worker is a supervisor that never runs a case itself: it imports what cases need
(:func:`gradcheck.session.tasks.preload`, seconds: torch), then on Linux forks a *case process*
that runs the tasks it relays, one at a time, and keeps running them (a case's reference
is reused for its other dtypes). When a case kills its process (``os._exit``, a
segfault, SIGKILL, the OOM killer) or is still running :attr:`Task.grace` seconds past
its time limit (it blocks or ignores SIGALRM, or is stuck in one C call), the
supervisor sees it (``waitpid`` gives the exact cause), kills it if need be, answers
that task with the case's error and forks a fresh case process on the next task: a fork
of the preloaded supervisor takes milliseconds where a new interpreter takes seconds.
The supervisor was never touched by a case (no CUDA context, no op module imported), so
every case process starts from the same clean state.

Off Linux (no fork of a process that imported torch there: macOS's system libraries do
not allow it) the supervisor runs the cases itself, and the parent sees a death as the
worker's.

Every process here dies with the one that started it (Linux's ``PR_SET_PDEATHSIG``), so
a parent killed even by SIGKILL leaves none behind.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from ..process.budgets import limit_worker
from ..checking.case import TIMEOUT
from ..base.result import CaseResult
from ..process.children import die_with as _die_with, how_ended
from ..process.threads import after_fork
from .tasks import Task, as_worker, died, execute, lost, preload

__all__ = ["worker_main", "leave", "how_ended", "FORKS"]

FORKS = sys.platform.startswith("linux")


def worker_main(fd: int, parent: int) -> None:
    """A pool worker (``python -c`` started by :class:`gradcheck.session.pool._Worker`): says it
    is ready on the socket ``fd``, then answers the tasks it is sent, one at a time,
    until it is sent None or the socket closes (the parent is gone: it leaves quietly)."""
    from multiprocessing.connection import Connection

    from ..checking import case as checking  # noqa: F401  (a broken install fails here, not in a case)

    _die_with(parent)
    as_worker()
    preload()
    limit_worker()   # --max-memory: this process's address space, and its case processes'
    conn = Connection(fd)
    cases = _CaseProcess(fd) if FORKS else None
    try:
        conn.send(("ready", os.getpid()))
        while True:
            task = conn.recv()
            if task is None:
                return
            conn.send(("result", cases.run(task) if cases else execute(task)))
    except (EOFError, OSError):   # the parent closed its end or died: nobody to tell
        return
    finally:
        if cases:
            cases.stop()


def leave() -> None:
    """End a worker (or its case process) that has answered its last task: its output
    flushed, then at once (``os._exit``). Nothing is left to clean up, and the
    interpreter's own teardown with torch loaded takes half a second that every
    ``gradcheck run`` would wait for (the parent joins its workers before it writes
    the report)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _serve(conn) -> None:
    """The case process's loop: run each task received, send its result back."""
    try:
        while True:
            task = conn.recv()
            if task is None:
                return
            conn.send(execute(task))
    except (EOFError, OSError):   # the supervisor is gone
        return


class _CaseProcess:
    """The supervisor's side of its case process (forked when a task needs it)."""

    def __init__(self, parent_fd: int):
        self.parent_fd = parent_fd   # the supervisor's socket: not the case process's
        self.pid = 0
        self.conn = None

    def _start(self) -> None:
        from multiprocessing import Pipe

        ours, theirs = Pipe()
        supervisor = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:   # the case process: never returns into the supervisor's code
            try:
                os.setpgid(0, 0)   # its own group: a kill takes what its op started
                after_fork()
                os.close(self.parent_fd)
                ours.close()
                _die_with(supervisor)
                _serve(theirs)
            finally:
                leave()
        try:
            os.setpgid(pid, pid)   # (either side may get there first)
        except OSError:
            pass
        theirs.close()
        self.pid, self.conn = pid, ours

    def run(self, task: Task) -> CaseResult:
        """``task``'s result from the case process, or the case's error when the process
        dies or runs past its kill deadline (it is killed; the next task forks anew)."""
        from ..checking.opcheck.compiled import warm

        # torch.compile's first-compile setup for op.compile, here (the deadline below
        # is the case's alone) before the case process is forked, so that it inherits
        # it; one forked before it is retired (the next fork inherits it)
        if warm(task.case) and self.pid:
            self.stop()
        if not self.pid:
            self._start()
        start = time.monotonic()
        deadline = (start + task.timeout + task.grace) if task.timeout else None
        try:
            self.conn.send(task)
        except OSError:   # dead already: the wait below says how
            pass
        result, status = self._wait(deadline)
        if result is not None:
            return result
        if status is None:   # past the deadline, alive: killed
            self._kill()
            return lost(task, (
                f"the case ran past its time limit of {task.timeout:g} s and did not "
                "stop (it blocks or ignores SIGALRM, or is stuck in one long call); its "
                "worker process was killed"), TIMEOUT, time.monotonic() - start)
        self._forget()
        return lost(task, died(how_ended(os.waitstatus_to_exitcode(status))),
                    seconds=time.monotonic() - start)

    def _wait(self, deadline: float | None) -> tuple[CaseResult | None, int | None]:
        """(the result, None) when it comes; (None, waitpid status) when the process
        dies first; (None, None) at the deadline."""
        from multiprocessing.connection import wait

        closed = False
        while True:
            now = time.monotonic()
            if deadline is not None and now > deadline:
                return None, None
            if not closed:
                # wake at least every second: a process of the op's own holding the pipe
                # open hides the case process's death from it
                wait([self.conn], timeout=min(1.0, (deadline or now + 1.0) - now))
                try:
                    if self.conn.poll():
                        return self.conn.recv(), None
                except (EOFError, OSError):
                    closed = True
            else:
                time.sleep(0.02)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return None, status

    def _kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self._forget()

    def _forget(self) -> None:
        self.conn.close()
        self.pid, self.conn = 0, None

    def stop(self) -> None:
        """The case process ended with the supervisor (killed: no case is wanted now)."""
        if self.pid:
            try:
                self._kill()
            except OSError:
                pass
