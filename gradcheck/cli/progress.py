"""The progress of a run as people read it, on a terminal or in a CI log.

:func:`display` gives the ``progress`` that :func:`gradcheck.session.runner.run` takes: called
``p(n, total, result)`` as each case run finishes, and ``p.started(case, dtype)`` as one
begins (where those events come from: :meth:`gradcheck.session.executors.Executor.map`). Three
modes:

- ``"live"`` (a terminal): one line, redrawn a few times a second, with ``[n/total]``
  and the runs under way, each with its time so far; a run that fails or errors is
  printed above it as a line that stays. Leaving the context erases the live line.
  It is drawn with a carriage return and spaces, never a cursor escape, so that with
  ``color=False`` not one escape code is written.
- ``"lines"`` (a log, a pipe): one line per finished run, written and flushed as it
  finishes (``[3/17] PASS softplus (float64) 0.42s``; ``XFAIL`` and ``XPASS`` for
  an ``expect = "fail"`` case, as the text report says), no wider than the console
  (a name cut where it must be), and ``still running: NAME
  (DTYPE) 10s`` for a run :data:`STILL_RUNNING_AFTER` seconds old, again every
  :data:`STILL_RUNNING_EVERY` seconds, so a log is not silent through a slow case.
- ``"quiet"``: nothing.

Names and dtypes come from case files: each is scrubbed (:func:`gradcheck.report.scrub.
one_line`) and printed as plain text (rich's markup and emoji codes off), so a name can
never drive the terminal. The clocks run in one daemon thread, stopped when the context
is left; whatever it writes goes under the same lock as the main thread's lines.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from typing import Iterator

from ..report.labels import STYLE, label
from ..report.scrub import one_line
from ..base.result import APPROXIMATE, ERROR, FAILED, XPASS

__all__ = ["display", "MODES", "STILL_RUNNING_AFTER", "STILL_RUNNING_EVERY", "REFRESH"]

MODES = ("live", "lines", "quiet")
STILL_RUNNING_AFTER = 10.0   # seconds a run is old when "lines" first says it still runs
STILL_RUNNING_EVERY = 30.0   # and how often it says so again (CI kills a silent job)
REFRESH = 0.25               # seconds between redraws of the live line

# the outcomes whose line stays above the live line: the runs to look at
_KEPT = (FAILED, XPASS, ERROR, APPROXIMATE)


@contextlib.contextmanager
def display(stream, *, mode: str, color: bool) -> Iterator:
    """The progress display of ``mode`` (one of :data:`MODES`) on ``stream``; with
    ``color`` False it writes no escape code at all (whether there should be colour,
    NO_COLOR included, is the caller's to say).

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"progress mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "quiet":
        yield _Quiet()
        return
    shown = (_Live if mode == "live" else _Lines)(stream, color)
    shown.begin()
    try:
        yield shown
    finally:
        shown.end()


class _Quiet:
    def __call__(self, n: int, total: int, result) -> None:
        pass

    def planned(self, total: int) -> None:
        pass

    def started(self, case, dtype: str) -> None:
        pass


def _label(name, dtype) -> str:
    """``NAME (DTYPE)``, scrubbed; a case-file error's dtype ``-`` is left out."""
    dtype = one_line(dtype)
    return one_line(name) + ("" if dtype in ("", "-") else f" ({dtype})")


class _Run:
    """One run under way."""

    __slots__ = ("label", "since", "notice")

    def __init__(self, label: str, since: float):
        self.label, self.since = label, since
        self.notice = since + STILL_RUNNING_AFTER   # when "lines" next says it runs


class _Shown:
    """What both visible modes share: the runs under way (keyed by file, name and
    dtype, as a result names its run), the count, the lock and the clock's thread.
    :meth:`_tick` is what the thread does when :meth:`_wake_in` comes due."""

    terminal = False

    def __init__(self, stream, color: bool):
        from rich.console import Console

        self.stream = stream
        # markup, emoji codes and highlighting off: a name prints as it is written;
        # colour_system None: rich writes no escape code at all
        self.console = Console(file=stream, force_terminal=self.terminal,
                               color_system="standard" if color else None,
                               # the caller decided (--color always beats NO_COLOR):
                               # rich must not read NO_COLOR again
                               no_color=not color,
                               highlight=False, markup=False, emoji=False,
                               soft_wrap=True)
        self.running: dict[tuple, deque[_Run]] = {}
        self.n, self.total = 0, None
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._clock, name="gradcheck-progress",
                                        daemon=True)

    def begin(self) -> None:
        self._thread.start()

    def end(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        with self._cond:
            self._finish()

    def planned(self, total: int) -> None:
        """``total`` runs are to come (before the first starts)."""
        with self._cond:
            self.n, self.total = 0, total
            self._started(None)
            self._cond.notify_all()

    def started(self, case, dtype: str) -> None:
        """A run of ``case`` (a :class:`~gradcheck.cases.Case`) in ``dtype`` began."""
        key = (str(getattr(case, "file", "")), str(getattr(case, "name", case)), str(dtype))
        run = _Run(_label(key[1], dtype), time.monotonic())
        with self._cond:
            self.running.setdefault(key, deque()).append(run)
            self._started(run)
            self._cond.notify_all()

    def __call__(self, n: int, total: int, result) -> None:
        """The ``n``-th of ``total`` runs finished with ``result``."""
        with self._cond:
            self.n, self.total = n, total
            self._forget(result)
            self._finished(result)
            self._cond.notify_all()

    def _forget(self, result) -> None:
        """Take the run of ``result`` off those under way (none: it never started, as a
        case-file error or a run refused before it ran)."""
        key = (str(result.file), str(result.name), str(result.dtype))
        if key not in self.running:   # a result naming its file otherwise: by name
            key = next((k for k in self.running if k[1:] == key[1:]), key)
        runs = self.running.get(key)
        if runs:
            runs.popleft()
            if not runs:
                del self.running[key]

    def _line(self, result):
        """The finished run's line, a rich Text, in the words of the text report
        (``XFAIL``, ``XPASS``: :mod:`gradcheck.report.labels`), no wider than the
        console: a name too long for it is cut, its dtype and time kept."""
        from rich.text import Text

        outcome = getattr(result, "outcome", result.status)
        head = f"[{self.n}/{self.total}] {label(outcome)} "
        name, dtype = _label(result.name, ""), _label("", result.dtype)
        tail = f"{dtype} {result.seconds:.2f}s"
        over = len(head) + len(name) + len(tail) - self.console.width
        if over > 0 and len(name) > over + 1:
            name = name[:len(name) - over - 1] + "…"
        line = Text(f"[{self.n}/{self.total}] ")
        line.append(label(outcome), style=STYLE.get(outcome, ""))
        line.append(f" {name}{tail}")
        line.truncate(self.console.width, overflow="ellipsis")
        return line

    def _print(self, text) -> None:
        if isinstance(text, str):   # (a line of its own: cut to the console too)
            from rich.text import Text

            text = Text(text)
            text.truncate(self.console.width, overflow="ellipsis")
        self.console.print(text, soft_wrap=True)
        self.stream.flush()

    def _clock(self) -> None:
        """The thread: wait for the next moment something is due, do it, until
        :meth:`end`. A stream that fails (closed, a broken pipe) stops only the clock:
        a display must never add a traceback of its own to a run's output."""
        try:
            with self._cond:
                while not self._stop:
                    self._cond.wait(self._wake_in())
                    if not self._stop:
                        self._tick(time.monotonic())
        except Exception:
            pass

    # what each mode does
    def _wake_in(self) -> float | None:
        raise NotImplementedError

    def _tick(self, now: float) -> None:
        raise NotImplementedError

    def _started(self, run: _Run | None) -> None:
        pass

    def _finished(self, result) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        pass


class _Lines(_Shown):
    """A line per finished run; "still running" for a slow one (see the module)."""

    def _wake_in(self) -> float | None:
        notices = [r.notice for runs in self.running.values() for r in runs]
        return max(0.0, min(notices) - time.monotonic()) if notices else None

    def _tick(self, now: float) -> None:
        for runs in self.running.values():
            for run in runs:
                if run.notice <= now:
                    self._print(f"still running: {run.label} {now - run.since:.0f}s")
                    run.notice = now + STILL_RUNNING_EVERY

    def _finished(self, result) -> None:
        self._print(self._line(result))


class _Live(_Shown):
    """The live line of a terminal (see the module)."""

    terminal = True

    def __init__(self, stream, color: bool):
        super().__init__(stream, color)
        self._drawn = 0   # the cells the live line takes now
        self._due = 0.0   # when it is next redrawn for its clocks

    def _wake_in(self) -> float | None:
        return max(0.0, self._due - time.monotonic()) if self.running else None

    def _tick(self, now: float) -> None:
        if now >= self._due:   # (not merely woken by an event, which drew already)
            self._draw(now)

    def _started(self, run: _Run | None) -> None:   # (None: the runs were planned)
        self._draw(time.monotonic())

    def _finished(self, result) -> None:
        if getattr(result, "outcome", result.status) in _KEPT:   # runs to look at
            self._erase()
            self._print(self._line(result))
        self._draw(time.monotonic())

    def _finish(self) -> None:
        self._erase()

    def _line_of(self, runs: list, now: float, more: int, labels: list | None = None):
        """The live line with ``runs`` shown (as ``labels``, default theirs) and
        ``more`` runs counted after them."""
        from rich.text import Text

        line = Text()
        if self.total is not None:
            line.append(f"[{self.n}/{self.total}]", style="bold")
        for i, run in enumerate(runs):
            line.append(", " if i else " " if line else "")
            line.append(labels[i] if labels else run.label)
            line.append(f" {now - run.since:.1f}s", style="dim")
        if more:
            line.append(f" +{more} more", style="dim")
        return line

    def _draw(self, now: float) -> None:
        # one cell short of the width: a line that fills the last column wraps on
        # some terminals, and a carriage return would then redraw only its tail
        width = max(1, self.console.width - 1)
        runs = [r for runs in self.running.values() for r in runs]
        shown = len(runs)
        line = self._line_of(runs, now, 0)
        while line.cell_len > width and shown > 1:   # fewer runs, each whole, counted
            shown -= 1
            line = self._line_of(runs[:shown], now, len(runs) - shown)
        if line.cell_len > width and shown == 1:   # one run too wide: cut its name,
            # keep its dtype and its time, which say what runs and for how long
            label, over = runs[0].label, line.cell_len - width
            name, paren, dtype = label.rpartition(" (")
            if paren and len(name) > over + 1:
                cut = name[:len(name) - over - 1] + "…" + paren + dtype
                line = self._line_of(runs[:1], now, len(runs) - 1, [cut])
        line.truncate(width, overflow="ellipsis")   # (what is left too wide: its end)
        with self.console.capture() as drawn:
            self.console.print(line, end="")
        cells = line.cell_len
        # spaces over what the last line had beyond this one
        self.stream.write("\r" + drawn.get() + " " * max(0, self._drawn - cells))
        self.stream.flush()
        self._drawn, self._due = cells, now + REFRESH

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0
