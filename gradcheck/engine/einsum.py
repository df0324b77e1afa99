"""einsum on engine tensors, recorded as PyTorch records it.

PyTorch has no einsum node: ``at::native::einsum`` (aten/src/ATen/native/Linear.cpp)
unsqueezes each operand for the labels it lacks and permutes it to one order of labels
(the output's, then the summed ones), sums a label only one operand has, and contracts a
pair by ``sumproduct_pair``: permute, reshape to three axes, one bmm, view, permute
(or a plain product when nothing is summed; the pair swapped where the right one's
dimensions all come before the left one's); a view drops the summed axes at the end,
or, for one operand, a sum. The engine takes the same steps on the same facts (the
labels' order, which dimensions have size 1, the operands' layout), so it records the
same nodes: UnsqueezeBackward0, PermuteBackward0, SumBackward1, ViewBackward0 (or the
reshape's alias or copy), BmmBackward0 or MulBackward0. Three or more operands are
contracted pairwise in PyTorch's order (:func:`gradcheck.rules.composite.einsum.pairs`):
opt_einsum's path, as torch.einsum computes it (its strategy, the same shapes), where
torch would take one (opt_einsum installed and ``torch.backends.opt_einsum.enabled``:
its default), the pair appended after the operands left; else left to right, the pair
put first. Which of a pair is sumproduct_pair's left decides its permutes and whether
it swaps, so the order is part of the graph, not only of the rounding.

The sums, products and bmm are the table's rows, applied by ``apply`` (the engine's
:func:`gradcheck.engine.ops.apply`, passed in: this module does not import the ops).
"""

from __future__ import annotations

import numpy as np

from ..rules import RULES
from ..rules.composite.einsum import ELLIPSIS, LETTERS, pairs, parse, replay
from .tensor import Tensor
from .views import _data, _derive, _reshape, _strides, _view


def _as_strided(a: np.ndarray, shape, strides) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(a, tuple(shape),
                                           [s * a.itemsize for s in strides])


def _unsqueeze(x, dim: int):
    # torch's inferUnsqueezeGeometry: the new axis's stride is size·stride of the axis
    # it goes before, or 1 at the end
    a = _data(x)
    shape, strides = list(a.shape), list(_strides(a))
    strides.insert(dim, shape[dim] * strides[dim] if dim < a.ndim else 1)
    shape.insert(dim, 1)
    return _derive(x, _as_strided(a, shape, strides), "UnsqueezeBackward0",
                   lambda g, ans, a: np.reshape(g, np.shape(a)))


def _permute(x, perm):
    back = tuple(np.argsort(perm))
    return _derive(x, np.transpose(_data(x), perm), "PermuteBackward0",
                   lambda g, ans, a: np.transpose(g, back))


def _drop(x, dims):
    """A view without the axes ``dims`` (each of size 1), the others' strides kept."""
    a = _data(x)
    keep = [d for d in range(a.ndim) if d not in dims]
    view = _as_strided(a, [a.shape[d] for d in keep], [_strides(a)[d] for d in keep])
    return _derive(x, view, "ViewBackward0", lambda g, ans, a: np.reshape(g, np.shape(a)))


def _sum(apply, x, dims, keepdim: bool = True):
    params = RULES["sum"].bind([np.shape(_data(x))], {"axis": tuple(sorted(dims)),
                                                      "keepdims": keepdim})
    return apply("sum", x, params=params, grad_fn="SumBackward1")


def _size(x, d: int) -> int:
    return np.shape(_data(x))[d]


def sumproduct_pair(apply, left, right, sum_dims: list[int]):
    """(left * right) summed over ``sum_dims`` (kept as size 1), by one bmm."""
    if not sum_dims:
        return apply("mul", left, right)
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(np.ndim(_data(left))):
        sl, sr = _size(left, i) != 1, _size(right, i) != 1
        if i in sum_dims:
            if sl and sr:
                sum_size *= _size(left, i)
            elif sl:
                left = _sum(apply, left, [i])
            elif sr:
                right = _sum(apply, right, [i])
        elif sl and sr:
            lro.append(i)
            lro_size *= _size(left, i)
        elif sl:
            lo.append(i)
            lo_size *= _size(left, i)
        else:
            ro.append(i)
            ro_size *= _size(right, i)
    if lo and ro and ro[-1] < lo[0]:
        # every dimension of the right operand's before the left's: swapped, the bmm
        # gives the output's order directly
        left, right, lo, ro, lo_size, ro_size = right, left, ro, lo, ro_size, lo_size
    out_size = ([_size(left, d) for d in lro + lo] + [1] * len(sum_dims)
                + [_size(right, d) for d in ro])
    lperm, rperm = lro + lo + sum_dims + ro, lro + sum_dims + ro + lo
    operm = list(np.argsort(lro + lo + sum_dims + ro))
    left = _reshape(_permute(left, lperm), (lro_size, lo_size, sum_size))
    right = _reshape(_permute(right, rperm), (lro_size, sum_size, ro_size))
    result = apply("matmul", left, right)
    return _permute(_view(result, out_size, "ViewBackward0"), operm)


def _label_order(eq, implicit: bool, ell: int) -> tuple[dict, int, int, int]:
    """(each label's position in the aligned order, the output's dimensions, the
    ellipsis' first position, all positions): the output's labels first (the implicit
    output: the ellipsis, then the labels seen once), then the ellipsis unless it is in
    the output, then the summed labels, in PyTorch's label order (A-Z, then a-z)."""
    index: dict = {}
    at, ell_index, ell_out = 0, 0, implicit
    if implicit:
        at = ell
    for label in ([] if implicit else eq.output):
        if label == ELLIPSIS:
            ell_index, at, ell_out = at, at + ell, True
        else:
            index[label], at = at, at + 1
    if implicit:
        for label in eq.output:
            if label != ELLIPSIS:
                index[label], at = at, at + 1
    out_dims = at
    if not ell_out:
        ell_index, at = at, at + ell
    for label in sorted({l for t in eq.terms for l in t if l != ELLIPSIS} - set(index),
                        key=LETTERS.index):
        index[label], at = at, at + 1
    return index, out_dims, ell_index, at


def _aligned(op, term, index, ell_index, ell, total, counts):
    """The operand unsqueezed for the labels it lacks and permuted to the common order;
    ``counts`` tallies the operands with a dimension of size other than 1 there."""
    perm, dim = [-1] * total, 0
    for label in term:
        if label == ELLIPSIS:
            span = np.ndim(_data(op)) - (len(term) - 1)
            for j in range(ell - span, ell):
                if _size(op, dim) != 1:
                    counts[ell_index + j] += 1
                perm[ell_index + j], dim = dim, dim + 1
            continue
        if _size(op, dim) != 1:
            counts[index[label]] += 1
        perm[index[label]], dim = dim, dim + 1
    for k, p in enumerate(perm):
        if p == -1:
            op = _unsqueeze(op, dim)
            perm[k], dim = dim, dim + 1
    return _permute(op, perm)


def contract(subscripts: str, operands, apply):
    """``einsum(subscripts, *operands)`` on engine tensors, as PyTorch computes it."""
    operands = [a if isinstance(a, Tensor) else Tensor(np.asarray(a)) for a in operands]
    eq = parse(subscripts, [a.shape for a in operands])
    ell = len(eq.ellipsis)
    index, out_dims, ell_index, total = _label_order(eq, "->" not in subscripts, ell)
    counts = [0] * total
    ops = [_aligned(op, term, index, ell_index, ell, total, counts)
           for op, term in zip(operands, eq.terms)]

    def pair(a, b, _left):   # (sums of a label one side has alone first, as torch does)
        sum_dims, a_sum, b_sum = [], [], []
        for dim in range(out_dims, total):
            if _size(a, dim) != 1 and _size(b, dim) != 1:
                counts[dim] -= 1
                if counts[dim] == 1:
                    sum_dims.append(dim)
                    counts[dim] = 0
            elif counts[dim] == 1:
                if _size(a, dim) != 1:
                    a_sum.append(dim)
                    counts[dim] = 0
                elif _size(b, dim) != 1:
                    b_sum.append(dim)
                    counts[dim] = 0
        a = _sum(apply, a, a_sum) if a_sum else a
        b = _sum(apply, b, b_sum) if b_sum else b
        return sumproduct_pair(apply, a, b, sum_dims)

    out = replay(pairs(subscripts, [a.shape for a in operands]), ops, pair)
    if total > out_dims:
        summed = list(range(out_dims, total))
        return _drop(out, summed) if len(operands) > 1 else _sum(apply, out, summed, False)
    return out
