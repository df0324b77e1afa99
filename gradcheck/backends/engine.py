"""The engine witness: the formula rebuilt on gradcheck's own reverse-mode engine through
the rule table (forward: ``numpy`` column; VJP and ``grad_fn`` name: ``engine`` column),
driven exactly as the torch witness drives PyTorch."""

from __future__ import annotations

import numpy as np

from ..engine import Tensor, ops
from ..evaluation import Evaluation
from ..rules import REDUCTION, RULES
from ..tree import fold
from . import grad_fn_chain


def build(case, point: dict[str, np.ndarray], dtype: str):
    """Forward on the engine: (output, leaves by name, retained lets by name)."""
    leaves = {s.name: Tensor(np.asarray(point[s.name], dtype=dtype),
                             requires_grad=s.requires_grad) for s in case.inputs}
    retained: dict[str, Tensor] = {}

    def visit(node, args):
        if node.op == "input":
            return leaves[node.name]
        if node.op == "const":
            return node.const
        if node.op == "let":
            value = args[0]
            if node.name in case.retain_grad:
                if isinstance(value, Tensor) and value.requires_grad:
                    value.retain_grad()
                retained[node.name] = value
            return value
        if RULES[node.op].kind == REDUCTION:
            return getattr(ops, node.op)(args[0], axis=node.axis, keepdims=node.keepdims)
        return getattr(ops, node.op)(*args)

    return fold(case.output, visit), leaves, retained


def _numpy(t) -> np.ndarray | None:
    return None if t is None else np.asarray(t.data, dtype=np.float64).copy()


def run(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str) -> Evaluation:
    y, leaves, retained = build(case, point, dtype)
    if isinstance(case.gradient, str) and case.gradient == "scalar":
        y.backward()
    else:
        y.backward(Tensor(np.asarray(v, dtype=dtype)))
    return Evaluation(
        value=_numpy(y),
        grads={s.name: _numpy(leaves[s.name].grad) for s in case.inputs if s.requires_grad},
        retained={n: _numpy(getattr(retained[n], "grad", None)) for n in case.retain_grad},
        grad_fn=grad_fn_chain(y),
    )
