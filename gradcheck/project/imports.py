"""Importing a user's code that a case names: an op (``op = "package.module:Name"``, a
``torch.autograd.Function`` subclass, a ``gradcheck.engine.Function`` subclass, or a
plain callable on tensors: driven by :mod:`gradcheck.checking.opcheck.loader`), a traced
reference function (``reference_function``, ``expr_function``: imported in the tracing
child, :mod:`gradcheck.tracing.apart`) or a doctor factory. This is the one place
gradcheck imports code on purpose.

``module`` (dotted names allowed: ``pkg.mod``) is looked for as a file under the case
file's folder, then under the project root (the nearest folder above it holding a
``pyproject.toml`` or ``.git``, else the current folder); a name that is no file there
is imported as usual (an installed package). A file found is imported under a name of
its own, ``gradcheck_op_<hash of the folder>.<module>``: two folders that each hold a
``myops.py`` get two modules, whichever ran first and in whichever process, where one
``sys.modules["myops"]`` would hand the second folder the first folder's class. The
module's own folder (and the folder it was found in) is put on ``sys.path`` too, so
that its plain sibling imports (``import helpers``) work; those siblings are ordinary
top-level modules, shared by every folder that imports the same name.

A case file is data that anyone may hand to a run, so it may name only the project's
own code: a module found as a file there. Any other module (the standard library,
site-packages) is refused before it is imported, unless a pattern allows it
(``fnmatch`` on the dotted name, case-sensitive: ``torch``, ``mypkg.*``) given as
``--allow-op-module``, ``allow_op_modules=`` (carried on the case, so it reaches worker
processes) or ``[tool.gradcheck] allow-op-modules`` in the nearest pyproject.toml. The
attribute must then be an op, not whatever the module happens to hold (see
:func:`_accepted`): a ``torch.autograd.Function`` or ``gradcheck.engine.Function``
subclass, a torch.library op, or a callable defined in a permitted module. An attribute
path (``Cls.name``) runs only through classes defined in a permitted module, never
through another module (``mymod:os.system``); ``Cls.apply`` of a Function is the
Function itself.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from pathlib import Path
from typing import Any

from ..base.errors import GradcheckError, describe_exception
from ..base.spelling import closest, did_you_mean
from .settings import project_root


class OpImportError(GradcheckError):
    """The op named by a case cannot be imported."""


class OpRefused(OpImportError):
    """The op names code a case file may not reach: a module that is no file of the
    project and no allow pattern names, or an attribute that is not an op."""


def op_folder(module_name: str, case_file: str = "") -> Path | None:
    """The folder under which ``module_name`` is a file (``a/b.py``, a compiled
    ``a/b.*.so`` or ``a/b/__init__.py`` for ``a.b``): the case file's folder, else the
    project root; None when neither holds it (it is then imported as an installed
    module). The one place that decides where an op may come from."""
    here = Path(case_file).resolve().parent if case_file else Path.cwd()
    parts = module_name.split(".")
    if not all(p.isidentifier() for p in parts):
        return None   # not a module name at all: let the import say so
    for folder in dict.fromkeys((here, project_root(case_file).resolve())):
        base = folder.joinpath(*parts)
        files = [base.with_name(base.name + suffix)
                 for suffix in importlib.machinery.all_suffixes()] + [base / "__init__.py"]
        if any(f.is_file() for f in files):
            return folder
    return None


_PACKAGES = threading.Lock()
_FOLDERS: set[str] = set()   # the packages made for project folders in this process


def _import_from(folder: Path, module_name: str):
    """``module_name`` from under ``folder``, as a submodule of a package made for that
    folder: the ordinary import machinery then finds ``a/b.py`` (and runs
    ``a/__init__.py``), relative imports inside it resolve, and the module sits in
    ``sys.modules`` under its own name, as dataclasses, pickle and ``inspect`` need."""
    # the folder's resolved path names it: the same folder always gets the same name
    prefix = "gradcheck_op_" + hashlib.sha256(str(folder).encode()).hexdigest()[:16]
    with _PACKAGES:   # Dask runs cases in threads: one package per folder
        if prefix not in sys.modules:
            spec = importlib.machinery.ModuleSpec(prefix, None, is_package=True)
            spec.submodule_search_locations = [str(folder)]
            package = types.ModuleType(prefix, f"the op modules under {folder}")
            package.__spec__, package.__path__ = spec, [str(folder)]
            package.__package__ = prefix
            sys.modules[prefix] = package
            _FOLDERS.add(prefix)
    parts = module_name.split(".")
    own = folder.joinpath(*parts[:-1])
    for root in (str(own), str(folder)):   # for its plain sibling imports
        if root not in sys.path:
            sys.path.insert(0, root)
    return importlib.import_module(f"{prefix}.{module_name}")


ALLOW_KEY = "allow-op-modules"   # the [tool.gradcheck] key of the allow patterns


def load(spec: str, case_file: str = "", allowed: tuple[str, ...] = (),
         what: str = "op") -> Any:
    """The object named ``module:attr`` (see the module's docstring for where
    ``module`` comes from and what it may be). ``allowed``: patterns of installed
    modules that may be imported, besides those of the pyproject's ``[tool.gradcheck]
    allow-op-modules``.

    Raises:
        OpRefused: the module is no file of the project and no pattern allows it (it is
            then never imported), or the attribute is not an op of a permitted module.
        OpImportError: the module or the attribute cannot be imported (a misspelled
            one: with the name meant, :func:`_misspelled`, :func:`_defined`).
        SettingsError: the pyproject.toml that would hold the patterns is invalid.
    """
    module_name, _, attr = spec.partition(":")
    policy, folder = refuse(spec, case_file, allowed, what=what)
    try:
        module = (importlib.import_module(module_name) if folder is None
                  else _import_from(folder, module_name))
    except Exception as exc:  # any failure while importing user code is the case's
        raise OpImportError(f"cannot import {what} {spec!r}: {describe_exception(exc)}") \
            from None
    return _attribute(module, attr, policy)


def refuse(spec: str, case_file: str = "", allowed: tuple[str, ...] = (),
           command: str = "run", what: str = "op"):
    """Raise :class:`OpRefused` when ``spec``'s module may not be imported (no file of
    the project, no pattern allowing it), importing nothing: a run's parent calls this
    before any worker starts. Returns the policy and the module's folder (None: an
    installed module a pattern allows). ``command``: the gradcheck command whose flag
    the message names (``run``, ``doctor``); ``what``: what ``spec`` names, in it.
    A module that is nowhere but close to a project file's name is a typo:
    :class:`OpImportError` naming the file meant (:func:`_misspelled`).
    A pattern that would admit the standard library is refused too (see
    :mod:`gradcheck.project.op_patterns`), whichever module ``spec`` names."""
    module_name = spec.partition(":")[0]
    policy = _Policy(spec, case_file, tuple(allowed), what)
    policy.patterns(what)   # raises for a pattern too wide, before anything is found
    folder = op_folder(module_name, case_file)
    if folder is None and not policy.allows(module_name):
        _misspelled(policy, module_name, case_file)
        searched = " and ".join(map(str, dict.fromkeys((policy.here,
                                                         project_root(case_file)))))
        raise OpRefused(f"{what} {spec!r} refused: module {module_name!r} is no file of this "
                        f"project (looked for under {searched}), and gradcheck imports no "
                        f"other module unless it is allowed. "
                        f"{policy.how(module_name, command)}{policy.nested(module_name)}")
    return policy, folder


def _misspelled(policy: "_Policy", module_name: str, case_file: str) -> None:
    """Raise :class:`OpImportError` for a module that is nowhere (no file of the
    project, no installed module) but whose name is close to one that is a file next
    to the case file or under the project root, or that an allow pattern names: a typo,
    not a module to allow (that advice is for a module that exists outside the
    project)."""
    try:   # (a top-level name only: finding a submodule would import its parent)
        if importlib.util.find_spec(module_name.partition(".")[0]) is not None:
            return
    except (ImportError, ValueError):   # not a module name: the import will say so
        return
    root = project_root(case_file).resolve()
    folders = dict.fromkeys((policy.here, root))
    close = closest(module_name, [*(m for f in folders for m in module_names(f, module_name)),
                                  *(p for p in policy.patterns() if p.isidentifier())])
    if close is None:
        return
    where = f"next to {case_file}" if case_file else f"in {policy.here}"
    raise OpImportError(f"cannot import {policy.what} {policy.spec!r}: no module "
                        f"{module_name!r} {where} or under the project root {root}; did "
                        f"you mean {close!r}?")


def module_names(folder: Path, module_name: str) -> list[str]:
    """The modules beside where ``module_name`` would be under ``folder`` (``a.b``: the
    ``.py`` files and packages of ``folder/a``), as dotted names: what a misspelled
    module name is compared with."""
    parts = module_name.split(".")[:-1]
    try:
        entries = list(folder.joinpath(*parts).iterdir())
    except OSError:
        return []
    names = [e.stem for e in entries if e.suffix == ".py" and e.stem.isidentifier()]
    names += [e.name for e in entries if e.name.isidentifier()
              and (e / "__init__.py").is_file()]
    return [".".join([*parts, n]) for n in sorted(names)]


class _Policy:
    """Which modules one op's spec may reach: the project's files, and the installed
    modules that a pattern allows (read from the pyproject only when needed).

    The patterns are the given ones and those of the project root's own pyproject.toml
    (:func:`gradcheck.project.settings.root_settings`): the root of the run (the current
    folder's) when the case file lies inside it, else the case file's own. A
    pyproject.toml nested nearer the case file is a file any contributor may add beside
    a case file, so its ``allow-op-modules`` are never read (a refusal says so); and a
    pattern that would admit the standard library is refused wherever it comes from."""

    def __init__(self, spec: str, case_file: str, given: tuple[str, ...],
                 what: str = "op"):
        self.spec, self.case_file, self.given, self.what = spec, case_file, given, what
        self.here = Path(case_file).resolve().parent if case_file else Path.cwd()
        self._settings = None
        self._patterns: tuple[str, ...] | None = None   # once vetted

    @property
    def settings(self):
        from .settings import project_root, root_settings

        if self._settings is None:
            run = project_root()
            inside = self.here.resolve().is_relative_to(run)
            self._settings = root_settings(run if inside else self.here)
        return self._settings

    def patterns(self, what: str = "op") -> tuple[str, ...]:
        from .op_patterns import problem
        from .settings import string_list

        if self._patterns is not None:
            return self._patterns
        configured = string_list(self.settings, ALLOW_KEY)
        for pattern, origin in [*((p, "given") for p in self.given),
                                *((p, f"[tool.gradcheck] {ALLOW_KEY} of "
                                      f"{self.settings.path}") for p in configured)]:
            why = problem(pattern)
            if why:
                raise OpRefused(f"{what} {self.spec!r} refused: {why} (the pattern is "
                                f"{origin})")
        self._patterns = (*self.given, *configured)
        return self._patterns

    def allows(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self.patterns())

    def nested(self, name: str) -> str:
        """A note for a refusal of module ``name`` that a nested pyproject.toml's
        patterns would have allowed ("" when none would)."""
        from .settings import settings, string_list

        try:   # a nested file that cannot be read says nothing: it is not read anyway
            near = settings(self.here)
            patterns = string_list(near, ALLOW_KEY)
        except GradcheckError:
            return ""
        if near.path is None or near.path == self.settings.path:
            return ""
        if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            return ""
        root = self.settings.path or "the project root's pyproject.toml"
        return (f" ({near.path} allows it, but that pyproject.toml is nested inside the "
                f"project: its {ALLOW_KEY} are not read, since only the root's ({root}) "
                f"may widen what a case file reaches)")

    def permitted(self, name: object, module: types.ModuleType) -> bool:
        """Whether the code of module ``name`` may be called: the op's own module, a
        project file (imported by :func:`_import_from`, or a plain sibling import found
        under the project), or an allowed module."""
        if not isinstance(name, str) or not name:
            return False
        if name == module.__name__ or name.partition(".")[0] in _FOLDERS:
            return True
        folder = op_folder(name, self.case_file)
        file = getattr(sys.modules.get(name), "__file__", None)
        if folder is not None and file and Path(file).resolve().is_relative_to(folder):
            return True
        return self.allows(name)

    def how(self, name: str, command: str = "run") -> str:
        where = self.settings.path or "the project's pyproject.toml"
        library = (f" (allow_op_modules=[{name!r}] in gradcheck.run)"
                   if command == "run" else "")
        return (f"To allow it, pass --allow-op-module {name} to gradcheck {command}"
                f"{library}, or add {ALLOW_KEY} = [\"{name}\"] under [tool.gradcheck] "
                f"in {where}")


def _shown(name: str) -> str:
    """A module's name as the case file wrote it (without the package of its folder)."""
    head, _, rest = name.partition(".")
    return rest if head in _FOLDERS and rest else name


def _attribute(module: types.ModuleType, attr: str, policy: _Policy) -> Any:
    """``module``'s attribute ``attr``, walking a dotted path only through classes
    defined in a permitted module, and only when the end is an op (:func:`_accepted`)."""
    spec, shown = policy.spec, _shown(module.__name__)
    parts = attr.split(".")
    obj, holder = module, None
    for i, part in enumerate(parts):
        if i and not (isinstance(obj, type) and policy.permitted(obj.__module__, module)):
            raise OpRefused(
                f"{policy.what} {spec!r} refused: {'.'.join(parts[:i])!r} is not a class "
                f"defined in {shown}; an op is an attribute of its module or of a class defined "
                f"there (to name another module's op, write that module before the "
                f"colon, 'package.module:Name'; it must be a project file or allowed)")
        holder = obj
        try:
            obj = getattr(obj, part)
        except AttributeError:   # said of the module as the user named it, not as
            # it was imported (gradcheck_op_<hash>.myops)
            where = shown if obj is module else repr(".".join(parts[:i]))
            raise OpImportError(f"cannot import {policy.what} {spec!r}: AttributeError: "
                                f"{where} has no attribute {part!r}"
                                f"{did_you_mean(part, _defined(obj, policy.what))}") from None
        except Exception as exc:  # a module's __getattr__ is user code too
            raise OpImportError(f"cannot import {policy.what} {spec!r}: "
                                f"{describe_exception(exc)}") from None
    if len(parts) > 1 and parts[-1] == "apply" and _function_class(holder):
        return holder   # Cls.apply is how a Function is called: check the Function
    if not _accepted(obj, module, policy):
        home = getattr(obj, "__module__", None)
        raise OpRefused(
            f"{policy.what} {spec!r} refused: {attr} is {_what(obj, home)}, and an op is "
            f"a torch.autograd.Function or gradcheck.engine.Function subclass, a "
            f"torch.library op, or a callable defined in the op's module ({shown})"
            + ("" if not callable(obj) else ": define it there (a def that calls it)")
            + (f"; or allow its module. {policy.how(home)}" if callable(obj)
               and isinstance(home, str) and home else ""))
    return obj


def _defined(holder: Any, what: str) -> list[str]:
    """The names of ``holder`` (a module, or a class on an attribute path) that a case
    could have meant: for an op, its classes, Function subclasses, torch.library ops and
    the functions it defines (an op may be a plain callable); for a function
    (``reference_function``), its functions. Read where the module was
    imported (the op's process, the tracing child), so the names are the module's own
    as it runs, never parsed by the judge; ``vars`` calls no ``__getattr__``."""
    try:
        names = dict(vars(holder))
    except TypeError:
        return []
    home = getattr(holder, "__name__", None)
    out = []
    for name, value in names.items():
        if name.startswith("_"):
            continue
        if what == "op" and (_function_class(value) or is_library_op(value)
                             or isinstance(value, (type, types.FunctionType))
                             and getattr(value, "__module__", None) == home):
            out.append(name)
        elif what != "op" and isinstance(value, types.FunctionType):
            out.append(name)
    return out


def _what(obj: Any, home: object) -> str:
    if not callable(obj):
        return f"a {type(obj).__name__}, not callable"
    if isinstance(home, str) and home:
        return f"defined in module {_shown(home)!r}"
    return "a callable of no module"


def _function_class(obj: Any) -> bool:
    """A torch.autograd.Function or gradcheck.engine.Function subclass. Looked up in
    ``sys.modules``: an object cannot be a subclass of a module never imported, and an
    engine op's check need not import torch for this."""
    if not isinstance(obj, type):
        return False
    bases = [getattr(sys.modules.get(m), "Function", None)
             for m in ("torch.autograd", "gradcheck.engine.function")]
    return any(isinstance(b, type) and issubclass(obj, b) for b in bases)


def is_library_op(obj: Any) -> bool:
    """A torch.library op: an ``OpOverloadPacket``/``OpOverload`` (``torch.ops.ns.name``)
    or what ``torch.library.custom_op`` returns."""
    ops, custom = sys.modules.get("torch._ops"), sys.modules.get("torch._library.custom_ops")
    kinds = tuple(k for k in (getattr(ops, "OpOverloadPacket", None),
                              getattr(ops, "OpOverload", None),
                              getattr(custom, "CustomOpDef", None)) if isinstance(k, type))
    return bool(kinds) and isinstance(obj, kinds)


def _accepted(obj: Any, module: types.ModuleType, policy: _Policy) -> bool:
    """Whether a case may call ``obj``: a Function subclass or a torch.library op (they
    run on tensors, wherever they are defined), or a callable whose ``__module__`` is a
    permitted module: what a module merely imported (``from os import system``, a
    ``functools.partial`` of it) is that other module's code, and refused."""
    if _function_class(obj) or is_library_op(obj):
        return True
    return callable(obj) and policy.permitted(getattr(obj, "__module__", None), module)
