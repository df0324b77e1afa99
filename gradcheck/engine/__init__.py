"""gradcheck's own reverse-mode autodiff engine, with PyTorch's semantics.

``Tensor`` wraps a NumPy array; every operation is a row of :mod:`gradcheck.rules`
(forward: the ``numpy`` column; VJP and ``grad_fn`` name: the ``engine`` column).
"""

from .function import Function
from .graph import AccumulateGrad, Node, is_grad_enabled, no_grad
from .ops import *  # noqa: F401,F403  (exp, log, sum, matmul, ...: every primitive)
from .ops import __all__ as _ops_all
from .tensor import Tensor, tensor

__all__ = ["Tensor", "tensor", "Function", "no_grad", "is_grad_enabled", "Node",
           "AccumulateGrad", *_ops_all]
