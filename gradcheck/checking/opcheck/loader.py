"""A user's custom op: how it is driven (:class:`OpKind`, :class:`Runner`) once imported.

Where an op may come from and how it is imported is :mod:`gradcheck.project.imports`
(the one place gradcheck imports code on purpose; a traced reference function is
imported there too); its names are re-exported here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...base.dtypes import to_numpy, torch_dtype  # noqa: F401  (to_numpy: op checks use it)
from ...base.errors import GradcheckError
from ...project.imports import (ALLOW_KEY, OpImportError, OpRefused,  # noqa: F401
                                is_library_op, load, op_folder, refuse)
from ...project.settings import project_root  # noqa: F401  (the one definition; op_folder's)


class OpDtypeError(GradcheckError):
    """The op cannot run in the case's dtype (an engine op in float16 or bfloat16)."""


def no_complex(name) -> OpDtypeError:
    """Why an engine op is not checked on complex inputs (a skip, as for its dtypes)."""
    return OpDtypeError(f"op {name} is a gradcheck.engine Function, which has no complex "
                        "tensors; write it as a torch.autograd.Function to check it on "
                        "complex inputs")


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

    from ...engine import Function as EngineFunction

    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
        return OpKind(obj, engine=False, function=True)
    if isinstance(obj, type) and issubclass(obj, EngineFunction):
        return OpKind(obj, engine=True, function=True)
    if callable(obj):
        return OpKind(obj, engine=False, function=False)
    raise OpImportError(f"op {obj!r} is neither an autograd Function nor callable")


def arguments(case) -> tuple[list, list]:
    """What the op is called with, as (positional, keywords): each an
    :class:`~gradcheck.cases.model.OpArgument` (an input's name or a plain value).
    Without ``call``: the inputs in order, then ``args`` (and ``kwargs``)."""
    from ...cases.model import OpArgument

    if case.call is not None:
        return list(case.call[0]), list(case.call[1])
    return ([OpArgument(input=s.name) for s in case.inputs]
            + [OpArgument(value=a) for a in case.args],
            [(k, OpArgument(value=v)) for k, v in case.kwargs.items()])


def wanted(case) -> list[str]:
    """The inputs whose gradients the op is checked for: those it is given that require
    grad (a reference-only input is none of the op's business)."""
    passed = set(case.passed)
    return [s.name for s in case.inputs if s.requires_grad and s.name in passed]


class Runner:
    """Calls one op on one point, in one dtype and device, and takes gradients."""

    def __init__(self, case, kind: OpKind, dtype: str, device: str):
        from ...witnesses.registry import skip_reason

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
            from ...engine import Tensor

            if any(s.complex for s in self.case.inputs):
                self.tensor(None, complex=True)   # (refused: the engine has no complex)
            return {s.name: Tensor(np.asarray(point[s.name], dtype=s.dtype or self.dtype),
                                   requires_grad=s.requires_grad)
                    for s in self.case.inputs}
        import torch

        # the point is already rounded to the dtype: the leaves hold it exactly; a
        # complex input's (re, im) pairs become a complex leaf of its own
        # (view_as_complex, copied), whose .grad is then the op's complex gradient
        return {s.name: (self.tensor(point[s.name], complex=True)
                         .requires_grad_(s.requires_grad)) if s.complex else
                torch.tensor(point[s.name], device=self.device,
                             dtype=getattr(torch, s.dtype) if s.dtype
                             else torch_dtype(self.dtype),
                             requires_grad=s.requires_grad)
                for s in self.case.inputs}

    def arguments(self) -> tuple[list, list]:
        return arguments(self.case)

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
        return wanted(self.case)

    def tensor(self, array: np.ndarray, complex: bool = False):
        """``array`` as a tensor of the op's kind in the run's dtype; ``complex``: an
        array in the layout (a last axis of (re, im) pairs) as the complex tensor it
        holds (complex128 in float64, complex64 in float32), one of its own."""
        if self.kind.engine:
            from ...engine import Tensor

            if complex:
                raise no_complex(self.kind.name)
            return Tensor(np.asarray(array, dtype=self.dtype))
        import torch

        t = torch.tensor(np.asarray(array), dtype=torch_dtype(self.dtype),
                         device=self.device)
        return torch.view_as_complex(t).clone() if complex else t

    def cotangents(self, vs: list) -> list:
        """The cotangents ``vs`` (arrays in the outputs' shapes, a complex output's in
        the layout) as tensors: a complex output's complex, whose ``view_as_real`` is
        the real cotangent (PyTorch's convention: dL = Re(sum(conj(v) dw)))."""
        outputs = self.case.outputs
        return [self.tensor(v, complex=k < len(outputs) and outputs[k].complex)
                for k, v in enumerate(vs)]

    def direction(self, name: str, u: np.ndarray):
        """A direction ``u`` for input ``name`` (a tangent; a complex input's in the
        layout) as a tensor like the input's own."""
        return self.tensor(u, complex=self.case.input[name].complex)

    def vjp(self, leaves: dict, outputs: tuple, vs: list[np.ndarray] | None,
            create_graph: bool = False, tensors: list | None = None,
            names: list[str] | None = None) -> dict:
        """vᵀJ through autograd, by input name (None where no gradient flows).

        ``tensors``: the cotangents as tensors already made (to see whether backward
        modifies them, or to differentiate with respect to them); else made from ``vs``.
        ``names``: the inputs whose gradients are taken (else every one checked).
        """
        wanted = self.wanted if names is None else names
        tensors = self.cotangents(vs) if tensors is None else tensors
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
        grads = self.kind.obj.backward(ctx, *self.cotangents(vs))
        return grads if isinstance(grads, tuple) else (grads,)

