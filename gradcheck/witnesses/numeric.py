"""The numeric witness: central finite differences of the float64 forward (the rule
table's ``numpy`` column), with Richardson extrapolation. It uses no derivative rule.

Each derivative is the extrapolation R(h) = (4·D(h) - D(2h)) / 3 of central differences
D, whose error is O(h⁴). The same extrapolation from steps twice as large, R(2h), has
about 16 times that error, so ``|R(h) - R(2h)|`` (about 15 times R(h)'s truncation
error) plus the rounding error ``Σ E(f)/h`` bounds the error of R(h), where E(f) bounds
the rounding error of each evaluation of f: the running rounding-error bound
(:func:`gradcheck.bounds.point.forward_bound`) at the farthest steps either way, the
perturbed input carrying the rounding of x + h itself, the larger of the two, times
:data:`gradcheck.bounds.tolerance.FORWARD_MARGIN` (:func:`_bound_near`). It sees
cancellation inside f (log(cosh(x)) near 0 errs by eps, not by eps·|f|). That bound, not
a guessed tolerance, is what the comparison allows this witness. Each perturbed
evaluation is then a plain forward (:func:`gradcheck.formula.forward.program`),
recomputing only what the perturbed input moves.

Elementwise formulas have a diagonal Jacobian, so all elements of an input are perturbed
at once (six evaluations per input). Other formulas are perturbed in groups of elements
that share no output (a colouring of the symbolic sparsity pattern): a banded Jacobian
takes a few groups, a dense one one group per element.

Without a pattern (the tensor reference of large mixing formulas has none) an input of
more than :data:`NUMERIC_COLUMNS` elements is measured along :data:`DIRECTIONS` random
directions instead: d/dt vᵀf(x + t·s) at t = 0 is (vᵀJ)·s, so a few evaluations per
direction (6 to 16: the step is chosen as in Ridders' method) check the gradient's
projections uᵀ(vᵀJ) whatever its size, but not each element: a wrong element shows in
every projection, weighted by its uᵢ, and is seen when that exceeds the projection's
error bound (about an element's relative error times √n of the gradient's elements).
The result says so (:attr:`Evaluation.directions`, and a note).
"""

from __future__ import annotations

import zlib

import numpy as np

from ..base.arrays import cut, slabs, body_cotangent, unbroadcast
from ..base.evaluation import PROJECTED, Directions, Evaluation
from ..formula.forward import evaluate, program
from ..base.dtypes import unit_roundoff
from ..bounds.point import PointBounds, forward_bound
from ..bounds.summation import accumulation
from ..bounds.tolerance import FORWARD_MARGIN
from ..sampling.points import case_rng
from ..formula.tree import differentiable_names, elementwise_split, ordered
from ..rules import RULES

STEP = 1e-3                  # relative step: h = STEP * max(1, |x|)
#: without a sparsity pattern, inputs up to this many elements are still perturbed one
#: element at a time (exact per element, and cheap); larger ones along directions
NUMERIC_COLUMNS = 32
DIRECTIONS = 3               # random directions per input measured that way
LADDER = 6                   # steps 1, 2, ..., 32 times a direction's first one tried
FARTHEST = 4                 # an element's differences take steps h, 2h and 4h


def _derivative(f, x: np.ndarray, h: np.ndarray):
    """Richardson-extrapolated central difference of f at x along the step h, and a
    bound on its error (both with f's output shape). ``f`` returns its value and a
    bound on that value's rounding error (:func:`_bound_near`)."""
    d, rounding = {}, 0.0
    for k in (1, 2, FARTHEST):      # one pair at a time: large inputs hold few arrays
        (p, ep), (m, em) = f(x + k * h), f(x - k * h)
        d[k] = (p - m) / (2 * k * h)
        rounding = rounding + ep + em
    r1 = (4 * d[1] - d[2]) / 3      # O(h^4) estimate
    r2 = (4 * d[2] - d[FARTHEST]) / 3   # from steps twice as large: 16x the error
    # R(h)'s rounding is (2/3)(E₁₊ + E₁₋)/h + (1/12)(E₂₊ + E₂₋)/h; the sum of all six
    # bounds over h covers it and R(2h)'s too
    return r1, np.abs(r1 - r2) + rounding / h


def _step(x: np.ndarray, step: float = STEP) -> np.ndarray:
    return step * np.maximum(1.0, np.abs(x))


def run(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str,
        reference=None, *, sparsity: dict | None = None, step: float = STEP,
        at: PointBounds | None = None) -> Evaluation:
    """Perturbations are grouped by the structural Jacobian pattern of ``reference``
    (:attr:`gradcheck.reference.Reference.sparsity`), or by ``sparsity`` (the same
    mapping, by name) when given: a test hands a pattern of its own that way. Without
    either, every element is perturbed on its own; with a reference that has no
    pattern, inputs larger than :data:`NUMERIC_COLUMNS` are measured along random
    directions (:func:`_directional`). ``step``: the relative step (a point where the
    default cannot resolve the derivative is measured again with finer ones,
    :func:`gradcheck.checking.case`). ``at``: the point's
    :class:`gradcheck.bounds.point.PointBounds`, whose float64 forward bound, where the
    tolerance's bounds took it, is read instead of taken again."""
    directional = (sparsity is None and reference is not None
                   and reference.sparsity is None)
    if sparsity is None and reference is not None:
        sparsity = reference.sparsity
    # (integer and boolean inputs keep their dtype: exact, and never perturbed)
    env = {k: (np.asarray(x) if np.asarray(x).dtype.kind in "biu"
               else np.asarray(x, dtype=np.float64)) for k, x in point.items()}
    lets: dict[str, np.ndarray] = {}
    # (the retained lets' values come from the walk; without any, the compiled forward)
    value = evaluate(case.output, env, lets=lets if case.retain_grad else None)
    reach = differentiable_names(case.output)
    targets = [(s.name, env[s.name], "grads") for s in case.inputs
               if s.requires_grad and s.name in reach]
    targets += [(n, lets[n], "retained") for n in case.retain_grad]
    out = Evaluation(value, {s.name: None for s in case.inputs if s.requires_grad}, {},
                     error={"value": np.zeros_like(value)}, directions={})
    split = elementwise_split(case.output)
    shared: dict = {}   # what the directions at this point share (_directional)
    with np.errstate(all="ignore"):
        for name, x0, where in targets:
            x0 = np.asarray(x0, dtype=np.float64)
            quantity = f"{name}.grad"
            if split is not None:
                grad, err = _diagonal(split, env, name, x0, v, step)
            elif directional and x0.size > NUMERIC_COLUMNS:
                rng = case_rng(case, dtype, _digest(x0), f"directions {name}")
                grad, err, out.directions[quantity] = _directional(
                    case.output, env, name, x0, v, rng, shared, step, at)
                quantity += PROJECTED
            else:
                grad, err = _columns(case.output, env, name, x0, v,
                                     (sparsity or {}).get(name), step)
            getattr(out, where)[name] = grad
            out.error[quantity] = err
    out.notes = _notes(targets, out.directions)
    out.directions = out.directions or None
    return out


def _digest(x: np.ndarray) -> int:
    """A number that depends only on the values of ``x``: the directions at a point are
    drawn from it (with the case's seed, name and dtype), so a run is reproducible.
    (CRC-32 read in place: 10 ms on a [4096, 1024] input, where BLAKE2 of a copy took
    72 ms; nothing here needs more than a reproducible mix of the values.)"""
    return zlib.crc32(np.ascontiguousarray(x).data)


def _notes(targets, directions: dict) -> tuple[str, ...]:
    """What the witness verified, when some gradient was seen along directions only."""
    if not directions:
        return ()
    along = list(directions)
    plain = [f"{n}.grad" for n, _, _ in targets if f"{n}.grad" not in directions]
    text = (f"numeric: {', '.join(along)} checked along {DIRECTIONS} random directions "
            "u (uᵀ(vᵀJ)), not element by element")
    if plain:
        text += f"; {', '.join(plain)} element by element"
    return (text,)


def _diagonal(split, env, name, x0, v, step: float = STEP):
    """vᵀJ for an elementwise formula: one perturbation of the whole input, evaluated
    slab by slab (each output element depends on its own elements only), so that a
    million-element case holds a few full-size arrays, not every temporary."""
    body, reduction = split
    shape = body.shape
    d, err = np.empty(shape), np.empty(shape)
    stopped = _stopped(body, env)
    forward = program(body, frozenset({name, *stopped}), True)   # (run's errstate holds)
    for axis, part, where in slabs(shape):
        local = {k: cut(a, len(shape), axis, part) for k, a in env.items()}
        held = {k: cut(a, len(shape), axis, part) for k, a in stopped.items()}
        x = cut(x0, len(shape), axis, part)
        out_shape = d[where].shape
        h = _step(x, step)
        bound = np.broadcast_to(_bound_near(body, local, name, x - FARTHEST * h,
                                            x + FARTHEST * h), out_shape)

        def f(xs, local=local, held=held, out_shape=out_shape, bound=bound):
            return np.broadcast_to(forward(local, {name: xs, **held}), out_shape), bound

        d[where], err[where] = _derivative(f, x, h)
    v_body = body_cotangent(reduction, v, shape)
    return (unbroadcast(v_body * d, x0.shape),
            unbroadcast(np.abs(v_body) * err, x0.shape))


def _rows_by_column(rows: np.ndarray, cols: np.ndarray, n_cols: int) -> list[np.ndarray]:
    """For each column of a sparsity pattern, the rows it touches (one sort, O(nnz log))."""
    order = np.argsort(cols, kind="stable")
    bounds = np.searchsorted(cols[order], np.arange(n_cols + 1))
    rows = rows[order]
    return [rows[bounds[j]:bounds[j + 1]] for j in range(n_cols)]


def colour(rows: np.ndarray, cols: np.ndarray, n_cols: int, n_rows: int) -> list[list[int]]:
    """Greedy colouring of the Jacobian's columns: columns in one group share no output
    row, so one perturbation of the whole group measures each of them."""
    return _greedy(_rows_by_column(rows, cols, n_cols), n_rows)


def _greedy(rows_of: list[np.ndarray], n_rows: int) -> list[list[int]]:
    groups: list[list[int]] = []
    used: list[np.ndarray] = []
    for j, touched in enumerate(rows_of):
        for g, mask in enumerate(used):
            if not mask[touched].any():
                break
        else:
            g = len(groups)
            groups.append([])
            used.append(np.zeros(n_rows, dtype=bool))
        groups[g].append(j)
        used[g][touched] = True
    return groups


def _columns(root, env, name, x0, v, pattern=None, relative: float = STEP):
    """vᵀJ by perturbing groups of elements: with the symbolic sparsity ``pattern``
    ((rows, cols) of the structural non-zeros) a diagonal or banded Jacobian needs a
    handful of groups instead of one per element. A group whose perturbation moves an
    output row the pattern says it cannot is measured again element by element, so a
    wrong pattern costs time, never a wrong witness."""
    v = np.broadcast_to(np.asarray(v, dtype=float), root.shape).reshape(-1)
    flat = x0.reshape(-1)
    n, m = flat.size, v.size
    if pattern is None:
        groups = [[j] for j in range(n)]
        rows_of = [slice(None)] * n
    else:
        rows_of = _rows_by_column(*pattern, n)
        groups = _greedy(rows_of, m)
    h = _step(flat, relative)
    grad, err = np.zeros(n), np.zeros(n)
    forward, given, moved = _mover(root, env, name, x0.shape)

    def measure(group, rows_of):
        step = np.zeros(n)
        step[group] = h[group]
        far = (FARTHEST * step).reshape(x0.shape)
        bound = np.broadcast_to(_bound_near(root, env, name, x0 - far, x0 + far),
                                root.shape).reshape(-1)

        def f(t):
            np.multiply(step.reshape(x0.shape), t, out=moved)
            np.add(moved, x0, out=moved)
            # (a copy: the value may be a view of the buffer the next call writes)
            return np.broadcast_to(forward(env, given), root.shape).flatten(), bound

        d, e = _derivative(f, 0.0, 1.0)   # d/dt f(x + t·step) = Σ_j J[:, j] h_j
        for j in group:
            r = rows_of[j]
            grad[j] = np.sum(v[r] * d[r]) / h[j]
            err[j] = np.sum(np.abs(v[r]) * e[r]) / h[j]
        return d, e

    for group in groups:
        d, e = measure(group, rows_of)
        if pattern is not None:
            outside = np.ones(m, dtype=bool)
            for j in group:
                outside[rows_of[j]] = False
            if np.any(np.abs(d[outside]) > e[outside]):
                every = [slice(None)] * n
                for j in group:           # the pattern missed a dependency here
                    measure([j], every)
    return grad.reshape(x0.shape), err.reshape(x0.shape)


def _rounding(root, env, v, at: PointBounds | None) -> dict:
    """What every direction at this point shares: v at the output's shape, and the rounding
    bound of vᵀf, Σ|vᵢ|·E(fᵢ) + (γ(m) + 1)·u·Σ|vᵢfᵢ| (vᵀf is a sum of m products), taken
    once at x (the running bound costs several forwards, a second at a layer's size;
    read from ``at`` where the tolerance took it) and doubled
    (:data:`gradcheck.bounds.tolerance.FORWARD_MARGIN`) for the points x + t·s: the
    largest step moves an argument by at most 4·32·STEP = 13% of max(1, |x|)
    (Cauchy–Schwarz, see :func:`_directional`), which moves a first-order bound by about
    as much, far less than the factor 2, where |x| is about 1 or more. Where |x| ≪ 1
    (the extreme points of small magnitudes) a step moves the values far beyond their
    size at x and this is no bound at the largest steps (a product of tiny elements:
    10¹⁰⁹ times over at the farthest step); the ladder's truncation term, which sees
    that rounding as noise, and the reference's own E_float64 in the tolerance have
    covered it in every formula tried (none failed in 209 random mixing formulas at 4
    points each, nor in the test of that), but it is not proved. (:func:`_bound_near`,
    for elements, takes the bound at the segment's ends.)"""
    v = np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=float), root.shape))
    value, bound = forward_bound(root, env, at=at)
    dot = (accumulation(v.size) + 1.0) * unit_roundoff("float64")
    total = float(np.sum(np.abs(v) * bound)) + dot * float(np.sum(np.abs(v * value)))
    return {"v": v, "rounding": FORWARD_MARGIN * total}


def _bound_near(root, env, name: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A rounding-error bound for every evaluation of ``root`` with the input (or ``let``)
    ``name`` moved along a segment, ``lo`` to ``hi`` (its farthest steps either way):
    the running bound at both ends, ``name`` carrying the rounding of a computed value
    (u·|x|, as a perturbed x + h does), the larger of the two per element, doubled
    (:data:`gradcheck.bounds.tolerance.FORWARD_MARGIN`). A bound is a sum of rounding
    units times magnitudes of values, which along so short a segment (4 steps, each 0.1%
    of max(1, |x|)) are nearly affine, so their magnitudes are largest at its ends; the
    factor covers the rest. Two running bounds per segment replace one per evaluation
    (six), each several forwards. (Not the bound at x: where |x| ≪ 1 a step of 0.1% of 1
    moves the values far beyond their sizes at x.)"""
    return FORWARD_MARGIN * np.maximum(forward_bound(root, env, {name: lo})[1],
                                       forward_bound(root, env, {name: hi})[1])


def _mover(root, env, name: str, shape) -> tuple:
    """What evaluates ``root`` with the input (or ``let``) ``name`` moved: the compiled
    forward, its overrides (``name`` and the values at x of what it does not move,
    :func:`_frozen`) and the buffer they hold for ``name``, which the caller writes each
    moved point into."""
    moved = np.empty(shape)
    given = dict(_frozen(root, env, name), **{name: moved})
    return program(root, frozenset(given), True), given, moved   # (run's errstate holds)


def _stopped(root, env) -> dict[int, np.ndarray]:
    """The values at x of the stop-gradients below ``root`` (``detach``,
    ``Rule.stops_gradient``), by node id: held there while an input moves, so that
    finite differences see their derivative zero, as every other witness does."""
    stops = {id(n) for n in ordered(root) if n.op in RULES and RULES[n.op].stops_gradient}
    found: dict[int, np.ndarray] = {}
    if stops:
        evaluate(root, env, on_node=lambda node, args, value: found.update(
            {id(node): value} if id(node) in stops else {}))
    return found


def _frozen(root, env, name: str) -> dict[int, np.ndarray]:
    """The values at x of the nodes that do not depend on the input (or ``let``)
    ``name`` but feed one that does, by node id: every step of a direction reuses them
    and recomputes only what ``name`` moves (a layer norm's weight moves two of its
    operations, not its normalisation). A stop-gradient (``detach``) never moves: its
    value at x is held (:func:`_stopped`)."""
    moves: dict[int, bool] = {}
    nodes = ordered(root)
    for node in nodes:
        moves[id(node)] = not (node.op in RULES and RULES[node.op].stops_gradient) and (
            (node.op in ("input", "let") and node.name == name)
            or any(moves[id(c)] for c in node.args))
    frontier = {id(c): c for node in nodes if moves[id(node)]
                and not (node.op == "let" and node.name == name)
                for c in node.args if not moves[id(c)] and c.op not in ("input", "const")}
    if not frontier:
        return {}
    found: dict[int, np.ndarray] = {}
    lets: dict[str, np.ndarray] = {}

    def keep(node, args, value):
        if id(node) in frontier:
            found[id(node)] = value

    evaluate(root, env, on_node=keep, lets=lets)
    found.update({key: lets[c.name] for key, c in frontier.items() if c.op == "let"})
    return found


def _directional(root, env, name, x0, v, rng, shared: dict, relative: float = STEP,
                 at: PointBounds | None = None):
    """vᵀJ along random directions: for each u (standard normal, scaled element by
    element by max(1, |x|) as the steps are: U = u⊙max(1, |x|)), the derivative of the
    scalar vᵀf(x + t·s) at t = 0 with s = STEP·U/‖u‖₂, which is (vᵀJ)·s (:func:`_ladder`).

    At t = 1 the step's Euclidean length is that of a one-element step, STEP·max(1,
    |x|): no argument of the formula moves further than one element's step could move
    it (Cauchy–Schwarz). The rounding term of the bound, Σ E/step, is then ‖u‖₂ ≈ √n
    times a one-element step's (the projection, a sum of n terms, is about √n times an
    element), and it is what dominates: the ladder takes larger steps while the bound
    falls.

    Returns the k measured values Uₖ·(vᵀJ), their error bounds, and U [k, *x.shape]
    (:class:`~gradcheck.base.evaluation.Directions`: drawn again when projected, not
    held). ``at``: the point's PointBounds (:func:`_rounding`)."""
    if "rounding" not in shared:
        shared.update(_rounding(root, env, v, at))
    v, rounding = shared["v"], shared["rounding"]
    forward, given, moved = _mover(root, env, name, x0.shape)
    # u is drawn in float32 and kept so (half an input's size per direction): each U
    # is made again from it when projected, exactly as the step was
    drawn: list[np.ndarray] = []
    scale = np.abs(x0)
    np.maximum(scale, 1.0, out=scale)

    def direction(k: int) -> np.ndarray:
        return np.multiply(drawn[k], scale, dtype=np.float64)

    got, err = np.empty(DIRECTIONS), np.empty(DIRECTIONS)
    rungs = shared.get("rungs", range(LADDER))
    for k in range(DIRECTIONS):
        drawn.append(rng.standard_normal(x0.shape, dtype=np.float32))
        # (‖u‖ in float32 arithmetic: it only scales the step, and the result by it)
        size = relative / max(float(np.sqrt(np.vdot(drawn[k], drawn[k]))), 1.0)
        step = direction(k)
        step *= size

        def g(t, step=step):
            np.multiply(step, t, out=moved)
            np.add(moved, x0, out=moved)
            value = forward(env, given)
            if value.size != v.size:   # (vdot reads both flat: equal sizes are aligned)
                value = np.broadcast_to(value, v.shape)
            return float(np.vdot(v, value)), rounding

        d, e, rung = _ladder(g, rungs)    # d/dt vᵀf = size·Uₖ·(vᵀJ)
        got[k], err[k] = d / size, e / size
        # the other directions (of every input) see the same function at the same
        # relative scale: the rung the first one chose (each direction's own bound is
        # still computed, only not minimised again)
        rungs = shared["rungs"] = (rung,)
    return got, err, Directions(DIRECTIONS, x0.shape, direction)


def _ladder(g, rungs) -> tuple[float, float, int]:
    """The derivative at 0 of the scalar g (which returns its value and a bound on that
    value's rounding error), its error bound and the rung chosen, with Ridders' choice
    of step: the estimate of :func:`_derivative` at steps c = 2^j for j in ``rungs``
    whose bound |R(c) − R(2c)| + Σ E/c is least. Each rung reuses its neighbour's
    differences but one; the bound's rounding term halves per rung up and its
    truncation term grows 16-fold, so it falls to one least rung and rises after it.
    The search starts at the middle rung and walks the way the bound falls until it
    rises (10 evaluations of g where the least is at either end of 6 rungs, not 14-16
    from the first). By those rates a neighbour's bound is 16·T + R/2 (up) or T/16 +
    2·R (down) where this rung's is T + R (T its truncation term, R its rounding
    term): both are larger when R/30 <= T <= 16·R/15, and the search stops at the
    middle rung when T lies in [R/30, R] (6 evaluations; the upper end kept below the
    rates' 16/15, as a T that is mostly rounding noise does not grow 16-fold). Any
    rung's bound holds for its estimate; the least is the tightest. A rung whose bound
    is not finite (g not finite around 0 at its steps) counts as the worst."""
    quotients: dict[int, tuple[float, float]] = {}

    def quotient(k: int) -> tuple[float, float]:
        if k not in quotients:
            (p, ep), (m, em) = g(k), g(-k)
            quotients[k] = ((p - m) / (2 * k), ep + em)
        return quotients[k]

    def rung(j: int) -> tuple[float, float, int, float, float, float]:
        """(estimate, bound, j, bound for ordering, truncation term, rounding term)"""
        c = 2 ** j
        (d1, e1), (d2, e2), (d4, e4) = quotient(c), quotient(2 * c), quotient(4 * c)
        r1, r2 = (4 * d1 - d2) / 3, (4 * d2 - d4) / 3
        truncation, rounding = abs(r1 - r2), (e1 + e2 + e4) / c
        bound = truncation + rounding
        return (r1, bound, j, bound if np.isfinite(bound) else np.inf, truncation,
                rounding)

    rungs = list(rungs)
    mid = len(rungs) // 2
    best = rung(rungs[mid])
    truncation, rounding = best[4:]
    if np.isfinite(best[3]) and rounding / 30 <= truncation <= rounding:
        return best[:3]   # both neighbours predicted looser (see above)
    for way in (1, -1):
        i, moved = mid + way, False
        while 0 <= i < len(rungs):
            found = rung(rungs[i])
            if not found[3] < best[3]:
                break
            best, moved, i = found, True, i + way
        if moved:
            break
    return best[:3]
