"""The convolution and pooling rows' columns: shape rules, NumPy forwards, SymPy meanings,
torch calls, max pooling's selector and hazard, and the window helpers the exact
adjoints share.

Layout is PyTorch's: an input is (N, C, *spatial) or, unbatched, (C, *spatial); a
convolution's weight is (C_out, C_in / groups, *kernel). A convolution with ``d``
spatial axes is a correlation (no kernel flip):

    out[n, o, i] = Σ_{c, k} x_pad[n, g·C_g + c, i·stride + k·dilation] · w[o, c, k]

over the C_g = C_in / groups channels of output channel o's group g, x_pad the input
zero-padded by ``padding`` on both sides of each spatial axis. Every array function here
takes batched or unbatched inputs, as torch does.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...base.shapes import ShapeError
from ..columns import sympy


# --------------------------------------------------------------------------- geometry
def spatial(value, d: int, name: str, least: int) -> tuple[int, ...]:
    """A parameter as ``d`` ints (an int, or a list of 1 or ``d`` ints, as torch takes
    them), each at least ``least``.

    Raises:
        ShapeError: another length, a nested list or a value below ``least``.
    """
    values = value if isinstance(value, tuple) else (value,)
    if len(values) == 1:
        values = values * d
    if len(values) != d or not all(isinstance(v, int) for v in values):
        raise ShapeError(f"{name}= must be an integer or a list of {d} integers, got "
                         f"{_text(value)}")
    if min(values) < least:
        raise ShapeError(f"{name}= must be at least {least}, got {_text(value)}")
    return tuple(values)


def _text(value) -> str:
    return str(list(value)) if isinstance(value, tuple) else str(value)


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output length along one axis: ⌊(size + 2·padding − dilation·(kernel − 1) − 1) /
    stride⌋ + 1."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def batched(x: np.ndarray, d: int) -> tuple[np.ndarray, bool]:
    """``x`` with a batch axis (a leading axis of 1 added to an unbatched input), and
    whether it had one."""
    x = np.asarray(x)
    return (x, True) if x.ndim == d + 2 else (x[None], False)


def unbatched(out: np.ndarray, had_batch: bool) -> np.ndarray:
    return out if had_batch else out[0]


def windows(xp: np.ndarray, kernel, stride, dilation) -> np.ndarray:
    """The windows of a batched, padded input ``xp`` (N, C, *S): a view of shape
    (N, C, *out, *kernel) whose element [n, c, i, k] is xp[n, c, i·stride + k·dilation]."""
    d = len(kernel)
    spans = [dl * (k - 1) + 1 for k, dl in zip(kernel, dilation)]
    view = np.lib.stride_tricks.sliding_window_view(xp, spans, axis=tuple(range(2, 2 + d)))
    return view[(slice(None),) * 2 + tuple(slice(None, None, s) for s in stride)
                + tuple(slice(None, None, dl) for dl in dilation)]


def scatter_windows(values: np.ndarray, shape, kernel, stride, dilation) -> np.ndarray:
    """The adjoint of :func:`windows`: each window element of ``values`` (N, C, *out,
    *kernel) added back at its place in an array of the padded input's ``shape``."""
    d = len(kernel)
    out = np.zeros(shape, dtype=np.result_type(values, np.float32))
    sizes = values.shape[2:2 + d]
    for k in itertools.product(*map(range, kernel)):
        # one kernel offset reaches distinct input elements: no two add to one place
        place = tuple(slice(i * dl, i * dl + s * (n - 1) + 1, s)
                      for i, dl, s, n in zip(k, dilation, stride, sizes))
        out[(slice(None), slice(None)) + place] += values[(slice(None),) * (2 + d) + k]
    return out


def pad(x: np.ndarray, padding) -> np.ndarray:
    """A batched input zero-padded by ``padding`` on both sides of each spatial axis."""
    return np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])


def crop(xp: np.ndarray, padding) -> np.ndarray:
    """The inverse of :func:`pad` (the padding's adjoint: the padded elements dropped)."""
    return xp[(slice(None), slice(None)) + tuple(slice(p, xp.shape[2 + i] - p)
                                                 for i, p in enumerate(padding))]


# --------------------------------------------------------------------------- convolution
def conv_geometry(w_shape, stride, padding, dilation):
    """(kernel, stride, padding, dilation) as tuples of d ints, d from the weight."""
    d = len(w_shape) - 2
    return (tuple(w_shape[2:]), spatial(stride, d, "stride", 1),
            spatial(padding, d, "padding", 0), spatial(dilation, d, "dilation", 1))


def conv_shape(d: int):
    """The shape rule of the convolution with ``d`` spatial axes (conv1d, conv2d)."""
    name, axes = f"conv{d}d", ("L",) if d == 1 else ("H", "W")

    def shape(x, w, stride, padding, dilation, groups):
        if len(x) not in (d + 1, d + 2):
            raise ShapeError(f"{name} needs an input of {d + 1} (C, {', '.join(axes)}) or "
                             f"{d + 2} (N, C, {', '.join(axes)}) dimensions, got shape "
                             f"{list(x)}")
        if len(w) != d + 2:
            raise ShapeError(f"{name} needs a weight of {d + 2} dimensions (C_out, "
                             f"C_in / groups, {', '.join('k' + a for a in axes)}), got "
                             f"shape {list(w)}")
        kernel, stride, padding, dilation = conv_geometry(w, stride, padding, dilation)
        if not isinstance(groups, int) or groups < 1:
            raise ShapeError(f"groups= must be a positive integer, got {groups}")
        channels, size = x[-d - 1], x[-d:]
        for what, n in (("weight's output channels", w[0]), ("input's channels", channels)):
            if n % groups:
                raise ShapeError(f"groups={groups} does not divide the {what} ({n})")
        if w[1] * groups != channels:
            raise ShapeError(f"the input has {channels} channels (shape {list(x)}); the "
                             f"weight {list(w)} expects {w[1]} per group × groups="
                             f"{groups} = {w[1] * groups}")
        out = []
        for i, (n, k, s, p, dl) in enumerate(zip(size, kernel, stride, padding, dilation)):
            span = dl * (k - 1) + 1
            if span > n + 2 * p:
                raise ShapeError(f"the kernel spans {span} (size {k}, dilation {dl}) along "
                                 f"axis {len(x) - d + i}, more than the padded input's "
                                 f"{n + 2 * p} (size {n} + 2 × padding {p})")
            out.append(out_size(n, k, s, p, dl))
        return tuple(x[:-d - 1]) + (w[0],) + tuple(out)

    return shape


def letters(d: int) -> tuple[str, str]:
    """einsum's letters for ``d`` output positions and ``d`` kernel offsets."""
    return "hwz"[:d], "HWZ"[:d]


def np_conv(x, w, stride, padding, dilation, groups):
    """The convolution's float forward: the padded input's windows contracted with the
    weight group by group (one einsum: BLAS for float arrays)."""
    w = np.asarray(w)
    kernel, stride, padding, dilation = conv_geometry(w.shape, stride, padding, dilation)
    d = len(kernel)
    xb, had = batched(x, d)
    win = windows(pad(xb, padding), kernel, stride, dilation)
    n, c, out = xb.shape[0], xb.shape[1], win.shape[2:2 + d]
    win = win.reshape((n, groups, c // groups) + out + kernel)
    wg = w.reshape((groups, w.shape[0] // groups, c // groups) + kernel)
    o, k = letters(d)
    y = np.einsum(f"ngc{o}{k},gpc{k}->ngp{o}", win, wg, optimize=True)
    return unbatched(y.reshape((n, w.shape[0]) + out), had)


def obj_conv(x, w, stride, padding, dilation, groups):
    """The convolution's SymPy meaning on object arrays, element by element from the
    defining sum (written apart from :func:`np_conv`, so that each checks the other)."""
    w = np.asarray(w, dtype=object)
    kernel, stride, padding, dilation = conv_geometry(w.shape, stride, padding, dilation)
    d = len(kernel)
    xb, had = batched(np.asarray(x, dtype=object), d)
    n, c, size = xb.shape[0], xb.shape[1], xb.shape[2:]
    outs = tuple(out_size(*a) for a in zip(size, kernel, stride, padding, dilation))
    per_group, cg = w.shape[0] // groups, c // groups
    y = np.empty((n, w.shape[0]) + outs, dtype=object)
    for b, o, *i in itertools.product(range(n), range(w.shape[0]), *map(range, outs)):
        terms = []
        for ci, k in itertools.product(range(cg), itertools.product(*map(range, kernel))):
            at = [ij * s + kj * dl - p for ij, kj, s, dl, p in
                  zip(i, k, stride, dilation, padding)]
            if all(0 <= a < m for a, m in zip(at, size)):
                terms.append(xb[(b, o // per_group * cg + ci, *at)] * w[(o, ci, *k)])
        y[(b, o, *i)] = sympy.Add(*terms)
    return unbatched(y, had)


def torch_conv(d: int):
    def call(x, w, stride, padding, dilation, groups):
        import torch.nn.functional as F

        return getattr(F, f"conv{d}d")(x, w, stride=stride, padding=padding,
                                       dilation=dilation, groups=groups)

    call.__name__ = f"torch_conv{d}d"
    return call


# torch's convolution backends that add a half-precision convolution's sums in float32
# and round once: oneDNN (on a CPU with avx512_fp16 or avx_ne_convert for float16, with
# avx512bw/vl/dq for bfloat16) and cuDNN (float32 math for half inputs)
FLOAT_ACCUMULATING = ("Mkldnn", "Cudnn")


def torch_adds_in_dtype(x_shape, w_shape, params, dtype: str, device: str = "cpu") -> bool:
    """Whether torch's convolution of these arguments adds partial sums in ``dtype``
    itself: the backend torch selects (``torch._C._select_conv_backend``, the choice
    ``F.conv2d`` makes: oneDNN where ``use_mkldnn`` holds, else aten's ``Slow2d`` /
    ``SlowDilated2d``, which round each GEMM's result into the dtype and add them there)
    is none of :data:`FLOAT_ACCUMULATING`. True where that cannot be asked (no torch,
    no such device, another torch's API): the looser model is the sound one."""
    p = dict(params)
    _, stride, padding, dilation = conv_geometry(w_shape, p["stride"], p["padding"],
                                                 p["dilation"])
    d = len(stride)
    try:
        import torch

        kind = getattr(torch, dtype)
        x_shape = tuple(x_shape) if len(x_shape) == d + 2 else (1,) + tuple(x_shape)
        # (no data: the shapes; requiring grad, as the witness's: torch's choice reads it)
        x, w = (torch.empty(s, dtype=kind, device=device, requires_grad=True)
                for s in (x_shape, tuple(w_shape)))
        backend = torch._C._select_conv_backend(x, w, None, list(stride), list(padding),
                                                list(dilation), False, [0] * d,
                                                p["groups"], None)
    except Exception:     # noqa: BLE001 (any failure: fall back to the sound model)
        return True
    return not any(name in str(backend) for name in FLOAT_ACCUMULATING)


def conv_terms(x_shape, w_shape, out_shape, k: int | None) -> int:
    """Terms of the sums a convolution's forward (``k`` None) or its cotangent into
    argument ``k`` adds (the rounding bound's γ(n)): C_in / groups × the kernel's size;
    into the input at most C_out / groups × the kernel's size; into the weight the batch
    times the output's spatial size."""
    kernel = math.prod(w_shape[2:])
    if k is None:
        return w_shape[1] * kernel
    if k == 0:
        groups = x_shape[-len(w_shape) + 1] // w_shape[1]
        return w_shape[0] // groups * kernel
    return math.prod(out_shape) // w_shape[0]


def pool_terms(op: str, kernel_size, stride, k: int | None) -> int:
    """Terms of a pooling's sums: avg_pool2d's forward adds a window; a cotangent adds
    the windows that overlap at an element (⌈k/s⌉ along each axis); max_pool2d's
    forward adds nothing (a selection)."""
    kernel, stride = pool_geometry(kernel_size, stride)
    if k is None:
        return math.prod(kernel) if op == "avg_pool2d" else 1
    return math.prod(-(-a // s) for a, s in zip(kernel, stride))


# --------------------------------------------------------------------------- pooling
def pool_geometry(kernel_size, stride):
    """(kernel, stride) of a 2-d pooling as pairs; stride None is the kernel."""
    if kernel_size is None:
        raise ShapeError("the kernel size is required (e.g. 2 or [2, 3])")
    kernel = spatial(kernel_size, 2, "kernel_size", 1)
    return kernel, kernel if stride is None else spatial(stride, 2, "stride", 1)


def pool_shape(x, kernel_size, stride):
    if len(x) not in (3, 4):
        raise ShapeError(f"pooling needs an input of 3 (C, H, W) or 4 (N, C, H, W) "
                         f"dimensions, got shape {list(x)}")
    kernel, stride = pool_geometry(kernel_size, stride)
    for i, (n, k) in enumerate(zip(x[-2:], kernel)):
        if k > n:
            raise ShapeError(f"the kernel size {k} is larger than the input's {n} along "
                             f"axis {len(x) - 2 + i}")
    return tuple(x[:-2]) + tuple(out_size(n, k, s, 0, 1)
                                 for n, k, s in zip(x[-2:], kernel, stride))


def pool_windows(x, kernel_size, stride):
    """(the windows of a batched ``x`` (N, C, OH, OW, kh, kw), whether ``x`` had a batch
    axis)."""
    kernel, stride = pool_geometry(kernel_size, stride)
    xb, had = batched(x, 2)
    return windows(xb, kernel, stride, (1, 1)), had


def np_avg_pool2d(x, kernel_size, stride):
    win, had = pool_windows(x, kernel_size, stride)
    return unbatched(np.mean(win, axis=(-2, -1)), had)


def np_max_pool2d(x, kernel_size, stride):
    win, had = pool_windows(x, kernel_size, stride)
    return unbatched(np.max(win, axis=(-2, -1)), had)


def _obj_windows(x, kernel_size, stride):
    """Each window's elements as a list, in an object array of the pooling's output shape
    (batched), from the defining indices."""
    kernel, stride = pool_geometry(kernel_size, stride)
    xb, had = batched(np.asarray(x, dtype=object), 2)
    outs = [out_size(n, k, s, 0, 1) for n, k, s in zip(xb.shape[2:], kernel, stride)]
    cells = np.empty(xb.shape[:2] + tuple(outs), dtype=object)
    for idx in np.ndindex(*cells.shape):
        (b, c, i, j), (kh, kw) = idx, kernel
        cells[idx] = [xb[b, c, i * stride[0] + a, j * stride[1] + e]
                      for a in range(kh) for e in range(kw)]
    return cells, had


def obj_avg_pool2d(x, kernel_size, stride):
    cells, had = _obj_windows(x, kernel_size, stride)
    out = np.empty(cells.shape, dtype=object)
    for idx in np.ndindex(*cells.shape):
        out[idx] = sympy.Add(*cells[idx]) / len(cells[idx])
    return unbatched(out, had)


def obj_max_pool2d(x, kernel_size, stride, onehot):
    """max pooling as a selection: each window's element that ``onehot`` (the selector's
    symbols, (N, C, OH, OW, kh, kw)) picks."""
    cells, had = _obj_windows(x, kernel_size, stride)
    picks = batched(np.asarray(onehot, dtype=object), 4)[0]
    out = np.empty(cells.shape, dtype=object)
    for idx in np.ndindex(*cells.shape):
        out[idx] = sympy.Add(*[e * h for e, h in zip(cells[idx], picks[idx].flat)])
    return unbatched(out, had)


def max_pool2d_pick(x, kernel_size, stride, *rest):
    """The selector: one-hot over each window (N, C, OH, OW, kh, kw; unbatched without
    N) of its first largest element, the one torch's max_pool2d picks."""
    win, had = pool_windows(np.asarray(x, dtype=float), kernel_size, stride)
    flat = win.reshape(win.shape[:4] + (-1,))
    hot = np.zeros(flat.shape)
    np.put_along_axis(hot, np.argmax(flat, axis=-1)[..., None], 1.0, axis=-1)
    return unbatched(hot.reshape(win.shape), had)


def max_pool2d_gap(x, kernel_size, stride):
    """The hazard: for each input element, the smallest gap between the largest two
    elements of the windows it lies in (inf in none), where the pick switches. Shaped
    like the input, so that sampling redraws only the windows near a tie."""
    x = np.asarray(x, dtype=float)
    win, had = pool_windows(x, kernel_size, stride)
    kernel, step = pool_geometry(kernel_size, stride)
    flat = win.reshape(win.shape[:4] + (-1,))
    if flat.shape[-1] < 2:
        return None
    top = -np.partition(-flat, 1, axis=-1)
    gap = top[..., 0] - top[..., 1]
    near = np.full(batched(x, 2)[0].shape, np.inf)
    oh, ow = gap.shape[2:]
    for a, e in itertools.product(range(kernel[0]), range(kernel[1])):
        place = (slice(None), slice(None), slice(a, a + step[0] * (oh - 1) + 1, step[0]),
                 slice(e, e + step[1] * (ow - 1) + 1, step[1]))
        near[place] = np.minimum(near[place], gap)
    return unbatched(near, had)


def torch_pool(fname: str):
    def call(x, kernel_size, stride):
        import torch.nn.functional as F

        return getattr(F, fname)(x, kernel_size, stride=stride)

    call.__name__ = f"torch_{fname}"
    return call
