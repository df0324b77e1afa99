"""Error maps: where in a quantity a witness disagrees with the exact reference, small
enough to keep in a result (and in a JSON report) whatever the quantity's size.

A quantity is seen as a 2-D array, its *view*: a scalar as 1×1, a 1-D of n elements as
one row of n (its index order kept, so that a cell's position is its index), and an
N-D one with its leading dimensions folded into rows and its last one as the columns
(``[4096, 1024]`` stays itself, ``[2, 3, 4]`` is 6×4). The view is cut into at most
:data:`GRID` × :data:`GRID` cells of equal size; each cell keeps the element of largest
``|obtained - expected| / tolerance`` with its sign, the maximum over the points. The
histogram counts ``|obtained - expected| / tolerance`` of every element over the bins of
:data:`gradcheck.base.result.HIST_EXPONENTS`.

op.jacobian compares one row of the Jacobian at a time, quantities named ``d outK[idx]
/ d x``: they are gathered into one map per output and input, a row per output element
(in the order they come) and a column per input element (flattened), the Jacobian itself
(for an input of one slab; a larger one has its op.backward map).

Everything here is vectorized and per slab (:func:`gradcheck.base.arrays.slabs`): the
temporaries are a slab's. :class:`gradcheck.checking.compare.Tally` decides when to map: always
for a quantity of one slab; a larger one from the first point where it differs on (the
slabs of that point before the first that differs looked at again), so that a layer's
passing comparisons cost nothing. The maps of a witness that passed are dropped."""

from __future__ import annotations

import re

import numpy as np

from ..base.result import HIST_EXPONENTS, ErrorMap

GRID = 64                       # cells per side at most
MAPS_KEPT = 8                   # maps a witness keeps (the first that differ)
JACOBIAN_ROWS = 64              # rows of a Jacobian map (op.jacobian's limit)
_EDGES = 10.0 ** np.asarray(HIST_EXPONENTS)
_JACOBIAN_ROW = re.compile(r"d (out\d+)\[([0-9,]*)\] / d (.+)")


def view(shape: tuple[int, ...]) -> tuple[int, int]:
    """The 2-D view of a quantity of ``shape`` (see the module's docstring)."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, int(shape[0])
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def jacobian_key(quantity: str) -> tuple[str, str] | None:
    """``("d out0 / d W", "0,1")`` for op.jacobian's ``d out0[0,1] / d W``, else None."""
    m = _JACOBIAN_ROW.fullmatch(quantity)
    return (f"d {m.group(1)} / d {m.group(3)}", m.group(2)) if m else None


def _starts(cells: np.ndarray) -> np.ndarray:
    """Where each run of equal (ascending) cell numbers starts."""
    return np.flatnonzero(np.diff(cells, prepend=-1))


class MapAccumulator:
    """One quantity's map, built slab by slab (:meth:`add`)."""

    def __init__(self, quantity: str, shape: tuple[int, ...], kind: str = "gradient"):
        self.quantity, self.shape, self.kind = quantity, tuple(shape), kind
        rows, cols = (JACOBIAN_ROWS, int(np.prod(shape, dtype=np.int64))) \
            if kind == "jacobian" else view(self.shape)
        self.rows, self.cols = rows, cols
        self.step = (-(-rows // GRID), -(-cols // GRID))
        cells = (-(-rows // self.step[0]), -(-cols // self.step[1]))
        self.hi = np.full(cells, -np.inf)     # largest signed ratio of each cell
        self.lo = np.full(cells, np.inf)      # smallest
        self.counts = np.zeros(len(_EDGES) + 1, dtype=np.int64)
        self.mismatched = self.total = 0
        self.row_of: dict[str, int] = {}      # a Jacobian's rows, by output index

    def jacobian_row(self, idx: str) -> int | None:
        """The row of output element ``idx`` (None past JACOBIAN_ROWS)."""
        if idx not in self.row_of:
            if len(self.row_of) >= JACOBIAN_ROWS:
                return None
            self.row_of[idx] = len(self.row_of)
        return self.row_of[idx]

    def add(self, signed: np.ndarray, rows: np.ndarray | None = None,
            cols: np.ndarray | None = None) -> None:
        """Take ``signed``, (obtained - expected) / tolerance of the view's ``rows`` ×
        ``cols`` (ascending indices of the view; None: all of them) as one 2-D array."""
        ratio = np.abs(signed)
        self._count(ratio)
        if rows is None and signed.shape == self.hi.shape:   # a cell per element
            with np.errstate(invalid="ignore"):
                np.fmax(self.hi, signed, out=self.hi)
                np.fmin(self.lo, signed, out=self.lo)
            return
        rows = np.arange(self.rows) if rows is None else rows
        cols = np.arange(self.cols) if cols is None else cols
        r, c = rows // self.step[0], cols // self.step[1]
        rs, cs = _starts(r), _starts(c)
        with np.errstate(invalid="ignore"):
            hi = np.fmax.reduceat(np.fmax.reduceat(signed, cs, axis=1), rs, axis=0)
            lo = np.fmin.reduceat(np.fmin.reduceat(signed, cs, axis=1), rs, axis=0)
        at = np.ix_(r[rs], c[cs])
        self.hi[at] = np.fmax(self.hi[at], hi)
        self.lo[at] = np.fmin(self.lo[at], lo)

    def _count(self, ratio: np.ndarray) -> None:
        """Add ``ratio`` (|obtained - expected| / tolerance) to the histogram."""
        self.mismatched += int(np.count_nonzero(ratio > 1))
        self.total += ratio.size
        if ratio.size <= 4096:   # (NaN sorts last: above every edge)
            self.counts += np.bincount(np.searchsorted(_EDGES, ratio.reshape(-1)),
                                       minlength=len(self.counts))
            return
        # elements above each edge (NaN above all), a pass per edge between the
        # slab's extremes: quicker than a search of every element among the edges
        low, high = float(np.min(ratio)), float(np.max(ratio))   # NaN: high is NaN
        above = [ratio.size if e < low else 0 if e >= high
                 else ratio.size - int(np.count_nonzero(ratio <= e)) for e in _EDGES]
        self.counts += np.diff([ratio.size, *above, 0]) * -1

    def merge(self, other: "MapAccumulator") -> None:
        """Take ``other``'s elements (a map of the same quantity) as this one's own."""
        self.counts = self.counts + other.counts
        self.mismatched += other.mismatched
        self.total += other.total
        if self.kind != "jacobian":
            self.hi, self.lo = np.fmax(self.hi, other.hi), np.fmin(self.lo, other.lo)
            return
        for idx, theirs in other.row_of.items():   # rows in the order each saw them
            ours = self.jacobian_row(idx)
            if ours is not None:
                self.hi[ours] = np.fmax(self.hi[ours], other.hi[theirs])
                self.lo[ours] = np.fmin(self.lo[ours], other.lo[theirs])

    def result(self) -> ErrorMap:
        """The map as data: each cell the element of larger magnitude, 3 digits."""
        hi, lo = self.hi, self.lo
        shape, view_shape = self.shape, (self.rows, self.cols)
        if self.kind == "jacobian":
            used = max(1, len(self.row_of))
            hi, lo = hi[:used], lo[:used]
            shape, view_shape = (used, *self.shape), (used, self.cols)
        with np.errstate(invalid="ignore"):
            # None where no element was seen (hi < lo still: a Jacobian's missing row)
            grid = np.where(hi >= lo, np.where(hi >= -lo, hi, lo), np.nan)
        cells = tuple(tuple(None if x != x else float(f"{x:.3g}") for x in row)
                      for row in grid.tolist())
        return ErrorMap(self.quantity, tuple(int(n) for n in shape), view_shape,
                        self.step, cells, tuple(int(n) for n in self.counts),
                        self.mismatched, self.total, self.kind)
