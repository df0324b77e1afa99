"""Starting the worker processes of :mod:`gradcheck.session.pool`, and one started early.

A worker spends seconds importing torch and SymPy before its first case
(:func:`gradcheck.session.tasks.preload`). ``gradcheck run`` starts one as soon as it knows it
will use a pool (:func:`prestart`), before its own imports and the reading of the case
files, so that those overlap the worker's; the pool then takes that worker first
(:func:`take`). One not taken (a run that had nothing to run, or raised) is killed
(:func:`discard`). This module uses the standard library only, so that the early start
is not itself delayed by gradcheck's imports.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["spawn", "prestart", "take", "discard"]

# The worker is a fresh interpreter (the spawn start method's safety: no fork of a
# process that holds torch's threads), started with subprocess rather than
# multiprocessing so that the caller's __main__ is not imported again: a plain script
# calling gradcheck.run(..., jobs=2) needs no ``if __name__ == "__main__"`` guard.
_BOOT = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
         "from gradcheck.session.worker import worker_main, leave; "
         "worker_main(int(sys.argv[2]), int(sys.argv[3])); leave()")

_spare: list = []   # at most one (process, connection) started early, not yet taken


def spawn(env: dict[str, str] | None = None):
    """A new worker process and the parent's end of its socket: (Popen, Connection).
    It inherits this process's environment as it is now (``--no-cache``,
    ``--max-memory`` are environment variables its cases read), with ``env`` added
    (the memory it may take: :func:`gradcheck.process.limits.worker_env`)."""
    import json
    import socket
    import subprocess
    from multiprocessing.connection import Connection

    mine, theirs = socket.socketpair()
    with theirs:
        path = json.dumps([str(p) for p in sys.path])
        process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, path, str(theirs.fileno()), str(os.getpid())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=2,
            # its own session: Ctrl-C reaches the parent only, which stops the
            # workers; and one process group to kill with whatever the op started
            start_new_session=True, env={**os.environ, **env} if env else None)
    return process, Connection(mine.detach())


def prestart(env: dict[str, str] | None = None) -> None:
    """Start one worker now for the pool this process is about to run (none if one is
    waiting already), with ``env`` added to its environment as :func:`spawn` does."""
    if not _spare:
        _spare.append(spawn(env))


def take():
    """The worker started early, (Popen, Connection), or None."""
    return _spare.pop() if _spare else None


def discard() -> None:
    """Kill the worker started early if no pool took it."""
    while _spare:
        process, conn = _spare.pop()
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:   # gone already
            pass
        process.wait()
        conn.close()
