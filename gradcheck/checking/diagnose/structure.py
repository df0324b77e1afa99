"""The structure of a gradient's error, E = J_op - J_exact (:func:`jacobian_structure`)
or, where only vector-Jacobian products were compared, of the error of vᵀJ along one
axis at a time (:func:`slice_structure`): what a backward that drops or garbles one term
leaves behind.

- The whole Jacobian (op.jacobian's one-hot rows, small outputs): the op's Jacobian is
  the exact one transposed (the forward's map applied in place of its adjoint); only
  the off-diagonal entries are wrong (cross terms); or the error is rank one within
  each block of outputs and inputs that depend on each other (E ≈ a bᵀ per row of a
  norm or softmax: a projection or mean term), with b constant (a mean) or along the
  input (a projection along x) said where it is; or each output's row is the exact one
  times a factor of its own (J_op = D·J: a weight of the output left out, or applied
  twice, said where D is an input or its reciprocal).
- vᵀJ along an axis (any size): the error of every slice along the axis is a constant
  (a mean term: Σ_j v_j a_j times a vector of ones) or a multiple of the input's own
  slice, or of it less its mean (a projection along x).

A reading is given only where it holds for every element under the patterns'
tolerance (the op's gradient matches the exact one plus the fitted structure) and the
fit is not trivial (a slice or block of at least :data:`MIN_SIZE` elements each way):
a structure that is not there is never claimed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .elements import label, matches, strong

MIN_SIZE = 3    # elements a slice (or a block, each way) needs for a fit to say anything


@dataclass(frozen=True)
class Jacobian:
    """One point's whole Jacobian from op.jacobian's one-hot rows: ``obtained`` and
    ``expected`` map an input name to its (output elements × input elements) matrix
    (None where the op gave no gradient); ``shapes``: the outputs' shapes."""

    point: int
    shapes: tuple
    obtained: dict
    expected: dict
    values: dict | None = None      # the point: input name -> value


def _fits(o: np.ndarray, e: np.ndarray, fit: np.ndarray, rtol: float, atol: float) -> bool:
    """``o`` is ``e`` plus ``fit`` at every element, and is not ``e`` at some."""
    return (bool(np.all(matches(o, e + fit, rtol, atol)))
            and not bool(np.all(matches(o, e, rtol, atol))))


def _residual(error: np.ndarray, fit: np.ndarray) -> float:
    """The share of the error a fit leaves: ‖error - fit‖ / ‖error‖ (evidence)."""
    size = float(np.linalg.norm(error))
    return float(np.linalg.norm(error - fit)) / size if size else 0.0


# --------------------------------------------------------------------------- whole Jacobian

def _blocks(mask: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The connected blocks of a Jacobian's non-zero pattern ``mask`` (outputs × inputs):
    (rows, columns) of each set of outputs and inputs that depend on each other."""
    m, n = mask.shape
    parent = list(range(m + n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, j in np.argwhere(mask):
        parent[find(int(i))] = find(m + int(j))
    groups: dict[int, tuple[list, list]] = {}
    for a in range(m + n):
        rows, cols = groups.setdefault(find(a), ([], []))
        (rows if a < m else cols).append(a if a < m else a - m)
    return [(np.array(r), np.array(c)) for r, c in groups.values() if r and c]


def _transposed(js: list[tuple[np.ndarray, np.ndarray]], rtol, atol) -> bool:
    return all(o.shape[0] == o.shape[1] and bool(np.all(matches(o, e.T, rtol, atol)))
               for o, e in js) and any(not np.all(matches(e.T, e, rtol, atol))
                                       for _, e in js)


def _cross_terms(js, rtol, atol) -> str | None:
    """Only off-diagonal entries wrong (square Jacobians of an output of the input's
    shape), with the diagonal evidence of being right."""
    for o, e in js:
        if o.shape[0] != o.shape[1]:
            return None
        ok = matches(o, e, rtol, atol)
        if not np.all(np.diag(ok)) or not np.any(np.diag(strong(e, atol))):
            return None
    if not any(not np.all(matches(o, e, rtol, atol)) for o, e in js):
        return None
    zero = all(bool(np.all(matches(o - np.diag(np.diag(o)), np.zeros_like(o), rtol, atol)))
               for o, _ in js)
    return ("its diagonal (d out[i] / d x[i]) is right and only cross terms (d out[i] / "
            "d x[j], i ≠ j) are wrong" + (": they are missing (the op's Jacobian is "
                                          "diagonal)" if zero else ""))


def _rank_one(js, values, rtol, atol) -> str | None:
    """E ≈ a bᵀ within every block with an error of at least MIN_SIZE × MIN_SIZE."""
    worst, counts, sizes, kinds = 0.0, [], set(), set()
    for (o, e), x in zip(js, values):
        error, wrong = o - e, 0
        # (entries within the tolerance of zero, e.g. the rounding of a cancelled
        # term, join no blocks)
        for rows, cols in _blocks((np.abs(e) > atol) | (np.abs(error) > atol)):
            ob, eb = o[np.ix_(rows, cols)], e[np.ix_(rows, cols)]
            if np.all(matches(ob, eb, rtol, atol)):
                continue
            if min(ob.shape) < MIN_SIZE:
                return None
            u, s, vt = np.linalg.svd(ob - eb)
            fit = s[0] * np.outer(u[:, 0], vt[0])
            if not _fits(ob, eb, fit, rtol, atol):
                return None
            worst = max(worst, s[1] / s[0] if s.size > 1 and s[0] else 0.0)
            wrong += 1
            sizes.add(ob.shape)
            kinds.add(_direction(vt[0], None if x is None else x.reshape(-1)[cols]))
        counts.append(wrong)
    if not any(counts):
        return None
    size = " or ".join(f"{r} outputs × {c} inputs" for r, c in sorted(sizes))
    many = (f"{max(counts)}" if min(counts) == max(counts) else
            f"{min(counts)} to {max(counts)}")
    kind = kinds.pop() if len(kinds) == 1 else None
    what = {"mean": "a mean term (b constant: the same for every input of the block)",
            "x": "a projection along x (b ∝ x)"}.get(kind, "a projection or mean term")
    points = f"{len(counts)} point" + "s" * (len(counts) > 1)
    return (f"its error is rank one (E = J_op - J ≈ a bᵀ) in each wrong block of the "
            f"Jacobian ({many} per point at {points}, each {size}; σ₂/σ₁ ≤ {worst:.1e}): "
            f"{what} is missing or wrong")


def _row_factors(js, points, rtol, atol) -> str | None:
    """J_op = D·J with D diagonal and not a constant: each output's row scaled by a
    factor of its own, in rows of at least MIN_SIZE clearly non-zero entries (a row of
    one entry fits any factor). ``points``: (the point's inputs, the output's shape)."""
    factors = []
    for o, e in js:
        ee = np.einsum("ij,ij->i", e, e)
        with np.errstate(all="ignore"):
            d = np.where(ee > 0, np.einsum("ij,ij->i", o, e) / ee, 1.0)
        wrong = ~np.all(matches(o, e, rtol, atol), axis=1)
        if (not _fits(o, e, d[:, None] * e - e, rtol, atol)
                or np.any(strong(e, atol)[wrong].sum(axis=1) < MIN_SIZE)):
            return None
        factors.append(d)
    every = np.concatenate(factors)
    if np.allclose(every, every[0], rtol=1e-6):   # one factor: gradient.py's pattern
        return None
    return (f"each output's row of its Jacobian is the exact one times a factor of its "
            f"own (J_op = D·J, D diagonal, from {every.min():.3g} to {every.max():.3g})"
            + _factor_is(factors, points))


def _factor_is(factors, points) -> str:
    """``: D = 1/w ...`` where the row factors are an input (or its reciprocal)
    broadcast to the output's shape at every point."""
    names = set.intersection(*(set(values or {}) for values, _ in points)) if points else ()
    for name in sorted(names):
        try:
            per = [np.broadcast_to(np.asarray(values[name], float), shape).reshape(-1)
                   for values, shape in points]
        except ValueError:
            continue
        for power, text in ((-1, f": D = 1/{name}, a factor {name} of grad_output left "
                                  "out of this gradient"),
                            (1, f": D = {name}, {name} applied once too often")):
            with np.errstate(all="ignore"):
                if all(np.allclose(d, v ** power, rtol=1e-6) for d, v in zip(factors, per)):
                    return text
    return ""


def _direction(b: np.ndarray, x: np.ndarray | None) -> str:
    """What the rank-one error's input side b is: constant ("mean"), along the point's
    own input x ("x"), or neither ("")."""
    if b.size and np.allclose(b, b[0], rtol=1e-6, atol=1e-6 * np.max(np.abs(b))):
        return "mean"
    if x is not None and np.linalg.norm(x) > 0:
        cos = abs(float(b @ x)) / (np.linalg.norm(b) * np.linalg.norm(x))
        if cos > 1 - 1e-6:
            return "x"
    return ""


def jacobian_structure(name: str, jacobians: list[Jacobian], rtol: float,
                       atol: float, complex_input: bool = False) -> str | None:
    """The structure of ``name``'s Jacobian error over the points of ``jacobians``; None
    where none fits (or the op gave no gradient, or a non-finite one). ``complex_input``:
    ``name`` is complex, its columns (re, im) pairs."""
    js, values = [], []
    for jac in jacobians:
        o, e = jac.obtained.get(name), jac.expected.get(name)
        if o is None or e is None or o.shape != e.shape:
            return None
        if not (np.all(np.isfinite(o)) and np.all(np.isfinite(e))):
            return None
        js.append((np.asarray(o, float), np.asarray(e, float)))
        values.append((jac.values or {}).get(name))
    if not js:
        return None
    scale = max(1.0, max(float(np.max(np.abs(e))) for _, e in js))
    r, a = rtol, atol * scale   # (matches scales atol by each matrix; keep one scale)
    if _transposed(js, r, a):
        if complex_input:
            # A complex-linear map's real Jacobian is made of blocks [[a, -b], [b, a]]
            # (multiplication by a + ib); its transpose multiplies by a - ib: the
            # backward multiplied grad_output by df/dz where conj(df/dz) is due
            return (f"{label(name)}: the op's Jacobian is the exact one transposed (J_op "
                    "= Jᵀ; in complex terms, grad_output times df/dz where conj(df/dz) "
                    "is due): conjugate missing?")
        return (f"{label(name)}: the op's Jacobian is the exact one transposed (J_op = "
                "Jᵀ): the backward applies the forward's map to grad_output, not its "
                "transpose")
    points = [(jac.values, jac.shapes[0]) for jac in jacobians] \
        if all(len(jac.shapes) == 1 for jac in jacobians) else []
    found = (_cross_terms(js, r, a) or _rank_one(js, values, r, a)
             or _row_factors(js, points, r, a))
    return f"{label(name)}: {found}" if found else None


# --------------------------------------------------------------------------- vᵀJ slices

def _slices(a: np.ndarray, axis: int) -> np.ndarray:
    """``a``'s slices along ``axis``, one a row."""
    return np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis])


def _projection(error: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each row of ``error`` projected on the same row of ``x``: (error·x / x·x) x."""
    xx = np.einsum("ij,ij->i", x, x)
    with np.errstate(all="ignore"):
        c = np.where(xx > 0, np.einsum("ij,ij->i", error, x) / xx, 0.0)
    return c[:, None] * x


_READINGS = (
    ("constant", "the same for every element of each slice: a mean term (a sum or mean "
                 "along the axis, spread back equally) is missing or wrong"),
    ("x", "a multiple of {x}'s own slice: a projection along {x} (a term through a "
          "norm or mean of {x}²) is missing or wrong"),
    ("centred", "a multiple of {x} less its mean along the axis: a projection along "
                "the centred {x} (a variance term) is missing or wrong"),
)


def _fit(kind: str, error: np.ndarray, x: np.ndarray | None) -> np.ndarray | None:
    if kind == "constant":
        return np.broadcast_to(error.mean(axis=1, keepdims=True), error.shape)
    if x is None:
        return None
    if kind == "centred":
        x = x - x.mean(axis=1, keepdims=True)
    return _projection(error, x)


def slice_structure(name: str, pairs: list[tuple[np.ndarray, np.ndarray, dict]],
                    rtol: float, atol: float) -> str | None:
    """The structure of ``name``'s vᵀJ error along one axis at every sample: ``pairs``
    of (obtained, exact, the point's inputs of the gradient's shape). The last axis
    first; None where no reading fits every sample."""
    if not pairs or any(o.shape != e.shape or not np.all(np.isfinite(o))
                        for o, e, _ in pairs):
        return None
    shape = pairs[0][1].shape
    inputs = [n for n in pairs[0][2] if all(n in v for _, _, v in pairs)]
    for axis in reversed(range(len(shape))):
        if shape[axis] < MIN_SIZE:
            continue
        for kind, text in _READINGS:
            for x in ([None] if kind == "constant" else inputs):
                found = _slice_fit(pairs, axis, kind, x, rtol, atol)
                if found is not None:
                    where = f"along axis {axis}" if len(shape) > 1 else "across it"
                    return (f"{label(name)}'s error {where} is "
                            + text.format(x=x) + f" (what the fit leaves: {found:.1e} "
                            "of the error)")
    return None


def _slice_fit(pairs, axis: int, kind: str, x: str | None, rtol: float,
               atol: float) -> float | None:
    """The largest share of the error the ``kind`` fit along ``axis`` leaves, where it
    fits every sample (and some sample is wrong); None where it does not."""
    worst, wrong = 0.0, False
    for o, e, values in pairs:
        error = _slices(o - e, axis)
        fit = _fit(kind, error, None if x is None else _slices(values[x], axis))
        if fit is None:
            return None
        full = np.moveaxis(fit.reshape(np.moveaxis(e, axis, -1).shape), -1, axis)
        if not np.all(matches(o, e + full, rtol, atol)):
            return None
        wrong = wrong or not bool(np.all(matches(o, e, rtol, atol)))
        worst = max(worst, _residual(error, fit))
    return worst if wrong else None
