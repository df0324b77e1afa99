"""Convolutions and pooling (conv1d, conv2d, avg_pool2d, max_pool2d): rows of the rule table.

The rows are appended to the table by :mod:`gradcheck.rules.table` (``ROWS``, in table
order). Their columns are in :mod:`.columns` (shapes, forwards, SymPy meanings, torch
calls, max pooling's selector and hazard), :mod:`.vjps` (PyTorch's backward formulas,
for the engine) and :mod:`.tensor` (the exact adjoints, for the tensor-level reference).
A convolution is of the bilinear family, as matmul; the poolings are the pooling family
(avg pooling linear, max pooling a selection, as the ``max`` row): the rounding model
has a module for each (:mod:`gradcheck.bounds`).
"""

from __future__ import annotations

from . import columns as cc
from . import tensor as ct
from .vjps import avg_pool2d_vjp, conv_input_vjp, conv_weight_vjp, max_pool2d_vjp
from ..row import BILINEAR, INT, INTS, POOLING, Param, Rule
from ..vjps import engine_rule

# torch's parameters after the tensors (no bias: it is `+ b` in the formula)
CONV_PARAMS = (Param("stride", INTS, 1), Param("padding", INTS, 0),
               Param("dilation", INTS, 1), Param("groups", INT, 1))
POOL_PARAMS = (Param("kernel_size", INTS, None), Param("stride", INTS, None))


def convolution_row(*, dimensions: int, example: str) -> Rule:
    """The convolution of ``dimensions`` spatial axes (conv1d, conv2d)."""
    d = dimensions
    size, kernel = ("L", "k") if d == 1 else ("H, W", "kH, kW")
    return Rule(
        name=f"conv{d}d", family=BILINEAR, arity=2, sympy=cc.obj_conv, numpy=cc.np_conv,
        torch=cc.torch_conv(d), params=CONV_PARAMS, shape=cc.conv_shape(d), rounding=1,
        example=example,
        doc=f"{d}-d convolution (cross-correlation) of x (N, C_in, {size}) with w "
            f"(C_out, C_in / groups, {kernel})",
        engine=engine_rule("ConvolutionBackward0", conv_input_vjp, conv_weight_vjp),
        tensor=ct.CONV)


ROWS: list[Rule] = [
    convolution_row(dimensions=1, example="conv1d(seq, w1, padding=2)"),
    convolution_row(dimensions=2, example="conv2d(img, k, padding=1)"),
    Rule(
        name="avg_pool2d", family=POOLING, arity=1, sympy=cc.obj_avg_pool2d,
        numpy=cc.np_avg_pool2d, torch=cc.torch_pool("avg_pool2d"), params=POOL_PARAMS,
        shape=cc.pool_shape, rounding=1, example="avg_pool2d(img, 2)",
        doc="mean over kernel_size windows of x (N, C, H, W), stride (default: the kernel)",
        engine=engine_rule("AvgPool2DBackward0", avg_pool2d_vjp), tensor=ct.AVG_POOL),
    Rule(
        name="max_pool2d", family=POOLING, arity=1, sympy=cc.obj_max_pool2d,
        numpy=cc.np_max_pool2d, torch=cc.torch_pool("max_pool2d"), params=POOL_PARAMS,
        shape=cc.pool_shape, hazard=cc.max_pool2d_gap, selector=cc.max_pool2d_pick, rounding=0,
        example="max_pool2d(img, 2, stride=1)",
        doc="largest element of kernel_size windows of x (N, C, H, W), stride (default: "
                                                                               "the kernel)",
        engine=engine_rule("MaxPool2DWithIndicesBackward0", max_pool2d_vjp), tensor=ct.MAX_POOL),
]

#: The convolutions: the bilinear rows whose cotangents the rounding bound computes one
#: at a time (their VJPs take no leading batch of cotangents), and its pooling rows.
CONVOLUTIONS = frozenset(r.name for r in ROWS if r.family == BILINEAR)
POOLS = frozenset(r.name for r in ROWS if r.family == POOLING)
