"""The rounding bounds of the spectral rows (:mod:`gradcheck.rules.composite.bounds`
hands them to the model): an FFT's result, and each VJP (again a transform), per element.

A transform of N points scaled by s sums N products of its inputs with unit-modulus
twiddles, so each real component of an output moves by at most s·Σ_j (|Δa_j| + |Δb_j|)
when the inputs (a_j + i b_j) move (irfft's interior bins count twice): the propagated
error, an upper bound of |J|·E(x). Its own rounding is bounded by K(N)·ua·s·Σ_j (|a_j| +
|b_j|), K(N) = N + 2⌈log2 N⌉ + 4. Proven for a direct summation of the N terms (a
complex product with a rounded twiddle errs by at most about (2√2 + 1)u of |a| + |b|,
the recursive sum of N terms by (N − 1)u, the scaling by u). The FFT algorithms torch
(MKL, or pocketfft) and NumPy (pocketfft) run are not a direct sum (mixed radix;
Bluestein's chirp for a large prime N), and for them it is measured, not proven: their
componentwise error grows like log2 N (Higham, Accuracy and Stability, ch. 24, proves it
normwise). Measured float32 against float64 on random inputs of N from 2 to 4099
(primes included), every norm, NumPy's and torch's: at most 5.1·u·s·Σ|x| for the
forward and 1.8 for the VJP (irfft's Σ weighted), where K(N) is 8 (N = 2) to 4129
(N = 4099); tests/test_fft_rows.py checks the bound at N = 2,
7, 16, 97 and 1024. ua is the accumulator's unit (half precision runs the transform in
float32); rounding the result to the dtype adds u·|y|.
"""

from __future__ import annotations

import math

import numpy as np

from .columns import COMPLEX_IN, COMPLEX_OUT, lengths, points, scale


def own_terms(n_points: int) -> float:
    """K(N): units of ua in one output's own rounding, per unit of s·Σ|x|."""
    return n_points + 2 * math.ceil(math.log2(max(n_points, 1))) + 4


def _total(a, d: int, pair: bool, keep_pair: bool):
    """Σ|a| along (negative, complex) axis ``d`` and the pair axis where ``a`` has one,
    kept as size 1 (the pair axis dropped unless ``keep_pair``)."""
    a = np.abs(np.asarray(a, dtype=float))
    if not pair:
        out = np.sum(a, axis=d, keepdims=True)
        return out[..., None] if keep_pair else out
    out = np.sum(a, axis=(d - 1, -1), keepdims=True)
    return out if keep_pair else out[..., 0]


def _weight(name: str) -> float:
    return 2.0 if name == "irfft" else 1.0


def _through(name: str, x, n, axis, norm, err, value, ua, reads_pairs, gives_pairs):
    """The bound of one transform of ``value`` (its error ``err``) along the row's axis:
    the error carried, w·Σ|err|, plus the transform's own rounding, w·K(N)·u·Σ|value|
    (w the row's scale and weight; the operand of x's shape, ``reads_pairs``/
    ``gives_pairs`` which side is in the layout)."""
    d = lengths(name, np.shape(x), n, axis)[0]
    big = points(name, np.shape(x), n, axis)
    w = scale(name, norm, big) * _weight(name)
    return (w * _total(err, d, reads_pairs, gives_pairs)
            + w * own_terms(big) * ua * _total(value, d, reads_pairs, gives_pairs))


def forward_bound(name: str):
    def forward(t, args, errs, units, n, axis, norm):
        (x,), (e,), (u, ua, _) = args, errs, units
        bound = _through(name, x, n, axis, norm, e, x, ua, COMPLEX_IN[name],
                         COMPLEX_OUT[name])
        return np.broadcast_to(bound, np.shape(t)) + u * np.abs(t)

    forward.__name__ = f"{name}_forward"
    return forward


def backward_bound(name: str):
    """The VJP is the adjoint transform of ȳ, scaled by the same s (the weights move:
    rfft's adjoint halves interior bins that irfft counts twice, irfft's doubles them)."""
    def backward(k, g, ge, c, t, et, args, errs, units, n, axis, norm):
        (x,), u, ua = args, units[0], units[1]
        bound = _through(name, x, n, axis, norm, ge, g, ua, COMPLEX_OUT[name],
                         COMPLEX_IN[name])
        return np.broadcast_to(bound, np.shape(c)) + u * np.abs(c)

    backward.__name__ = f"{name}_backward"
    return backward
