"""The tensor column of the spectral rows: each adjoint as a named NumPy function of the
cotangent applied with ``b.apply``, in float64 (no dense DFT matrix: the FFT's own
rounding, ≈ log2 N ulps). Written apart from the engine's VJPs (:mod:`.vjps`), from the
definition rather than from the dual transform, so that a slip in one is not the
reference's too: with y = s·F·P x,

- fft: x̄ = Pᵀ s Fᴴ ȳ = Pᵀ s conj(F conj(ȳ)) (F: numpy's unnormalised fft);
- ifft: F is the inverse DFT, Fᴴ the forward one: x̄ = Pᵀ s fft(ȳ);
- rfft: x̄_j = s Re Σ_k e^{+2πi jk/N} ȳ_k over the kept bins, the real part of the
  full inverse DFT of ȳ padded with zeros to N bins;
- irfft: h̄_k = w_k s Σ_j ȳ_j e^{-2πi jk/N}, the full DFT of ȳ at the kept bins, w_k
  = 1 at k = 0 and 2k = N (whose imaginary parts irfft ignores: 0), 2 elsewhere.

Its own adjoint, which double backward takes, is the forward row itself (the adjoint of
Aᵀ is A)."""

from __future__ import annotations

import numpy as np

from ..row import TensorRule
from .columns import as_complex, as_real, fit, lengths, points, scale


def _transform(name: str, g, d: int, big: int):
    """Fᴴ ȳ along (negative) axis ``d``, unscaled, at the operand's bins."""
    if name == "fft":
        return np.conj(np.fft.fft(np.conj(as_complex(g)), axis=d))
    if name == "ifft":
        return np.fft.fft(as_complex(g), axis=d)
    if name == "rfft":
        return np.real(np.fft.ifft(fit(as_complex(g), big, d), axis=d, norm="forward"))
    k = np.arange(big // 2 + 1).reshape((-1,) + (1,) * (-d - 1))
    full = np.fft.fft(np.asarray(g, dtype=float), axis=d)
    h = fit(full, big // 2 + 1, d) * np.where((k == 0) | (2 * k == big), 1, 2)
    return np.where((k == 0) | (2 * k == big), h.real, h)


def _adjoint(name: str, g, shape, n, axis, norm):
    """The adjoint of row ``name`` (a VJP) into its operand of (layout) ``shape``."""
    d, m, size, _ = lengths(name, shape, n, axis)
    big = points(name, shape, n, axis)
    out = fit(_transform(name, g, d, big), m, d) * scale(name, norm, big)
    return as_real(out) if name != "rfft" else out


def _named(name: str):
    """``<name>_adjoint(g, shape, n=None, axis=-1, norm="backward")``, a module-level
    function (the reference prints it by name, with the parameters that differ from
    the row's defaults), its own adjoint the row itself."""
    def adjoint(g, shape, n=None, axis=-1, norm="backward"):
        return _adjoint(name, g, shape, n, axis, norm)

    def adjoint_adjoint(b, G, g, shape, **p):
        yield g, b.row(name, G, **p)

    adjoint.__name__ = adjoint.__qualname__ = f"{name}_adjoint"
    adjoint.adjoint, adjoint.linear_in = adjoint_adjoint, (0,)
    return adjoint


fft_adjoint, ifft_adjoint = _named("fft"), _named("ifft")
rfft_adjoint, irfft_adjoint = _named("rfft"), _named("irfft")
ADJOINTS = {"fft": fft_adjoint, "ifft": ifft_adjoint, "rfft": rfft_adjoint,
            "irfft": irfft_adjoint}
_DEFAULTS = {"n": None, "axis": -1, "norm": "backward"}


def tensor_rule(name: str) -> TensorRule:
    def vjp(b, g, ans, x, n, axis, norm):
        given = {k: v for k, v in (("n", n), ("axis", axis), ("norm", norm))
                 if v != _DEFAULTS[k]}
        return b.apply(ADJOINTS[name], g, shape=x.shape, **given)

    vjp.__name__ = f"{name}_tensor"
    return TensorRule((vjp,))
