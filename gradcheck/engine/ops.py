"""The engine's operations: every primitive of the rule table, on engine tensors.

Each op runs its row's ``numpy`` column forward and records a node with the row's
``engine`` column (PyTorch's ``grad_fn`` name and one VJP per argument). The row is
looked up when the op runs, so a patched table is what runs. Arguments may be tensors,
NumPy arrays or Python numbers; only tensors that require grad get gradients.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..rules import RULES
from ..tree import normalize_axis
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


def _view(x, shape, name: str):
    """A reshape recorded as PyTorch's view node ``name`` (it moves no values)."""
    if not isinstance(x, Tensor):
        return np.reshape(x, shape)
    out = Tensor(x.data.reshape(shape))
    if x._requires_grad and grad_mode.enabled:
        record(out, name, (x,), (x.data,), (lambda g, ans, a: g.reshape(a.shape),),
               saves=False)
    return out


def matmul(a, b):
    """a @ b by NumPy's rules, with PyTorch's graph: DotBackward0, MvBackward0 and
    MmBackward0, and the views PyTorch puts around Mm/Mv for a vector on the left or a
    stack of matrices times a matrix or vector."""
    da, db = np.ndim(getattr(a, "data", a)), np.ndim(getattr(b, "data", b))
    if da == 1 and db == 2:
        row = _view(a, (1, -1), "UnsqueezeBackward0")
        return _view(apply("matmul", row, b), (-1,), "SqueezeBackward4")
    if da >= 3 and db <= 2:
        shape = np.shape(getattr(a, "data", a))
        flat = _view(a, (-1, shape[-1]), "ViewBackward0")
        out = apply("matmul", flat, b)
        return _view(out, shape[:-1] + out.shape[1:], "UnsafeViewBackward0")
    return apply("matmul", a, b)


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
