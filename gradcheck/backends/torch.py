"""The torch witness: the formula rebuilt in PyTorch through the rule table's ``torch``
column, then ``y.backward(v)`` (``y.backward()`` for a scalar case), ``retain_grad()`` on
the named intermediates, and the ``grad_fn`` graph walked through ``next_functions``."""

from __future__ import annotations

import numpy as np
import torch

from ..evaluation import Evaluation
from ..rules import REDUCTION, RULES
from ..tree import fold
from . import grad_fn_chain

DTYPES = {"float64": torch.float64, "float32": torch.float32}
# Operators accept Python numbers as they are; functions get 0-d tensors of the run dtype.
_OPERATORS = {"add", "sub", "mul", "div", "pow", "neg", "lt", "le", "gt", "ge"}


def build(case, point: dict[str, np.ndarray], dtype: str):
    """Forward in torch: (output, leaves by name, retained lets by name)."""
    tdtype = DTYPES[dtype]
    leaves = {s.name: torch.tensor(point[s.name], dtype=tdtype, device=case.device,
                                   requires_grad=s.requires_grad) for s in case.inputs}
    retained: dict[str, torch.Tensor] = {}

    def visit(node, args):
        if node.op == "input":
            return leaves[node.name]
        if node.op == "const":
            return node.const
        if node.op == "let":
            value = args[0]
            if node.name in case.retain_grad:
                if isinstance(value, torch.Tensor) and value.requires_grad:
                    value.retain_grad()
                retained[node.name] = value
            return value
        rule = RULES[node.op]
        if node.op not in _OPERATORS:
            args = [a if isinstance(a, torch.Tensor) else
                    torch.tensor(a, dtype=tdtype, device=case.device) for a in args]
        if rule.kind == REDUCTION:
            return rule.torch(args[0], node.axis, node.keepdims)
        return rule.torch(*args)

    out = fold(case.output, visit)
    return out, leaves, retained


def _numpy(t) -> np.ndarray | None:
    return None if t is None else t.detach().cpu().to(torch.float64).numpy().copy()


def run(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str) -> Evaluation:
    y, leaves, retained = build(case, point, dtype)
    if isinstance(case.gradient, str) and case.gradient == "scalar":
        y.backward()
    else:
        y.backward(torch.tensor(np.asarray(v), dtype=DTYPES[dtype], device=case.device))
    return Evaluation(
        value=_numpy(y),
        grads={s.name: _numpy(leaves[s.name].grad) for s in case.inputs if s.requires_grad},
        retained={n: _numpy(getattr(retained[n], "grad", None)) for n in case.retain_grad},
        grad_fn=grad_fn_chain(y),
    )
