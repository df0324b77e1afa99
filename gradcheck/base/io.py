"""Writing report files: the one place a file gradcheck produces is written.

A regular file (or a new one) is replaced atomically: readers see the old file or the
new, never half, and the new one has the mode any new file gets (``0o666`` less the
umask), not the private mode of a temporary file. A symbolic link to a regular file has
its target replaced, the link kept. What is no regular file (a character device such as
``/dev/null``, a FIFO, a socket) and the names of this process's own streams
(``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) are written to in place: replacing
them would put a regular file where a device or a link of the system was.

:func:`output_problem` says before a run whether its report could be written there."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["write_atomic", "output_problem"]

# Names that stand for a stream of this process, whatever they resolve to.
_STREAMS = ("/dev/", "/proc/")


def _names_a_stream(path: Path) -> bool:
    """Whether ``path``, or a link on the way to what it names, is under /dev or /proc
    (``/dev/stdout`` is a link to ``/proc/self/fd/1``, a link to whatever fd 1 is)."""
    path = Path(os.path.abspath(path))
    for _ in range(40):   # the kernel's own limit on a chain of links
        if str(path).startswith(_STREAMS):
            return True
        if not path.is_symlink():
            return False
        path = Path(os.path.abspath(path.parent / os.readlink(path)))
    return False


def _in_place(path: Path) -> bool:
    """Whether ``path`` is written to rather than replaced (see the module docstring)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:   # absent, or a dangling link: a new file
        return False
    return not stat.S_ISREG(mode) or _names_a_stream(path)


def _umask() -> int:
    """This process's umask: read from /proc where Linux shows it; elsewhere set and set
    back at once (the only other way to read it, racy against another thread's files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new, never half
    (in place where ``path`` is no regular file: see the module docstring)."""
    path = Path(path)
    if _in_place(path):
        # appended, not truncated: /dev/stdout reopens whatever fd 1 is, and "w" would
        # empty a log redirected there (> log, >> "$GITHUB_STEP_SUMMARY"); a device or a
        # FIFO has nothing to truncate
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
        return
    if path.is_symlink():   # replace what it points to, and keep the link
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def output_problem(path: str | Path) -> str:
    """Why a report could not be written to ``path`` ("" when it could), checked before
    a run so that its report is not lost at the end: a folder, a path under a file, a
    folder that cannot be written (tried: a temporary file is made and removed)."""
    path = Path(path)
    if path.is_dir():
        return f"--output {path} is a folder; give a file name"
    if _in_place(path):
        return "" if os.access(path, os.W_OK) else f"--output {path} cannot be written"
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"--output {path}: {folder} is a file, not a folder"
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gradcheck-probe.", suffix=".tmp")
    except OSError as exc:
        return f"--output {path}: cannot write in {folder} ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(tmp)
    return ""
