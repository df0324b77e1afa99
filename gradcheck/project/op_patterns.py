"""Which ``allow-op-modules`` patterns gradcheck refuses: those that would let a case
file's ``op`` reach the standard library, or an installed module that runs commands,
loads code or writes files.

An allow pattern is the project's word that a case file may name an installed module's
callables as an op (see :mod:`gradcheck.checking.opcheck.loader`). ``*``, ``o*`` or ``sub*`` says
more than any project means: it admits ``os`` and ``subprocess``, whose callables
(``os:system``) run whatever command a case file names. So each pattern is tried, with
``fnmatchcase`` as the op loader applies it, against the names of the standard library
(``sys.stdlib_module_names``), a fixed list of installed modules that are as dangerous
(:data:`DANGEROUS`), their usual submodules (``os.path``, ``importlib.util``), a
submodule of each (``os.*``), and a dangerous name inside any package (``*.os``); a
pattern that matches one of them is refused, naming the pattern and the module it would
admit. ``torch``, ``numpy``, ``mypkg.*`` and ``tor*`` match none."""

from __future__ import annotations

import fnmatch
import re
import sys
from functools import lru_cache

__all__ = ["DANGEROUS", "admitted", "argument", "problem"]

# installed modules (or standard ones, first in the message) whose callables run
# commands, load code, open sockets or write files, and gradcheck itself (an op from the
# judge's own package could change the judge)
DANGEROUS = ("os", "subprocess", "sys", "builtins", "importlib", "shutil", "ctypes",
             "pickle", "marshal", "posix", "nt", "pty", "socket", "multiprocessing",
             "runpy", "code", "signal", "io", "pathlib", "tempfile", "shelve",
             "distutils", "setuptools", "pkg_resources", "pip", "dill", "cloudpickle",
             "joblib", "sh", "pexpect", "plumbum", "psutil", "invoke", "fabric",
             "paramiko", "requests", "urllib3", "httpx", "cffi", "pytest", "_pytest",
             "IPython", "gradcheck")

# submodules a pattern must not reach either: the usual ones of the dangerous modules,
# and a made-up one, which a pattern ending in ``.*`` or ``*`` matches
_SUBMODULES = ("path", "util", "machinery", "metadata", "abc", "resources", "spawn",
               "popen_fork", "_gradcheck_probe")


@lru_cache(maxsize=1)
def _names() -> tuple[str, ...]:
    """Every name a pattern must not match, the dangerous ones first."""
    tops = tuple(dict.fromkeys((*DANGEROUS, *sorted(sys.stdlib_module_names))))
    subs = tuple(f"{top}.{sub}" for top in tops for sub in _SUBMODULES)
    inside = tuple(f"_gradcheck_probe.{name}" for name in DANGEROUS)
    return (*tops, *subs, *inside)


def admitted(pattern: str) -> str | None:
    """The first dangerous module name ``pattern`` matches (None when it matches none)."""
    match = re.compile(fnmatch.translate(pattern)).match   # fnmatchcase's own regex
    return next((name for name in _names() if match(name)), None)


def problem(pattern: str) -> str:
    """Why ``pattern`` is refused as an allow pattern ("" when it is not)."""
    name = admitted(pattern)
    if name is None:
        return ""
    top = name.split(".")[0]
    if top == "_gradcheck_probe":
        what = f"any package's module {name.split('.', 1)[1]!r}"
    elif top in sys.stdlib_module_names:
        what = f"the standard library's {name!r}"
    else:
        what = f"the installed module {name!r}"
    return (f"allow pattern {pattern!r} would admit {what}: a case file could then name "
            f"its callables as an op (os:system runs any command), so gradcheck refuses "
            f"it; name the package the ops come from instead (torch, mypkg.*)")


def argument(text: str) -> str:
    """``--allow-op-module``'s PATTERN (argparse reports an ArgumentTypeError as a usage
    error, exit 2, with this message)."""
    import argparse

    why = problem(text)
    if why:
        raise argparse.ArgumentTypeError(why)
    return text
