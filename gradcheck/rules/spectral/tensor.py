"""The tensor column of the spectral rows: each adjoint (:mod:`.vjps`, derived there) as
a named NumPy function of the cotangent applied with ``b.apply``, exact in float64 up
to the FFT's own rounding (≈ log2 N ulps: no dense DFT matrix). Its own adjoint, which
double backward takes, is the forward row itself (the adjoint of Aᵀ is A)."""

from __future__ import annotations

import numpy as np

from ..row import TensorRule
from .vjps import VJPS


def spectral_adjoint(g, shape, name, n, axis, norm):
    """The VJP of row ``name`` into its operand of (layout) ``shape``."""
    placeholder = np.broadcast_to(np.float64(0), shape)    # (only its shape is read)
    return VJPS[name](np.asarray(g, dtype=float), None, placeholder, n, axis, norm)


def _adjoint_adjoint(b, G, g, shape, name, **p):
    yield g, b.row(name, G, **p)


spectral_adjoint.adjoint, spectral_adjoint.linear_in = _adjoint_adjoint, (0,)


def tensor_rule(name: str) -> TensorRule:
    def vjp(b, g, ans, x, n, axis, norm):
        return b.apply(spectral_adjoint, g, shape=x.shape, name=name, n=n, axis=axis,
                       norm=norm)

    vjp.__name__ = f"{name}_tensor"
    return TensorRule((vjp,))
