"""The engine column of the spectral rows: their VJPs, the adjoints in the layout, in
PyTorch's convention (the realified gradient: for real L, x̄ = ∂L/∂Re x + i ∂L/∂Im x).

For the real inner product of layouts, ⟨a, b⟩ = Re Σ conj(a) b, the adjoint of a
complex-linear map A is Aᴴ. With y = s·F·P x (P: the zero padding or truncation of
``n``, F the DFT of N points, s the norm's scale):

- fft, ifft: x̄ = Pᵀ s Fᴴ ȳ, the inverse transform (ifft for fft, fft for ifft) with the
  dual norm (s is its scale there), then Pᵀ: truncation's adjoint pads with zeros,
  padding's truncates (torch's fft_c2c_backward);
- rfft: y keeps bins 0..N/2 of F x, x real: x̄_j = s Re Σ_k e^{+2πi jk/N} ȳ_k, which is
  irfft of ȳ with its interior bins halved (irfft counts them twice as the Hermitian
  half), dual norm, then Pᵀ (torch's fft_r2c_backward);
- irfft: y_j = s Σ_k w_k Re(h_k e^{+2πi jk/N}), w_k 2 on interior bins, 1 on the DC bin
  and the Nyquist bin (N even), whose imaginary parts it ignores: h̄_k = w_k s Σ_j ȳ_j
  e^{-2πi jk/N}, rfft of ȳ with interior bins doubled, dual norm, the DC and Nyquist
  imaginary parts 0, then Pᵀ (torch's fft_c2r_backward).

Each takes a cotangent with one more leading axis as it is (axes are negative).
"""

from __future__ import annotations

import numpy as np

from .columns import DUAL, as_complex, as_real, fit, lengths


def interior(count: int) -> slice:
    """The interior bins of a one-sided spectrum of N = ``count`` points (N//2 + 1
    bins): neither the DC bin nor, N even, the Nyquist bin."""
    return slice(1, count - count // 2)


def _along(d: int, index) -> tuple:
    return (Ellipsis, index) + (slice(None),) * (-d - 1)


def fft_vjp(g, ans, x, n, axis, norm):
    d, m, size, _ = lengths("fft", np.shape(x), n, axis)
    return as_real(fit(np.fft.ifft(as_complex(g), axis=d, norm=DUAL[norm]), m, d))


def ifft_vjp(g, ans, x, n, axis, norm):
    d, m, size, _ = lengths("ifft", np.shape(x), n, axis)
    return as_real(fit(np.fft.fft(as_complex(g), axis=d, norm=DUAL[norm]), m, d))


def rfft_vjp(g, ans, x, n, axis, norm):
    d, m, size, _ = lengths("rfft", np.shape(x), n, axis)
    h = as_complex(g).copy()
    h[_along(d, interior(size))] *= 0.5
    return fit(np.fft.irfft(h, n=size, axis=d, norm=DUAL[norm]), m, d)


def irfft_vjp(g, ans, x, n, axis, norm):
    d, m, size, count = lengths("irfft", np.shape(x), n, axis)
    h = np.fft.rfft(g, axis=d, norm=DUAL[norm])
    h[_along(d, interior(count))] *= 2
    h[_along(d, 0)] = h[_along(d, 0)].real          # DC: its imaginary part unread
    if count % 2 == 0:                                 # Nyquist, likewise
        h[_along(d, size - 1)] = h[_along(d, size - 1)].real
    return as_real(fit(h, m, d)).astype(np.result_type(g), copy=False)


VJPS = {"fft": fft_vjp, "ifft": ifft_vjp, "rfft": rfft_vjp, "irfft": irfft_vjp}
