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

from dataclasses import dataclass

import numpy as np

from ..approximate import LOOSE
from ..compare import Comparison, Finding, Outcome
from ...base.dtypes import round_to, unit_roundoff
from ...bounds.summation import accumulation
from ...sampling.points import case_rng

ONE_HOTS = 4       # one-hot tangents at the first point
SAMPLED = 16       # output elements checked of an op whose Jacobian is not
PATH = "under forward-mode AD (torch.autograd.forward_ad dual numbers)"


@dataclass(frozen=True)
class OneHot:
    """A one-hot tangent: 1 at element ``flat`` of input ``name``, 0 elsewhere. Kept as
    its index (J u is the Jacobian entry there), dense only for the op's call."""

    name: str
    flat: int
    shapes: dict

    def dense(self) -> dict:
        u = {m: np.zeros(s) for m, s in self.shapes.items()}
        u[self.name].reshape(-1)[self.flat] = 1.0
        return u


def sampled_hots(outputs, count: int = SAMPLED) -> list[tuple[int, str, int]]:
    """``count`` output elements ``(k, index text, flat index)`` spread evenly over the
    outputs' elements (all of them where there are no more)."""
    sizes = [int(np.prod(n.shape, dtype=np.int64)) for n in outputs]
    total = sum(sizes)
    picks = sorted({int(p) for p in np.linspace(0, total - 1, min(count, total)).round()})
    starts = np.cumsum([0] + sizes)
    out = []
    for p in picks:
        k = int(np.searchsorted(starts, p, side="right") - 1)
        flat = int(p - starts[k])
        out.append((k, ",".join(map(str, np.unravel_index(flat, outputs[k].shape))), flat))
    return out


def cotangent(outputs, k: int, flat: int) -> list[np.ndarray]:
    """The one-hot cotangent of element ``flat`` of output ``k``."""
    vs = [np.zeros(n.shape) for n in outputs]
    vs[k].reshape(-1)[flat] = 1.0
    return vs


def directions(case, dtype: str, i: int, names: list[str]) -> list[tuple[str, object]]:
    """(words, u) of each tangent at point ``i``: the random one (arrays by input name),
    then at the first point the one-hot ones (:class:`OneHot`, on elements drawn over
    the inputs in turn)."""
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
        index = ",".join(map(str, np.unravel_index(flat, shapes[n])))
        out.append((f"a one-hot tangent on {n}[{index}]", OneHot(n, flat, shapes)))
    return out


def _dense(u) -> dict:
    return u.dense() if isinstance(u, OneHot) else u


def jvp(op, case, dtype: str, point: dict, i: int, names: list[str], picks: list,
        rows) -> list[Outcome]:
    """The outcomes of op.jvp at point ``i`` (``op``: the op's process; ``names``: the
    inputs whose gradients are checked; ``picks``: the output elements compared, ``(k,
    index text, flat index)`` each; ``rows``: :func:`~gradcheck.checking.opcheck.checks.
    jacobian_rows` of them, or for a large op a function ``r -> that of picks[r]
    alone``). ``[Finding(note=...)]`` alone where the op does not do forward mode.

    Where every output element is compared (a small op) the tangents go to the op in one
    call. Else a large op is asked one tangent at a time, each reply cut to the compared
    elements at once, and its rows streamed, each reduced to its sums against every
    tangent as it comes: no more than one tangent's and one row's input-sized arrays
    are held at a time."""
    drawn = directions(case, dtype, i, names)
    full = len(picks) == sum(int(np.prod(n.shape, dtype=np.int64)) for n in case.outputs)
    first = op.jvp(point, [_dense(u) for _, u in (drawn if full else drawn[:1])])
    if "unsupported" in first:
        # (nothing compared: the report shows op.jvp skipped, saying why)
        return [Finding(note=f"forward mode not supported: {first['unsupported']}")]
    if "raised" in first:
        return [Finding(problem=f"the op raised {PATH} with {drawn[0][0]}: "
                                f"{first['raised']}")]
    projected = _projections(rows, len(picks), [u for _, u in drawn], dtype)
    out: list[Outcome] = []
    for j, ((words, u), (exact, bound, loose)) in enumerate(zip(drawn, projected)):
        if full or j == 0:
            tangents = first["tangents"][j]
        else:
            got = op.jvp(point, [_dense(u)])
            if "tangents" not in got:
                out.append(Finding(problem=f"the op raised {PATH} with {words}: "
                                           f"{got.get('raised', got.get('unsupported'))}"))
                continue
            tangents = got["tangents"][0]
        wrong = _malformed(tangents, case, words)
        if wrong is not None:
            out.append(wrong)
            continue
        if full:
            obtained = [np.zeros(n.shape) if t is None else t
                        for n, t in zip(case.outputs, tangents)]
        else:
            obtained = np.array([0.0 if tangents[k] is None else
                                 float(np.asarray(tangents[k]).reshape(-1)[flat])
                                 for k, _, flat in picks])
        del tangents
        out.append(_comparison(obtained, picks, exact, bound, loose, full, words, i,
                               point))
    return out


def _malformed(tangents: list, case, words: str) -> Finding | None:
    """A problem where the op's tangents are not one of the reference's shape per
    output."""
    if len(tangents) != len(case.outputs):
        return Finding(problem=f"{PATH}, with {words}, the op returned {len(tangents)} "
                               f"outputs; the reference has {len(case.outputs)}")
    for k, (n, t) in enumerate(zip(case.outputs, tangents)):
        if t is not None and np.shape(t) != tuple(n.shape):
            return Finding(problem=f"{PATH}, with {words}, the tangent of out{k} has "
                                   f"shape {list(np.shape(t))}, expected "
                                   f"{list(n.shape)}")
    return None


def _projections(rows, count: int, us: list[dict], dtype: str) -> list[tuple]:
    """For each tangent of ``us``: (J u at the rows' elements, its tolerance, its float32
    tolerance as a function or None). ``rows`` as :func:`jvp` takes it."""
    if callable(rows):
        row = rows
    else:
        expected, allowed, looser = rows
        row = lambda r: (expected[r], allowed[r], looser[r])   # noqa: E731
    sums = [(np.zeros(count), np.zeros(count)) for _ in us]
    loose = False
    for r in range(count):
        want, tol, looser_r = row(r)
        loose = looser_r is not None
        for (exact, bound), u in zip(sums, us):
            exact[r], bound[r] = _projected_row(want, tol, u, dtype)
        del want, tol, looser_r
    if not loose:
        return [(e, b, None) for e, b in sums]
    return [(e, b, _loose(row, count, u)) for (e, b), u in zip(sums, us)]


def _projected_row(want: dict, tol: dict, u, dtype: str) -> tuple[float, float]:
    """(J u)_k and its tolerance from the row e_kᵀJ (``want``) and its tolerances."""
    if isinstance(u, OneHot):   # (J u)_k = J_kx at the one element: one product, exact
        row = want.get(f"{u.name}.grad")
        if row is None:
            return 0.0, 0.0
        t = tol.get(f"{u.name}.grad")
        shape = np.shape(row)
        entry = float(np.asarray(row, dtype=float).reshape(-1)[u.flat])
        t = 0.0 if t is None else float(np.broadcast_to(
            np.asarray(t, dtype=float), shape).reshape(-1)[u.flat])
        return entry, t + unit_roundoff(dtype) * abs(entry)
    terms = sum(int(np.count_nonzero(a)) for a in u.values())
    rounding = (accumulation(terms) + 1.0) * unit_roundoff(dtype)
    exact = bound = 0.0
    for n, a in u.items():
        row = want.get(f"{n}.grad")
        if row is None:
            continue
        a = np.asarray(a, dtype=float).reshape(-1)
        row = np.asarray(row, dtype=float).reshape(-1)
        t = tol.get(f"{n}.grad")
        t = 0.0 if t is None else np.broadcast_to(np.asarray(t, dtype=float),
                                                   np.shape(want[f"{n}.grad"])).reshape(-1)
        exact += float(row @ a)
        bound += float(np.sum(t * np.abs(a)) + rounding * (np.abs(row) @ np.abs(a)))
    return exact, bound


def _loose(row, count: int, u: dict):
    """The tolerance in float32 of the same elements, asked where float64 fails (the
    rows asked again where they were streamed)."""
    found: list = []

    def get() -> np.ndarray:
        if not found:
            bound = np.zeros(count)
            for r in range(count):
                want, _, looser_r = row(r)
                bound[r] = _projected_row(want, looser_r(), u, LOOSE)[1]
            found.append(bound)
        return found[0]
    return get


def _comparison(obtained, picks: list, exact, bound, loose, full: bool, words: str,
                i: int, point: dict) -> Comparison:
    """The tangents against J u, named with the path: each output whole where every
    element is compared, else each element compared on its own."""
    if full:
        names = {k: f"{PATH}, with {words}: out{k}" for k, _, _ in picks}
        got, want, tol, where = {}, {}, {}, {}
        for r, (k, _, _) in enumerate(picks):
            where.setdefault(k, []).append(r)
        for k, rs in where.items():
            shape = obtained[k].shape
            got[names[k]] = obtained[k]
            want[names[k]] = exact[rs].reshape(shape)
            tol[names[k]] = bound[rs].reshape(shape)
        grown = None if loose is None else _grown(loose, where, names, obtained)
        return Comparison(got, want, i, tol, loose=grown, values=point)
    names = [f"{PATH}, with {words}: out{k}[{idx}]" for k, idx, _ in picks]
    got = {q: obtained[r] for r, q in enumerate(names)}
    want = {q: exact[r] for r, q in enumerate(names)}
    tol = {q: bound[r] for r, q in enumerate(names)}
    looser = None if loose is None else (
        lambda: {q: b for q, b in zip(names, loose())})
    return Comparison(got, want, i, tol, loose=looser, values=point)


def _grown(loose, where: dict, names: dict, obtained: list):
    """``loose``'s row bounds as the outputs' arrays."""
    return lambda: {names[k]: loose()[rs].reshape(obtained[k].shape)
                    for k, rs in where.items()}
