"""The mapping table's (:data:`.aten.ATEN`) neural-network families: activations with
parameters, convolution and pooling, padding, the reductions that return values and
indices (``max.dim``, ``sort``, ``topk``), vector norms, splits and the empty tensors
decompositions allocate. Registered into the one table by :func:`.table.maps`.

An op that returns indices beside its values (``sort``, ``topk``, ``max.dim``,
``max_pool2d_with_indices``) gives the indices a text that names itself and parses as no
row (:func:`_no_indices`): the values trace, a use of the indices (a ``gather`` by them)
fails with its name.
"""

from __future__ import annotations

import math

from .table import maps, operand, text
from .values import NoFormula, TraceError, axes, axis_text, number, shape_text


def _no_indices(op: str, x) -> str:
    return NoFormula(f"the indices {op} returns have no formula (no row takes computed "
                     "indices: only an integer input's)")


def _axis(dim, ndim: int) -> int:
    return int(dim) % max(ndim, 1)


# ------------------------------------------------------------------ activations

@maps("aten.leaky_relu", source="F.leaky_relu(x, slope)")
def _leaky_relu(out, x, negative_slope=0.01):
    return f"leaky_relu({text(x)}, slope={number(negative_slope)})"


@maps("aten.hardtanh", source="F.hardtanh(x, lo, hi)")
def _hardtanh(out, x, min_val=-1.0, max_val=1.0):
    return f"hardtanh({text(x)}, lo={number(min_val)}, hi={number(max_val)})"


@maps("aten.elu", source="F.elu(x, alpha)")
def _elu(out, x, alpha=1.0, scale=1.0, input_scale=1.0):
    if input_scale == 1:
        inner = f"elu({text(x)}, alpha={number(alpha)})"
    else:   # scale·(x, or alpha·(exp(s·x) − 1)) is scale·elu(s·x, alpha·s) / s
        inner = f"elu({number(input_scale)} * {operand(x)}, " \
                f"alpha={number(alpha * input_scale)}) / {number(input_scale)}"
    return inner if scale == 1 else f"{number(scale)} * ({inner})"


@maps("aten.softplus", source="F.softplus(x, beta, threshold)")
def _softplus(out, x, beta=1.0, threshold=20.0):
    # the exact softplus(beta x) / beta: torch answers x where beta x > threshold, a
    # difference below exp(-threshold) in value, the whole derivative's tail in slope
    if beta == 1:
        return f"softplus({text(x)})"
    return f"softplus({number(beta)} * {operand(x)}) / {number(beta)}"


# ------------------------------------------------------------------ allocation

@maps("aten.empty", "aten.empty_like", source="F.batch_norm (decomposed), F.binary_cross_entropy_with_logits")
def _empty(out, *args, **_):
    # an empty tensor's values are whatever memory held: zeros are one such
    return f"zeros({shape_text(out.shape)})"


# ------------------------------------------------------------------ reductions with indices

def _dim_reduction(row: str, op: str):
    def emit(outs, x, dim=None, keepdim=False):
        if dim is None:
            return (f"{row}({text(x)})",)
        keep = ", keepdims=True" if keepdim else ""
        return (f"{row}({text(x)}, axis={_axis(dim, x.ndim)}{keep})", _no_indices(op, x))
    return emit


maps("aten.max", source="torch.max(x, dim).values")(_dim_reduction("max", "max"))
maps("aten.min", source="torch.min(x, dim).values")(_dim_reduction("min", "min"))


@maps("aten.sort", source="torch.sort(x, dim).values")
def _sort(outs, x, dim=-1, descending=False, stable=None):
    if isinstance(dim, bool):    # sort.stable(x, *, stable, dim, descending)
        raise TraceError("sort's overload is not mapped that way")
    desc = ", descending=True" if descending else ""
    return (f"sort({text(x)}, axis={_axis(dim, x.ndim)}{desc})", _no_indices("sort", x))


@maps("aten.topk", source="torch.topk(x, k, dim).values")
def _topk(outs, x, k, dim=-1, largest=True, sorted=True):
    axis = _axis(dim, x.ndim)
    values = f"topk({text(x)}, k={int(k)}, axis={axis})" if largest else \
        f"-topk(-{operand(x)}, k={int(k)}, axis={axis})"
    return (values, _no_indices("topk", x))


@maps("aten.linalg_vector_norm", source="torch.linalg.vector_norm(x, ord, dim), F.normalize")
def _vector_norm(out, x, ord=2, dim=None, keepdim=False, **_):
    if not (math.isinf(ord) and ord > 0) and ord < 1:
        raise TraceError(f"vector_norm of ord {ord} has no row (ord 2, 1, inf or p >= 1)")
    keep = ", keepdims=True" if keepdim else ""
    return f"norm({text(x)}, ord={number(float(ord))}, " \
           f"axis={axis_text(axes(dim, x.ndim))}{keep})"


# ------------------------------------------------------------------ splits and padding

@maps("aten.split_with_sizes", source="torch.split(x, sizes, dim)")
def _split_with_sizes(outs, x, sizes, dim=0):
    whole = f"split({text(x)}, sizes={shape_text(sizes)}, axis={_axis(dim, x.ndim)})"
    return tuple(f"{whole}[{i}]" for i in range(len(sizes)))


@maps("aten.split", source="torch.chunk(x, n, dim), torch.split(x, size, dim)")
def _split(outs, x, split_size, dim=0):
    axis = _axis(dim, x.ndim)
    sizes = [o.shape[axis] for o in outs]
    return _split_with_sizes(outs, x, sizes, axis)


@maps("aten.constant_pad_nd", source="F.pad(x, pad, value=v)")
def _constant_pad(out, x, pad, value=0):
    pairs = [[0, 0] for _ in range(x.ndim)]
    for i in range(0, len(pad), 2):   # torch: the last axis first
        pairs[x.ndim - 1 - i // 2] = [int(pad[i]), int(pad[i + 1])]
    if any(w < 0 for p in pairs for w in p):
        raise TraceError("F.pad with negative widths (a crop) has no pad row: slice instead")
    widths = "[" + ", ".join(f"[{a}, {b}]" for a, b in pairs) + "]"
    return f"pad({text(x)}, widths={widths}, value={number(float(value))})"


# ------------------------------------------------------------------ convolution and pooling

@maps("aten.convolution", source="F.conv1d, F.conv2d (with bias)")
def _convolution(out, x, w, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    d = x.ndim - 2
    if transposed or d not in (1, 2):
        raise TraceError(f"a {'transposed ' if transposed else ''}{d}-d convolution has "
                         "no row (conv1d and conv2d)")
    conv = f"conv{d}d({text(x)}, {text(w)}, stride={shape_text(stride)}, " \
           f"padding={shape_text(padding)}, dilation={shape_text(dilation)}, " \
           f"groups={int(groups)})"
    if bias is None:
        return conv
    return f"{conv} + reshape({text(bias)}, {shape_text([bias.shape[0]] + [1] * d)})"


def _pool_check(name, padding, dilation=1, ceil_mode=False):
    flat = padding if isinstance(padding, (list, tuple)) else [padding]
    dil = dilation if isinstance(dilation, (list, tuple)) else [dilation]
    if any(p != 0 for p in flat) or any(v != 1 for v in dil) or ceil_mode:
        raise TraceError(f"{name} with padding, dilation or ceil_mode has no row")


@maps("aten.avg_pool2d", source="F.avg_pool2d(x, k, stride)")
def _avg_pool2d(out, x, kernel_size, stride=(), padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    _pool_check("avg_pool2d", padding, 1, ceil_mode)
    if divisor_override is not None:
        raise TraceError("avg_pool2d with divisor_override has no row")
    stride = stride or kernel_size
    return f"avg_pool2d({text(x)}, kernel_size={shape_text(kernel_size)}, " \
           f"stride={shape_text(stride)})"


@maps("aten.max_pool2d_with_indices", source="F.max_pool2d(x, k, stride)")
def _max_pool2d(outs, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    _pool_check("max_pool2d", padding, dilation, ceil_mode)
    stride = stride or kernel_size
    return (f"max_pool2d({text(x)}, kernel_size={shape_text(kernel_size)}, "
            f"stride={shape_text(stride)})", _no_indices("max_pool2d", x))


@maps("aten.log2", source="torch.log2(x)")
def _log2(out, x):
    return f"log({text(x)}) / {number(math.log(2.0))}"


@maps("aten.log10", source="torch.log10(x)")
def _log10(out, x):
    return f"log({text(x)}) / {number(math.log(10.0))}"


@maps("aten.repeat", source="x.repeat(sizes)")
def _repeat(out, x, repeats):
    # x tiled: each axis of size n becomes (r, n), expanded, then merged to r·n
    lead = len(repeats) - x.ndim
    shape = [1] * lead + list(x.shape)
    split, tiled = [], []
    for r, n in zip(repeats, shape):
        split += [1, n]
        tiled += [int(r), n]
    return f"reshape(expand(reshape({text(x)}, {shape_text(split)}), " \
           f"{shape_text(tiled)}), {shape_text(out.shape)})"
