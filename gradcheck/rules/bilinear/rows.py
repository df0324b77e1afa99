"""The bilinear family's matrix products: matmul (``@``) and dot. Their sums round; the
rounding model bounds them as bilinear maps (:mod:`gradcheck.bounds`). Columns in
:mod:`.columns`, :mod:`.vjps` and :mod:`.tensor`. The rows are appended to the table by
:mod:`gradcheck.rules.table` (``ROWS``, in table order); the convolutions, bilinear too,
are in :mod:`gradcheck.rules.conv`.
"""

from __future__ import annotations

import numpy as np

from . import columns as bc, tensor as bt, vjps as bv
from ...base.shapes import matmul_shape
from ..columns import torch_fn
from ..row import BILINEAR, Rule
from ..tensor import tensor_rule
from ..vjps import engine_rule

ROWS: list[Rule] = [
    Rule(
        name="matmul", family=BILINEAR, arity=2, sympy=bc.obj_matmul, numpy=bc.np_matmul,
        torch=lambda a, b: a @ b, doc="a @ b", example="x @ W", symbol="@", shape=matmul_shape,
        engine=engine_rule(bv.matmul_name, bv.matmul_a, bv.matmul_b),
        tensor=tensor_rule(bt.matmul_a, bt.matmul_b)),
    Rule(
        name="dot", family=BILINEAR, arity=2, sympy=bc.obj_dot, numpy=np.dot,
        torch=torch_fn("dot"), doc="inner product of two vectors", example="dot(v, u)",
        shape=bc.dot_shape,
        engine=engine_rule("DotBackward0", lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a),
        tensor=tensor_rule(bt.dot_a, bt.dot_b)),
]
