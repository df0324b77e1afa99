"""A process's peak resident memory from a moment on: what a case's check took (the
JSON report's ``peak_memory``) and what the bench's million-element check took.

Linux keeps a high-water mark of each process's resident set (``VmHWM`` in
``/proc/self/status``), which writing ``5`` to ``/proc/self/clear_refs`` resets to the
current resident set: the peak from then on, less the resident set then, is what the
work in between added at its height. Elsewhere only ``ru_maxrss`` is there, the peak
since the process began, which cannot be reset.
"""

from __future__ import annotations

import sys
from pathlib import Path


def rss_kib() -> tuple[int | None, int | None]:
    """(current, peak) resident set size in KiB from /proc, or (None, None)."""
    try:
        fields = dict(line.split(":", 1) for line in
                      Path("/proc/self/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError):
        return None, None


class PeakMemory:
    """The process's peak resident bytes from now on: Linux's high-water mark (VmHWM)
    reset to the current RSS, or else ru_maxrss (which undercounts when the process
    peaked higher before)."""

    def __init__(self):
        import resource

        before, _ = rss_kib()
        self.method = "ru_maxrss"
        if before is not None:
            try:  # Linux: reset the high-water mark to the current RSS
                Path("/proc/self/clear_refs").write_text("5")
                self.method = "VmHWM"
            except OSError:
                pass
        self._scale = 1 if sys.platform == "darwin" else 1024
        if self.method == "ru_maxrss":
            self.baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * self._scale
        else:
            self.baseline = before * 1024

    def peak(self) -> int:
        import resource

        if self.method == "VmHWM":
            return (rss_kib()[1] or 0) * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * self._scale

    def above(self) -> int | None:
        """Bytes the peak from the start rose above the resident set then; None where
        the high-water mark could not be reset (ru_maxrss counts what came before)."""
        if self.method != "VmHWM":
            return None
        return max(0, self.peak() - self.baseline)
