"""What a wrong gradient of a complex input looks like: the mistakes particular to
complex numbers, read on the gradient as the check holds it, the view_as_real layout
(a last axis of (real, imaginary) pairs).

PyTorch's convention (checked against torch in tests/test_complex_diagnose.py): for a
real loss L of z = x + iy, ``z.grad = dL/dx + i dL/dy``, twice the conjugate of the
Wirtinger derivative dL/dz = (dL/dx - i dL/dy) / 2. A backward written with dL/dz's
formula where its conjugate is due (``grad * w`` for z * w, not ``grad * conj(w)``)
returns the conjugate of the right gradient: same modulus, imaginary part negated. A
backward that drops one part returns the other alone.

Each reading holds for every element within the patterns' tolerance and is told apart
from the exact gradient (:class:`~gradcheck.checking.diagnose.gradient._Case`'s
``close`` and ``distinct``): a real exact gradient is its own conjugate and its own real
part. A gradient scaled by a real constant (an FFT's normalisation) is
:func:`gradcheck.checking.diagnose.gradient._factor`'s, on the complex shape.
"""

from __future__ import annotations

import numpy as np

from .elements import label

#: each reading: the exact gradient's (re, im) multiplied by these, and what it means
_READINGS = (
    ((1.0, -1.0), "is the conjugate of the exact gradient (its imaginary part negated): "
                  "conjugate missing? (PyTorch's {z}.grad is dL/d re({z}) + i dL/d im({z}), "
                  "twice the conjugate of the Wirtinger dL/d{z})"),
    ((1.0, 0.0), "is the real part of the exact gradient alone (its imaginary part is "
                 "zero, the real part right): real part only?"),
    ((0.0, 1.0), "is the imaginary part of the exact gradient alone (its real part is "
                 "zero, the imaginary part right): imaginary part only?"),
)


def complex_part(name: str, c) -> str | None:
    """The reading of ``name``'s wrong gradient when ``name`` is a complex input
    (``c.complex``): conjugate missing, real part only, imaginary part only; None where
    none holds at every element (or the input is real)."""
    o, e = c.obtained[name], c.expected[name]
    if name not in c.complex or o.shape != e.shape or not e.shape or e.shape[-1] != 2:
        return None
    for factors, text in _READINGS:
        candidate = e * np.asarray(factors)
        if c.close(o, candidate) and c.distinct(candidate, e):
            return f"{label(name)} {text.format(z=name)}"
    return None
