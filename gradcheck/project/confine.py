"""Where gradcheck may write, and which configured case paths it may read: inside the
project, never under ``.git/`` or ``.github/``.

In CI a run takes its settings from the pull request's own pyproject.toml and writes
its reports where those settings, or the workflow's command line, say; a report path
may be a committed symbolic link, or pass through one. So a path is judged by where it
resolves, every link followed (each folder on the way and the last component too, a
dangling link by where it points), never by how it is written: inside the project root
(:func:`gradcheck.project.settings.project_root` of the current folder), and outside its
``.git/`` and ``.github/`` at any depth, where git hooks, git's config and workflows are
code that later steps run. The process's own streams and the sinks that keep nothing
(``/dev/stdout``, ``/dev/stderr``, ``/dev/null``, ``/dev/full``) are allowed by name,
and so is a link to one of the sinks: writing there replaces no file. The job summary
and the kernel cache are gradcheck's own files outside the project, and are not judged
here."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STREAMS", "SINKS", "GUARDED", "outside", "write_problem"]

STREAMS = frozenset({"/dev/stdout", "/dev/stderr", "/dev/null", "/dev/full"})
SINKS = frozenset({"/dev/null", "/dev/full"})   # allowed where a link leads there too
GUARDED = (".git", ".github")   # compared case-folded: .GIT is .git on macOS


def _resolved(path: str | Path) -> tuple[Path, bool]:
    """Where ``path`` resolves, every link followed, and whether that ends in a loop
    of links (realpath then stops at a link)."""
    real = Path(os.path.realpath(path))
    return real, real.is_symlink()


def outside(path: str | Path, root: Path) -> str:
    """Why ``path`` resolves outside the project rooted at ``root`` ("" when it lies
    inside): the message names the path, where it resolves and the root."""
    real, loop = _resolved(path)
    if loop:
        return f"{path} is a loop of symbolic links (at {real})"
    top = Path(os.path.realpath(root))
    if not real.is_relative_to(top):
        return f"{path}{_how(path, real)} is outside the project root {top}"
    return ""


def _how(path: str | Path, real: Path) -> str:
    """Where ``path`` resolves, said where that is not how it is written."""
    return "" if str(real) == str(path) else f" resolves to {real}, which"


def write_problem(path: str | Path, root: Path) -> str:
    """Why gradcheck may not write ``path`` ("" when it may): see the module's
    docstring. Checked before anything is made there, a probe file included."""
    if (os.path.normpath(os.path.abspath(path)) in STREAMS
            or os.path.realpath(path) in SINKS):   # a link to /dev/null keeps nothing
        return ""
    problem = outside(path, root)
    if problem:
        return f"{problem}: gradcheck writes only inside the project it runs in"
    real = Path(os.path.realpath(path))
    inner = real.relative_to(Path(os.path.realpath(root))).parts
    guarded = next((part for part in inner if part.casefold() in GUARDED), None)
    if guarded is None:
        return ""
    return (f"{path}{_how(path, real)} is under {guarded}/: gradcheck never writes "
            "under .git/ or .github/ (git hooks, git's config and workflows are code that "
            "later steps run)")
