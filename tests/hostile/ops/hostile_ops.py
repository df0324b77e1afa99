"""A project module of the hostile op corpus: it holds real ops (a case may name them)
and, beside them, other modules' code it merely imported (a case may not call that)."""

import functools
import os
from os import system  # noqa: F401  (what a case must not reach through this module)

import torch

sneaky = functools.partial(os.system, "echo pwned > hostile_ops_marker_partial")


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def square(x):
    return x * x


# torch.library ops: accepted wherever they are defined (they run on tensors)
aten_sin = torch.ops.aten.sin


@torch.library.custom_op("gradcheck_hostile::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


def _cube_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _cube_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return 3 * x * x * g


cube.register_autograd(_cube_backward, setup_context=_cube_setup)


class Holder:
    """A class defined here whose attributes are another module's code."""

    os = os
    run = staticmethod(os.system)

    @staticmethod
    def square(x):
        return x * x
