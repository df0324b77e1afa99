"""Stopping a run on SIGINT or SIGTERM and keeping what is done.

While :func:`stop_on` holds, the first of its signals raises :class:`Interrupted` in the
main thread (a ``KeyboardInterrupt``, so a library caller sees Ctrl-C as Python always
shows it); :func:`gradcheck.session.runner.run` attaches the results finished so far to it, and
the command line writes them as an incomplete report and exits ``128 + signal``, as
shells expect (130 for SIGINT, 143 for SIGTERM). A second signal while the first is being
handled is ignored: killing the workers and writing the report must not be cut short by
an impatient second Ctrl-C (SIGKILL still ends the process).

An ``Interrupted`` is the one ``KeyboardInterrupt`` that stops a run: a
``KeyboardInterrupt`` or ``SystemExit`` that an op raises itself is that case's failure
(:mod:`gradcheck.session.tasks`), so an op cannot end the run early.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Interrupted", "stop_on", "ctrl_c_is_ours"]


class Interrupted(KeyboardInterrupt):
    """The run was stopped by signal ``signum``; ``result`` is the partial
    :class:`~gradcheck.base.result.RunResult` (set by :func:`gradcheck.session.runner.run`)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.result = None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal: 128 + its number."""
        return 128 + self.signum


# Handlers that are "nobody's": replacing them changes nothing a caller chose.
_DEFAULTS = (signal.default_int_handler, signal.SIG_DFL)
_OURS: set = set()   # the handlers stop_on has installed (and not yet removed)


def ctrl_c_is_ours() -> bool:
    """Whether a Ctrl-C now raises :class:`Interrupted` (a handler of :func:`stop_on`
    holds SIGINT), so that any other ``KeyboardInterrupt`` was raised by code itself."""
    return signal.getsignal(signal.SIGINT) in _OURS


@contextlib.contextmanager
def stop_on(*signums: int, only_default: bool = False):
    """Inside the block, the first of ``signums`` raises :class:`Interrupted` (later
    ones are ignored); the handlers as they were after. ``only_default`` leaves a signal
    whose handler someone has set alone (a library call keeps its caller's choice).
    Outside the main thread, where no handler can be set, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def handler(signum, frame):
        if fired:
            return
        fired.append(signum)
        raise Interrupted(signum)

    previous = {}
    _OURS.add(handler)
    try:
        for s in signums:
            if only_default and signal.getsignal(s) not in _DEFAULTS:
                continue
            previous[s] = signal.signal(s, handler)
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _OURS.discard(handler)
