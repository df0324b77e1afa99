"""Time limits on running code: one case (one dtype) may take :data:`DEFAULT_TIMEOUT`
seconds. The limit raises :class:`CaseTimeout` inside the code that runs too long, in
the main thread (SIGALRM) and in any other (a Dask worker's thread) alike."""

from __future__ import annotations

import contextlib
import signal
import threading

from ..base.errors import GradcheckError

DEFAULT_TIMEOUT = 300.0  # seconds one case (one dtype) may take


class CaseTimeout(GradcheckError):
    """A case ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise CaseTimeout in the running code after ``seconds``: by SIGALRM in the main
    thread, by an asynchronous exception in any other (a Dask worker's thread). Either
    takes effect between two bytecodes."""
    if not seconds:
        yield
        return
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not \
            threading.main_thread():
        with thread_time_limit(seconds):
            yield
        return

    def expire(signum, frame):
        raise CaseTimeout(f"the case ran past its time limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def thread_time_limit(seconds: float):
    import ctypes

    message = f"the case ran past its time limit of {seconds:g} s"

    class Expired(CaseTimeout):  # raised by class: the message comes from here
        def __init__(self, *args):
            super().__init__(*(args or (message,)))

    target = ctypes.c_ulong(threading.get_ident())
    lock, state = threading.Lock(), ["running"]

    def expire() -> None:
        with lock:
            if state[0] == "running":
                state[0] = "fired"
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(Expired))

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    try:
        timer.start()
        yield
    finally:
        timer.cancel()
        with lock:
            if state[0] == "fired":   # raised too late to land: take it back
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)
            state[0] = "done"
