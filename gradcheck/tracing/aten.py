"""The one mapping from ATen (and prims) ops to rows of the rule table.

Each entry sends one op overload packet (``aten.mm``: every overload of it) to formula
text over its operands: ``mm(a, b)`` is ``a @ b``, ``amax(x, [1], True)`` is
``max(x, axis=1, keepdims=True)``. The text is parsed by the same safe parser as a
written formula, so a traced reference is a formula like any other: every witness, the
rounding model and ``explain`` read it as they read one a user wrote.

An emitter takes the result's :class:`Out` (shape and kind, read from the trace), then
the op's arguments as the trace gave them (a tensor as :class:`~.values.Traced`,
anything else as it is), and returns the text. Tensors that depend on no input (a causal
mask built from ``arange``) are mapped like any other: the language has the constructors.
"""

from __future__ import annotations

from .table import ATEN, SOURCES, Emit, Out, maps, operand, text  # noqa: F401
from .values import Traced, TraceError, axes, axis_text, number, shape_text


# ------------------------------------------------------------------ elementwise

_UNARY = {
    "exp": "exp", "log": "log", "log1p": "log1p", "expm1": "expm1", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
    "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "abs": "abs", "sign": "sign",
    "erf": "erf", "sigmoid": "sigmoid", "relu": "relu", "reciprocal": "reciprocal",
    "floor": "floor", "ceil": "ceil", "round": "round", "trunc": "trunc", "silu": "silu",
    "mish": "mish", "detach": "detach",
}


def _unary(row: str) -> Emit:
    return lambda out, x: f"{row}({text(x)})"


for _packet, _row in _UNARY.items():
    maps(f"aten.{_packet}", source=f"torch.{_packet}")(_unary(_row))


def _function(row: str) -> Emit:
    """The row called on the op's tensors, in order: ``maximum(a, b)``."""
    return lambda out, *tensors: f"{row}({', '.join(text(t) for t in tensors)})"


#: ATen ops that are a row called by the same name on the same operands
_FUNCTIONS = {"maximum": "torch.maximum(a, b)", "minimum": "torch.minimum(a, b)",
              "where": "torch.where(c, a, b)", "xlogy": "torch.xlogy(x, y), F.kl_div",
              "atan2": "torch.atan2(y, x)", "hypot": "torch.hypot(a, b)",
              "logaddexp": "torch.logaddexp(a, b)"}
for _packet, _source in _FUNCTIONS.items():
    maps(f"aten.{_packet}", source=_source)(_function(_packet))


@maps("aten.neg", "prims.neg", source="-x")
def _neg(out, x):
    return f"-{operand(x)}"


def _scaled(b, alpha) -> str:
    return operand(b) if alpha in (None, 1) else f"{number(alpha)} * {operand(b)}"


@maps("aten.add", "prims.add", source="x + y")
def _add(out, a, b, alpha=1):
    return f"{operand(a)} + {_scaled(b, alpha)}"


@maps("aten.sub", "prims.sub", source="x - y")
def _sub(out, a, b, alpha=1):
    return f"{operand(a)} - {_scaled(b, alpha)}"


@maps("aten.rsub", source="1 - x")
def _rsub(out, a, b, alpha=1):
    return f"{operand(b)} - {_scaled(a, alpha)}"


@maps("aten.mul", "prims.mul", source="x * y")
def _mul(out, a, b):
    return f"{operand(a)} * {operand(b)}"


@maps("aten.div", "prims.div", source="x / y")
def _div(out, a, b, rounding_mode=None):
    if rounding_mode is not None:
        raise TraceError(f"div with rounding_mode={rounding_mode!r} has no derivative "
                         "to check", op="aten.div")
    return f"{operand(a)} / {operand(b)}"


@maps("aten.pow", source="x ** 2")
def _pow(out, a, b):
    return f"{operand(a)} ** {operand(b)}"


@maps("aten.gelu", source="F.gelu(x, approximate=...)")
def _gelu(out, x, approximate="none"):
    return f"gelu({text(x)}, approximate='{approximate}')"


@maps("aten.clamp", source="torch.clamp(x, lo, hi)")
def _clamp(out, x, min=None, max=None):
    lo = "" if min is None else f", min={number(min)}"
    hi = "" if max is None else f", max={number(max)}"
    return f"clamp({text(x)}{lo}{hi})"


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _compare(symbol: str) -> Emit:
    return lambda out, a, b: f"{operand(a)} {symbol} {operand(b)}"


for _packet, _symbol in _COMPARE.items():
    maps(f"aten.{_packet}", source=f"x {_symbol} y")(_compare(_symbol))


@maps("aten.logical_not", "aten.bitwise_not", source="~mask")
def _not(out, a):
    return f"~{operand(a)}"


@maps("aten.logical_and", "aten.bitwise_and", source="a & b")
def _and(out, a, b):
    return f"{operand(a)} & {operand(b)}"


@maps("aten.logical_or", "aten.bitwise_or", source="a | b")
def _or(out, a, b):
    return f"{operand(a)} | {operand(b)}"


# ------------------------------------------------------------------ identities and casts

@maps("aten.clone", "aten.lift_fresh_copy",
      source="x.clone()")
def _same(out, x, **_):
    return text(x)


@maps("aten._to_copy", "prims.convert_element_type", source="x.to(dtype)")
def _cast(out, x, *args, **kwargs):
    if not isinstance(x, Traced) or x.kind == out.kind:
        return text(x)
    if out.kind == "float" and x.kind == "bool":
        return f"where({text(x)}, ones({shape_text(x.shape)}), zeros({shape_text(x.shape)}))"
    if out.kind == "float" and x.kind == "int":
        return f"{operand(x)} * 1.0"
    raise TraceError(f"a cast from {x.kind} to {out.kind} has no formula", op="aten._to_copy")


# ------------------------------------------------------------------ constants

@maps("aten.scalar_tensor", source="torch.tensor(0.5)")
def _scalar(out, value, **_):
    return number(value)


@maps("aten.full", source="torch.full(shape, v)")
def _full(out, size, value, **_):
    if not len(size):   # a 0-d tensor: the number (full([], v) has no shape to expand)
        return number(value)
    return f"full({shape_text(size)}, {number(value)})"


@maps("aten.full_like", source="torch.full_like(x, v)")
def _full_like(out, x, value, **_):
    return _full(out, out.shape, value)


@maps("aten.zeros_like", source="torch.zeros_like(x)")
def _zeros_like(out, x, **_):
    return f"zeros({shape_text(out.shape)})"


@maps("aten.ones_like", source="torch.ones_like(x)")
def _ones_like(out, x, **_):
    return f"ones({shape_text(out.shape)})"


@maps("aten.arange", source="torch.arange(n)")
def _arange(out, *args, **kwargs):
    numbers = [a for a in args if isinstance(a, (int, float))]
    return f"arange({', '.join(number(n) for n in numbers)})"


# ------------------------------------------------------------------ reductions

def _reduce(row: str) -> Emit:
    def emit(out, x, dims=None, keepdim=False, **_):
        picked = axes(dims, x.ndim)
        if not picked:
            return text(x)
        keep = ", keepdims=True" if keepdim else ""
        return f"{row}({text(x)}, axis={axis_text(picked)}{keep})"
    return emit


maps("aten.sum", source="x.sum(dim)")(_reduce("sum"))
maps("aten.mean", source="x.mean(dim)")(_reduce("mean"))
maps("aten.amax", source="x.amax(dim), F.softmax")(_reduce("max"))
maps("aten.amin", source="x.amin(dim)")(_reduce("min"))
maps("aten.logsumexp", source="torch.logsumexp(x, dim)")(_reduce("logsumexp"))


@maps("prims.sum", source="F.layer_norm (decomposed)")
def _prims_sum(out, x, dims, **_):
    return _reduce("sum")(out, x, dims, False)


@maps("aten.prod", source="x.prod(dim)")
def _prod(out, x, dim=None, keepdim=False, **_):
    return _reduce("prod")(out, x, dim, keepdim)


@maps("aten.var", source="x.var(dim, correction=c)")
def _var(out, x, dims=None, *, correction=1, keepdim=False, **_):
    keep = ", keepdims=True" if keepdim else ""
    picked = axis_text(axes(dims, x.ndim))
    correction = int(correction) if float(correction).is_integer() else correction
    return f"var({text(x)}, axis={picked}, correction={number(correction)}{keep})"


@maps("prims.var", source="F.layer_norm (decomposed)")
def _prims_var(out, x, dims, correction=1, **_):
    return _var(out, x, dims, correction=correction)


# ------------------------------------------------------------------ layout

@maps("aten.view", "aten._unsafe_view", source="x.view(shape)")
def _view(out, x, shape, *_):
    if tuple(out.shape) == tuple(x.shape):
        return text(x)
    return f"reshape({text(x)}, {shape_text(out.shape)})"


@maps("aten.expand", source="x.expand(shape)")
def _expand(out, x, shape, **_):
    if tuple(out.shape) == tuple(x.shape):
        return text(x)
    return f"expand({text(x)}, {shape_text(out.shape)})"


@maps("prims.broadcast_in_dim", source="F.layer_norm (decomposed)")
def _broadcast_in_dim(out, x, shape, dims):
    kept = [1] * len(shape)
    for axis, size in zip(dims, x.shape):
        kept[axis] = size
    shaped = text(x) if tuple(kept) == tuple(x.shape) else \
        f"reshape({text(x)}, {shape_text(kept)})"
    return shaped if tuple(kept) == tuple(shape) else f"expand({shaped}, {shape_text(shape)})"


@maps("aten.permute", source="x.permute(dims)")
def _permute(out, x, dims):
    order = [int(d) % x.ndim for d in dims]
    if order == list(range(x.ndim)):
        return text(x)
    return f"permute({text(x)}, {shape_text(order)})"


@maps("aten.t", source="x.t()")
def _t(out, x):
    return text(x) if x.ndim < 2 else f"transpose({text(x)}, 0, 1)"


@maps("aten.transpose", source="x.transpose(a, b)")
def _transpose(out, x, a, b):
    return f"transpose({text(x)}, {int(a) % x.ndim}, {int(b) % x.ndim})"


@maps("aten.unsqueeze", source="x.unsqueeze(dim)")
def _unsqueeze(out, x, dim):
    return f"unsqueeze({text(x)}, {int(dim) % (x.ndim + 1)})"


@maps("aten.squeeze", source="x.squeeze(dim)")
def _squeeze(out, x, dims=None):
    if tuple(out.shape) == tuple(x.shape):
        return text(x)
    return f"reshape({text(x)}, {shape_text(out.shape)})"


@maps("aten.slice", source="x[a:b]")
def _slice(out, x, dim=0, start=None, end=None, step=1):
    dim = int(dim) % x.ndim
    size = x.shape[dim]
    lo = 0 if start is None else max(min(int(start) if start >= 0 else size + start, size), 0)
    hi = size if end is None else max(min(int(end) if end >= 0 else size + end, size), 0)
    if (lo, hi, step) == (0, size, 1):
        return text(x)
    key = [":"] * dim + [f"{lo}:{hi}" + (f":{step}" if step != 1 else "")]
    return f"{operand(x)}[{', '.join(key)}]"


@maps("aten.select", source="x[:, i]")
def _select(out, x, dim, index):
    dim = int(dim) % x.ndim
    key = [":"] * dim + [str(int(index) % x.shape[dim])]
    return f"{operand(x)}[{', '.join(key)}]"


@maps("aten.cat", source="torch.cat(tensors, dim)")
def _cat(out, tensors, dim=0):
    parts = [t for t in tensors if 0 not in t.shape]
    return f"concat([{', '.join(text(t) for t in parts)}], axis={int(dim) % len(out.shape)})"


@maps("aten.flip", source="x.flip(dims)")
def _flip(out, x, dims):
    return f"flip({text(x)}, axis={axis_text(axes(dims, x.ndim))})"


@maps("aten.roll", source="x.roll(shifts, dims)")
def _roll(out, x, shifts, dims=()):
    if not dims:
        return f"roll({text(x)}, shift={int(shifts[0])})"
    return f"roll({text(x)}, shift={shape_text(shifts)}, axis={axis_text(tuple(dims))})"


@maps("aten.tril", source="x.tril(k)")
def _tril(out, x, k=0):
    return f"tril({text(x)}, {int(k)})"


@maps("aten.triu", source="x.triu(k)")
def _triu(out, x, k=0):
    return f"triu({text(x)}, {int(k)})"


# ------------------------------------------------------------------ products

@maps("aten.mm", "aten.bmm", source="x @ w, F.scaled_dot_product_attention")
def _matmul(out, a, b):
    return f"{operand(a)} @ {operand(b)}"


@maps("aten.addmm", source="F.linear(x, w, b)")
def _addmm(out, bias, a, b, beta=1, alpha=1):
    product = f"{operand(a)} @ {operand(b)}"
    if alpha != 1:
        product = f"{number(alpha)} * ({product})"
    return f"{_scaled(bias, beta)} + {product}"


@maps("aten.dot", source="torch.dot(a, b)")
def _dot(out, a, b):
    return f"dot({text(a)}, {text(b)})"


# ------------------------------------------------------------------ normalisations

@maps("aten._softmax", source="F.softmax(x, dim)")
def _softmax(out, x, dim, half_to_float=False):
    return f"softmax({text(x)}, axis={int(dim) % max(x.ndim, 1)})"


@maps("aten._log_softmax", source="F.log_softmax(x, dim)")
def _log_softmax(out, x, dim, half_to_float=False):
    return f"log_softmax({text(x)}, axis={int(dim) % max(x.ndim, 1)})"


# ------------------------------------------------------------------ indexing

@maps("aten.gather", source="x.gather(dim, idx), F.cross_entropy")
def _gather(out, x, dim, index, sparse_grad=False):
    return f"gather({text(x)}, {text(index)}, axis={int(dim) % x.ndim})"


@maps("aten.index_select", source="x.index_select(dim, idx)")
def _index_select(out, x, dim, index):
    return f"take({text(x)}, {text(index)}, axis={int(dim) % x.ndim})"


@maps("aten.scatter_add", source="x.scatter_add(dim, idx, src)")
def _scatter_add(out, x, dim, index, src):
    return f"scatter_add({text(x)}, {text(index)}, {text(src)}, axis={int(dim) % x.ndim})"


@maps("aten.index_add", source="x.index_add(dim, idx, src)")
def _index_add(out, x, dim, index, src, alpha=1):
    return f"index_add({text(x)}, {text(index)}, {_scaled(src, alpha)}, " \
           f"axis={int(dim) % x.ndim})"


@maps("aten.masked_fill", source="x.masked_fill(mask, v)")
def _masked_fill(out, x, mask, value):
    return f"masked_fill({text(x)}, {text(mask)}, value={text(value)})"


@maps("aten.cumsum", source="x.cumsum(dim)")
def _cumsum(out, x, dim, **_):
    return f"cumsum({text(x)}, axis={int(dim) % x.ndim})"


@maps("aten.cumprod", source="x.cumprod(dim)")
def _cumprod(out, x, dim, **_):
    return f"cumprod({text(x)}, axis={int(dim) % x.ndim})"


@maps("aten.index", source="x[idx], F.embedding")
def _index(out, x, indices):
    picked = [(k, i) for k, i in enumerate(indices) if i is not None]
    if len(picked) != 1 or picked[0][1].kind != "int":
        raise TraceError("indexing by more than one index tensor, or by a mask, has no "
                         "row: index one axis at a time (take)")
    axis, index = picked[0]
    return f"take({text(x)}, {text(index)}, axis={axis})"


# the neural-network families register into ATEN on import
from . import aten_nn  # noqa: E402,F401
