"""The spectral rows (fft, ifft, rfft, irfft) recorded as PyTorch records
``view_as_real(torch.fft.fft(view_as_complex(x), n, dim, norm))``: a clone where the
operand is not contiguous (``x.contiguous()``), ViewAsComplexBackward0, then a
SliceBackward0 or ConstantPadNdBackward0 where ``n`` truncates or pads the transformed
axis, the transform's node (FftC2CBackward0, FftR2CBackward0, FftC2RBackward0: the
row's own VJP, looked up when the backward runs; its result strided as PyTorch's
strides it), and ViewAsRealBackward0 (irfft's result is real: none). The views' VJPs
are the identity on the layout; the slice's pads the cotangent back with zeros, the
padding's truncates it."""

from __future__ import annotations

import numpy as np

from ..rules import RULES
from ..rules.spectral.columns import COMPLEX_IN, COMPLEX_OUT, fit, lengths
from .graph import grad_mode, record
from .tensor import Tensor
from .views import _contiguous, _data, _derive, _strides


def _same(g, ans, a):
    return g


def _resize(x, size: int, d: int, pair: bool):
    """``x`` truncated (SliceBackward0) or zero-padded (ConstantPadNdBackward0) to
    ``size`` along complex axis ``d``; itself where it has that length."""
    axis = d - 1 if pair else d
    m = np.shape(_data(x))[axis]
    if m == size:
        return x
    name = "SliceBackward0" if size < m else "ConstantPadNdBackward0"
    data = fit(_data(x), size, axis)     # (constant_pad_nd's result is contiguous)
    data = data if size < m else np.ascontiguousarray(data)
    return _derive(x, data, name, lambda g, ans, a: fit(g, m, axis))


def _laid_out(out: np.ndarray, a: np.ndarray, d: int, name: str) -> np.ndarray:
    """``out`` with the strides PyTorch's FFT gives its result (``_exec_fft``): the
    untransformed axes in the order of the operand's strides, largest first, then the
    transformed axis innermost (the layout's pair after it), so that the ops after it
    (their TensorIterator layouts, a later ``contiguous()``) see what PyTorch's see."""
    ndim = a.ndim - COMPLEX_IN[name]
    d = d + ndim
    strides = _strides(a)
    order = sorted((i for i in range(ndim) if i != d), key=lambda i: -strides[i]) + [d]
    order += [ndim] if COMPLEX_OUT[name] else []
    return np.transpose(np.ascontiguousarray(np.transpose(out, order)), np.argsort(order))


def _op(name: str):
    def fn(x, n=None, axis=-1, norm="backward"):
        x = x if isinstance(x, Tensor) else Tensor(np.asarray(x))
        rule = RULES[name]
        params = rule.bind([x.shape], {"n": n, "axis": axis, "norm": norm})
        d, m, size, _ = lengths(name, x.shape, n, axis)
        if COMPLEX_IN[name]:
            x = _contiguous(x)
            x = _derive(x, _data(x), "ViewAsComplexBackward0", _same)
        x = _resize(x, size, d, COMPLEX_IN[name])
        if name == "irfft" and n is None:   # (the default n read off the unresized x)
            params = rule.bind([x.shape], {"n": 2 * (m - 1), "axis": axis, "norm": norm})
        a = _data(x)
        out = Tensor(_laid_out(rule.call("numpy", [a], params), a, d, name))
        if x._requires_grad and grad_mode.enabled:   # (rfft's node saves its operand)
            record(out, rule.grad_fn_name([a], params), (x,), (a,),
                   (lambda g, ans, a: RULES[name].vjp(0, g, ans, [a], params),),
                   saves=rule.engine.saves)
        return _derive(out, out.data, "ViewAsRealBackward0", _same) if COMPLEX_OUT[name] \
            else out

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The rule table's ``{name}`` ({RULES[name].doc}), as PyTorch records it."
    return fn


BY_HAND = {name: _op(name) for name in ("fft", "ifft", "rfft", "irfft")}
