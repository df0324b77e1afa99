"""What one witness computed at one point; every witness returns this, the symbolic
reference included, so one comparison serves them all."""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np

#: appended to a quantity's name when what is compared is its projections on directions
#: (``W.grad·u``: element k is uₖᵀ(vᵀJ)), not its elements
PROJECTED = "·u"


class Directions:
    """The k directions U of a quantity measured along them, shape ``[k, *x.shape]``,
    each made again when it is needed (``make(k)``) rather than held: at a layer's size
    one direction is as large as the input, and three of them were the largest arrays
    alive while the witness's result was compared. Directions of up to :data:`KEPT`
    elements are kept once made (a comparison projects on each several times)."""

    KEPT = 1 << 16

    def __init__(self, count: int, shape: tuple[int, ...], make):
        self.count, self.shape, self._make = count, (count, *shape), make
        self._kept: dict[int, np.ndarray] | None = \
            {} if math.prod(shape) <= self.KEPT else None

    def __getitem__(self, k: int) -> np.ndarray:
        if self._kept is None:
            return self._make(k)
        if k not in self._kept:
            self._kept[k] = self._make(k)
        return self._kept[k]

    def __array__(self, dtype=None, copy=None):
        return np.stack([self[k] for k in range(self.count)]).astype(dtype or float)

    def contract(self, a: np.ndarray, absolute: bool = False) -> np.ndarray:
        """Uₖ·a for each k (|Uₖ|·a with ``absolute``)."""
        out = np.empty(self.count)
        for k in range(self.count):
            u = self[k]
            out[k] = np.vdot(np.abs(u) if absolute else u, a)
        return out


@dataclass
class Evaluation:
    """The output and vᵀJ for each input and retained ``let``, at one point.

    ``error`` holds, for a witness that knows its own error (finite differences), a bound
    per element of each quantity, keyed like :meth:`quantities` (the tolerances of the
    others come from :mod:`gradcheck.bounds.model`).

    ``directions`` (by quantity, ``"W.grad"``) holds the directions U, shape
    ``[k, *W.shape]`` (an array, or :class:`Directions` made on demand), of a quantity the witness measured only along them: its entry in
    ``grads`` (or ``retained``) is then the k values Uₖ·(vᵀJ), compared as ``W.grad·u``
    with :meth:`project` of the exact gradient. ``notes`` say how the witness checked
    (what a report should know of what it verified).
    """

    value: np.ndarray
    grads: dict[str, np.ndarray | None]
    retained: dict[str, np.ndarray | None] = field(default_factory=dict)
    grad_fn: tuple[str, ...] | None = None
    error: dict[str, np.ndarray] | None = None
    directions: dict[str, np.ndarray] | None = None
    notes: tuple[str, ...] = ()
    # the deciding rows' arguments as the witness computed them (a
    # gradcheck.witnesses.recorder.Recorder), for judging the branches it took
    decisions: object | None = None

    def quantities(self) -> dict[str, np.ndarray | None]:
        """Everything to compare, by the name a report shows: value, x.grad, h.grad (and
        W.grad·u for a quantity measured along directions)."""
        out: dict[str, np.ndarray | None] = {"value": self.value}
        out.update({f"{n}.grad": g for n, g in self.grads.items()})
        out.update({f"{n}.grad": g for n, g in self.retained.items()})
        return {self._name(q): a for q, a in out.items()}

    def _name(self, quantity: str) -> str:
        return quantity + PROJECTED if quantity in (self.directions or {}) else quantity

    def project(self, quantities: dict, absolute: bool = False) -> dict:
        """``quantities`` (full arrays keyed like an element-wise :meth:`quantities`:
        another witness's values, or bounds per element) as this evaluation compares
        them: each one it has directions U for becomes ``q·u``, the k contractions
        Uₖ·q; the others stay as they are.

        ``absolute``: |Uₖ|·|q| instead. For per-element error bounds E this is the bound
        of the projection (|Σ uᵢ δᵢ| <= Σ |uᵢ| Eᵢ when |δᵢ| <= Eᵢ); for values, the size
        the projection's own rounding scales with."""
        out = {}
        for q, a in quantities.items():
            found = (self.directions or {}).get(q)
            if found is None or a is None:
                out[self._name(q)] = a
                continue
            a = np.asarray(a, dtype=float)
            if a.shape != found.shape[1:]:
                a = np.broadcast_to(a, found.shape[1:])
            with np.errstate(all="ignore"):
                if isinstance(found, Directions):
                    out[self._name(q)] = found.contract(np.abs(a) if absolute else a,
                                                        absolute)
                    continue
                u = np.abs(found) if absolute else found
                out[self._name(q)] = np.tensordot(u, np.abs(a) if absolute else a,
                                                  axes=a.ndim)
        return out
