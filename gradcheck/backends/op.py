"""A user's custom op: importing it and calling it.

``op = "package.module:Name"`` names a ``torch.autograd.Function`` subclass (called
through ``apply``), a ``gradcheck.engine.Function`` subclass, or a plain callable on
tensors. This is the one place gradcheck imports code on purpose.

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
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import to_numpy, torch_dtype  # noqa: F401  (to_numpy: op checks use it)
from ..errors import GradcheckError, describe_exception

class OpImportError(GradcheckError):
    """The op named by a case cannot be imported."""


class OpDtypeError(GradcheckError):
    """The op cannot run in the case's dtype (an engine op in float16 or bfloat16)."""


def project_root(case_file: str) -> Path:
    here = Path(case_file).resolve().parent if case_file else Path.cwd()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").exists() or (folder / ".git").exists():
            return folder
    return Path.cwd()


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
    parts = module_name.split(".")
    own = folder.joinpath(*parts[:-1])
    for root in (str(own), str(folder)):   # for its plain sibling imports
        if root not in sys.path:
            sys.path.insert(0, root)
    return importlib.import_module(f"{prefix}.{module_name}")


def load(spec: str, case_file: str = "") -> Any:
    """The object named ``module:attr`` (see the module's docstring for where
    ``module`` comes from).

    Raises:
        OpImportError: the module or the attribute cannot be imported.
    """
    module_name, _, attr = spec.partition(":")
    try:
        folder = op_folder(module_name, case_file)
        obj = (importlib.import_module(module_name) if folder is None
               else _import_from(folder, module_name))
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # any failure while importing user code is the case's
        raise OpImportError(f"cannot import op {spec!r}: {describe_exception(exc)}") \
            from None
    return obj


@dataclass(frozen=True)
class OpKind:
    """How to drive the op: on torch tensors or on engine tensors, through apply or not."""

    obj: Any
    engine: bool          # gradcheck.engine tensors instead of torch tensors
    function: bool        # a Function subclass (has a backward we can call directly)

    @property
    def name(self) -> str:
        return getattr(self.obj, "__name__", repr(self.obj))

    def __call__(self, *args, **kwargs):
        fn = self.obj.apply if self.function else self.obj
        return fn(*args, **kwargs)


def kind_of(obj: Any) -> OpKind:
    import torch

    from ..engine import Function as EngineFunction

    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
        return OpKind(obj, engine=False, function=True)
    if isinstance(obj, type) and issubclass(obj, EngineFunction):
        return OpKind(obj, engine=True, function=True)
    if callable(obj):
        return OpKind(obj, engine=False, function=False)
    raise OpImportError(f"op {obj!r} is neither an autograd Function nor callable")


class Runner:
    """Calls one op on one point, in one dtype and device, and takes gradients."""

    def __init__(self, case, kind: OpKind, dtype: str, device: str):
        from ..witnesses import skip_reason

        reason = skip_reason("engine", dtype)
        if kind.engine and reason:
            raise OpDtypeError(f"op {kind.name} is a gradcheck.engine Function, and "
                               f"{reason}; check it in those, or write it as a "
                               f"torch.autograd.Function to check it in {dtype}")
        self.case, self.kind, self.dtype, self.device = case, kind, dtype, device

    def leaves(self, point: dict[str, np.ndarray]) -> dict:
        """The case's inputs as tensors of the op's kind, in the run's dtype (an integer
        or boolean input in its own dtype, never requiring grad)."""
        if self.kind.engine:
            from ..engine import Tensor

            return {s.name: Tensor(np.asarray(point[s.name], dtype=s.dtype or self.dtype),
                                   requires_grad=s.requires_grad)
                    for s in self.case.inputs}
        import torch

        # the point is already rounded to the dtype: the leaves hold it exactly
        return {s.name: torch.tensor(point[s.name], device=self.device,
                                     dtype=getattr(torch, s.dtype) if s.dtype
                                     else torch_dtype(self.dtype),
                                     requires_grad=s.requires_grad)
                for s in self.case.inputs}

    def arguments(self) -> tuple[list, list]:
        """What the op is called with, as (positional, keywords): each an
        :class:`~gradcheck.cases.model.OpArgument` (an input's name or a plain value).
        Without ``call``: the inputs in order, then ``args`` (and ``kwargs``)."""
        from ..cases.model import OpArgument

        case = self.case
        if case.call is not None:
            return list(case.call[0]), list(case.call[1])
        return ([OpArgument(input=s.name) for s in case.inputs]
                + [OpArgument(value=a) for a in case.args],
                [(k, OpArgument(value=v)) for k, v in case.kwargs.items()])

    def forward(self, leaves: dict) -> tuple:
        """The op's outputs, always as a tuple."""
        positional, keywords = self.arguments()

        def given(a):
            return leaves[a.input] if a.input is not None else a.value

        out = self.kind(*[given(a) for a in positional],
                        **{k: given(a) for k, a in keywords})
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    @property
    def wanted(self) -> list[str]:
        """The inputs whose gradients the op is checked for: those it is given that
        require grad (a reference-only input is none of the op's business)."""
        passed = set(self.case.passed)
        return [s.name for s in self.case.inputs if s.requires_grad and s.name in passed]

    def tensor(self, array: np.ndarray):
        if self.kind.engine:
            from ..engine import Tensor

            return Tensor(np.asarray(array, dtype=self.dtype))
        import torch

        return torch.tensor(np.asarray(array), dtype=torch_dtype(self.dtype),
                            device=self.device)

    def vjp(self, leaves: dict, outputs: tuple, vs: list[np.ndarray],
            create_graph: bool = False, tensors: list | None = None) -> dict:
        """vᵀJ through autograd, by input name (None where no gradient flows).

        ``tensors``: the cotangents as tensors already made (to see whether backward
        modifies them, or to differentiate with respect to them); else made from ``vs``.
        """
        wanted = self.wanted
        tensors = [self.tensor(v) for v in vs] if tensors is None else tensors
        if self.kind.engine:
            for leaf in leaves.values():
                leaf.grad = None
            total = None
            for y, v in zip(outputs, tensors):
                term = (y * v).sum()
                total = term if total is None else total + term
            total.backward(retain_graph=True)
            return {n: leaves[n].grad for n in wanted}
        import torch

        pairs = [(y, v) for y, v in zip(outputs, tensors) if y.requires_grad]
        if not pairs:
            return dict.fromkeys(wanted)
        grads = torch.autograd.grad([y for y, _ in pairs], [leaves[n] for n in wanted],
                                    grad_outputs=[v for _, v in pairs], retain_graph=True,
                                    create_graph=create_graph, allow_unused=True)
        return dict(zip(wanted, grads))

    def raw_backward(self, outputs: tuple, vs: list[np.ndarray]) -> tuple | None:
        """What the Function's own ``backward`` returns, before autograd reshapes or sums
        it; ``None`` for a plain callable (there is no backward of its own to call)."""
        if not self.kind.function:
            return None
        ctx = outputs[0].grad_fn
        if ctx is None:
            return None
        grads = self.kind.obj.backward(ctx, *[self.tensor(v) for v in vs])
        return grads if isinstance(grads, tuple) else (grads,)

