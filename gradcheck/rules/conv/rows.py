"""Convolutions and pooling (conv1d, conv2d, avg_pool2d, max_pool2d): rows of the rule table.

The rows are appended to the table by :mod:`.table` (``ROWS``, in table order). Their
columns are in :mod:`.conv_columns` (shapes, forwards, SymPy meanings, torch calls, max
pooling's selector and hazard), :mod:`.conv_vjps` (PyTorch's backward formulas, for the
engine) and :mod:`.conv_tensor` (the exact adjoints, for the tensor-level reference).
A convolution is bilinear and avg pooling linear, as matmul: the rounding bound treats
them so (:mod:`gradcheck.bounds.model`); max pooling is a selection, as the ``max`` row.
"""

from __future__ import annotations

from . import columns as cc
from . import tensor as ct
from .vjps import avg_pool2d_vjp, conv_input_vjp, conv_weight_vjp, max_pool2d_vjp
from ..row import INT, INTS, LINALG, Param, Rule
from ..vjps import engine_rule

# torch's parameters after the tensors (no bias: it is `+ b` in the formula)
CONV_PARAMS = (Param("stride", INTS, 1), Param("padding", INTS, 0),
               Param("dilation", INTS, 1), Param("groups", INT, 1))
POOL_PARAMS = (Param("kernel_size", INTS, None), Param("stride", INTS, None))


def _conv(d: int, example: str) -> Rule:
    size, kernel = ("L", "k") if d == 1 else ("H, W", "kH, kW")
    return Rule(f"conv{d}d", LINALG, 2, cc.obj_conv, cc.np_conv, cc.torch_conv(d),
                params=CONV_PARAMS, shape=cc.conv_shape(d), rounding=1, example=example,
                doc=f"{d}-d convolution (cross-correlation) of x (N, C_in, {size}) with w "
                    f"(C_out, C_in / groups, {kernel})",
                engine=engine_rule("ConvolutionBackward0", conv_input_vjp, conv_weight_vjp),
                tensor=ct.CONV)


ROWS: list[Rule] = [
    _conv(1, "conv1d(seq, w1, padding=2)"),
    _conv(2, "conv2d(img, k, padding=1)"),
    Rule("avg_pool2d", LINALG, 1, cc.obj_avg_pool2d, cc.np_avg_pool2d,
         cc.torch_pool("avg_pool2d"), params=POOL_PARAMS, shape=cc.pool_shape,
         rounding=1, example="avg_pool2d(img, 2)",
         doc="mean over kernel_size windows of x (N, C, H, W), stride (default: the kernel)",
         engine=engine_rule("AvgPool2DBackward0", avg_pool2d_vjp), tensor=ct.AVG_POOL),
    Rule("max_pool2d", LINALG, 1, cc.obj_max_pool2d, cc.np_max_pool2d,
         cc.torch_pool("max_pool2d"), params=POOL_PARAMS, shape=cc.pool_shape,
         hazard=cc.max_pool2d_gap, selector=cc.max_pool2d_pick, rounding=0,
         example="max_pool2d(img, 2, stride=1)",
         doc="largest element of kernel_size windows of x (N, C, H, W), stride (default: "
             "the kernel)",
         engine=engine_rule("MaxPool2DWithIndicesBackward0", max_pool2d_vjp),
         tensor=ct.MAX_POOL),
]

#: The rows whose cotangents the rounding bound computes one at a time (their VJPs
#: take no leading batch of cotangents), and its bilinear and pooling rows.
CONVOLUTIONS = frozenset({"conv1d", "conv2d"})
POOLS = frozenset({"avg_pool2d", "max_pool2d"})
