"""The engine's operations: every primitive of the rule table, on engine tensors.

Each op runs its row's ``numpy`` column forward and records a node with the row's
``engine`` column (PyTorch's ``grad_fn`` name and one VJP per argument). The ops are
generated from the table (an op per row, taking the row's operands and then its
parameters, positionally or by keyword); only those whose PyTorch graph differs from
one node of the row are written by hand below (``2 + x``, ``2 / x``, ``prod`` over
several axes, ``matmul``). The row is looked up when the op runs, so a patched table is
what runs. Arguments may be tensors, NumPy arrays or Python numbers; only tensors that
require grad get gradients.
"""

from __future__ import annotations

import inspect
import math
import numbers

import numpy as np

from ..rules import COMPARISON, COMPOSITE, ELEMENTWISE, REDUCTION, RULES, STRUCTURE
from ..rules.conv.rows import CONVOLUTIONS
from ..rules.row import param_values
from .graph import grad_mode, record
from . import einsum as _einsum
from . import spectral, structure
from .tensor import Tensor
from .views import _contiguous, _data, _expand, _reshape, _squeeze, _strides, _view


#: Structure rows whose result is a fresh tensor, row-major in torch (cat's
#: compute_output_memory_format: contiguous unless every operand is channels-last),
#: where NumPy's concatenate follows its operands' stride order: an rfft's strided
#: result joined by stack would otherwise look non-contiguous to a later view_as_complex.
_JOINS = frozenset({"stack", "concat"})


def apply(op: str, *args, params=(), grad_fn: str | None = None) -> Tensor:
    """``RULES[op]`` applied to the operands ``args`` with the parameter values
    ``params`` (the (name, value) pairs of ``Rule.bind``): the forward, and the node when
    grad is on. ``grad_fn`` overrides the node's name (``2 / x`` makes PyTorch's
    ReciprocalBackward0).
    """
    # (every op of every engine witness passes here: written for few Python steps)
    rule = RULES[op]
    raw, tensors = [], []
    for a in args:
        if isinstance(a, Tensor):
            raw.append(a.data)
            tensors.append(a)
        else:
            raw.append(a)
    values = param_values(params)
    out = Tensor(rule.numpy(*raw, *values))
    dtype = out.data.dtype
    for t in tensors:
        if t.data.dtype != dtype:
            _promote_as_torch(out, tensors)
            break
    if rule.family in (ELEMENTWISE, COMPARISON):
        if out.data.ndim > 1:
            out.data = _torch_layout(out.data, [a for a in raw if isinstance(a, np.ndarray)])
        elif not out.data.flags.c_contiguous:   # (a 1-d view with a stride: dense)
            out.data = np.ascontiguousarray(out.data)
    elif rule.family != STRUCTURE or op in _JOINS:   # fresh row-major results
        out.data = np.asarray(out.data, order="C")   # (views keep NumPy's strides: torch's)
    if rule.engine.grad_fn is not None and grad_mode.enabled and \
            any(t._requires_grad for t in tensors):
        record(out, grad_fn or rule.grad_fn_name(args, params), args, raw,
               _vjps(rule, len(args), values), rule.engine.saves)
    return out


def _vjps(rule, n: int, values: tuple) -> tuple:
    """The node's VJPs of ``n`` operands, the parameter ``values`` bound; those of a row
    without parameters made once per row and count (by identity: a patched table's row
    is a new object)."""
    if values:
        return tuple(None if f is None else _with_params(f, values)
                     for f in map(rule.engine_vjp, range(n)))
    key = (id(rule), n)
    found = _VJPS.get(key)
    if found is None or found[0] is not rule:
        found = _VJPS[key] = (rule, tuple(map(rule.engine_vjp, range(n))))
    return found[1]


_VJPS: dict = {}   # _vjps() of rows without parameters: (id, count) -> (row, VJPs)


def _with_params(vjp, values: tuple):
    """A VJP with the node's parameter values bound after its arguments (the graph calls
    ``vjp(g, ans, *args)``)."""
    return (lambda g, ans, *args: vjp(g, ans, *args, *values)) if values else vjp


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


def _op(rule):
    """The engine op of ``rule``: its operands, then its parameters (positional or by
    keyword, with the row's defaults), as the expression language and NumPy call it."""

    def fn(*args, **given):
        row = RULES[rule.name]   # (the table's row now: a test may replace it)
        if not given and not row.params and row.variadic is None and len(args) == row.arity:
            return apply(rule.name, *args)   # (the common case: nothing to bind)
        operands, rest = _operands(rule, args)
        if len(rest) > len(rule.params):
            raise TypeError(f"{rule.name}() takes {rule.arity} arguments and "
                            f"{len(rule.params)} parameters, got {len(args)}")
        given.update(zip((p.name for p in rule.params), rest))
        params = RULES[rule.name].bind([np.shape(_data(a)) for a in operands], given)
        return apply(rule.name, *operands, params=params)

    fn.__name__ = fn.__qualname__ = rule.name
    fn.__doc__ = (f"The rule table's ``{rule.name}``"
                  + (f" ({rule.doc})" if rule.doc else "") + ".")
    first = [inspect.Parameter("tensors", inspect.Parameter.POSITIONAL_ONLY)] if \
        rule.variadic == "list" else [inspect.Parameter(
            f"a{i}" if rule.arity > 1 else "x", inspect.Parameter.POSITIONAL_ONLY)
            for i in range(rule.arity)]
    fn.__signature__ = inspect.Signature(
        first
        + [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             default=p.default) for p in rule.params])
    return fn


def _operands(rule, args) -> tuple[list, tuple]:
    """A call's (operands, parameters given positionally): the row's ``arity`` operands;
    a list row's in its first argument (``concat([a, b], 0)``), or, as the witnesses
    apply a node, every leading tensor (``concat(a, b, axis=0)``); a star row's after its
    leading strings (``einsum("ij,jk->ik", a, b)``)."""
    if rule.variadic == "star":
        n = next((i for i, a in enumerate(args) if not isinstance(a, str)), len(args))
        return list(args[n:]), args[:n]
    if rule.variadic != "list":
        return list(args[:rule.arity]), args[rule.arity:]
    if args and isinstance(args[0], (list, tuple)):
        return list(args[0]), args[1:]
    n = next((i for i, a in enumerate(args) if not isinstance(a, (Tensor, np.ndarray))),
             len(args))
    return list(args[:n]), args[n:]


def _tensor_first(a, b):
    # PyTorch computes 2 + x as x.add(2): the constant becomes the second input.
    return (b, a) if isinstance(b, Tensor) and not isinstance(a, Tensor) else (a, b)


# --------------------------------------------------------------------------- ops by hand
# Where PyTorch records more than the row's one node, or reorders its operands.

def add(a, b):
    return apply("add", *_tensor_first(a, b))


def mul(a, b):
    return apply("mul", *_tensor_first(a, b))


def div(a, b):
    """a / b. For a number ``a``, PyTorch computes ``reciprocal(b) * a``, and so do we."""
    if isinstance(a, numbers.Number) and isinstance(b, Tensor):
        return mul(apply("pow", b, -1.0, grad_fn="ReciprocalBackward0"), a)
    return apply("div", a, b)


def prod(x, axis=None, keepdims: bool = False):
    """Product over ``axis``. As the torch column (and torch.prod) it reduces one axis at
    a time, the last first, unless it reduces everything to a scalar."""
    ndim = np.ndim(_data(x))
    params = RULES["prod"].bind([np.shape(_data(x))], {"axis": axis, "keepdims": keepdims})
    axis = dict(params)["axis"]
    if len(axis) == ndim and not keepdims:
        return apply("prod", x, params=params)
    for d in sorted(axis, reverse=True):
        x = apply("prod", x, params=(("axis", (d,)), ("keepdims", keepdims)))
    return x


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

def _ndim(x) -> int:
    return _data(x).ndim


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


# --------------------------------------------------------------------------- convolution
# torch's convolution records one ConvolutionBackward0 whose next_functions hold an edge
# for the bias too (None without one); an unbatched input (C, *spatial) is unsqueezed to
# a batch of one first and the result squeezed back, each a node of its own.

def _convolution(rule):
    plain = _op(rule)

    def fn(x, w, *args, **given):
        unbatched = _ndim(x) == _ndim(w) - 1      # (C, *spatial): one axis fewer than w
        if unbatched:
            x = _view(x, (1,) + np.shape(_data(x)), "UnsqueezeBackward0")
        out = plain(x, w, *args, **given)
        node = out.grad_fn
        if node is not None and type(node).__name__ == "ConvolutionBackward0":
            node.next_functions += ((None, 0),)     # the bias's edge: no bias
            node._meta, node._slots = node._meta + (None,), node._slots + (None,)
        return _squeeze(out, 0) if unbatched else out

    fn.__name__ = fn.__qualname__ = rule.name
    fn.__doc__, fn.__signature__ = plain.__doc__, plain.__signature__
    return fn


def einsum(*args, subscripts: str | None = None):
    """einsum("ij,jk->ik", a, b) (or the operands then ``subscripts=``), recorded as
    PyTorch decomposes it (:mod:`gradcheck.engine.einsum`)."""
    if subscripts is None:
        if not args or not isinstance(args[0], str):
            raise TypeError('einsum() takes its subscripts first: einsum("ij,jk->ik", a, b)')
        subscripts, args = args[0], args[1:]
    RULES["einsum"].bind([np.shape(_data(a)) for a in args], {"subscripts": subscripts})
    return _einsum.contract(subscripts, args, apply)


# --------------------------------------------------------------------------- the table's ops
# One op per row not written by hand above, and the Tensor methods and operators that
# call them (x.exp(), x.sum(axis=1), x + y, ...).

_BY_HAND = {"add": add, "mul": mul, "div": div, "prod": prod, "matmul": matmul,
            "einsum": einsum,
            **{name: _convolution(RULES[name]) for name in CONVOLUTIONS},
            **structure.BY_HAND, **spectral.BY_HAND}
# (methods Tensor defines itself stay: x.detach() shares x's data, as PyTorch's; the
# detach op, the row's, copies it)
_OWN = set(vars(Tensor))
for _rule in RULES.values():
    globals()[_rule.name] = _BY_HAND.get(_rule.name) or _op(_rule)
    # (methods of one operand: x.exp(), x.sum(axis=1), x.softmax(); einsum's operands vary)
    if _rule.arity == 1 and _rule.symbol is None and not _rule.variadic and \
            _rule.family in (ELEMENTWISE, REDUCTION, COMPOSITE) and _rule.name not in _OWN:
        setattr(Tensor, _rule.name, globals()[_rule.name])
del _rule

_OPERATORS = {"add": ("__add__", "__radd__"), "sub": ("__sub__", "__rsub__"),
              "mul": ("__mul__", "__rmul__"), "div": ("__truediv__", "__rtruediv__"),
              "pow": ("__pow__", "__rpow__"), "matmul": ("__matmul__", "__rmatmul__"),
              "lt": ("__lt__", None), "le": ("__le__", None), "gt": ("__gt__", None),
              "ge": ("__ge__", None)}


def _dunders(fn, forward: str, reflected: str | None) -> None:
    setattr(Tensor, forward, lambda self, other: fn(self, other))
    if reflected:   # other + self: the op sees the operands in the written order
        setattr(Tensor, reflected, lambda self, other: fn(other, self))


for _name, (_fwd, _ref) in _OPERATORS.items():
    _dunders(globals()[_name], _fwd, _ref)
Tensor.__neg__ = lambda self: neg(self)   # noqa: F821  (generated above)
# Comparisons give tensors that do not require grad; == stays identity (hashable).
del _name, _fwd, _ref

__all__ = ["apply", *RULES]
