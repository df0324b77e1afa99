"""The engine's operations: every primitive of the rule table, on engine tensors.

Each op runs its row's ``numpy`` column forward and records a node with the row's
``engine`` column (PyTorch's ``grad_fn`` name and one VJP per argument). The row is
looked up when the op runs, so a patched table is what runs. Arguments may be tensors,
NumPy arrays or Python numbers; only tensors that require grad get gradients.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..rules import COMPARISON, ELEMENTWISE, RULES
from ..tree import normalize_axis, unbroadcast
from .graph import grad_mode, record
from .tensor import Tensor


def apply(op: str, *args, grad_fn: str | None = None) -> Tensor:
    """``RULES[op]`` applied to ``args``: the forward, and the node when grad is on.

    ``args`` are the row's operands, then (reductions) ``axis, keepdims``; ``grad_fn``
    overrides the node's name (``2 / x`` makes PyTorch's ReciprocalBackward0).
    """
    rule = RULES[op]
    operands = args[: rule.arity]
    raw = [a.data if isinstance(a, Tensor) else a for a in args]
    out = Tensor(rule.numpy(*raw))
    tensors = [a for a in operands if isinstance(a, Tensor)]
    if any(t.data.dtype != out.data.dtype for t in tensors):
        _promote_as_torch(out, tensors)
    if rule.kind in (ELEMENTWISE, COMPARISON):
        out.data = _torch_layout(out.data, [a for a in raw[: rule.arity]
                                            if isinstance(a, np.ndarray)])
    elif op != "transpose":     # reductions and products: fresh row-major results
        out.data = np.asarray(out.data, order="C")
    engine = rule.engine
    if (engine.grad_fn is not None and grad_mode.enabled
            and any(t._requires_grad for t in tensors)):
        name = grad_fn or engine.grad_fn
        record(out, name if isinstance(name, str) else name(*args), operands, raw,
               engine.vjps, engine.saves)
    return out


def _promote_as_torch(out: Tensor, tensors) -> None:
    """Give a floating result the dtype PyTorch would: that of the floating tensors with
    dimensions, else of the 0-d ones (numbers and arrays do not promote). The numpy
    column may compute in float64 (its reductions do)."""
    floats = [t.data for t in tensors if t.data.dtype.kind == "f"]
    ranked = [a.dtype for a in floats if a.ndim] or [a.dtype for a in floats]
    if ranked and out.data.dtype.kind == "f":
        out.data = out.data.astype(np.result_type(*ranked), copy=False)


def _torch_layout(out: np.ndarray, operands: list) -> np.ndarray:
    """``out`` in the memory layout PyTorch's TensorIterator gives an elementwise result
    (reorder_dimensions in aten/src/ATen/TensorIterator.cpp), which NumPy's differs
    from when operands' layouts differ (torch follows the first operand that orders two
    axes, NumPy a blend). Layout shows in the graph: it decides whether matmul's
    reshapes are views or copies (see matmul below). Axes are sorted fastest first by
    each operand's strides in turn, broadcast axes (stride 0) having no say, equal
    strides putting the shorter axis first; the result is dense in that order."""
    if out.ndim < 2 or all(a.flags.c_contiguous for a in operands):
        return np.asarray(out, order="C")
    shape, nd = out.shape, out.ndim
    strides = []    # per operand, in elements, over out's axes (0 where broadcast)
    for a in operands:
        lead = nd - a.ndim
        strides.append([0] * lead + [
            0 if n == 1 and shape[lead + i] != 1 else s // a.itemsize
            for i, (n, s) in enumerate(zip(a.shape, a.strides))])

    def order(d0, d1) -> int:   # 1: d0 moves slower than d1; 0: no operand says
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return 1 if s0 > s1 else -1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(nd - 1, -1, -1))    # fastest first; torch's insertion sort
    for i in range(1, nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = order(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    step, new = 1, [0] * nd
    for d in perm:
        new[d] = step * out.itemsize
        step *= shape[d]
    laid = np.lib.stride_tricks.as_strided(np.empty(out.size, out.dtype), shape, new)
    laid[...] = out
    return laid


def _op(op: str):
    def fn(*args):
        return apply(op, *args)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"The rule table's ``{op}`` (elementwise ops broadcast as NumPy does)."
    return fn


def _tensor_first(a, b):
    # PyTorch computes 2 + x as x.add(2): the constant becomes the second input.
    return (b, a) if isinstance(b, Tensor) and not isinstance(a, Tensor) else (a, b)


# --------------------------------------------------------------------------- arithmetic

def add(a, b):
    return apply("add", *_tensor_first(a, b))


def mul(a, b):
    return apply("mul", *_tensor_first(a, b))


def div(a, b):
    """a / b. For a number ``a``, PyTorch computes ``reciprocal(b) * a``, and so do we."""
    if isinstance(a, numbers.Number) and isinstance(b, Tensor):
        return mul(apply("pow", b, -1.0, grad_fn="ReciprocalBackward0"), a)
    return apply("div", a, b)


sub = _op("sub")    # 2 - x is PyTorch's RsubBackward1
pow = _op("pow")    # PowBackward0 / 1 / 2 for x ** 2, x ** y, 2 ** x
neg = _op("neg")

# --------------------------------------------------------------------------- elementwise

exp = _op("exp")
log = _op("log")
log1p = _op("log1p")
expm1 = _op("expm1")
sqrt = _op("sqrt")
sin = _op("sin")
cos = _op("cos")
tan = _op("tan")
asin = _op("asin")
acos = _op("acos")
atan = _op("atan")
sinh = _op("sinh")
cosh = _op("cosh")
tanh = _op("tanh")
asinh = _op("asinh")
acosh = _op("acosh")
atanh = _op("atanh")
abs = _op("abs")
sign = _op("sign")
erf = _op("erf")
sigmoid = _op("sigmoid")
softplus = _op("softplus")
relu = _op("relu")
maximum = _op("maximum")
minimum = _op("minimum")
where = _op("where")          # where(cond, a, b); no gradient to cond
lt = _op("lt")                # comparisons: bool tensors that never require grad
le = _op("le")
gt = _op("gt")
ge = _op("ge")

# --------------------------------------------------------------------------- reductions


def _reduction(op: str):
    def fn(x, axis=None, keepdims: bool = False):
        return apply(op, x, normalize_axis(axis, np.ndim(getattr(x, "data", x))), keepdims)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``{op}`` over ``axis`` (all axes when ``None``), NumPy style."
    return fn


sum = _reduction("sum")
mean = _reduction("mean")
max = _reduction("max")
min = _reduction("min")
logsumexp = _reduction("logsumexp")


def prod(x, axis=None, keepdims: bool = False):
    """Product over ``axis``. As the torch column (and torch.prod) it reduces one axis at
    a time, the last first, unless it reduces everything to a scalar."""
    ndim = np.ndim(getattr(x, "data", x))
    axis = normalize_axis(axis, ndim)
    if len(axis) == ndim and not keepdims:
        return apply("prod", x, axis, keepdims)
    for d in sorted(axis, reverse=True):
        x = apply("prod", x, (d,), keepdims)
    return x


# --------------------------------------------------------------------------- linear algebra

dot = _op("dot")
transpose = _op("transpose")  # swaps the last two axes


# --------------------------------------------------------------------------- matmul
# a @ b is PyTorch's at::native::_matmul_impl (aten/src/ATen/native/LinearAlgebra.cpp):
# it reduces every rank pair to one dot, mv, mm or bmm (the matmul row's node) with
# views, expands and copies around it, and which ones depends on the ranks, on which
# operand requires grad and on the operands' memory layout. The engine takes the same
# decisions on the same facts, so it records the same nodes: the layout is the NumPy
# strides of the engine's arrays, which follow torch's for what the engine makes
# (leaves and matmul results contiguous, transpose a view with swapped strides, expand
# zero strides, a reshape a view exactly where torch's is, elementwise results in
# their operand's layout).

def _derive(x, data, name: str, vjp):
    """``data``, computed from ``x`` without arithmetic (a view, an expand or a copy),
    recorded as PyTorch's node ``name`` with the one VJP ``vjp(g, ans, x)``. Views and
    copies save no tensors, so a second backward through them needs no retain_graph."""
    if not isinstance(x, Tensor):
        return data
    out = Tensor(data)
    if x._requires_grad and grad_mode.enabled:
        record(out, name, (x,), (x.data,), (vjp,), saves=False)
    return out


def _data(x) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)


def _ndim(x) -> int:
    return _data(x).ndim


def _strides(a: np.ndarray) -> tuple[int, ...]:
    """Strides in elements, as torch counts them."""
    return tuple(s // a.itemsize for s in a.strides)


def _reshape_grad(g, ans, a):
    return np.reshape(g, np.shape(a))


def _view(x, shape, name: str):
    """A reshape of contiguous data recorded as the view node ``name`` (it moves no
    values): torch's unsqueeze, squeeze and _unsafe_view."""
    return _derive(x, np.reshape(_data(x), shape), name, _reshape_grad)


def _view_strides(shape, strides, new) -> tuple[int, ...] | None:
    """The strides of a view of ``shape``/``strides`` as ``new``, or None where no view
    exists and reshape must copy: torch's computeStride (aten/src/ATen/TensorUtils.cpp).
    Walking the old dimensions from the last, a "chunk" is a run whose strides nest
    (stride[d-1] == size[d] * stride[d]; dimensions of size 1 never break a run); a
    view exists iff the new dimensions split into consecutive groups, each of exactly
    one chunk's element count."""
    if not shape:
        return (1,) * len(new)
    if math.prod(shape) == 0:   # any strides will do; torch's are those of a fresh tensor
        return _contiguous_strides(new)
    out = [0] * len(new)
    view_d = len(new) - 1
    base, tensor_numel, view_numel = strides[-1], 1, 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None


def _contiguous_strides(shape) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n if n else 1   # (the reduction max shadows the builtin here)
    return tuple(reversed(out))


def _is_contiguous(a: np.ndarray) -> bool:
    """torch's is_contiguous: row-major strides, ignoring dimensions of size 1."""
    if a.size == 0:
        return True
    expected = _contiguous_strides(a.shape)
    return all(n == 1 or s == e for n, s, e in zip(a.shape, _strides(a), expected))


def _clone(x):
    """torch's clone(memory_format=contiguous): a row-major copy (CloneBackward0)."""
    return _derive(x, np.array(_data(x), order="C"), "CloneBackward0", _grad_through)


def _grad_through(g, ans, a):
    return g


def _contiguous(x):
    """torch's Tensor.contiguous(): the tensor itself when contiguous, else a clone."""
    return x if _is_contiguous(_data(x)) else _clone(x)


def _reshape(x, shape):
    """torch's reshape (reshape_symint in aten/src/ATen/native/TensorShape.cpp): a view
    of a contiguous tensor (ViewBackward0); else an alias with the strides computeStride
    finds (ReshapeAliasBackward0); else a contiguous clone viewed as ``shape``
    (CloneBackward0, then UnsafeViewBackward0)."""
    a = _data(x)
    if _is_contiguous(a):
        return _view(x, shape, "ViewBackward0")
    strides = _view_strides(a.shape, _strides(a), tuple(shape))
    if strides is None:
        return _view(_clone(x), shape, "UnsafeViewBackward0")
    view = np.lib.stride_tricks.as_strided(a, shape, [s * a.itemsize for s in strides])
    return _derive(x, view, "ReshapeAliasBackward0", _reshape_grad)


def _expand(x, shape):
    """torch's expand (ExpandBackward0, recorded even when nothing is expanded): the
    expanded axes get stride 0; the gradient is summed back over them."""
    return _derive(x, np.broadcast_to(_data(x), shape), "ExpandBackward0",
                   lambda g, ans, a: unbroadcast(g, np.shape(a)))


def _squeeze(x, dim: int):
    """torch's squeeze(dim) (SqueezeBackward1)."""
    return _derive(x, np.squeeze(_data(x), dim), "SqueezeBackward1", _reshape_grad)


def _mT(x, name: str = "TransposeBackward0"):
    """The last two axes swapped, a view: torch's mT (TransposeBackward0), or t() of a
    matrix (TBackward0)."""
    return apply("transpose", x, grad_fn=name)


def _should_fold(a, b) -> bool:
    """torch's should_fold: whether a stack of matrices (either side) times a matrix or
    vector is computed by one mm/mv on the stack folded into one matrix rather than by
    bmm. Always when the small operand requires grad (its gradient is then one mm, not a
    sum over a broadcast batch); else only where the fold is a view (no copy)."""
    da, db = _ndim(a), _ndim(b)
    larger = da >= db
    t1 = _data(a) if larger else np.swapaxes(_data(b), -1, -2)
    if not (t1.ndim >= 3 and (db if larger else da) <= 2):
        return False
    small = b if larger else a
    if isinstance(small, Tensor) and small._requires_grad:
        return True
    if da == 2:   # the fold would be an mm on b's transpose, whose result needs a copy
        return False
    if t1.size == 0:
        return True
    shape, strides = t1.shape, _strides(t1)
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(t1.ndim - 2))


def matmul(a, b):
    """a @ b by NumPy's rules, with PyTorch's graph (see the comment above): the matmul
    row's DotBackward0, MvBackward0, MmBackward0 or BmmBackward0, with PyTorch's
    unsqueeze, squeeze, transpose, expand, view and copy nodes around it."""
    da, db = _ndim(a), _ndim(b)
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they "
                           f"are {da}D and {db}D")
    if (da, db) in ((1, 1), (2, 1), (2, 2)):
        return apply("matmul", a, b)
    if (da, db) == (1, 2):   # torch: a.unsqueeze(0).mm(b).squeeze_(0)
        row = _view(a, (1, -1), "UnsqueezeBackward0")
        return _view(apply("matmul", row, b), (-1,), "SqueezeBackward4")
    if _should_fold(a, b):
        # The stack is t1 (a, or b's transpose when b is the bigger); its batch and row
        # axes fold into one: (..., n, k) @ (k, p) = ((... n), k) @ (k, p), viewed back.
        # b's side is computed transposed, (a @ b)ᵀ = bᵀ @ aᵀ, and transposed back.
        transpose = db > da
        t1 = _mT(b) if transpose else a
        t2 = (_mT(a, "TBackward0") if da == 2 else a) if transpose else b
        s1 = np.shape(_data(t1))
        out_shape = s1[:-1] + ((np.shape(_data(t2))[1],) if _ndim(t2) == 2 else ())
        folded = _reshape(t1, (math.prod(s1[:-1]), s1[-1]))
        out = _view(apply("matmul", folded, t2), out_shape, "UnsafeViewBackward0")
        return _contiguous(_mT(out)) if transpose and _ndim(t2) == 2 else out
    sa, sb = np.shape(_data(a)), np.shape(_data(b))
    n, m1 = (sa[-2] if da > 1 else 1), sa[-1]
    m2, p = (sb[-2] if db > 1 else sb[0]), (sb[-1] if db > 1 else 1)
    batch_a, batch_b = sa[:-2], sb[:-2]   # () for a vector
    if da == 3 and db == 3 and batch_a[0] != batch_b[0]:
        # torch drops a batch of one that requires grad, so that its gradient is not a
        # sum over the other's batch: then it is the fold above.
        if batch_a[0] == 1 and isinstance(a, Tensor) and a._requires_grad:
            return matmul(_squeeze(a, 0), b)
        if batch_b[0] == 1 and isinstance(b, Tensor) and b._requires_grad:
            return matmul(a, _squeeze(b, 0))
    batch = tuple(np.broadcast_shapes(batch_a, batch_b))
    size = math.prod(batch)
    a3 = _reshape(_expand(a, batch + (n, m1)), (size, n, m1))
    if db == 1:   # a vector is one column: (size, m2) then unsqueezed to (size, m2, 1)
        b3 = _view(_reshape(_expand(b, batch + (m2,)), (size, m2)), (size, m2, 1),
                   "UnsqueezeBackward0")
    else:
        b3 = _reshape(_expand(b, batch + (m2, p)), (size, m2, p))
    out = apply("matmul", a3, b3)
    if db == 1:
        out = _squeeze(out, -1)
    out_shape = batch + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    return _view(out, out_shape, "UnsafeViewBackward0")


# Tensor methods for the one-argument ops (x.exp(), x.sum(axis=1), ...).
for _name in ("exp log log1p expm1 sqrt sin cos tan asin acos atan sinh cosh tanh asinh "
              "acosh atanh abs sign erf sigmoid softplus relu sum mean prod max min "
              "logsumexp").split():
    setattr(Tensor, _name, globals()[_name])
del _name

__all__ = ["apply", "add", "sub", "mul", "div", "pow", "neg", "exp", "log", "log1p", "expm1",
           "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
           "asinh", "acosh", "atanh", "abs", "sign", "erf", "sigmoid", "softplus", "relu",
           "maximum", "minimum", "where", "lt", "le", "gt", "ge", "sum", "mean", "prod",
           "max", "min", "logsumexp", "matmul", "dot", "transpose"]
