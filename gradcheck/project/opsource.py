"""An op's ``forward`` signature, read from its module's source with :mod:`ast`: what
``gradcheck init`` writes a starter case from. Nothing of the module runs, in this
process or another: an op is untrusted code, imported only in an op's own process when
a case is checked (:mod:`gradcheck.project.imports`), and the signature is all
``init`` needs (parsing is instant, where asking an op process would import torch and
the module, seconds, for a starter file).

The op is named as a case file names it (``module:Class``, dotted modules allowed) or by
its file (``path/to/module.py:Class``). Either way the module must be a file that the
loader will find from the case file (:func:`gradcheck.project.imports.op_folder`: the
case file's folder, then the project root), and :func:`read_op` says the name the case
file gives it.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import GradcheckError
from .imports import op_folder
from .settings import project_root

#: annotations that mark an argument as a plain value, not a tensor
_PLAIN = {"int", "float", "bool", "str", "complex", "Number", "tuple", "list", "dict"}


class OpSourceError(GradcheckError):
    """The op cannot be found in the project's source. ``known``: the module's classes
    and functions, for a "did you mean" (empty where the module itself is missing)."""

    def __init__(self, message: str, known: tuple[str, ...] = (), name: str = ""):
        super().__init__(message)
        self.known, self.name = known, name


@dataclass(frozen=True)
class Argument:
    name: str
    tensor: bool               # no default and no plain annotation: an input
    default: str | None = None  # the default's source text
    keyword_only: bool = False


@dataclass(frozen=True)
class OpSource:
    """Where the op is and what its forward takes (``ctx`` left out)."""

    spec: str                  # ``module:Name``, as the case file's ``op`` says it
    file: Path
    kind: str                  # "Function" (a class with forward) or "function"
    arguments: tuple[Argument, ...] = ()
    variadic: str = ""         # the name of a ``*args`` argument, if forward has one
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return self.spec.split(":", 1)[1]


def read_op(spec: str, case_file: Path) -> OpSource:
    """The op ``spec`` (``module:Name`` or ``path/to/module.py:Name``) for a case file
    that will be written at ``case_file``. Raises :class:`OpSourceError`."""
    module, sep, name = spec.rpartition(":")
    if not sep or not module or not name:
        raise OpSourceError(f"{spec!r}: name the op as module:Class or "
                            "path/to/module.py:Class")
    if module.endswith(".py") or os.sep in module or "/" in module:
        module = _module_name(Path(module), case_file)
    file = _module_file(module, case_file)
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    return _signature(f"{module}:{name}", file, tree)


def _module_name(path: Path, case_file: Path) -> str:
    """The dotted name the loader finds the file ``path`` by, from ``case_file``."""
    path = path.resolve()
    if not path.is_file():
        raise OpSourceError(f"{path}: no such file")
    for folder in (case_file.parent.resolve(), project_root(case_file.parent).resolve()):
        if path.is_relative_to(folder):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and all(p.isidentifier() for p in parts):
                return ".".join(parts)
    raise OpSourceError(
        f"{path} is outside the folder of the case file ({case_file.parent}) and the "
        f"project root ({project_root(case_file.parent)}), where a case's op is looked "
        "for: write the files (--dir) in the project that holds the module")


def _module_file(module: str, case_file: Path) -> Path:
    folder = op_folder(module, str(case_file))
    if folder is not None:
        base = folder.joinpath(*module.split("."))
        for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        raise OpSourceError(f"{module} is a compiled module: its source cannot be read "
                            "(write the case file's inputs by hand)")
    raise OpSourceError(
        f"no module {module} (as {module.replace('.', '/')}.py) in the folder of the case "
        f"file ({case_file.parent}) or the project root "
        f"({project_root(case_file.parent)}): pass the module's path "
        "(path/to/module.py:Class), or --dir for the files next to it")


def _signature(spec: str, file: Path, tree: ast.Module) -> OpSource:
    name = spec.split(":", 1)[1]
    found = _lookup(tree, name.split("."))
    if found is None:
        known = tuple(dict.fromkeys(
            n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
            and not n.name.startswith("_")))
        raise OpSourceError(f"{file} has no class or function {name}", known, name)
    if isinstance(found, ast.ClassDef):
        forward = _method(tree, found, "forward")
        if forward is None:
            raise OpSourceError(f"{name} in {file} has no forward method (nor a class of "
                                "that module it inherits from)")
        # an old-style Function's forward takes ctx first; one with setup_context does not
        skip = 0 if _method(tree, found, "setup_context") else 1
        return _arguments(spec, file, "Function", forward, skip)
    return _arguments(spec, file, "function", found, 0)


def _lookup(tree: ast.Module, path: list[str]):
    """The class or function at ``path`` (``Outer.Inner``) among the module's top level."""
    body, found = tree.body, None
    for part in path:
        found = next((n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef,
                                                        ast.AsyncFunctionDef))
                      and n.name == part), None)
        if found is None:
            return None
        body = found.body if isinstance(found, ast.ClassDef) else []
    return found


def _method(tree: ast.Module, cls: ast.ClassDef, name: str, depth: int = 0):
    """``cls``'s method ``name``, or that of a base class defined in the same module."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    for base in cls.bases:
        parent = _lookup(tree, [base.id]) if isinstance(base, ast.Name) else None
        if isinstance(parent, ast.ClassDef) and depth < 20:
            found = _method(tree, parent, name, depth + 1)
            if found is not None:
                return found
    return None


def _arguments(spec: str, file: Path, kind: str, fn: ast.FunctionDef,
               skip: int) -> OpSource:
    a = fn.args
    positional = [*a.posonlyargs, *a.args][skip:]
    defaults = [None] * (len([*a.posonlyargs, *a.args]) - len(a.defaults)) + a.defaults
    defaults = defaults[skip:]
    out = [_argument(arg, default) for arg, default in zip(positional, defaults)]
    out += [_argument(arg, default, keyword_only=True)
            for arg, default in zip(a.kwonlyargs, a.kw_defaults)]
    notes = ()
    if a.kwarg is not None:
        notes = (f"forward also takes **{a.kwarg.arg}: name what the op needs in call",)
    return OpSource(spec, file, kind, tuple(out), a.vararg.arg if a.vararg else "", notes)


def _argument(arg: ast.arg, default, keyword_only: bool = False) -> Argument:
    # `float`, `float | None`, `Optional[int]`: plain; anything naming Tensor: a tensor
    names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(arg.annotation)
             if isinstance(n, (ast.Name, ast.Attribute))} if arg.annotation else set()
    plain = bool(names & _PLAIN) and "Tensor" not in names
    text = ast.unparse(default) if default is not None else None
    return Argument(arg.arg, tensor=default is None and not plain, default=text,
                    keyword_only=keyword_only)
