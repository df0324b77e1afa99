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




#: bytes of a child's output (an op's, a doctor factory's) kept for the report
OUTPUT_KEPT = 64 * 1024


class Capture:
    """An anonymous file in memory (Linux's ``memfd``; a temporary file elsewhere) that
    a child process's stdout and stderr point at, read once the child is done: there is
    no pipe to drain while it runs, and none that a process it started can hold open."""

    def __init__(self, name: str):
        if hasattr(os, "memfd_create"):
            self.fd = os.memfd_create(name)
        else:   # pragma: no cover - off Linux
            import tempfile

            with tempfile.TemporaryFile() as f:
                self.fd = os.dup(f.fileno())

    def read(self, limit: int = OUTPUT_KEPT) -> tuple[bytes, int]:
        """The first ``limit`` bytes written, and how many were written in all."""
        size = os.fstat(self.fd).st_size
        return os.pread(self.fd, min(limit, size), 0) if size else b"", size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
