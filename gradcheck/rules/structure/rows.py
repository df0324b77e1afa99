"""Structural rows: shape, indexing and combining (reshape, x[...], concat...): exact linear maps.

Each row moves, copies or drops elements (kind ``structure``): it rounds nothing, and
the error bound of its result is the map applied to its operand's bound
(:mod:`gradcheck.bounds.model` handles the kind, not the rows). Columns in
:mod:`.structure_columns` (forwards, shapes, torch), :mod:`.structure_vjps` (engine:
PyTorch's backward formulas) and :mod:`.structure_tensor` (the exact adjoints of the
tensor-level reference). The rows are appended to the table by :mod:`.table` (``ROWS``,
in table order); ``transpose``, older, is in the table itself.
"""

from __future__ import annotations

import numpy as np

from . import columns as c
from . import tensor as tt
from . import vjps as v
from . import take as tk
from ..columns import torch_fn as t
from ..row import AXIS, INT, INTS, KEY, NUMBER, STRUCTURE, Param, Rule, TensorRule
from ..vjps import engine_rule as e


def structural(name, arity, numpy, torch, shape, params, grad_fn, vjp, tensor,
               sympy=None, **row):
    """A row of the family: its SymPy meaning is its NumPy forward on object arrays."""
    return Rule(name, STRUCTURE, arity, sympy or c.objects(numpy, len(params)), numpy,
                torch, params=params, shape=shape, rounding=0,
                engine=e(grad_fn, vjp, saves=False), tensor=TensorRule((tensor,)), **row)


def taking(name, numpy, sympy, torch, shape, grad_fn, vjp, tensor, **row):
    """A row that takes x's elements at an integer input's indices (exact constants: no
    derivative); PyTorch's node saves the indices."""
    return Rule(name, STRUCTURE, 2, sympy, numpy, torch, params=(Param("axis", INT, 0),),
                shape=shape, rounding=0, domain=("real", "integer"),
                engine=e(grad_fn, vjp, None), tensor=TensorRule((tensor, None)), **row)


ROWS: list[Rule] = [
    # shape: the same elements, another shape (views where PyTorch makes views)
    structural("reshape", 1, c.np_reshape, t("reshape"), c.reshape_shape,
               (Param("shape", INTS),), "ViewBackward0", v.reshape_vjp, tt.reshape_vjp,
               doc="the elements in another shape (one size may be -1)",
               example="reshape(x, [2, -1])"),
    structural("flatten", 1, c.np_flatten, t("flatten"), c.flatten_shape,
               (Param("start", INT, 0), Param("end", INT, -1)), "ViewBackward0",
               v.reshape_vjp, tt.reshape_vjp, doc="axes start to end as one",
               example="flatten(x, start=0, end=-1)"),
    structural("squeeze", 1, c.np_squeeze, c.torch_squeeze, c.squeeze_shape,
               (Param("axis", INT),), v.squeeze_name, v.reshape_vjp, tt.reshape_vjp,
               doc="drop an axis of size 1 (None: every one)",
               example="squeeze(unsqueeze(x, 0), 0)"),
    structural("unsqueeze", 1, c.np_unsqueeze, t("unsqueeze"), c.unsqueeze_shape,
               (Param("axis", INT),), "UnsqueezeBackward0", v.reshape_vjp, tt.reshape_vjp,
               doc="a new axis of size 1", example="unsqueeze(x, 1)"),
    structural("permute", 1, c.np_permute, t("permute"), c.permute_shape,
               (Param("axes", INTS),), "PermuteBackward0", v.permute_vjp, tt.permute_vjp,
               doc="the axes in another order", example="permute(x, [1, 0])"),
    structural("expand", 1, c.np_expand, c.torch_expand, c.expand_shape,
               (Param("shape", INTS),), "ExpandBackward0", v.expand_vjp, tt.expand_vjp,
               doc="axes of size 1 repeated, new ones in front (-1 keeps a size)",
               example="expand(v, [3, -1])"),
    # copies: the elements moved, or some replaced
    structural("flip", 1, c.np_flip, t("flip"), c.flip_shape,
               (Param("axis", AXIS),), "FlipBackward0", v.flip_vjp, tt.flip_vjp,
               doc="the order reversed along axis (None: every axis)",
               example="flip(x, axis=1)"),
    structural("roll", 1, c.np_roll, c.torch_roll, c.roll_shape,
               (Param("shift", INTS), Param("axis", INTS)), "RollBackward0", v.roll_vjp,
               tt.roll_vjp, doc="elements shifted cyclically along axis (None: flat)",
               example="roll(x, 1, axis=1)"),
    structural("pad", 1, c.np_pad, c.torch_pad, c.pad_shape,
               (Param("widths", INTS), Param("value", NUMBER, 0.0)),
               "ConstantPadNdBackward0", v.pad_vjp, tt.pad_vjp, sympy=c.sym_pad,
               doc="value added before and after each axis ([before, after] per axis)",
               example="pad(x, [[0, 0], [1, 2]], value=0)"),
    structural("tril", 1, np.tril, t("tril"), c.triangle_shape, (Param("k", INT, 0),),
               "TrilBackward0", v.tril_vjp, tt.tril_vjp,
               doc="zeros above the k-th diagonal (the last two axes)",
               example="tril(x, k=0)"),
    structural("triu", 1, np.triu, t("triu"), c.triangle_shape, (Param("k", INT, 0),),
               "TriuBackward0", v.triu_vjp, tt.triu_vjp,
               doc="zeros below the k-th diagonal (the last two axes)",
               example="triu(x, k=1)"),
    # indexing: written x[0], x[:, 1:3], x[..., ::-1], x[:, None] (the engine records
    # PyTorch's select, slice, unsqueeze and alias views, a flip before a negative step)
    structural("index", 1, c.np_index, c.torch_index, c.index_shape,
               (Param("key", KEY),), c.index_name, v.index_vjp, tt.index_vjp,
               doc="x[...]: ints, slices (negative steps too), None, ...",
               example="x[:, 1:3]"),
    # by an integer input's indices (x[idx], x[:, idx], x[..., idx] are take)
    taking("take", tk.np_take, tk.sym_take, tk.torch_take, tk.take_shape, "IndexBackward0",
           tk.take_vjp, tk.take_tensor, example="x[idx]",
           doc="x's elements at integer indices along axis (written x[:, idx])"),
    taking("gather", tk.np_gather, tk.sym_gather, tk.torch_gather, tk.gather_shape,
           "GatherBackward0", tk.gather_vjp, tk.gather_tensor,
           example="gather(x, idx2, axis=1)",
           doc="out[i][j] = x[i][idx[i][j]] along axis (PyTorch's gather)"),
    taking("take_along_axis", tk.np_take_along, tk.sym_take_along, tk.torch_take_along,
           tk.take_along_shape, "GatherBackward0", tk.take_along_vjp, tk.take_along_tensor,
           example="take_along_axis(x, idx2, axis=1)",
           doc="gather with broadcasting (NumPy's take_along_axis)"),
    # combining
    structural("concat", 1, c.np_concat, c.torch_concat, c.concat_shape,
               (Param("axis", INT, 0),), "CatBackward0", v.concat_vjp, tt.concat_vjp,
               variadic="list", doc="tensors joined along an existing axis",
               example="concat([x, y], axis=-1)"),
    structural("stack", 1, c.np_stack, c.torch_stack, c.stack_shape,
               (Param("axis", INT, 0),), "StackBackward0", v.stack_vjp, tt.stack_vjp,
               variadic="list", doc="tensors joined along a new axis",
               example="stack([x, y], axis=0)"),
    structural("split", 1, c.np_split, c.torch_split, c.split_shape,
               (Param("sizes", INTS), Param("axis", INT, 0), Param("piece", KEY)),
               "SplitWithSizesBackward0", v.split_vjp, tt.split_vjp,
               doc="one piece of x cut along axis into the sizes (written split(...)[i])",
               example="split(x, [1, 2], axis=0)[0]"),
]
