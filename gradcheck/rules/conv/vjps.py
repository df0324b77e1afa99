"""The engine column of the convolution and pooling rows: PyTorch's backward formulas as
NumPy VJPs (aten's convolution_backward and the pooling backward kernels), each written
as PyTorch computes it, apart from the exact tensor adjoints of :mod:`.conv_tensor`:

- the input's cotangent of a convolution is a transposed convolution: the output's
  cotangent dilated by the stride (stride − 1 zeros between elements), padded by
  dilation·(kernel − 1) − padding (cropped where that is negative), correlated with the
  kernel flipped and its in- and output channels swapped, group by group;
- the weight's cotangent is a convolution of the padded input, its channels taken as
  the batch and its batch as the channels, with the output's cotangent as the kernel,
  stride and dilation swapped;
- avg_pool2d spreads each output's cotangent evenly over its window, max_pool2d sends
  it to the index of the window's (first) largest element.

aten's own convolution on the CPU without oneDNN (the ``Slow2d``/``SlowDilated2d``
backends: float16 wherever the CPU lacks avx512_fp16, any dtype with oneDNN off) forms
these sums in parts and adds the parts in the dtype itself: the input's cotangent as one
GEMM per kernel offset, each rounded, added by col2im (``grad_input += ...``); the
weight's as one GEMM per batch sample added into the weight's gradient (β = 1).
:func:`conv_input_parts` and :func:`conv_weight_parts` give those parts' magnitudes, for
the rounding bound (:mod:`gradcheck.bounds.bilinear`).
"""

from __future__ import annotations

import itertools

import numpy as np

from .columns import (batched, conv_geometry, crop, letters, max_pool2d_pick, np_conv, pad,
                      pool_geometry, scatter_windows, unbatched)


def _pad_or_crop(a: np.ndarray, before, after) -> np.ndarray:
    """``a`` padded by ``before``/``after`` zeros on each spatial axis, cropped where a
    width is negative."""
    widths = [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(before, after)]
    a = np.pad(a, widths)
    return a[(slice(None), slice(None)) + tuple(
        slice(max(-b, 0), a.shape[2 + i] - max(-e, 0))
        for i, (b, e) in enumerate(zip(before, after)))]


def conv_input_vjp(g, ans, x, w, stride, padding, dilation, groups):
    """x̄ = conv_transpose(ḡ, w) (see the module docstring)."""
    kernel, stride, padding, dilation = conv_geometry(np.shape(w), stride, padding, dilation)
    d = len(kernel)
    gb, had = batched(g, d)
    size = np.shape(x)[-d:]
    n, c_out, outs = gb.shape[0], gb.shape[1], gb.shape[2:]
    spread = np.zeros((n, c_out) + tuple((o - 1) * s + 1 for o, s in zip(outs, stride)),
                      dtype=gb.dtype)
    spread[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)] = gb
    before = [dl * (k - 1) - p for k, dl, p in zip(kernel, dilation, padding)]
    after = [m + p - (o - 1) * s - 1 for m, p, o, s in zip(size, padding, outs, stride)]
    w = np.asarray(w)
    cg = w.shape[1]
    flipped = np.flip(w, axis=tuple(range(2, 2 + d)))
    swapped = flipped.reshape((groups, c_out // groups, cg) + kernel).swapaxes(1, 2)
    swapped = swapped.reshape((groups * cg, c_out // groups) + kernel)
    grad = np_conv(_pad_or_crop(spread, before, after), swapped, 1, 0, dilation, groups)
    return unbatched(grad, had)


def conv_weight_vjp(g, ans, x, w, stride, padding, dilation, groups):
    """w̄ = conv(x_padᵀ, ḡᵀ) group by group (see the module docstring)."""
    kernel, stride, padding, dilation = conv_geometry(np.shape(w), stride, padding, dilation)
    d = len(kernel)
    xb, gb = batched(x, d)[0], batched(g, d)[0]
    xp = pad(xb, padding)
    cg, per_group = np.shape(w)[1], gb.shape[1] // groups
    parts = []
    for k in range(groups):
        xs = xp[:, k * cg:(k + 1) * cg].swapaxes(0, 1)           # (C_g, N, *S_pad)
        gs = gb[:, k * per_group:(k + 1) * per_group].swapaxes(0, 1)   # (C_out/g, N, *O)
        full = np_conv(xs, gs, dilation, 0, stride, 1)           # (C_g, C_out/g, *K')
        parts.append(full[(slice(None), slice(None)) + tuple(slice(0, k_) for k_ in kernel)]
                     .swapaxes(0, 1))
    return np.concatenate(parts, axis=0)


def conv_input_parts(g, w, shape, stride, padding, dilation, groups):
    """(Σ_k |t_k|, m): the magnitudes of the parts col2im adds into x̄, one per kernel
    offset k (t_k[n, c, i] = Σ_o ḡ[n, o, i]·w[o, c, k] over the group's output channels,
    added at x_pad[n, c, i·stride + k·dilation]), summed per element of x (``shape``),
    and how many parts reach each element (m, broadcast over batch and channels)."""
    kernel, stride, padding, dilation = conv_geometry(np.shape(w), stride, padding, dilation)
    d = len(kernel)
    gb, had = batched(g, d)
    n, c_out, outs = gb.shape[0], gb.shape[1], gb.shape[2:]
    c = shape[-d - 1]
    spatial = tuple(m + 2 * p for m, p in zip(shape[-d:], padding))
    total, count = np.zeros((n, c) + spatial), np.zeros((1, 1) + spatial)
    gg = gb.reshape((n, groups, c_out // groups) + outs)
    wg = np.reshape(w, (groups, c_out // groups, c // groups) + kernel)
    o = letters(d)[0]
    for k in itertools.product(*map(range, kernel)):   # one offset at a time: memory
        t = np.einsum(f"ngp{o},gpc->ngc{o}", gg, wg[(Ellipsis,) + k], optimize=True)
        place = (slice(None), slice(None)) + tuple(
            slice(i * dl, i * dl + s * (m - 1) + 1, s)
            for i, dl, s, m in zip(k, dilation, stride, outs))
        total[place] += np.abs(t.reshape((n, c) + outs))
        count[place] += 1
    return unbatched(crop(total, padding), had), crop(count, padding)[0, 0]


def conv_weight_parts(g, x, w_shape, stride, padding, dilation, groups):
    """(Σ_n |w̄_n|, N): the magnitudes of the per-sample parts w̄_n (each batch sample's
    own weight cotangent) aten adds into w̄, and how many there are."""
    d = len(w_shape) - 2
    xb, gb = batched(x, d)[0], batched(g, d)[0]
    w = np.broadcast_to(0.0, w_shape)          # (its shape only)
    total = np.zeros(w_shape)
    for i in range(xb.shape[0]):
        total += np.abs(conv_weight_vjp(gb[i:i + 1], None, xb[i:i + 1], w, stride,
                                        padding, dilation, groups))
    return total, xb.shape[0]


def avg_pool2d_vjp(g, ans, x, kernel_size, stride):
    """Each output's cotangent over its window's kh·kw elements, evenly."""
    kernel, step = pool_geometry(kernel_size, stride)
    gb, had = batched(g, 2)
    spread = np.broadcast_to((gb / (kernel[0] * kernel[1]))[..., None, None],
                             gb.shape + kernel)
    return unbatched(scatter_windows(spread, batched(x, 2)[0].shape, kernel, step, (1, 1)),
                     had)


def max_pool2d_vjp(g, ans, x, kernel_size, stride):
    """Each output's cotangent to its window's first largest element (torch's index)."""
    kernel, step = pool_geometry(kernel_size, stride)
    gb, had = batched(g, 2)
    hot = batched(max_pool2d_pick(x, kernel_size, stride), 4)[0].astype(gb.dtype)
    return unbatched(scatter_windows(gb[..., None, None] * hot, batched(x, 2)[0].shape,
                                     kernel, step, (1, 1)), had)
