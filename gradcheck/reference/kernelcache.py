"""This process's memo of compiled reference kernels: a kernel compiled once is reused
by the case's other dtypes and by later cases with the same formula, in this process
only. Nothing is written to or read from the disk.

There is no disk cache on purpose. It stored lambdify's Python source and exec'd it on
load, so any process that could write its folder (an op of a pull request, in an
earlier run) could make a later trusted run execute its code and forge a verdict; an
entry cannot be verified without compiling the kernel again (a hash names the input,
not the output, and a key to sign entries would sit where an op can read it). It saved
about 1% of a run (docs/design.md §4 has the numbers).

The memo is keyed by the caller's key (a deterministic text of whatever decides the
generated code, e.g. :func:`gradcheck.formula.tree.canonical` of the formula) and the
``modules`` given to lambdify; it holds the last :data:`SIZE` kernels.
``GRADCHECK_NO_CACHE=1`` (``gradcheck run --no-cache``) turns it off: every kernel is
compiled anew (the bench measures compile time so).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

#: how many kernels the memo keeps (least recently used dropped first): a kernel and its
#: namespace are a few KiB, and a long test session revisits a few hundred formulas
SIZE = 512

#: this process's counts: ``memory`` (a kernel served by the memo), ``misses`` (built
#: and remembered), ``uncached`` (built with no key, or with the memo off)
STATS = {"memory": 0, "misses": 0, "uncached": 0}

_memo: OrderedDict = OrderedDict()   # (key, modules' names) -> kernel


def enabled() -> bool:
    """False when ``GRADCHECK_NO_CACHE`` is set (to anything but ``""`` or ``0``)."""
    return os.environ.get("GRADCHECK_NO_CACHE", "") in ("", "0")


@contextmanager
def turned_off(off: bool = True):
    """Inside the block, the memo off when ``off`` (``GRADCHECK_NO_CACHE=1``, which
    child processes inherit: ``--jobs`` workers, the bench's children); the variable as
    it was after."""
    before = os.environ.get("GRADCHECK_NO_CACHE")
    if off:
        os.environ["GRADCHECK_NO_CACHE"] = "1"
    try:
        yield
    finally:
        if off and before is None:
            del os.environ["GRADCHECK_NO_CACHE"]
        elif off:
            os.environ["GRADCHECK_NO_CACHE"] = before


def clear() -> None:
    """Forget every kernel of this process."""
    _memo.clear()


def cached_lambdify(key: str | None, build: Callable[[], Callable], *,
                    modules) -> Callable:
    """The kernel ``build()`` returns, from this process's memo when it holds one for
    ``key`` and ``modules``.

    Args:
        key: a deterministic text of everything that decides the generated code: the
            formula (:func:`gradcheck.formula.tree.canonical`, placeholders for opaque inputs),
            the arguments' names and order, what is differentiated and how, and a tag
            naming the kind of kernel. Equal keys must mean equal code: that is the
            caller's promise. None: do not remember (e.g. a row's meaning patched at
            run time).
        build: does the SymPy work and returns the compiled function.
        modules: the ``modules`` given to lambdify in ``build``, e.g.
            :data:`gradcheck.reference.derivatives.MODULES`.
    """
    if key is None or not enabled():
        STATS["uncached"] += 1
        return build()
    name = (key, repr([sorted(m) if isinstance(m, dict) else str(m) for m in modules]))
    fn = _memo.get(name)
    if fn is not None:
        STATS["memory"] += 1
        _memo.move_to_end(name)
        return fn
    STATS["misses"] += 1
    fn = _memo[name] = build()
    while len(_memo) > SIZE:
        _memo.popitem(last=False)
    return fn


def old_folder() -> Path:
    """Where gradcheck 0.1.0 kept its disk cache (``$GRADCHECK_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/gradcheck``, else ``~/.cache/gradcheck``): never read now, named
    by ``gradcheck cache`` so that its files can be removed."""
    given = os.environ.get("GRADCHECK_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gradcheck"


def old_entries(where: Path | None = None) -> list[Path]:
    """The files the old disk cache wrote (``kernels/*.json``), which nothing reads."""
    kernels = (where or old_folder()) / "kernels"
    try:
        return sorted(p for p in kernels.iterdir()
                      if p.suffix == ".json" and p.is_file() and not p.is_symlink())
    except OSError:
        return []


def remove_old(where: Path | None = None) -> int:
    """Remove the old disk cache's entries (only ``kernels/*.json`` and its temporary
    files, never the folder's other contents: ``$GRADCHECK_CACHE_DIR`` may be any
    folder); the number removed. Their content is never opened."""
    kernels = (where or old_folder()) / "kernels"
    removed = 0
    stale = sorted(kernels.glob(".*.tmp")) if kernels.is_dir() else []
    for path in old_entries(where) + stale:
        try:
            path.unlink()
            removed += path.suffix == ".json"
        except OSError:
            pass
    try:
        kernels.rmdir()
    except OSError:
        pass
    return removed
