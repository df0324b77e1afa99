"""Structural rows: shape, indexing and combining (reshape, x[...], concat...): exact linear maps.

Each row moves, copies or drops elements (family ``structure``): it rounds nothing, and
the error bound of its result is the map applied to its operand's bound
(:mod:`gradcheck.bounds.model` handles the family, not the rows). Columns in
:mod:`.columns` (forwards, shapes, torch), :mod:`.take` (the rows taking by an integer
input's indices), :mod:`.vjps` (engine: PyTorch's backward formulas) and :mod:`.tensor`
(the exact adjoints of the tensor-level reference). The rows are appended to the table
by :mod:`gradcheck.rules.table` (``ROWS``, in table order; ``TRANSPOSE``, the oldest, at
its own place).
"""

from __future__ import annotations

import numpy as np

from . import columns as sc, take as tk, tensor as st, vjps as sv
from ..columns import torch_fn
from ..row import AXIS, INT, INTS, KEY, NUMBER, STRUCTURE, Param, Rule, TensorRule
from ..vjps import engine_rule


def structural_row(*, name: str, arity: int, numpy, torch, shape, params, grad_fn, vjp,
                   tensor_vjp, sympy=None, keeps_dtype: bool = True, **row) -> Rule:
    """A row of the family: exact (rounding 0), PyTorch's node saves nothing, one engine
    VJP ``vjp`` and one tensor-level adjoint ``tensor_vjp``; its SymPy meaning is its
    NumPy forward on object arrays unless ``sympy`` is given. An integer or boolean
    operand keeps its dtype through it (``keeps_dtype``: False where the row writes
    values of its own or joins several operands)."""
    return Rule(
        name=name, family=STRUCTURE, arity=arity, keeps_dtype=keeps_dtype,
        sympy=sympy or sc.objects(numpy, len(params)), numpy=numpy, torch=torch,
        params=params, shape=shape, rounding=0,
        engine=engine_rule(grad_fn, vjp, saves=False), tensor=TensorRule((tensor_vjp,)),
        **row)


def taking_row(*, name: str, numpy, sympy, torch, shape, grad_fn, vjp, tensor_vjp,
               **row) -> Rule:
    """A row that takes x's elements at an integer input's indices (exact constants: no
    derivative); PyTorch's node saves the indices. An integer or boolean x keeps its
    dtype. Its VJP adds the cotangents of repeated indices one at a time, in the dtype
    (PyTorch's index_add_/scatter_add_ backward): ``scatters``."""
    return Rule(
        name=name, family=STRUCTURE, arity=2, sympy=sympy, numpy=numpy, torch=torch,
        params=(Param("axis", INT, 0),), shape=shape, rounding=0, keeps_dtype=True,
        scatters=True,
        domain=("real", "integer"), engine=engine_rule(grad_fn, vjp, None),
        tensor=TensorRule((tensor_vjp, None)), **row)


def adding_row(*, name: str, numpy, sympy, torch, shape, grad_fn, vjp, tensor_vjp,
               **row) -> Rule:
    """A row that adds src into x at an integer input's indices (scatter_add,
    index_add): linear in x (cotangent ḡ) and src; the indices get no derivative."""
    return Rule(
        name=name, family=STRUCTURE, arity=3, sympy=sympy, numpy=numpy, torch=torch,
        params=(Param("axis", INT, 0),), shape=shape, rounding=0,
        domain=("real", "integer", "real"),
        engine=engine_rule(grad_fn, tk.added_x_vjp, None, vjp),
        tensor=TensorRule((tk.added_x_tensor, None, tensor_vjp)), **row)


#: The oldest structural row, kept at its place in the table's order (after dot).
TRANSPOSE = structural_row(
    name="transpose", arity=1, numpy=sc.np_transpose, torch=sc.torch_transpose,
    shape=sc.transpose_shape, params=(Param("dim0", INT, -2), Param("dim1", INT, -1)),
    grad_fn="TransposeBackward0", vjp=sv.transpose_vjp, tensor_vjp=st.transpose_vjp,
    doc="swap two axes (the last two by default)", example="transpose(x)")

ROWS: list[Rule] = [
    # shape: the same elements, another shape (views where PyTorch makes views)
    structural_row(
        name="reshape", arity=1, numpy=sc.np_reshape, torch=torch_fn("reshape"),
        shape=sc.reshape_shape, params=(Param("shape", INTS),), grad_fn="ViewBackward0",
        vjp=sv.reshape_vjp, tensor_vjp=st.reshape_vjp,
        doc="the elements in another shape (one size may be -1)", example="reshape(x, [2, -1])"),
    structural_row(
        name="flatten", arity=1, numpy=sc.np_flatten, torch=torch_fn("flatten"),
        shape=sc.flatten_shape, params=(Param("start", INT, 0), Param("end", INT, -1)),
        grad_fn="ViewBackward0", vjp=sv.reshape_vjp, tensor_vjp=st.reshape_vjp,
        doc="axes start to end as one", example="flatten(x, start=0, end=-1)"),
    structural_row(
        name="squeeze", arity=1, numpy=sc.np_squeeze, torch=sc.torch_squeeze,
        shape=sc.squeeze_shape, params=(Param("axis", INT),), grad_fn=sv.squeeze_name,
        vjp=sv.reshape_vjp, tensor_vjp=st.reshape_vjp,
        doc="drop an axis of size 1 (None: every one)", example="squeeze(unsqueeze(x, 0), 0)"),
    structural_row(
        name="unsqueeze", arity=1, numpy=sc.np_unsqueeze, torch=torch_fn("unsqueeze"),
        shape=sc.unsqueeze_shape, params=(Param("axis", INT),), grad_fn="UnsqueezeBackward0",
        vjp=sv.reshape_vjp, tensor_vjp=st.reshape_vjp, doc="a new axis of size 1",
        example="unsqueeze(x, 1)"),
    structural_row(
        name="permute", arity=1, numpy=sc.np_permute, torch=torch_fn("permute"),
        shape=sc.permute_shape, params=(Param("axes", INTS),), grad_fn="PermuteBackward0",
        vjp=sv.permute_vjp, tensor_vjp=st.permute_vjp, doc="the axes in another order",
        example="permute(x, [1, 0])"),
    structural_row(
        name="expand", arity=1, numpy=sc.np_expand, torch=sc.torch_expand, shape=sc.expand_shape,
        params=(Param("shape", INTS),), grad_fn="ExpandBackward0", vjp=sv.expand_vjp,
        tensor_vjp=st.expand_vjp,
        doc="axes of size 1 repeated, new ones in front (-1 keeps a size)",
        example="expand(v, [3, -1])"),
    # copies: the elements moved, or some replaced
    structural_row(
        name="flip", arity=1, numpy=sc.np_flip, torch=torch_fn("flip"), shape=sc.flip_shape,
        params=(Param("axis", AXIS),), grad_fn="FlipBackward0", vjp=sv.flip_vjp,
        tensor_vjp=st.flip_vjp, doc="the order reversed along axis (None: every axis)",
        example="flip(x, axis=1)"),
    structural_row(
        name="roll", arity=1, numpy=sc.np_roll, torch=sc.torch_roll, shape=sc.roll_shape,
        params=(Param("shift", INTS), Param("axis", INTS)), grad_fn="RollBackward0",
        vjp=sv.roll_vjp, tensor_vjp=st.roll_vjp,
        doc="elements shifted cyclically along axis (None: flat)", example="roll(x, 1, axis=1)"),
    structural_row(
        name="pad", arity=1, numpy=sc.np_pad, torch=sc.torch_pad, shape=sc.pad_shape,
        params=(Param("widths", INTS), Param("value", NUMBER, 0.0)),
        grad_fn="ConstantPadNdBackward0", vjp=sv.pad_vjp, tensor_vjp=st.pad_vjp, sympy=sc.sym_pad,
        doc="value added before and after each axis ([before, after] per axis)",
        example="pad(x, [[0, 0], [1, 2]], value=0)", keeps_dtype=False),
    structural_row(
        name="tril", arity=1, numpy=np.tril, torch=torch_fn("tril"), shape=sc.triangle_shape,
        params=(Param("k", INT, 0),), grad_fn="TrilBackward0", vjp=sv.tril_vjp,
        tensor_vjp=st.tril_vjp, doc="zeros above the k-th diagonal (the last two axes)",
        example="tril(x, k=0)", keeps_dtype=False),
    structural_row(
        name="triu", arity=1, numpy=np.triu, torch=torch_fn("triu"), shape=sc.triangle_shape,
        params=(Param("k", INT, 0),), grad_fn="TriuBackward0", vjp=sv.triu_vjp,
        tensor_vjp=st.triu_vjp, doc="zeros below the k-th diagonal (the last two axes)",
        example="triu(x, k=1)", keeps_dtype=False),
    # indexing: written x[0], x[:, 1:3], x[..., ::-1], x[:, None] (the engine records
    # PyTorch's select, slice, unsqueeze and alias views, a flip before a negative step)
    structural_row(
        name="index", arity=1, numpy=sc.np_index, torch=sc.torch_index, shape=sc.index_shape,
        params=(Param("key", KEY),), grad_fn=sc.index_name, vjp=sv.index_vjp,
        tensor_vjp=st.index_vjp, doc="x[...]: ints, slices (negative steps too), None, ...",
        example="x[:, 1:3]"),
    # by an integer input's indices (x[idx], x[:, idx], x[..., idx] are take)
    taking_row(
        name="take", numpy=tk.np_take, sympy=tk.sym_take, torch=tk.torch_take, shape=tk.take_shape,
        grad_fn="IndexBackward0", vjp=tk.take_vjp, tensor_vjp=tk.take_tensor, example="x[idx]",
        doc="x's elements at integer indices along axis (written x[:, idx])"),
    taking_row(
        name="gather", numpy=tk.np_gather, sympy=tk.sym_gather, torch=tk.torch_gather,
        shape=tk.gather_shape, grad_fn="GatherBackward0", vjp=tk.gather_vjp,
        tensor_vjp=tk.gather_tensor, example="gather(x, idx2, axis=1)",
        doc="out[i][j] = x[i][idx[i][j]] along axis (PyTorch's gather)"),
    taking_row(
        name="take_along_axis", numpy=tk.np_take_along, sympy=tk.sym_take_along,
        torch=tk.torch_take_along, shape=tk.take_along_shape, grad_fn="GatherBackward0",
        vjp=tk.take_along_vjp, tensor_vjp=tk.take_along_tensor,
        example="take_along_axis(x, idx2, axis=1)",
        doc="gather with broadcasting (NumPy's take_along_axis)"),
    adding_row(
        name="scatter_add", numpy=tk.np_scatter_add, sympy=tk.sym_scatter_add,
        torch=tk.torch_scatter_add, shape=tk.scatter_add_shape, grad_fn="ScatterAddBackward0",
        vjp=tk.scatter_add_vjp, tensor_vjp=tk.scatter_add_tensor,
        example="scatter_add(x, idx2, y[:, :2], axis=1)",
        doc="x with src[i][j] added at x[i][idx[i][j]] along axis (PyTorch's scatter_add)"),
    adding_row(
        name="index_add", numpy=tk.np_index_add, sympy=tk.sym_index_add,
        torch=tk.torch_index_add, shape=tk.index_add_shape, grad_fn="IndexAddBackward0",
        vjp=tk.index_add_vjp, tensor_vjp=tk.index_add_tensor,
        example="index_add(x, idx, y, axis=0)",
        doc="x with src's slice j along axis added at idx[j] (PyTorch's index_add)"),
    # combining
    structural_row(
        name="concat", arity=1, numpy=sc.np_concat, torch=sc.torch_concat, shape=sc.concat_shape,
        params=(Param("axis", INT, 0),), grad_fn="CatBackward0", vjp=sv.concat_vjp,
        tensor_vjp=st.concat_vjp, variadic="list", doc="tensors joined along an existing axis",
        example="concat([x, y], axis=-1)", keeps_dtype=False),
    structural_row(
        name="stack", arity=1, numpy=sc.np_stack, torch=sc.torch_stack, shape=sc.stack_shape,
        params=(Param("axis", INT, 0),), grad_fn="StackBackward0", vjp=sv.stack_vjp,
        tensor_vjp=st.stack_vjp, variadic="list", doc="tensors joined along a new axis",
        example="stack([x, y], axis=0)", keeps_dtype=False),
    structural_row(
        name="split", arity=1, numpy=sc.np_split, torch=sc.torch_split, shape=sc.split_shape,
        params=(Param("sizes", INTS), Param("axis", INT, 0), Param("piece", KEY)),
        grad_fn="SplitWithSizesBackward0", vjp=sv.split_vjp, tensor_vjp=st.split_vjp,
        doc="one piece of x cut along axis into the sizes (written split(...)[i])",
        example="split(x, [1, 2], axis=0)[0]"),
]
