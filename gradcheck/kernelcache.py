"""A disk cache of compiled reference kernels: the Python source ``sympy.lambdify``
generates, stored so that a later run (or another worker process) skips SymPy's
differentiation and printing, which are most of the cost of building a reference.

An entry is one small JSON file, ``<folder>/kernels/<sha256>.json``, holding a kernel's
source and the imports its printer added (functools' ``reduce``). Its name is the sha256
of the caller's key (a deterministic text of whatever decides the generated code, e.g.
:func:`gradcheck.tree.canonical` of the formula) together with :data:`FORMAT`,
gradcheck's and SymPy's versions, the namespaces' names and :func:`source_digest` (the
code that decides what a kernel computes), so a changed rule or printer never serves an
old kernel. A hit execs the stored source in the namespace a kernel built now would get
(:mod:`gradcheck.kernelnames`: the names its code uses, bound as lambdify's namespace for
the same ``modules`` binds them, so a kernel that calls no SciPy function imports no
SciPy).

The cache is an optimisation and never fails a run: an unreadable or corrupt entry is a
miss (rebuilt and overwritten), an unwritable folder turns writing off silently.

The folder is ``$GRADCHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/gradcheck``, else
``~/.cache/gradcheck``; ``GRADCHECK_NO_CACHE=1`` (``gradcheck run --no-cache``) turns
the cache off. This module imports SymPy only when a kernel is built or loaded, so the
CLI's ``gradcheck cache`` stays instant.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import os
import sys
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from . import kernelnames
from .io import write_atomic

#: the layout of an entry; bump it when that changes
FORMAT = 2
#: the code whose text decides what a compiled kernel computes (relative to gradcheck/)
SOURCES = ("rules/*.py", "reference/*.py", "lowering.py", "tree.py", "kernelcache.py",
           "kernelnames.py")

#: this process's counts: ``hits`` (disk), ``memory`` (a kernel this process already
#: built or loaded, still alive), ``misses`` (built), ``written`` (a miss that could not
#: be written is not), ``uncached`` (built with no key, or with the cache off)
STATS = {"hits": 0, "memory": 0, "misses": 0, "written": 0, "uncached": 0}

_PACKAGE = Path(__file__).resolve().parent
_ENTRY = "_lambdifygenerated"        # the function lambdify defines
# entry name -> kernel, while something in this process holds it (weak: a long session
# of many formulas does not keep every kernel alive)
_loaded: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_digest: list[str] = []              # source_digest(), computed once
_unwritable: set[Path] = set()       # folders a write already failed in
_counter = [0]


def folder() -> Path:
    """The cache folder (it need not exist)."""
    given = os.environ.get("GRADCHECK_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gradcheck"


def enabled() -> bool:
    """False when ``GRADCHECK_NO_CACHE`` is set (to anything but ``""`` or ``0``)."""
    return os.environ.get("GRADCHECK_NO_CACHE", "") in ("", "0")


@contextmanager
def turned_off(off: bool = True):
    """Inside the block, the cache off when ``off`` (``GRADCHECK_NO_CACHE=1``, which
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


def entries(where: Path | None = None) -> list[Path]:
    """The entry files in the cache folder."""
    kernels = (where or folder()) / "kernels"
    try:
        return sorted(p for p in kernels.iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:
        return []


def clear(where: Path | None = None) -> int:
    """Remove every entry (only the files this module writes, never the folder's other
    contents: ``$GRADCHECK_CACHE_DIR`` may be any folder); the number removed."""
    kernels = (where or folder()) / "kernels"
    removed = 0
    for path in entries(where) + (sorted(kernels.glob(".*.tmp")) if kernels.is_dir() else []):
        try:
            path.unlink()
            removed += path.suffix == ".json"
        except OSError:
            pass
    try:
        kernels.rmdir()
    except OSError:
        pass
    _loaded.clear()
    return removed


def source_digest() -> str:
    """sha256 of the files in :data:`SOURCES` (names and contents), once per process."""
    if not _digest:
        h = hashlib.sha256()
        for path in sorted({p for pattern in SOURCES for p in _PACKAGE.glob(pattern)}):
            h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
        _digest.append(h.hexdigest())
    return _digest[0]


def cached_lambdify(key: str | None, build: Callable[[], Callable], *,
                    modules) -> Callable:
    """The kernel ``build()`` returns, from the cache when it holds one for ``key``.

    Args:
        key: a deterministic text of everything that decides the generated code: the
            formula (:func:`gradcheck.tree.canonical`, placeholders for opaque inputs),
            the arguments' names and order, what is differentiated and how, and a tag
            naming the kind of kernel. Equal keys must mean equal code: that is the
            caller's promise (gradcheck's own code, versions and ``modules`` are added
            here). None: do not cache (e.g. a row's meaning patched at run time).
        build: does the SymPy work and returns the function of one
            :func:`gradcheck.kernelnames.lambdify` (or ``sympy.lambdify``) call, whose
            source ``linecache`` holds (lambdify does this).
        modules: the ``modules`` given to lambdify in ``build``, e.g.
            :data:`gradcheck.reference.derivatives.MODULES`.

    Returns:
        A function computing what ``build()``'s does; on a hit, the stored source
        exec'd in :func:`gradcheck.kernelnames.namespace`'s bindings of its names, under
        a file name ``<lambdifygenerated-cached-N>``.
    """
    if key is None or not enabled():
        STATS["uncached"] += 1
        return build()
    name = entry_name(key, modules)
    fn = _loaded.get(name)
    if fn is not None:
        STATS["memory"] += 1
        return fn
    path = folder() / "kernels" / f"{name}.json"
    fn = _load(path, name, modules)
    if fn is not None:
        STATS["hits"] += 1
    else:
        STATS["misses"] += 1
        fn = build()
        _store(path, name, fn, modules)
    _loaded[name] = fn
    return fn


def entry_name(key: str, modules) -> str:
    """The sha256 an entry for ``key`` is stored under."""
    import sympy

    from . import __version__

    names = [sorted(m) if isinstance(m, dict) else str(m) for m in modules]
    h = hashlib.sha256()
    for part in (f"format {FORMAT}", f"gradcheck {__version__}",
                 f"sympy {sympy.__version__}", f"python {sys.version_info[:2]}",
                 f"modules {names!r}", f"sources {source_digest()}", key):
        h.update(part.encode("utf-8") + b"\0")
    return h.hexdigest()


def _store(path: Path, name: str, fn: Callable, modules) -> None:
    lines = linecache.getlines(getattr(getattr(fn, "__code__", None), "co_filename", ""))
    imports = kernelnames.imports_of(fn, modules) if lines else None
    if imports is None or path.parent in _unwritable:
        return
    source = "".join(lines)
    entry = {"format": FORMAT, "name": name, "source": source,
             "imports": sorted([n, m, a] for n, (m, a) in imports.items()),
             "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest()}
    try:
        write_atomic(path, json.dumps(entry))
        STATS["written"] += 1
    except (OSError, TypeError, ValueError):   # read-only, full, uncreatable: never fail
        _unwritable.add(path.parent)


def _load(path: Path, name: str, modules) -> Callable | None:
    """The kernel stored at ``path``, or None (missing, unreadable, corrupt, stale)."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        source = entry["source"]
        if (entry["format"] != FORMAT or entry["name"] != name
                or hashlib.sha256(source.encode("utf-8")).hexdigest() != entry["sha256"]):
            return None
        return _define(source, entry["imports"], modules)
    # whatever is wrong with an entry makes it a miss; only these, so that a case's time
    # limit (an exception raised asynchronously, anywhere) still stops the case
    except (OSError, ValueError, KeyError, TypeError, AttributeError, SyntaxError,
            ImportError):
        return None


def _define(source: str, imports: list, modules) -> Callable:
    """``source`` exec'd in the namespace its names need (:mod:`.kernelnames`, as a
    kernel built now gets), registered with linecache (so tracebacks and
    ``inspect.getsource`` show it) until the function is collected."""
    _counter[0] += 1
    # "<lambdifygenerated": checking.py reads an exception raised here as the reference's
    filename = f"<lambdifygenerated-cached-{_counter[0]}>"
    code = compile(source, filename, "exec")
    namespace = kernelnames.namespace(
        kernelnames.code_names(code, source) - {_ENTRY}, modules,
        {name: (module, attribute) for name, module, attribute in imports})
    scope: dict = {}
    exec(code, namespace, scope)
    fn = scope[_ENTRY]
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(fn, linecache.cache.pop, filename, None)
    return fn
