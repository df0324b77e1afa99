"""A user's custom op: importing it and calling it.

``op = "package.module:Name"`` names a ``torch.autograd.Function`` subclass (called
through ``apply``), a ``gradcheck.engine.Function`` subclass, or a plain callable on
tensors. This is the one place gradcheck imports code on purpose; the project root (the
folder holding the case file's project, found by walking up to a ``pyproject.toml`` or
``.git``, else the current folder) is put on ``sys.path`` first.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import to_float64, torch_dtype
from ..errors import GradcheckError

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


def load(spec: str, case_file: str = "") -> Any:
    """The object named ``module:attr``.

    Raises:
        OpImportError: the module or the attribute cannot be imported.
    """
    module_name, _, attr = spec.partition(":")
    roots = [str(project_root(case_file)), str(Path(case_file).resolve().parent)
             if case_file else str(Path.cwd())]
    for root in roots:
        if root not in sys.path:
            sys.path.insert(0, root)
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # any failure while importing user code is the case's
        raise OpImportError(f"cannot import op {spec!r}: {type(exc).__name__}: {exc}") \
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
        from . import skip_reason

        reason = skip_reason("engine", dtype)
        if kind.engine and reason:
            raise OpDtypeError(f"op {kind.name} is a gradcheck.engine Function, and "
                               f"{reason}; check it in those, or write it as a "
                               f"torch.autograd.Function to check it in {dtype}")
        self.case, self.kind, self.dtype, self.device = case, kind, dtype, device

    def leaves(self, point: dict[str, np.ndarray]) -> dict:
        if self.kind.engine:
            from ..engine import Tensor

            return {s.name: Tensor(np.asarray(point[s.name], dtype=self.dtype),
                                   requires_grad=s.requires_grad)
                    for s in self.case.inputs}
        import torch

        # the point is already rounded to the dtype: the leaves hold it exactly
        return {s.name: torch.tensor(point[s.name], dtype=torch_dtype(self.dtype),
                                     device=self.device, requires_grad=s.requires_grad)
                for s in self.case.inputs}

    def forward(self, leaves: dict) -> tuple:
        """The op's outputs, always as a tuple."""
        out = self.kind(*[leaves[s.name] for s in self.case.inputs], *self.case.args,
                        **self.case.kwargs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def tensor(self, array: np.ndarray):
        if self.kind.engine:
            from ..engine import Tensor

            return Tensor(np.asarray(array, dtype=self.dtype))
        import torch

        return torch.tensor(np.asarray(array), dtype=torch_dtype(self.dtype),
                            device=self.device)

    def vjp(self, leaves: dict, outputs: tuple, vs: list[np.ndarray],
            create_graph: bool = False) -> dict:
        """vᵀJ through autograd, by input name (None where no gradient flows)."""
        wanted = [s.name for s in self.case.inputs if s.requires_grad]
        if self.kind.engine:
            for leaf in leaves.values():
                leaf.grad = None
            total = None
            for y, v in zip(outputs, vs):
                term = (y * self.tensor(v)).sum()
                total = term if total is None else total + term
            total.backward(retain_graph=True)
            return {n: leaves[n].grad for n in wanted}
        import torch

        pairs = [(y, self.tensor(v)) for y, v in zip(outputs, vs) if y.requires_grad]
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


def to_numpy(t) -> np.ndarray | None:
    """A torch or engine tensor (or None) as a float64 NumPy array (or None)."""
    if t is None:
        return None
    if hasattr(t, "detach") and hasattr(t, "cpu"):  # torch (bfloat16 has no NumPy view)
        return to_float64(t)
    return to_float64(getattr(t, "data", t))   # an engine tensor's NumPy array
