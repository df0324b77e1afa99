"""Process plumbing the worker and the op's process share: dying with the parent,
and a process's end in words."""

from __future__ import annotations

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1   # <linux/prctl.h>


def die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` exits (Linux), and exit now if
    it already has (it died before the request was made)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):   # pragma: no cover - no usable libc
            pass
    if os.getppid() != parent:
        os._exit(0)


def how_ended(code: int) -> str:
    """A process's end in words, from its return code as ``subprocess`` gives it (a
    negative code: killed by that signal)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


