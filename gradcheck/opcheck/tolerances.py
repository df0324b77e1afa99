"""The per-element tolerances of an op's values and vᵀJ at one point (the table in
:mod:`gradcheck.tolerance`): the rounding-error model of the reference formula in the
op's dtype, or twice what PyTorch's own autograd of that formula errs by (the peer),
whichever is larger."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..dtypes import to_numpy
from ..tolerance import model_tolerance, peer_tolerance, with_nondeterminism
from .exact import sum_outputs


def _tensor_like(like, array):
    """``array`` as a torch tensor of ``like``'s dtype and device."""
    import torch

    return torch.tensor(np.asarray(array), dtype=like.dtype, device=like.device)


class OpTolerance:
    """``tolerance(point, vs, exact)`` for one op case in one dtype. The forward passes
    (of the rounding bound and of the peer) are kept for the current point and reused
    for every cotangent there: call :meth:`start_point` when the point changes."""

    def __init__(self, case, dtype: str):
        self.case, self.dtype = case, dtype
        # each output of the op as a formula case of its own, driven with its v: for the
        # rounding-error bounds and the peer baseline
        self.subcases = [dataclasses.replace(case, output=node, retain_grad=(),
                                             outputs=(node,), gradient="random")
                         for node in case.outputs]
        self.at_point: dict = {}

    def start_point(self) -> None:
        self.at_point = {}

    def __call__(self, point: dict, vs: list, exact: dict | None = None) -> dict:
        """Per-element tolerances of the op's values (``out{k}``) and vᵀJ (``x.grad``):
        the rounding-error model, and, given the exact quantities, the peer baseline."""
        from ..rounding import error_bounds

        bounds = [error_bounds(self.subcases[k], point, v, self.dtype, self.at_point)
                  for k, v in enumerate(vs)]
        model = with_nondeterminism(model_tolerance(sum_outputs(bounds), self.dtype),
                                    self.case.nondet_tol)
        if exact is None:
            return model
        peer = self.peer(point, vs)
        return model if peer is None else peer_tolerance(model, peer, exact, self.dtype)

    def peer(self, point: dict, vs: list) -> dict | None:
        """PyTorch's autograd of the reference formula, in the op's dtype, at this point:
        values and vᵀJ as quantities; None where torch cannot run it (an operation it
        lacks in this dtype or on this device)."""
        import torch

        from ..backends.drive import rebuild
        from ..backends.torch import applier, leaves as torch_leaves

        wanted = [s.name for s in self.case.inputs if s.requires_grad]
        per_output = []
        try:
            if "peer" not in self.at_point:   # the graph once per point, kept for each v
                leaves = torch_leaves(self.case, point, self.dtype)
                apply = applier(self.case, self.dtype)
                self.at_point["peer"] = leaves, [rebuild(node, leaves, apply)
                                                 for node in self.case.outputs]
            leaves, ys = self.at_point["peer"]
            for y, v in zip(ys, vs):
                grads = [None] * len(wanted)
                if y.requires_grad and wanted:
                    grads = torch.autograd.grad(
                        y, [leaves[n] for n in wanted], _tensor_like(y, v),
                        retain_graph=True, allow_unused=True)
                per_output.append(dict(value=to_numpy(y), **{
                    f"{n}.grad": to_numpy(g) for n, g in zip(wanted, grads)}))
        except Exception:   # no peer: the rounding-error model alone then decides
            return None
        return sum_outputs(per_output)
