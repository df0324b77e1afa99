"""What a wrong gradient looks like: short explanations of simple error shapes.

:func:`diagnose` compares the gradient an op returned for each input (its vector-Jacobian
product) with the exact one and names the pattern the error follows, when one does: a
flipped sign, a constant factor, the gradient of another input, a transpose, broadcasting
not summed back, ``grad_output`` ignored, ``None`` where a gradient is needed (or the
reverse). :func:`diagnose_points` looks across several points for a gradient that is right
at some of them only (a wrong branch of a piecewise function).

Elements are compared as in :mod:`gradcheck.compare`: ``|o - e| <= atol * scale + rtol *
|e|`` with ``scale = max(1, max |e|)``. A pattern is reported only when it holds for every
element and is distinguishable from the exact gradient: the sign of a zero gradient, the
transpose of a symmetric matrix or the swap of two equal gradients are not errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from .tree import unbroadcast

# --------------------------------------------------------------------------- comparison

def _tolerance(expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    return atol * scale + rtol * np.abs(expected)


def _matches(obtained: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise: ``obtained`` passes against ``expected`` (same shapes)."""
    with np.errstate(all="ignore"):
        ok = np.abs(obtained - expected) <= _tolerance(expected, rtol, atol)
    return ok | (obtained == expected) | (np.isnan(obtained) & np.isnan(expected))


def _label(name: str) -> str:
    return name if name.endswith(".grad") else f"{name}.grad"


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _array(value) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=float)


@dataclass
class _Case:
    obtained: dict[str, np.ndarray | None]
    expected: dict[str, np.ndarray]
    ones_vjp: dict[str, np.ndarray]
    rtol: float
    atol: float

    def close(self, obtained, expected) -> bool:
        """All elements of ``obtained`` pass against ``expected`` (same shape)."""
        return (obtained is not None and expected is not None
                and obtained.shape == expected.shape
                and bool(np.all(_matches(obtained, expected, self.rtol, self.atol))))

    def distinct(self, candidate, expected) -> bool:
        """``candidate`` (the exact gradient transformed) differs from ``expected``."""
        return not self.close(candidate, expected)


# --------------------------------------------------------------------------- patterns
# Each takes (name, case) for an input whose obtained gradient is present and does not
# match; it returns a one-line message or None.

def _sign_flip(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    if c.close(o, -e) and c.distinct(-e, e):
        return f"{_label(name)} has its sign flipped: it equals minus the exact gradient"
    return None


def _grad_output_ignored(name: str, c: _Case) -> str | None:
    o, e, ones = c.obtained[name], c.expected[name], c.ones_vjp.get(name)
    if ones is not None and c.close(o, ones) and c.distinct(ones, e):
        return (f"{_label(name)} ignores grad_output: it equals the gradient for "
                "grad_output = ones (the Jacobian summed over the outputs)")
    return None


def _swapped(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    for other, e_other in c.expected.items():
        if other == name or not c.close(o, e_other) or not c.distinct(e_other, e):
            continue
        if c.close(c.obtained.get(other), e):
            first, second = (n for n in c.expected if n in (name, other))
            return (f"{_label(first)} and {_label(second)} are swapped: each is the exact "
                    "gradient of the other input")
        return (f"{_label(name)} is the exact gradient of {other}: the gradient for "
                f"{other} was returned for {name}")
    return None


def _transposed(name: str, c: _Case) -> str | None:
    o, e = c.obtained[name], c.expected[name]
    if e.ndim < 2:
        return None
    t = np.swapaxes(e, -1, -2)
    if c.close(o, t) and c.distinct(t, e):
        return f"{_label(name)} is the transpose of the exact gradient" + (
            f" (shape {_shape(o.shape)} instead of {_shape(e.shape)})"
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
    return (f"{_label(name)} has shape {_shape(o.shape)} but {name} has shape "
            f"{_shape(e.shape)}: broadcasting not summed back (sum over {where}{keep})")


def _counts(name: str, c: _Case) -> list[tuple[int, str]]:
    """Sizes a mean/sum mix-up would divide or multiply ``name``'s gradient by (2 is
    left to the plain factor: "2 times" is more often a forgotten 2 than a mean)."""
    shape = c.expected[name].shape
    size = int(np.prod(shape, dtype=np.int64))
    out = []
    try:
        full = np.broadcast_shapes(*(e.shape for e in c.expected.values()))
        times = int(np.prod(full, dtype=np.int64)) // size if size else 0
        if times > 2:
            out.append((times, f"the number of times {name} is broadcast"))
    except ValueError:
        pass
    out += [(n, f"the size of axis {d} of {name}") for d, n in enumerate(shape) if n > 2]
    if size > 2:
        out.append((size, f"the number of elements of {name}"))
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
    label = _label(name)

    def fits(factor: float) -> bool:  # o = factor * e, told apart from e and from -e
        return (c.close(o, factor * e) and c.distinct(factor * e, e)
                and c.distinct(factor * e, -e))

    if fits(0.0):
        return f"{label} is zero but the exact gradient is not"
    for n, what in _counts(name, c):
        if fits(1.0 / n):
            return f"{label} is 1/{n} of the exact gradient ({n} = {what}): mean instead of sum?"
        if fits(float(n)):
            return f"{label} is {n} times the exact gradient ({n} = {what}): sum instead of mean?"
    simple = Fraction(k).limit_denominator(8)
    if simple not in (0, 1, -1) and fits(float(simple)):
        return f"{label} is {_ratio(simple)}"
    # Any factor fits a gradient with one significant element: say only simple ones.
    significant = np.abs(e) > _tolerance(e, c.rtol, c.atol)
    if int(significant.sum()) >= 2 and fits(k):
        return f"{label} is {k:.6g} times the exact gradient"
    return None


#: Tried in this order for each input; the first that fits explains it.
PATTERNS: list[Callable[[str, _Case], str | None]] = [
    _sign_flip, _grad_output_ignored, _swapped, _transposed, _not_summed_back, _factor,
]


# --------------------------------------------------------------------------- API

def diagnose(obtained: dict[str, np.ndarray | None], expected: dict[str, np.ndarray],
             *, ones_vjp: dict[str, np.ndarray] | None = None,
             rtol: float = 1e-6, atol: float = 1e-9) -> list[str]:
    """Short explanations of how ``obtained`` (the op's vector-Jacobian product per input
    name) differs from ``expected`` (the exact one), most specific first; [] when no
    simple pattern fits. ``ones_vjp``: the exact VJP with v = ones (what a backward that
    ignores grad_output would return).

    An input whose gradient should be ``None`` (no differentiable path) is absent from
    ``expected``; ``obtained`` holds ``None`` for an input the op gave no gradient.
    """
    exp = {n: _array(v) for n, v in expected.items() if v is not None}
    obt = {n: _array(v) for n, v in obtained.items()}
    case = _Case(obt, exp, {n: _array(v) for n, v in (ones_vjp or {}).items()}, rtol, atol)

    found: list[tuple[int, str]] = []
    for name in exp:
        if obt.get(name) is None:
            found.append((0, f"{_label(name)} is None, but {name} needs a gradient "
                             "(a differentiable path reaches the output)"))
    for name, value in obt.items():
        if value is not None and name not in exp:
            found.append((0, f"{_label(name)} should be None: no differentiable path "
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


def diagnose_points(per_point: list[tuple[dict, dict]], *, rtol: float = 1e-6,
                    atol: float = 1e-9) -> list[str]:
    """Given (obtained, expected) pairs for several points/cotangents: detect "correct at
    some points only" (e.g. a wrong branch of a piecewise): report the fraction of points
    (or of elements) that match and which do not.

    Only matches of elements whose exact gradient is well above the tolerance count as
    evidence: a zero element matches a flipped sign or any factor too.
    """
    names = list(dict.fromkeys(n for _, exp in per_point for n, v in exp.items()
                               if v is not None))
    return [m for m in (_partial(name, per_point, rtol, atol) for name in names) if m]


_LISTED = 3  # wrong elements listed by value when there are at most this many


def _partial(name: str, per_point, rtol: float, atol: float) -> str | None:
    points = points_right = right = total = informative = 0
    wrong: list[str] = []
    whole_point_wrong = False
    for p, (obtained, expected) in enumerate(per_point):
        e = _array(expected.get(name))
        if e is None:
            continue
        o = _array(obtained.get(name))
        points += 1
        total += e.size
        if o is None or o.shape != e.shape:
            whole_point_wrong = True
            continue
        ok = _matches(o, e, rtol, atol)
        scale = max(1.0, float(np.max(np.abs(e)))) if e.size else 1.0
        # Well above any tolerance: an element that a small factor would not fit.
        strong = np.abs(e) > 1e3 * atol * scale if atol > 0 else e != 0
        right += int(ok.sum())
        informative += int((ok & strong).sum())
        points_right += bool(ok.all())
        for idx in np.argwhere(~ok)[:_LISTED + 1]:
            i = tuple(int(j) for j in idx)
            at = f"[{','.join(map(str, i))}]" if i else ""
            wrong.append(f"{_label(name)}{at} at point {p} (got {o[i]:.6g}, "
                         f"expected {e[i]:.6g})")
    if informative == 0 or right == total:
        return None
    if points > 1 and points_right:
        where = f"{points_right} of {points} points ({right} of {total} elements)"
    else:
        where = f"{right} of {total} elements"
    message = (f"{_label(name)} is right at {where} and wrong elsewhere: "
               "a wrong branch of a piecewise?")
    if total - right <= _LISTED and not whole_point_wrong:
        message += "; wrong: " + ", ".join(wrong)
    return message


#: (rtol, atol) for deciding that a pattern fits, by the dtype the gradients came in.
TOLERANCES = {"float64": (1e-6, 1e-9), "float32": (1e-4, 1e-5)}


def summarize(samples: list[tuple[dict, dict, dict | None]], dtype: str = "float64") -> str:
    """One text for a failing check: the pattern of the first sample that shows one,
    then :func:`diagnose_points` over all samples for the inputs no pattern explained
    (the diagonal of a transposed gradient is right, which is no "wrong branch").

    Args:
        samples: ``(obtained, expected, exact VJP for v = ones or None)`` per point and v;
            an ``expected`` value ``None`` means no gradient is expected.
        dtype: the dtype of ``obtained``, which sets the tolerances.
    """
    rtol, atol = TOLERANCES.get(dtype, TOLERANCES["float64"])
    notes: list[str] = []
    for got, expected, ones in samples:
        notes = diagnose(got, {n: e for n, e in expected.items() if e is not None},
                         ones_vjp=ones, rtol=rtol, atol=atol)
        if notes:
            break
    names = {n for _, expected, _ in samples for n in expected}
    explained = {n for n in names if any(
        re.search(rf"(?<![\w.]){re.escape(n)}\.grad\b", note) for note in notes)}
    notes += diagnose_points(
        [(got, {n: e for n, e in expected.items() if n not in explained})
         for got, expected, _ in samples], rtol=rtol, atol=atol)
    return "; ".join(dict.fromkeys(notes))
