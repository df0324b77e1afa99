"""The rounding bound (:mod:`gradcheck.bounds.model`) of a convolution's cotangents beyond
its float32 sums: the rounding into the dtype.

Where torch forms a cotangent's sums in float32 and rounds once (oneDNN, cuDNN) that
rounding is u·|c|.
Where it adds rounded parts in the dtype itself (aten's ``Slow2d``/``SlowDilated2d``:
torch's float16 convolution on a CPU without avx512_fp16, such as AMD's EPYC; any
low-precision dtype with oneDNN off), each of m parts p_j is rounded once and each of
the m − 1 additions rounds a partial sum of at most Σ|p_j|: m·u·Σ|p_j| in all. The
parts are x̄'s per kernel offset (col2im adds them; m the offsets that reach the
element) and w̄'s per batch sample (m = N), :func:`gradcheck.rules.conv.vjps.
conv_input_parts` and ``conv_weight_parts``. An emulation of exactly that is torch's
float16 result bit for bit at 99.96% of a 64-channel layer's x̄ and w̄ (one float16
step off at the rest: float32 sums in another order), where one rounding of exact sums
is at 42% and 74% (tests/test_conv_half.py). Which kernel runs is torch's own choice,
asked of torch (:func:`gradcheck.rules.conv.columns.torch_adds_in_dtype`): a CPU whose
oneDNN runs float16 keeps the one-rounding bound. float32 and float64 keep u·|c|
(their u is the accumulator's own, and γ(n)·u·Σ|terms| holds the few parts: with oneDNN
on, aten runs float32 for 1×1 kernels alone, one part).
"""

from __future__ import annotations

import numpy as np

from ..rules.conv.columns import torch_adds_in_dtype
from ..rules.conv.vjps import conv_input_parts, conv_weight_parts


def conv_rounding(b, node, k: int, g, args, c) -> np.ndarray:
    """The rounding into the dtype of the convolution's cotangent ``c`` into argument
    ``k`` (ḡ ``g``, with the leading axis of many cotangents where ``b`` carries them)
    for the bounds ``b``: u·|c|, or m·u·Σ|parts| where torch adds parts in the dtype."""
    if b.u <= b.u_acc or not torch_adds_in_dtype(node.args[0].shape, node.args[1].shape,
                                                  node.params, b.dtype, b.device):
        return b.u * np.abs(c)
    x, w = args
    params = [v for _, v in node.params]
    if k == 0:
        def parts(gi):
            return conv_input_parts(gi, w, np.shape(x), *params)
    else:
        def parts(gi):
            return conv_weight_parts(gi, x, np.shape(w), *params)
    bounds = [b.u * m * total for total, m in map(parts, g if b.lead else [g])]
    return np.stack(bounds) if b.lead else bounds[0]
