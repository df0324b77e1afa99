"""A forked child made apart from the process that forked it (the judge): the op's own
process (:mod:`gradcheck.checking.opcheck.server`) and the child that traces a user's
reference function (:mod:`gradcheck.tracing.apart`). Whatever the user's code patches,
prints or leaves behind dies with the child."""

from __future__ import annotations

import os
import signal
import sys

from .cienv import controlled


def become_apart(channel: int, capture: int, judge: int) -> None:
    """Make this freshly forked process a world of its own: its own process group, dying
    with ``judge``; stdin from /dev/null, stdout and stderr into ``capture``; no CI
    control variable in its environment; no descriptor of the judge's but ``channel``."""
    from .children import die_with
    from .threads import after_fork

    os.setpgid(0, 0)   # its own group: the judge kills what the op started with it
    after_fork()
    die_with(judge)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)   # (the judge's handlers are not the op's)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(capture, 1)
    os.dup2(capture, 2)
    # every other descriptor of the judge's (its result pipe to the run, report files)
    # closed: the op reaches the judge through the channel only
    os.closerange(3, channel)
    os.closerange(channel + 1, max(os.sysconf("SC_OPEN_MAX"), channel + 1))
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="backslashreplace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
    for name in [n for n in os.environ if controlled(n)]:   # (.cienv)
        del os.environ[name]
