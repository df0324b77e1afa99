"""The gradient an op returned at one point against the exact one: which simple
pattern the error follows (:func:`diagnose`): a flipped sign, a constant factor, the
gradient of another input, a transpose, broadcasting not summed back, ``grad_output``
ignored, ``None`` where a gradient is needed (or the reverse).

A pattern is reported only when it holds for every element and is distinguishable from
the exact gradient: the sign of a zero gradient, the transpose of a symmetric matrix or
the swap of two equal gradients are not errors."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from ...base.arrays import unbroadcast
from ...formula.tree import walk
from ...rules.spectral.columns import NAMES as FFT_ROWS, points
from .elements import (PATTERN_ATOL, PATTERN_RTOL, SYSTEMATIC, array, label, matches, shape_text,
                       tolerance)
from .parts import complex_part


@dataclass
class _Case:
    obtained: dict[str, np.ndarray | None]
    expected: dict[str, np.ndarray]
    ones_vjp: dict[str, np.ndarray]
    rtol: float
    atol: float
    # complex inputs: their gradients in the view_as_real layout (a last axis of 2)
    complex: frozenset = frozenset()
    # the lengths N of the formula's FFTs: a factor N, 1/N or √N is their normalisation
    # as likely as a mean for a sum
    ffts: tuple[int, ...] = ()

    def shape(self, name: str) -> tuple:
        """``name``'s shape as declared: a complex input's without its (re, im) axis."""
        shape = self.expected[name].shape
        return shape[:-1] if name in self.complex else shape

    def close(self, obtained, expected) -> bool:
        """All elements of ``obtained`` pass against ``expected`` (same shape)."""
        return (obtained is not None and expected is not None
                and obtained.shape == expected.shape
                and bool(np.all(matches(obtained, expected, self.rtol, self.atol))))

    def distinct(self, candidate, expected) -> bool:
        """``candidate`` (the exact gradient transformed) differs from ``expected``."""
        return not self.close(candidate, expected)


# --------------------------------------------------------------------------- patterns
# Each takes (name, case) for an input whose obtained gradient is present and does not
# match; it returns a one-line message or None.

def _sign_flip(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    if c.close(o, -e) and c.distinct(-e, e):
        return f"{label(name)} has its sign flipped: it equals minus the exact gradient"
    return None


def _grad_output_ignored(name: str, c: _Case) -> str | None:
    o, e, ones = c.obtained[name], c.expected[name], c.ones_vjp.get(name)
    if ones is not None and c.close(o, ones) and c.distinct(ones, e):
        return (f"{label(name)} ignores grad_output: it equals the gradient for "
                "grad_output = ones (the Jacobian summed over the outputs)")
    return None


def _swapped(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    for other, e_other in c.expected.items():
        if other == name or not c.close(o, e_other) or not c.distinct(e_other, e):
            continue
        if c.close(c.obtained.get(other), e):
            first, second = (n for n in c.expected if n in (name, other))
            return (f"{label(first)} and {label(second)} are swapped: each is the exact "
                    "gradient of the other input")
        return (f"{label(name)} is the exact gradient of {other}: the gradient for "
                f"{other} was returned for {name}")
    return None


def _transposed(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    last = -2 if name in c.complex else -1   # (a complex matrix's last axis is (re, im))
    if e.ndim < 1 - last:
        return None
    t = np.swapaxes(e, last, last - 1)
    if c.close(o, t) and c.distinct(t, e):
        held = o.shape[:-1] if name in c.complex else o.shape
        return f"{label(name)} is the transpose of the exact gradient" + (
            f" (shape {shape_text(held)} instead of {shape_text(c.shape(name))})"
            if o.shape != e.shape else "")
    return None


def _not_summed_back(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    if o.shape == e.shape or o.size <= e.size:
        return None
    try:
        if np.broadcast_shapes(o.shape, e.shape) != o.shape:
            return None
    except ValueError:
        return None
    if not c.close(unbroadcast(o, e.shape), e):
        return None
    lead = o.ndim - e.ndim
    kept = [lead + d for d, n in enumerate(e.shape) if n == 1 and o.shape[lead + d] != 1]
    axes = list(range(lead)) + kept
    where = f"axis {axes[0]}" if len(axes) == 1 else "axes " + ", ".join(map(str, axes))
    keep = ""
    if kept:
        keep = (" keeping " + ("axis " if len(kept) == 1 else "axes ")
                + ", ".join(map(str, kept)) + " as size 1")
    held = o.shape[:-1] if name in c.complex else o.shape
    return (f"{label(name)} has shape {shape_text(held)} but {name} has shape "
            f"{shape_text(c.shape(name))}: broadcasting not summed back (sum over {where}{keep})")


def _counts(name: str, c: _Case) -> list[tuple[int, str]]:
    """Sizes a mean/sum mix-up would divide or multiply ``name``'s gradient by (2 is
    left to the plain factor: "2 times" is more often a forgotten 2 than a mean)."""
    shape = c.shape(name)
    size = int(np.prod(shape, dtype=np.int64))
    out = []
    try:
        full = np.broadcast_shapes(*(c.shape(n) for n in c.expected))
        times = int(np.prod(full, dtype=np.int64)) // size if size else 0
        if times > 2:
            out.append((times, f"the number of times {name} is broadcast"))
    except ValueError:
        pass
    out += [(n, f"the size of axis {d} of {name}") for d, n in enumerate(shape) if n > 2]
    if size > 2:
        out.append((size, f"the number of elements of {name}"))
    out += [(n, "the length of an FFT of the formula") for n in c.ffts
            if n > 2 and n not in {k for k, _ in out}]
    return out


def _ratio(f: Fraction) -> str:
    if f.denominator == 1:
        return f"{f.numerator} times the exact gradient"
    if f.numerator == 1:
        return f"1/{f.denominator} of the exact gradient"
    return f"{f.numerator}/{f.denominator} times the exact gradient"


def _factor(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    if o.shape != e.shape:
        return None
    ee = float(np.vdot(e, e))
    if not ee > 0 or not np.all(np.isfinite(o)):
        return None
    k = float(np.vdot(o, e)) / ee
    if not np.isfinite(k):
        return None
    text = label(name)

    def fits(factor: float) -> bool:  # o = factor * e, told apart from e and from -e
        return (c.close(o, factor * e) and c.distinct(factor * e, e)
                and c.distinct(factor * e, -e))

    if fits(0.0):
        return f"{text} is zero but the exact gradient is not"
    counts = _counts(name, c)
    # a complex input's gradient scaled by an axis' length is as likely an FFT's
    # normalisation (norm="backward" against "forward") as a mean for a sum
    fft = ": an FFT normalisation, or {}?" if name in c.complex or c.ffts else ": {}?"
    for n, what in counts:
        if fits(1.0 / n):
            return f"{text} is 1/{n} of the exact gradient ({n} = {what})" + fft.format(
                "mean instead of sum")
        if fits(float(n)):
            return f"{text} is {n} times the exact gradient ({n} = {what})" + fft.format(
                "sum instead of mean")
    simple = Fraction(k).limit_denominator(8)
    if simple not in (0, 1, -1) and fits(float(simple)):
        return f"{text} is {_ratio(simple)}"
    for n, what in counts:   # √n: norm="ortho" against "backward" or "forward"
        for power in (-0.5, 0.5):
            if fits(n ** power):
                return (f"{text} is {'1/' if power < 0 else ''}√{n} = {n ** power:.6g} "
                        f"times the exact gradient ({n} = {what}): an FFT normalisation "
                        "(norm=\"ortho\")?")
    # Any factor fits a gradient with one significant element: say only simple ones.
    # A factor within a few percent of 1 is left to _systematic, which sees every point.
    significant = np.abs(e) > tolerance(e, c.rtol, c.atol)
    if int(significant.sum()) >= 2 and abs(k - 1) > SYSTEMATIC and fits(k):
        return f"{text} is {k:.6g} times the exact gradient"
    return None


#: Tried in this order for each input; the first that fits explains it.
PATTERNS: list[Callable[[str, _Case], str | None]] = [
    _sign_flip, complex_part, _grad_output_ignored, _swapped, _transposed, _not_summed_back,
    _factor,
]


# --------------------------------------------------------------------------- API

def diagnose(obtained: dict[str, np.ndarray | None], expected: dict[str, np.ndarray],
             *, ones_vjp: dict[str, np.ndarray] | None = None,
             rtol: float = PATTERN_RTOL, atol: float = PATTERN_ATOL,
             complex=(), ffts=()) -> list[str]:
    """Short explanations of how ``obtained`` (the op's vector-Jacobian product per input
    name) differs from ``expected`` (the exact one), most specific first; [] when no
    simple pattern fits. ``ones_vjp``: the exact VJP with v = ones (what a backward that
    ignores grad_output would return). ``complex``: the names of complex inputs, whose
    gradients are in the view_as_real layout (:mod:`~gradcheck.checking.diagnose.parts`).
    ``ffts``: the lengths of the formula's FFTs (:func:`fft_lengths`).

    An input whose gradient should be ``None`` (no differentiable path) is absent from
    ``expected``; ``obtained`` holds ``None`` for an input the op gave no gradient.
    """
    exp = {n: array(v) for n, v in expected.items() if v is not None}
    obt = {n: array(v) for n, v in obtained.items()}
    case = _Case(obt, exp, {n: array(v) for n, v in (ones_vjp or {}).items()}, rtol, atol,
                 frozenset(complex), tuple(ffts))

    found: list[tuple[int, str]] = []
    for name in exp:
        if obt.get(name) is None:
            found.append((0, f"{label(name)} is None, but {name} needs a gradient "
                             "(a differentiable path reaches the output)"))
    for name, value in obt.items():
        if value is not None and name not in exp:
            found.append((0, f"{label(name)} should be None: no differentiable path "
                             f"from {name} reaches the output"))
    for name, e in exp.items():
        o = obt.get(name)
        if o is None or case.close(o, e) or not np.all(np.isfinite(e)):
            continue
        for rank, pattern in enumerate(PATTERNS, start=1):
            message = pattern(name, case)
            if message:
                found.append((rank, message))
                break
    found.sort(key=lambda item: item[0])  # stable: input order within one pattern
    return list(dict.fromkeys(message for _, message in found))



def fft_lengths(reference) -> tuple[int, ...]:
    """The lengths N of the FFT rows below the formula's output nodes ``reference``."""
    found = {points(node.op, node.args[0].shape, node.param("n"), node.param("axis", -1))
             for root in reference for node in walk(root) if node.op in FFT_ROWS}
    return tuple(sorted(found))
