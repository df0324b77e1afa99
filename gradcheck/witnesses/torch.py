"""The torch witness: the formula rebuilt in PyTorch through the rule table's ``torch``
column, then ``y.backward(v)`` (``y.backward()`` for a scalar case), ``retain_grad()`` on
the named intermediates, and the ``grad_fn`` graph walked through ``next_functions``."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from ..base.dtypes import to_numpy, torch_dtype
from ..base.evaluation import Evaluation
from ..formula.tree import float_operands
from .drive import drive


def _apply(node, args, dtype, device):
    # Operators (and torch's Scalar overloads) take a Python number as it is, as a user
    # writes 2 * x; functions get a 0-d tensor of the run's dtype (the row's ``numbers``).
    if not node.rule.numbers:
        args = [a if isinstance(a, torch.Tensor) else
                torch.tensor(a, dtype=dtype, device=device) for a in args]
    # an integer or boolean tensor in float arithmetic: the run's float dtype (torch
    # promotes x * idx so; sin(idx) alone would take torch's default dtype instead)
    args = [a.to(dtype) if promote and isinstance(a, torch.Tensor)
            and not a.is_floating_point() else a
            for a, promote in zip(args, float_operands(node))]
    return node.call("torch", args)


def input_dtype(spec, dtype: str):
    """The torch dtype of input ``spec`` in a run in ``dtype``: its own integer or
    boolean dtype, else the run's."""
    return getattr(torch, spec.dtype) if spec.dtype is not None else torch_dtype(dtype)


def leaves(case, point: dict[str, np.ndarray], dtype: str) -> dict:
    """The case's inputs as torch leaves in ``dtype`` on the case's device (integer and
    boolean inputs in their own dtype, never requiring grad)."""
    return {s.name: torch.tensor(point[s.name], dtype=input_dtype(s, dtype),
                                 device=case.device, requires_grad=s.requires_grad)
            for s in case.inputs}


def applier(case, dtype: str):
    """``(node, args) -> tensor``: the rule table's torch column in ``dtype``."""
    tdtype = torch_dtype(dtype)
    return lambda node, args: _apply(node, args, tdtype, case.device)


def run(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str,
        reference=None, pins: dict | None = None) -> Evaluation:
    """``pins``: rows' arguments pinned to another witness's values (judging the branch
    it took, :mod:`gradcheck.checking.decisions`); without them, the deciding rows' arguments
    are recorded."""
    # every rule's torch column runs forward and backward on CPU in all four dtypes
    # (float16 and bfloat16 included; tests/test_dtypes.py runs each of them)
    tdtype, device = torch_dtype(dtype), case.device
    with _ieee_float32(device):
        return drive(case, leaves(case, point, dtype), applier(case, dtype),
                     lambda a: torch.tensor(np.asarray(a), dtype=tdtype, device=device),
                     v, to_numpy, order=None if pins else order, pins=pins)


def order(node, x):
    """The positions torch's sort (or topk) of ``x`` takes, as the torch column calls it
    (torch's sort is not stable: this is the order it chose among equal keys)."""
    if node.op == "topk":
        return torch.topk(x, node.param("k"), dim=node.axis[0]).indices.cpu().numpy()
    return torch.sort(x, dim=node.axis[0],
                      descending=bool(node.param("descending"))).indices.cpu().numpy()


@contextlib.contextmanager
def _ieee_float32(device):
    """cuDNN runs float32 convolutions in TF32 (a 10-bit significand) unless told
    otherwise: on a CUDA device the formula is run in float32 itself, which is what the
    rounding model bounds (the setting is restored after)."""
    cudnn = torch.backends.cudnn
    if not str(device).startswith("cuda"):
        yield
        return
    kept = cudnn.allow_tf32
    cudnn.allow_tf32 = False
    try:
        yield
    finally:
        cudnn.allow_tf32 = kept
