"""Decisions judged as the witness made them.

A row that selects or switches (sort, topk, max/min, max_pool2d; relu, abs, clamp,
where's comparisons, leaky_relu, hardtanh, floor...) decides on its arguments' values:
which element is largest, which side of a kink. A witness computing in its dtype decides
on its own rounded values, and where two candidates lie within the dtype's rounding of
each other (a saturated tanh rounding to 1.0 in float16, two sort keys 2⁻⁹ apart in
bfloat16) it can decide otherwise than the exact values do. Its gradient is then the
derivative of another branch, right for the values it held, and comparing it with the
exact branch's derivative is a false alarm.

Such a witness is judged against the derivative of the branch it took. Every row with a
hazard column (kinks, ties, switches and singularities alike) records its arguments as
the witness computed them (:class:`gradcheck.witnesses.recorder.Recorder`, from :func:`gradcheck.witnesses.drive.drive`).
Where a witness disagrees with the exact reference at a point and some decision there lay
within the witness's own error of its switch (the distance of the exact arguments to it,
the row's hazard, no more than how far the witness's arguments are from the exact ones),
the point is evaluated again in float64 by the *other* autograd library (the engine for
torch, torch for the engine: no witness judges itself) with each such row's arguments
pinned to the witness's values: ``(a - ā) + w`` with ``ā`` a constant of ``a``'s value, so
the value is the witness's to the bit and the derivative flows to ``a`` as before
(:func:`gradcheck.witnesses.drive._pinned`). A sort or topk is pinned to the
witness's own permutation as well (torch's sort is not stable: exactly equal keys are
ordered as it chose, and a gradient routes by that order), by a tie-break far below any
gap between distinct keys. The witness passes at that point when it agrees with that
derivative within the same tolerance; a note names the rows, the elements and the margin.

A wrong backward of such a row (a wrong permutation, the wrong side of a kink) still
fails: the branch's derivative is right for the branch, the wrong backward is not.
"""

from __future__ import annotations

import numpy as np

from ..base.dtypes import eps
from ..witnesses.recorder import deciding

#: the witnesses that record their decisions, and which library judges each
JUDGE = {"torch": "engine", "engine": "torch"}


def _exact_args(case, values: dict) -> dict[int, tuple]:
    """Each deciding row's arguments in float64 at the point, and the row's node."""
    from ..formula.forward import evaluate

    found: dict[int, tuple] = {}

    def on_node(node, args, value) -> None:
        if deciding(node):
            found[id(node)] = (node, [np.asarray(a, dtype=float) if not np.isscalar(a)
                                      else a for a in args])

    evaluate(case.output, values, on_node=on_node)
    return found


def flipped(case, values: dict, recorded: dict) -> list[tuple]:
    """The deciding rows whose switch the witness's arguments could reach: ``(node,
    count, margin)``, count the elements within reach, margin the largest exact
    distance to the switch among them."""
    out = []
    for key, (node, exact) in _exact_args(case, values).items():
        got = recorded.get(key)
        if got is None:
            continue
        reach = 0.0
        for e, w in zip(exact, got):
            if isinstance(e, np.ndarray) and isinstance(w, np.ndarray) and e.dtype.kind == "f":
                with np.errstate(all="ignore"):
                    d = np.abs(w - e)
                reach += float(np.max(d)) if d.size else 0.0
        if not np.isfinite(reach) or reach == 0.0:
            continue
        with np.errstate(all="ignore"):
            distance = np.abs(np.asarray(node.call("hazard", exact), dtype=float))
        # a pair of candidates (a tie) moves by both its elements' errors
        near = distance <= 2 * reach
        if near.any():
            out.append((node, int(near.sum()), float(distance[near].max())))
    return out


def within_steps(case, values: dict, relative: float, farthest: int = 4) -> list[tuple]:
    """The deciding rows whose switch the numeric witness's steps could reach at this
    point: every float input moved by ``farthest`` steps of ``relative``·max(1, |x|) at
    once (up, down, and with random signs: more than any one perturbation of the
    witness moves them), the rows' arguments there against the exact ones (as
    :func:`flipped` takes a witness's). ``(node, count, margin)`` as :func:`flipped`."""
    rng = np.random.default_rng(0)
    found: dict[int, tuple] = {}
    for way in ("up", "down", "signs"):
        moved = {}
        for name, x in values.items():
            x = np.asarray(x)
            if x.dtype.kind != "f":
                moved[name] = x
                continue
            step = farthest * relative * np.maximum(1.0, np.abs(x))
            sign = (1.0 if way == "up" else -1.0 if way == "down"
                    else rng.choice([-1.0, 1.0], size=x.shape))
            moved[name] = x + sign * step
        args = {key: a for key, (_node, a) in _exact_args(case, moved).items()}
        for node, count, margin in flipped(case, values, args):
            if id(node) not in found or found[id(node)][1] < count:
                found[id(node)] = (node, count, margin)
    return list(found.values())


def _tie_broken(w: np.ndarray, perm: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """``w`` with exactly equal keys made distinct in the order of ``perm`` (positions
    along ``axis`` in the order the witness's sort put them): the k-th of a run of equal
    keys moves by k float64 spacings, so any sort of the result orders it as ``perm``
    and the values move by nothing a tolerance in the witness's dtype can see."""
    w = np.asarray(w, dtype=float)
    moved, p = np.moveaxis(w, axis, -1), np.moveaxis(perm, axis, -1)
    ordered = np.take_along_axis(moved, p, -1)
    n = ordered.shape[-1]
    idx = np.broadcast_to(np.arange(n), ordered.shape)
    new_run = np.concatenate([np.ones(ordered.shape[:-1] + (1,), bool),
                              ordered[..., 1:] != ordered[..., :-1]], axis=-1)
    tie = idx - np.maximum.accumulate(np.where(new_run, idx, 0), axis=-1)
    shift = (-1.0 if descending else 1.0) * tie * np.spacing(np.abs(ordered))
    out = moved.copy()
    np.put_along_axis(out, p, ordered + shift, -1)
    return np.moveaxis(out, -1, axis)


def _pins(recorded, perms: dict, rows: list) -> dict[int, list]:
    """Each row's arguments as the witness held them (a sort's or topk's in its order)."""
    pins = {}
    for node, _count, _margin in rows:
        args = list(recorded[id(node)])
        if node.op in ("sort", "topk") and id(node) in perms:
            axis = node.axis[0]
            full = args[0]
            perm = perms[id(node)]
            if node.op == "topk":   # the top k of the witness, the rest after them
                rest = np.argsort(-np.asarray(full, dtype=float), axis=axis, kind="stable")
                perm = _complete(perm, rest, axis)
            args[0] = _tie_broken(full, perm, axis,
                                  node.op == "topk" or bool(node.param("descending")))
        pins[id(node)] = args
    return pins


def _complete(picked: np.ndarray, order: np.ndarray, axis: int) -> np.ndarray:
    """A full permutation along ``axis`` starting with ``picked`` (topk's k), the other
    positions after them in ``order``'s order."""
    moved_picked, moved = np.moveaxis(picked, axis, -1), np.moveaxis(order, axis, -1)
    out = np.empty(moved.shape, dtype=moved.dtype)
    for at in np.ndindex(moved.shape[:-1]):
        t = list(moved_picked[at])
        out[at] = t + [j for j in moved[at] if j not in set(t)]
    return np.moveaxis(out, -1, axis)


def judged(case, values: dict, v, dtype: str, witness: str, decisions,
           run_judge) -> tuple | None:
    """``(expected, bounds, note)``: the derivative of the branch ``witness`` took at
    the point (an :class:`~gradcheck.base.evaluation.Evaluation` in float64 by the other
    library), ``dtype -> rounding bounds`` of that branch's computation (the rounding
    model with the same rows pinned) and the note saying so; None where no decision lay
    within the witness's reach. ``run_judge(name)``: the run function of witness
    ``name`` (the registry's), which takes ``pins``."""
    if decisions is None or witness not in JUDGE:
        return None
    recorded = decisions.arrays()
    rows = flipped(case, values, recorded)
    if not rows:
        return None
    pins = _pins(recorded, decisions.perms(), rows)
    expected = run_judge(JUDGE[witness])(case, values, v, "float64", pins=pins)
    named = "; ".join(f"{node.op} at {count} element{'s' * (count != 1)} (exact margin "
                      f"{margin:.3g})" for node, count, margin in rows)
    note = (f"{witness}'s decisions in {dtype} lie within its rounding (u = "
            f"{eps(dtype):.2g}) of a switch: {named}; where it decided otherwise than the "
            f"exact values, it is checked against the derivative of the branch it took")
    from ..bounds.point import error_bounds

    found: dict = {}

    def bounds(d: str) -> dict:
        if d not in found:
            found[d] = error_bounds(case, values, v, d, pins=pins)
        return found[d]

    return expected, bounds, note


def rejudged(case, values: dict, v, dtype: str, witness: str, trial, got, i: int,
             run_judge, tolerance) -> tuple:
    """A torch or engine witness's disagreement at point ``i`` (``trial``, its tally
    there), judged against the branch it took (:func:`judged`): ``(tally, note)``, the
    branch's agreement where it agrees, else ``trial`` as it was. ``tolerance(bounds)``:
    the witness's tolerances from ``dtype -> bounds``. A judge that raises leaves the
    disagreement standing (never a pass)."""
    from ..process.budgets import exhausted
    from ..process.timelimit import CaseTimeout

    try:
        found = judged(case, values, v, dtype, witness, got.decisions, run_judge)
    except Exception as exc:
        if exhausted(exc) or isinstance(exc, CaseTimeout):
            raise
        return trial, None
    if found is None:
        return trial, None
    branch, bounds, note = found
    again = trial.fresh()
    again.add(got, branch, i, tolerance(bounds))
    return (trial, None) if again.mismatched else (again, note)
