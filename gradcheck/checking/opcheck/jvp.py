"""op.jvp: the op's forward mode (``torch.autograd.forward_ad`` dual numbers, computed in
the op's process by :mod:`gradcheck.checking.opcheck.forward_mode`) against the exact J u.

Tangents: at every point a random u on every input whose gradient is checked, all at
once; at the first point also :data:`ONE_HOTS` one-hot tangents (a column of J each).

The exact side is the exact Jacobian's rows e_kᵀJ, the same ones op.jacobian checks
(exact vᵀJ of the reference for one-hot v): (J u)_k = Σₓ (e_kᵀJ)ₓ uₓ, summed in float64.
For an op whose Jacobian op.jacobian checks (up to JACOBIAN_LIMIT output elements) every
element is compared, at every point, from the rows op.jacobian computes anyway; for a
larger one :data:`SAMPLED` output elements spread over the outputs, at the first point.

The tolerance of (J u)_k is the bound of the transposed problem: Σₓ T_kx·|uₓ| +
(γ(n) + 1)·u·Σₓ |J_kx|·|uₓ|, with T_kx the tolerance of the Jacobian entry J_kx as
op.jacobian allows it (the rounding-error model of the formula's backward for the
cotangent e_k, or the peer's rule) and u the dtype's unit roundoff. Sound because J u
is linear in u: forward mode computes each entry's contribution J_kx·uₓ through the same
chain of local partials as reverse mode (at the same rounded intermediates; a product
of partials errs by the same relative bound in either association), so its error is at
most Σₓ (error of J_kx)·|uₓ|, plus the rounding of the products with uₓ and of the sum
over the n elements of u (the second term). The forward's own bound is not used: it
bounds f(x), not its derivative.
"""

from __future__ import annotations

import numpy as np

from ..approximate import LOOSE
from ..compare import Comparison, Finding, Outcome
from ...base.dtypes import round_to, unit_roundoff
from ...bounds.summation import accumulation
from ...sampling.points import case_rng

ONE_HOTS = 4       # one-hot tangents at the first point
SAMPLED = 16       # output elements checked of an op whose Jacobian is not
PATH = "under forward-mode AD (torch.autograd.forward_ad dual numbers)"


def sampled_hots(outputs, count: int = SAMPLED) -> list:
    """``count`` one-hot cotangents ``(k, index text, vs)`` spread evenly over the
    outputs' elements (all of them where there are no more)."""
    sizes = [int(np.prod(n.shape, dtype=np.int64)) for n in outputs]
    total = sum(sizes)
    picks = sorted({int(p) for p in np.linspace(0, total - 1, min(count, total)).round()})
    starts = np.cumsum([0] + sizes)
    out = []
    for p in picks:
        k = int(np.searchsorted(starts, p, side="right") - 1)
        flat = int(p - starts[k])
        vs = [np.zeros(n.shape) for n in outputs]
        vs[k].reshape(-1)[flat] = 1.0
        out.append((k, ",".join(map(str, np.unravel_index(flat, outputs[k].shape))), vs))
    return out


def directions(case, dtype: str, i: int, names: list[str]) -> list[tuple[str, dict]]:
    """(words, u by input name) of each tangent at point ``i``: the random one, then at
    the first point the one-hot ones (on elements drawn over the inputs in turn)."""
    rng = case_rng(case, dtype, i, "op-jvp-u")
    shapes = {n: case.input[n].shape for n in names}
    out = [(f"a random tangent on {', '.join(names)}",
            {n: round_to(rng.standard_normal(s), dtype) for n, s in shapes.items()})]
    if i != 0:
        return out
    seen = set()
    for j in range(ONE_HOTS):
        n = names[j % len(names)]
        size = int(np.prod(shapes[n], dtype=np.int64))
        if size == 0:
            continue
        flat = int(rng.integers(size))
        if (n, flat) in seen:
            continue
        seen.add((n, flat))
        u = {m: np.zeros(s) for m, s in shapes.items()}
        u[n].reshape(-1)[flat] = 1.0
        index = ",".join(map(str, np.unravel_index(flat, shapes[n])))
        out.append((f"a one-hot tangent on {n}[{index}]", u))
    return out


def jvp(op, case, dtype: str, point: dict, i: int, names: list[str], hots: list,
        rows: tuple) -> list[Outcome]:
    """The outcomes of op.jvp at point ``i`` (``op``: the op's process; ``names``: the
    inputs whose gradients are checked; ``hots`` and ``rows``: the output elements
    compared and :func:`~gradcheck.checking.opcheck.checks.jacobian_rows` of them).
    ``[Finding(note=...)]`` alone where the op does not do forward mode."""
    drawn = directions(case, dtype, i, names)
    got = op.jvp(point, [u for _, u in drawn])
    if "unsupported" in got:
        # (nothing compared: the report shows op.jvp skipped, saying why)
        return [Finding(note=f"forward mode not supported: {got['unsupported']}")]
    if "raised" in got:
        return [Finding(problem=f"the op raised {PATH} with {drawn[0][0]}: "
                                f"{got['raised']}")]
    expected, allowed, looser = rows
    full = len(hots) == sum(int(np.prod(n.shape, dtype=np.int64)) for n in case.outputs)
    out: list[Outcome] = []
    for (words, u), tangents in zip(drawn, got["tangents"]):
        if len(tangents) != len(case.outputs):
            out.append(Finding(problem=f"{PATH}, with {words}, the op returned "
                                       f"{len(tangents)} outputs; the reference has "
                                       f"{len(case.outputs)}"))
            continue
        shapes = [(k, np.shape(t)) for k, (n, t) in enumerate(zip(case.outputs, tangents))
                  if t is not None and np.shape(t) != tuple(n.shape)]
        if shapes:
            k, shape = shapes[0]
            out.append(Finding(problem=f"{PATH}, with {words}, the tangent of out{k} has "
                                       f"shape {list(shape)}, expected "
                                       f"{list(case.outputs[k].shape)}"))
            continue
        exact, bound = _projected(expected, allowed, u, dtype)
        loose = None
        if looser[0] is not None:
            loose = _loose(looser, expected, u)
        obtained = [np.zeros(n.shape) if t is None else t
                    for n, t in zip(case.outputs, tangents)]
        out.append(_comparison(obtained, hots, exact, bound, loose, full, words, i,
                               point))
    return out


def _projected(expected: list, allowed: list, u: dict, dtype: str):
    """(J u at the rows' elements, its tolerance): Σ over the rows' entries and u."""
    terms = sum(int(np.count_nonzero(a)) for a in u.values())
    rounding = (accumulation(terms) + 1.0) * unit_roundoff(dtype)
    exact = np.zeros(len(expected))
    bound = np.zeros(len(expected))
    for r, (want, tol) in enumerate(zip(expected, allowed)):
        for n, a in u.items():
            a = np.asarray(a, dtype=float).reshape(-1)
            row = want.get(f"{n}.grad")
            if row is None:
                continue
            row = np.asarray(row, dtype=float)
            t = tol.get(f"{n}.grad")
            t = (0.0 if t is None else
                 np.broadcast_to(np.asarray(t, dtype=float), row.shape).reshape(-1))
            row = row.reshape(-1)
            exact[r] += row @ a
            bound[r] += np.sum(t * np.abs(a)) + rounding * (np.abs(row) @ np.abs(a))
    return exact, bound


def _loose(looser: list, expected: list, u: dict):
    """The tolerance in float32 of the same elements, asked where float64 fails."""
    found: list = []

    def get() -> np.ndarray:
        if not found:
            found.append(_projected(expected, [f() for f in looser], u, LOOSE)[1])
        return found[0]
    return get


def _comparison(obtained: list, hots: list, exact, bound, loose, full: bool, words: str,
                i: int, point: dict) -> Comparison:
    """The tangents against J u, named with the path: each output whole where every
    element is compared, else each element compared on its own."""
    if full:
        names = {k: f"{PATH}, with {words}: out{k}" for k, _, _ in hots}
        got, want, tol, where = {}, {}, {}, {}
        for r, (k, _, vs) in enumerate(hots):
            where.setdefault(k, []).append(r)
        for k, rs in where.items():
            shape = obtained[k].shape
            got[names[k]] = obtained[k]
            want[names[k]] = exact[rs].reshape(shape)
            tol[names[k]] = bound[rs].reshape(shape)
        grown = None if loose is None else _grown(loose, where, names, obtained)
        return Comparison(got, want, i, tol, loose=grown, values=point)
    names = [f"{PATH}, with {words}: out{k}[{idx}]" for k, idx, _ in hots]
    got = {q: obtained[k].reshape(-1)[int(np.argmax(vs[k].reshape(-1)))]
           for q, (k, _, vs) in zip(names, hots)}
    want = {q: exact[r] for r, q in enumerate(names)}
    tol = {q: bound[r] for r, q in enumerate(names)}
    looser = None if loose is None else (
        lambda: {q: b for q, b in zip(names, loose())})
    return Comparison(got, want, i, tol, loose=looser, values=point)


def _grown(loose, where: dict, names: dict, obtained: list):
    """``loose``'s row bounds as the outputs' arrays."""
    return lambda: {names[k]: loose()[rs].reshape(obtained[k].shape)
                    for k, rs in where.items()}
