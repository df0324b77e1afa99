"""The notes an extreme point carries: what it sampled (:func:`extreme_note`), and why
one was drawn from the bulk (:func:`hopeless_note`)."""

from __future__ import annotations

import math

import numpy as np

from .domains import Modulus, modulus


def hopeless_note(index: int, limit: float) -> str:
    """The note of an extreme point of a formula that mixes elements and passes the
    ceiling even with every element at the bulk's scale (λ = 0: softmax logits that are
    sums of a layer's products): no draw of the band can keep the ceiling, and whole
    redraws rarely do, so the point is drawn from the bulk at once, its kinks kept away
    (where CEILING_ROUNDS forward passes of whole redraws came to a bulk draw too)."""
    return (f"point {index}: the formula passes {limit:.2g} even with every input at the "
            f"bulk's scale, so this extreme point is drawn from the bulk")


def extreme_note(index, band, dtype, limit, pull, values, free, rays) -> str:
    """What extreme point ``index`` sampled: per input, the range of its elements'
    distances from the band's anchors (|x| where the anchor is 0)."""
    parts = []
    for spec in (s for s in free if not s.integer):
        anchors = sorted({r.anchor for r in rays[spec.name]})
        by_modulus = isinstance(spec.domain, Modulus)   # (its rays run along |z|)
        x = modulus(values[spec.name]) if by_modulus else values[spec.name]
        d = np.min([np.abs(x - a) for a in anchors], axis=0)
        span = f"{np.min(d):.2g} to {np.max(d):.2g}"
        who = f"|{spec.name}|" if by_modulus or anchors == [0.0] else spec.name
        parts.append(f"{who} {span}" if anchors == [0.0] else
                     f"{who} {span} from {' and '.join(f'{a:g}' for a in anchors)}")
    how = (f"values of the formula kept below {limit:.2g}, √ of {dtype}'s largest, and "
           f"arguments of exponentials below {math.log(limit):.3g}"
           + (f"; pulled in to λ = {pull:.3g}" if pull < 1 else ""))
    return f"point {index} is an extreme point, {band}: {'; '.join(parts)} ({how})"
