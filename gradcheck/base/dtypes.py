"""The floating-point dtypes a run can be in, and every fact about them gradcheck uses:
the NumPy and torch dtypes, the unit roundoff, the range, the accumulator, the
tolerances of a diagnosis, and rounding into the dtype.

This is the one place these facts live, each a field of the dtype's record
(:class:`Format`); case files, the command line, sampling, the rounding model, the
witnesses and the op checks ask here, and a name that is not a dtype's is an error
(:func:`info`), never another dtype's facts. A binary format with p significand bits
(the implicit leading bit counted) and exponents emin..emax has

- unit roundoff u = 2^-p: a correctly rounded operation returns x(1 + δ), |δ| <= u;
- machine epsilon eps = 2u = 2^(1-p), the spacing of the floats just above 1;
- largest finite value (2 - 2^(1-p))·2^emax, smallest normal 2^emin.

=========  ==  =====  ======  ================================  ===========  ============
name       p   emin   emax    u                                 accumulator  pattern
=========  ==  =====  ======  ================================  ===========  ============
float64    53  -1022  1023    2^-53 ≈ 1.1e-16                   float64      (1e-6, 1e-9)
float32    24  -126   127     2^-24 ≈ 6.0e-8                    float32      (1e-4, 1e-5)
float16    11  -14    15      2^-11 ≈ 4.9e-4                    float32      (1e-2, 1e-3)
bfloat16   8   -126   127     2^-8 ≈ 3.9e-3 (float32's range)   float32      (8e-2, 1e-2)
=========  ==  =====  ======  ================================  ===========  ============

The accumulator is the dtype sums are formed in: PyTorch's CPU kernels accumulate half
precision in float32 (the rounding model's u_acc). ``pattern`` is the (rtol, atol) with
which a diagnosis says that a pattern fits a wrong gradient in the dtype
(:data:`gradcheck.bounds.tolerance.PATTERN_TOLERANCES`): about 100 units of its epsilon.

Importing this module costs nothing beyond the standard library: NumPy's bfloat16
comes from ``ml_dtypes`` (NumPy has none) and torch is imported only when a torch
dtype is asked for, so ``gradcheck list`` and ``--help`` stay instant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Format:
    """One binary floating-point format (see the table in the module docstring)."""

    name: str
    precision: int        # p: significand bits, the implicit leading bit counted
    emin: int             # exponent of the smallest normal
    emax: int             # exponent of the largest finite value
    accumulator: str      # the dtype its sums are formed in
    pattern: tuple[float, float]   # (rtol, atol) of a diagnosis pattern in it

    @property
    def unit_roundoff(self) -> float:
        return math.ldexp(1.0, -self.precision)

    @property
    def eps(self) -> float:
        return math.ldexp(1.0, 1 - self.precision)

    @property
    def max(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, 1 - self.precision), self.emax)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)


FORMATS = {f.name: f for f in (
    Format("float64", 53, -1022, 1023, accumulator="float64", pattern=(1e-6, 1e-9)),
    Format("float32", 24, -126, 127, accumulator="float32", pattern=(1e-4, 1e-5)),
    Format("float16", 11, -14, 15, accumulator="float32", pattern=(1e-2, 1e-3)),
    Format("bfloat16", 8, -126, 127, accumulator="float32", pattern=(8e-2, 1e-2)))}
#: The dtype names a case, the command line and the library calls accept, in order.
NAMES: tuple[str, ...] = tuple(FORMATS)


def info(dtype: str) -> Format:
    """The :class:`Format` named ``dtype``.

    Raises:
        ValueError: ``dtype`` is not one of :data:`NAMES`.
    """
    try:
        return FORMATS[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"dtype must be one of {', '.join(NAMES)}, got {dtype!r}") \
            from None


def unit_roundoff(dtype: str) -> float:
    """u = 2^-p: the largest relative error of one correctly rounded operation."""
    return info(dtype).unit_roundoff


def accumulator_roundoff(dtype: str) -> float:
    """The unit roundoff of the dtype ``dtype``'s sums are formed in (its
    :attr:`Format.accumulator`)."""
    return unit_roundoff(info(dtype).accumulator)


def eps(dtype: str) -> float:
    """Machine epsilon 2u: the distance from 1 to the next float."""
    return info(dtype).eps


def max_finite(dtype: str) -> float:
    """The largest finite value; anything rounding beyond it is inf."""
    return info(dtype).max


def overflow_threshold(dtype: str) -> float:
    """The smallest magnitude that rounds to inf in ``dtype``: max plus half its last
    place, (2 - 2^-p)·2^emax (a tie there rounds to the even inf); inf for float64,
    whose values are float64's own."""
    f = info(dtype)
    if dtype == "float64":
        return math.inf
    return math.ldexp(2.0 - math.ldexp(1.0, -f.precision), f.emax)


def smallest_normal(dtype: str) -> float:
    """The smallest positive normal value (below it precision is lost: subnormals)."""
    return info(dtype).smallest_normal


def numpy_dtype(dtype: str):
    """The NumPy dtype (bfloat16: ``ml_dtypes.bfloat16``, which registers with NumPy)."""
    import numpy as np

    info(dtype)
    if dtype == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def torch_dtype(dtype: str):
    """The torch dtype (torch is imported here, on first use)."""
    info(dtype)
    import torch

    return getattr(torch, dtype)


def round_to(x: Any, dtype: str):
    """``x`` rounded to the nearest value of ``dtype`` (ties to even) and back, as a
    float64 array: values the run's tensors can hold exactly, so a witness built from
    them sees the very point the float64 reference is evaluated at. Beyond
    :func:`max_finite` a value becomes inf, as the dtype's own cast makes it."""
    import numpy as np

    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(numpy_dtype(dtype)).astype(np.float64)


def to_float64(t: Any):
    """A torch tensor of any of these dtypes (or an array) as a new float64 NumPy array.
    Torch cannot hand a bfloat16 tensor to NumPy (NumPy has no bfloat16), so the
    widening to float64, which is exact for every dtype here, is done by torch first."""
    import numpy as np

    if hasattr(t, "detach") and hasattr(t, "cpu"):      # a torch tensor
        import torch

        return t.detach().cpu().to(torch.float64).numpy().copy()
    return np.array(t, dtype=np.float64)


def to_numpy(t: Any):
    """Anything a witness or an op hands back, as a new float64 NumPy array: None stays
    None; a torch tensor of any dtype (bfloat16 included, see :func:`to_float64`); a
    ``gradcheck.engine`` Tensor, its ``.data``; an array or a number, as it is."""
    import numpy as np

    if t is None:
        return None
    if hasattr(t, "detach") and hasattr(t, "cpu"):      # a torch tensor
        return to_float64(t)
    data = getattr(t, "data", None)
    if isinstance(data, np.ndarray) and not isinstance(t, np.ndarray):   # engine Tensor
        return np.array(data, dtype=np.float64)
    return to_float64(t)
