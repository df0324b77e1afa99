"""The engine witness: the formula rebuilt on gradcheck's own reverse-mode engine through
the rule table (forward: ``numpy`` column; VJP and ``grad_fn`` name: ``engine`` column),
driven exactly as the torch witness drives PyTorch."""

from __future__ import annotations

import numpy as np

from ..engine import Tensor, ops
from ..dtypes import to_numpy
from ..evaluation import Evaluation
from .drive import drive


def _apply(node, args):
    # the engine's op of the row's name, called as a user calls it (keywords by name)
    return getattr(ops, node.op)(*args, **dict(node.params))


def run(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str,
        reference=None) -> Evaluation:
    leaves = {s.name: Tensor(np.asarray(point[s.name], dtype=dtype),
                             requires_grad=s.requires_grad) for s in case.inputs}
    return drive(case, leaves, _apply, lambda a: Tensor(np.asarray(a, dtype=dtype)), v,
                 to_numpy)
