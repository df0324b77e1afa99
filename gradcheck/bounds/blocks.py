"""Arrays a block of rows at a time, for the rounding model (:mod:`gradcheck.bounds`):
its bounds at a layer's size are computed over blocks of rows (axis 0) that stay in the
cache, into arrays it takes back and writes over (:class:`Spare`) instead of fresh
ones, with the same arithmetic per element as over the whole arrays."""

from __future__ import annotations

import functools
import math
import weakref

import numpy as np

#: elements of a block of rows (512 KB of float64): a probe's temporaries stay in cache
BLOCK_ELEMENTS = 1 << 16
SPARE_ARRAYS = 3            # arrays a Spare keeps at most
SPARE_BYTES = 1 << 20       # the smallest array a Spare takes back


@functools.lru_cache(maxsize=256)
def _small_ones(shape: tuple[int, ...]) -> np.ndarray:
    ones = np.ones(shape)
    ones.flags.writeable = False
    return ones


def ones(shape: tuple[int, ...]) -> np.ndarray:
    """ḡ = 1 of ``shape``, for reading |∂f/∂a| off a VJP: one read-only array per small
    shape (the VJPs only read ḡ)."""
    return _small_ones(shape) if math.prod(shape) <= 4096 else np.ones(shape)


def finite(x: np.ndarray, posinf: float | None = 0.0) -> np.ndarray:
    """``np.nan_to_num(x, nan=0.0, posinf=posinf)``, without its cost (a dozen NumPy
    calls) where ``x`` is finite already, as it nearly always is."""
    if np.isfinite(x).all():
        return x
    # (an array still where x has no dimensions: nan_to_num gives a NumPy scalar)
    return np.asarray(np.nan_to_num(x, nan=0.0, posinf=posinf))


def plus(a: np.ndarray, b) -> np.ndarray:
    """a + b, into ``a`` when that is the same result (``a`` a fresh array of the sum's
    shape that nothing else holds: the callers pass only such), which keeps one large
    temporary fewer alive; the order of the additions is the caller's, so the bounds
    are the same to the bit."""
    if isinstance(a, np.ndarray) and a.flags.writeable and a.flags.owndata and \
            np.shape(b) in ((), a.shape) and a.dtype == np.result_type(a, b):
        a += b
        return a
    return a + b


def any_error(e) -> bool:
    """Whether the bound ``e`` is not 0 everywhere (NaN counts, as in ``e.any()``); a
    bound broadcast from one number (an input's exact 0) is read once, not per element."""
    e = np.asarray(e)
    if e.size and (not any(e.strides) or e.flat[0]):   # (or the first is not 0)
        return bool(e.flat[0])
    return bool(e.any())


def row_blocks(shape: tuple[int, ...]) -> list[slice] | None:
    """Blocks of rows (slices of axis 0) of about :data:`BLOCK_ELEMENTS` each; None
    where the array is one block (small, a scalar, or a single row)."""
    total = math.prod(shape)
    if not shape or total <= BLOCK_ELEMENTS or shape[0] <= 1:
        return None
    rows = max(1, BLOCK_ELEMENTS // (total // shape[0]))
    return [slice(lo, lo + rows) for lo in range(0, shape[0], rows)]


def piece(a, ndim: int, rows: slice | None):
    """The part of ``a`` (broadcast against an array of ``ndim`` dimensions, NumPy's
    right-aligned rule) that lines up with ``rows`` of that array's axis 0: ``a`` itself
    where it has no such axis or a length of 1 there, or ``rows`` is None (the whole
    arrays); None, a value dropped after the forward, stays None."""
    if rows is None or a is None or np.ndim(a) < max(ndim, 1) or np.shape(a)[0] == 1:
        return a
    return a[rows]


class Spare:
    """Arrays the rounding model made and holds no longer, kept to be written over by
    the next arrays of their shape it makes: at a layer's size a fresh array costs its
    page faults (32 MB at [4096, 1024]: tens of ms, and more where the machine is busy),
    and a backward drops about as many arrays as it makes. Only an array that
    :meth:`empty` made is taken back, only where no array the caller names still holds
    its memory (a cotangent that is the parent's own, a let's bound that is its
    operand's), and at most :data:`SPARE_ARRAYS` at a time."""

    def __init__(self):
        self.made: dict[int, weakref.ref] = {}   # (by id: an ndarray is not hashable)
        self.arrays: list[np.ndarray] = []

    def empty(self, shape: tuple[int, ...]) -> np.ndarray:
        """An array of ``shape`` whose values will all be written."""
        for i, a in enumerate(self.arrays):
            if a.shape == shape:
                return self.arrays.pop(i)
        a = np.empty(shape)
        if a.nbytes >= SPARE_BYTES:
            self.made[id(a)] = weakref.ref(a)
        return a

    def give(self, a, *holders: dict) -> None:
        """Take ``a`` back, which the caller no longer uses, unless a value of the
        dicts ``holders`` shares its memory (or this did not make it)."""
        ref = self.made.get(id(a))
        if ref is None or ref() is not a or len(self.arrays) >= SPARE_ARRAYS:
            return
        if any(isinstance(h, np.ndarray) and np.may_share_memory(a, h)
               for d in holders for h in d.values()):
            return
        self.arrays.append(a)


def by_rows(shape: tuple[int, ...], fn, result: tuple[int, ...] | None = None,
            spare: Spare | None = None):
    """``fn(rows)``, a computation row by row over arrays of ``shape`` (each cut with
    :func:`piece`), a block of rows at a time into a fresh array of ``result`` (default
    ``shape``; axis 0 that of ``shape``), from ``spare`` where given; ``fn(None)``, on
    the whole arrays, where ``shape`` is one block."""
    blocks = row_blocks(shape)
    if blocks is None:
        return fn(None)
    result = shape if result is None else result
    out = np.empty(result) if spare is None else spare.empty(result)
    for rows in blocks:
        out[rows] = fn(rows)
    return out
