"""What one witness computed at one point; every witness returns this, the symbolic
reference included, so one comparison serves them all."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Evaluation:
    """The output and vᵀJ for each input and retained ``let``, at one point.

    ``error`` holds, for a witness that knows its own error (finite differences), a bound
    per element of each quantity, keyed like :meth:`quantities` (the tolerances of the
    others come from :mod:`gradcheck.rounding`).
    """

    value: np.ndarray
    grads: dict[str, np.ndarray | None]
    retained: dict[str, np.ndarray | None] = field(default_factory=dict)
    grad_fn: tuple[str, ...] | None = None
    error: dict[str, np.ndarray] | None = None

    def quantities(self) -> dict[str, np.ndarray | None]:
        """Everything to compare, by the name a report shows: value, x.grad, h.grad."""
        out: dict[str, np.ndarray | None] = {"value": self.value}
        out.update({f"{n}.grad": g for n, g in self.grads.items()})
        out.update({f"{n}.grad": g for n, g in self.retained.items()})
        return out
