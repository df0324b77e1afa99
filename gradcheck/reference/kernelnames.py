"""The namespace a compiled reference kernel runs in: the names its code uses, each bound
to what ``sympy.lambdify``'s own namespace for the same ``modules`` binds it to, and
nothing else.

lambdify builds its namespace for ``["scipy", "numpy"]`` by ``from numpy import *``,
``from numpy.linalg import *`` and ``from scipy.special import *``: every NumPy
submodule (fft, random, testing, f2py...) and SciPy, a quarter of a second in every
process, even for a kernel that calls nothing but ``tanh``. Here each name the code
uses is resolved alone, in lambdify's order (``builtins`` and ``range``, then
``modules`` in order, then what the printer imported itself):

- a dict of ``modules`` binds its own names (gradcheck's ``select``, ``Heaviside``...);
- ``"numpy"``: what lambdify's NumPy namespace binds (``numpy.linalg``'s names over
  ``numpy``'s, its translations, ``Abs``), read from NumPy's ``__all__`` without the
  star imports;
- ``"scipy"``: SciPy's namespace is imported only for a name NumPy's lacks (``erf``,
  ``expit``, ``xlogy``) or one of :data:`SCIPY_SHADOWS`, the NumPy names SciPy's
  namespace binds to its own functions (``log1p``, ``expm1``: a kernel calling them
  keeps calling SciPy's); a name the printer imported from a module of its own
  (functools' ``reduce``) is that module's.

So a process imports SciPy only when a kernel calls one of its functions, and a kernel
computes exactly what it computed in lambdify's namespace (tests/test_kernelnames.py
checks every name of that namespace). :mod:`gradcheck.reference.kernelcache` memoises the compiled
kernels within a process; none is ever loaded from a file.
"""

from __future__ import annotations

import builtins
import importlib
import re
import types
from typing import Callable

#: NumPy names that lambdify's SciPy namespace binds to SciPy's functions instead
#: (``from scipy.special import *`` after ``from numpy import *``)
SCIPY_SHADOWS = frozenset({"cbrt", "errstate", "exp2", "expm1", "geterr", "i0", "log1p",
                           "round", "seterr"})
#: names lambdify binds last, over every module
FIXED = {"builtins": builtins, "range": range}
MISSING = object()

_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")   # a name, not an attribute
_numpy: dict = {}                    # NumPy's names: "all", "linalg", "loaded"...
_namespaces: dict[str, dict] = {}    # module string -> lambdify's namespace for it


def code_names(code, source: str | None = None) -> set[str]:
    """The global names ``code`` (and the code nested in it) may look up: its names,
    without those ``source`` only uses as attributes (``logical_and.reduce``)."""
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out |= code_names(c)
    if source is not None:
        out &= set(_IDENTIFIER.findall(source))
    return out


def namespace(names, modules, imports: dict | None = None) -> dict:
    """``{name: binding}`` for each of ``names`` that lambdify's namespace for
    ``modules`` (plus the printer's ``imports``, name -> (module, attribute)) binds; a
    name it does not bind is left out (a builtin, or a NameError as it was there)."""
    out = {}
    for name in names:
        value = binding(name, modules, imports or {})
        if value is not MISSING:
            out[name] = value
    return out


def binding(name: str, modules, imports: dict):
    """What ``name`` is bound to (:data:`MISSING`: nothing)."""
    if name in FIXED:
        return FIXED[name]
    for k, m in enumerate(modules):
        if isinstance(m, dict):
            if name in m:
                return m[name]
        elif m == "numpy":
            value = _numpy_binding(name)
            if value is not MISSING:
                return value
        elif m == "scipy" and _numpy_later(name, modules[k + 1:], imports):
            continue    # SciPy's namespace binds it as NumPy's, or not at all
        else:
            value = _sympy_namespace(m).get(name, MISSING)
            if value is not MISSING:
                return value
    if name in imports:
        module, attribute = imports[name]
        return getattr(importlib.import_module(module), attribute)
    return MISSING


def _numpy_later(name: str, later, imports: dict) -> bool:
    """Whether SciPy's namespace can be skipped for ``name``: a NumPy name it does not
    shadow, with NumPy's namespace after it, or a name the printer imported from a
    module other than NumPy and SciPy (their own ``reduce``)."""
    if name in imports and imports[name][0].partition(".")[0] not in ("numpy", "scipy"):
        return True
    return (name not in SCIPY_SHADOWS and "numpy" in later
            and _numpy_binding(name) is not MISSING)


def _numpy_binding(name: str):
    """What lambdify's "numpy" namespace (its defaults, then ``import numpy; from numpy
    import *; from numpy.linalg import *``, then its translations, then ``Abs``) binds
    ``name`` to."""
    import numpy

    if "all" not in _numpy:
        from sympy.utilities.lambdify import NUMPY_DEFAULT, NUMPY_TRANSLATIONS

        _numpy.update(all=frozenset(numpy.__all__),
                      linalg=frozenset(numpy.linalg.__all__),
                      translations=dict(NUMPY_TRANSLATIONS), default=dict(NUMPY_DEFAULT))
    name = _numpy["translations"].get(name, name)
    if name in _numpy["linalg"]:
        return getattr(numpy.linalg, name)
    if name in _numpy["all"]:
        return getattr(numpy, name)     # (a lazy submodule is imported only if used)
    if name == "numpy":
        return numpy
    if name in _numpy["default"]:       # (I: 1j)
        return _numpy["default"][name]
    return abs if name == "Abs" else MISSING


def _numpy_loaded() -> dict:
    """NumPy's names that it has loaded already (not its lazy submodules)."""
    if "loaded" not in _numpy:
        import numpy

        _numpy["loaded"] = {n: numpy.__dict__[n] for n in numpy.__all__
                            if n in numpy.__dict__}
    return _numpy["loaded"]


def _sympy_namespace(module: str) -> dict:
    """lambdify's own namespace for one module string, built once per process."""
    if module not in _namespaces:
        import sympy

        _namespaces[module] = sympy.lambdify([], 0, modules=[module]).__globals__
    return _namespaces[module]


def printer_settings(modules) -> dict:
    """The settings ``sympy.lambdify`` gives its printer for ``modules``: the dicts'
    names printed as they are (user functions)."""
    user = {k: k for m in modules or () if isinstance(m, dict) for k in m}
    return {"fully_qualified_modules": False, "inline": True,
            "allow_unknown_functions": True, "user_functions": user}


def printer_for(modules):
    """The printer ``sympy.lambdify`` picks for ``modules`` (SciPy's, or NumPy's),
    built here because lambdify is given only the dicts."""
    from sympy.printing.numpy import NumPyPrinter, SciPyPrinter

    cls = SciPyPrinter if "scipy" in modules else NumPyPrinter
    return cls(printer_settings(modules))


def lambdify(args, exprs, *, modules, printer=None, **options) -> Callable:
    """``sympy.lambdify(args, exprs, modules=modules, printer=printer, **options)``:
    the same code, run in :func:`namespace`'s bindings for it. lambdify itself is given
    only the dicts of ``modules`` (its namespaces would import all of NumPy and SciPy)
    and ``printer`` (by default the one it would pick for ``modules``). Modules other
    than dicts, "numpy" and "scipy" (or None, lambdify's default) are lambdify's own."""
    import sympy

    if modules is None or not all(isinstance(m, dict) or m in ("numpy", "scipy")
                                  for m in modules):
        return sympy.lambdify(args, exprs, modules=modules, printer=printer, **options)
    printer = printer if printer is not None else printer_for(modules)
    # (NumPy's loaded names too: lambdify would import each name its code uses by an
    # exec of its own; the kernel's bindings are namespace()'s, below)
    fn = sympy.lambdify(args, exprs, modules=[m for m in modules if isinstance(m, dict)]
                        + [_numpy_loaded()], printer=printer, **options)
    printed = getattr(printer, "module_imports", None) or {}
    imports = {name: (module, name) for module, names in printed.items()
               for name in names}
    return bind(fn, modules, imports)


def bind(fn: Callable, modules, imports: dict) -> Callable:
    """lambdify's ``fn``, its own code looking its names up in :func:`namespace`
    (``imports``: what the printer imported, name -> (module, attribute)). The result
    keeps ``fn`` alive (``_lambdified``), so lambdify's copy of the source stays in
    ``linecache``, and the imports its code uses (``_imports``, for the disk cache)."""
    import linecache

    code = fn.__code__
    names = code_names(code, "".join(linecache.getlines(code.co_filename)) or None)
    imports = {n: v for n, v in imports.items() if n in names}
    bound = types.FunctionType(code, namespace(names, modules, imports), fn.__name__,
                               fn.__defaults__, fn.__closure__)
    bound.__doc__, bound._lambdified, bound._imports = fn.__doc__, fn, imports
    return bound


def imports_of(fn: Callable, modules) -> dict | None:
    """The imports ``fn`` needs beside :func:`namespace`'s bindings for ``modules`` (name
    -> (module, attribute)): its own ``_imports`` (:func:`lambdify`), else those found
    in its globals (a plain ``sympy.lambdify``'s, which imported what its printer asked
    for); None when one of its names cannot be imported back by name."""
    own = getattr(fn, "_imports", None)
    if own is not None:
        return own
    out, missing = {}, object()
    for name in code_names(fn.__code__):
        value = fn.__globals__.get(name, missing)
        if value is missing or value is binding(name, modules, {}):
            continue
        module, attribute = getattr(value, "__module__", None), getattr(
            value, "__name__", None)
        try:
            if getattr(importlib.import_module(module), attribute) is not value:
                return None
        except (ImportError, AttributeError, TypeError, ValueError):   # cannot be named
            return None
        out[name] = (module, attribute)
    return out
