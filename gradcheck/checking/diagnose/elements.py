"""What the diagnoses share: when an obtained element passes against the exact one
(looser than a verdict: :data:`gradcheck.bounds.tolerance.PATTERN_TOLERANCES`), which exact
elements are evidence, and how elements and inputs are named in the text."""

from __future__ import annotations

import numpy as np

from ...base.result import PARTS, element_name
from ...bounds.tolerance import PATTERN_ATOL, PATTERN_RTOL  # noqa: F401  (the defaults' source)

SYSTEMATIC = 5e-2  # the largest relative error still called small (of all patterns)


def tolerance(expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    return atol * scale + rtol * np.abs(expected)


def matches(obtained: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise: ``obtained`` passes against ``expected`` (same shapes)."""
    with np.errstate(all="ignore"):
        ok = np.abs(obtained - expected) <= tolerance(expected, rtol, atol)
    return ok | (obtained == expected) | (np.isnan(obtained) & np.isnan(expected))


def label(name: str) -> str:
    return name if name.endswith(".grad") else f"{name}.grad"


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def array(value) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=float)


def strong(e: np.ndarray, atol: float) -> np.ndarray:
    """Elements whose exact value is well above any tolerance: only where the exact
    gradient is clearly non-zero does "right" say anything (zero matches a flipped sign
    or any factor too)."""
    scale = max(1.0, float(np.max(np.abs(e)))) if e.size else 1.0
    return np.abs(e) > 1e3 * atol * scale if atol > 0 else e != 0


def round_between(lo: float, hi: float) -> float:
    """The shortest decimal t with lo <= t < hi (a threshold as a person would write it)."""
    top = max(abs(lo), abs(hi))
    if top == 0:
        return lo
    for digits in range(16):
        step = 10.0 ** (np.floor(np.log10(top)) - digits)
        t = float(np.ceil(lo / step) * step)
        if lo <= t < hi:
            return t
    return lo


def at(label: str, index: tuple, complex: bool = False) -> str:
    """``x.grad[1,2]``; of a complex input's gradient (``complex``: ``index`` on the
    view_as_real layout) ``z.grad[1] (imaginary part)``, as every report names it."""
    if complex and index:
        return element_name(label, index[:-1], PARTS[index[-1]])
    return element_name(label, index) if index else label


def listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

