"""The spectral rows (fft, ifft, rfft, irfft) recorded as PyTorch records
``view_as_real(torch.fft.fft(view_as_complex(x), n, dim, norm))``: a clone where the
operand is not contiguous (``x.contiguous()``), ViewAsComplexBackward0, then a
SliceBackward0 or ConstantPadNdBackward0 where ``n`` truncates or pads the transformed
axis, the transform's node (FftC2CBackward0, FftR2CBackward0, FftC2RBackward0: the
row's own VJP, looked up when the backward runs), and ViewAsRealBackward0 (irfft's
result is real: none). The views' VJPs are the identity on the layout; the slice's pads
the cotangent back with zeros, the padding's truncates it."""

from __future__ import annotations

import numpy as np

from ..rules import RULES
from ..rules.spectral.columns import COMPLEX_IN, COMPLEX_OUT, fit, lengths
from .graph import grad_mode, record
from .tensor import Tensor
from .views import _contiguous, _data, _derive


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
    return _derive(x, fit(_data(x), size, axis), name, lambda g, ans, a: fit(g, m, axis))


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
        out = Tensor(rule.call("numpy", [a], params))
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
