"""The first-order op checks, each a function of what the op did and what is exact that
returns its outcomes (:class:`~gradcheck.checking.compare.Comparison` s and
:class:`~gradcheck.checking.compare.Finding` s) for the check's tally; the driver
(:class:`gradcheck.checking.opcheck.driver.OpCheck`) calls the op and records them."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..compare import Comparison, Finding, Outcome
from .exact import exact_rows, grad_quantities, one_hots

JACOBIAN_LIMIT = 64        # output elements up to which every one-hot v is checked
SECOND_FORWARD = ("a second forward after a backward returns other values: state kept "
                  "between calls?")


def forward(obtained: dict, exact_values: dict, i: int, tolerance: dict, loose=None,
            values: dict | None = None) -> list[Outcome]:
    """op.forward: the op's outputs (``out{k}``) against the reference's values
    (``loose``, ``values``: as a :class:`~gradcheck.checking.compare.Comparison`'s)."""
    return [Comparison(obtained, exact_values, i, tolerance, loose=loose, values=values)]


def backward(got: dict, exact_grads: dict, i: int, tolerance: dict, loose=None,
             values: dict | None = None) -> list[Outcome]:
    """op.backward: vᵀJ through autograd (by input name) against the exact one."""
    return [Comparison(grad_quantities(got), exact_grads, i, tolerance, loose=loose,
                       values=values)]


def determinism(first: dict, second: dict, i: int) -> list[Outcome]:
    """op.determinism: a second backward with the same v gives what the first did (the
    tally allows ``nondet_tol``)."""
    return [Comparison(grad_quantities(second), grad_quantities(first), i, exact=False)]


def zero(got: dict, exact_ones: dict, inputs: dict, i: int) -> list[Outcome]:
    """op.zero: a zero grad_output gives exact zeros (None where no gradient is due:
    where the exact gradient for v = ones is None). A backward that computes 0 * inf or
    0 / 0 somewhere returns NaN, which training would then spread."""
    zeros = {n: (None if exact_ones.get(n) is None else np.zeros(inputs[n].shape))
             for n in got}
    return [Comparison(grad_quantities(got), grad_quantities(zeros), i)]


def jacobian_checked(outputs) -> bool:
    """Whether op.jacobian checks an op of these outputs: up to JACOBIAN_LIMIT elements."""
    return sum(int(np.prod(n.shape, dtype=np.int64)) for n in outputs) <= JACOBIAN_LIMIT


def jacobian_rows(refs, point: dict, hots: list, tolerances: Callable, keep=None,
                  loose: Callable | None = None) -> tuple[list, list, list]:
    """For the one-hot cotangents ``hots`` (``(k, index text, vs)`` each): the exact
    vᵀJ of each (quantities ``x.grad``), its tolerances, and its float32 tolerances as a
    function (None each where ``loose`` is None); the arguments as :func:`jacobian`'s.
    op.jacobian and op.jvp share them (op.jvp's J u is a sum over these rows)."""
    rows = [vs for _, _, vs in hots]
    expected = [grad_quantities(e.grads) for e in exact_rows(refs, point, rows, keep)]
    allowed = tolerances(point, rows, expected)
    looser = loose(point, rows, expected) if loose is not None else [None] * len(hots)
    return expected, allowed, looser


def jacobian(vjps: Callable[[list], list[dict]], refs, outputs, point: dict, i: int,
             tolerances: Callable[[dict, list, list], list], keep=None,
             loose: Callable[[dict, list, list], list] | None = None,
             rows: tuple | None = None,
             seen: Callable[[list, list], None] | None = None) -> list[Outcome]:
    """op.jacobian: vᵀJ for every one-hot v (the whole Jacobian), each entry named
    ``d out{k}[idx] / d x``; nothing for outputs of more than JACOBIAN_LIMIT elements.

    Args:
        vjps: the op's ``[vs, ...] -> [{input name: gradient}, ...]`` at this point.
        tolerances: ``(point, [vs, ...], [exact quantities, ...]) -> [tolerances, ...]``
            for all the one-hot cotangents at once (:meth:`gradcheck.checking.opcheck.tolerances.
            OpTolerance.many`).
        keep: the inputs whose gradients are checked (None: every one; an input the
            op is not given is not).
        loose: as ``tolerances``, each row's float32 tolerance as a function asked
            where the row fails in float64 (:meth:`gradcheck.checking.opcheck.driver.OpCheck.
            looser`); None: none.
        rows: what :func:`jacobian_rows` gave for ``one_hots(outputs)`` already (None:
            computed here).
        seen: given the op's rows and the exact ones (quantities), for the diagnosis.
    """
    if not jacobian_checked(outputs):
        return []
    hots = list(one_hots(outputs))
    if not hots:
        return []
    expected, allowed, looser = rows if rows is not None else jacobian_rows(
        refs, point, hots, tolerances, keep, loose)
    out: list[Outcome] = []
    got_rows = vjps([vs for _, _, vs in hots])
    if seen is not None:
        seen(got_rows, expected)
    for (k, idx, vs), want, tolerance, row, got in zip(hots, expected, allowed, looser,
                                                        got_rows):
        rename = {f"{n}.grad": f"d out{k}[{idx}] / d {n}" for n in got}
        out.append(Comparison({rename[q]: g for q, g in grad_quantities(got).items()},
                              {rename[q]: g for q, g in want.items()}, i,
                              _renamed(tolerance, rename),
                              loose=None if row is None else _renaming(row, rename),
                              values=point))
    return out


def _renamed(tolerance: dict, rename: dict) -> dict:
    """``tolerance``'s quantities under their Jacobian names (the others left out)."""
    return {rename[q]: b for q, b in tolerance.items() if q in rename}


def _renaming(loose: Callable[[], dict], rename: dict) -> Callable[[], dict]:
    """``loose`` with :func:`_renamed` applied to what it gives."""
    return lambda: _renamed(loose(), rename)


def inplace(done: dict, point: dict, vs: list, outputs: dict, i: int) -> list[Outcome]:
    """op.inplace: forward and backward leave the op's inputs and grad_outputs as they
    were, and a second forward after a backward returns what the first did (the tally
    allows ``nondet_tol`` there). ``done``: what the op's process read after each call
    (:meth:`gradcheck.checking.opcheck.process.OpProcess.inplace`)."""
    found = _unchanged(point, done["after_forward"], "forward")
    found += _unchanged(point, done["after_backward"], "backward")
    found += [Finding(problem=f"backward modified grad_output of out{k} in place")
              for k, (v, t) in enumerate(zip(vs, done["cotangents"]))
              if not np.array_equal(t, v, equal_nan=True)]
    found.append(Comparison({f"out{k}": y for k, y in enumerate(done["again"])},
                            outputs, i, hint=SECOND_FORWARD, exact=False))
    return found


def _unchanged(before: dict, after: dict, stage: str) -> list[Outcome]:
    """Each input's elements, looked at: a failure where ``stage`` changed them (the
    point is what the inputs were made of, exactly: it is in the case's dtype)."""
    return [Finding(checked=np.size(value),
                    problem=None if np.array_equal(after[name], value, equal_nan=True)
                    else f"{stage} modified input {name} in place")
            for name, value in before.items() if name in after]


LAYOUT_WORDS = {"strided": "every other element of a longer buffer",
                "transposed": "a transposed view",
                "expanded": "one slice broadcast along an axis, stride 0"}


def layout(done: dict, values: dict, grads: dict, i: int, tolerance: dict,
           point: dict | None = None) -> list[Outcome]:
    """op.layout: the op given its inputs as non-contiguous views with the same values
    (``done``: :meth:`gradcheck.checking.opcheck.process.OpProcess.layouts`) computes what it computes
    for contiguous ones (``values``: its outputs, ``grads``: its vᵀJ, by input name), to
    twice the point's tolerance (each within it of the exact values: a layout may round
    otherwise, a matmul of a transposed operand). Measured against the op's own
    contiguous call, not the exact values, so that op.layout fails only where the layout
    changes what the op does; each quantity named with its layout (``x.grad
    (strided)``)."""
    out: list[Outcome] = []
    for name, got in done.items():
        words = LAYOUT_WORDS.get(name, name)
        if "error" in got:
            out.append(Finding(problem=f"the op raised for {name} inputs ({words}) where "
                                       f"it takes contiguous ones: {got['error']}"))
            continue
        if len(got["outputs"]) != len(values):
            out.append(Finding(problem=f"the op returned {len(got['outputs'])} outputs for "
                                       f"{name} inputs ({words}); {len(values)} otherwise"))
            continue
        obtained = {**{f"out{k}": y for k, y in enumerate(got["outputs"])},
                    **grad_quantities(got["grads"])}
        expected = {**values, **grad_quantities(grads)}
        rename = {q: f"{q} ({name})" for q in obtained if q in expected}
        # (the op against itself: NaN for NaN and inf for the same inf agree)
        out.append(Comparison({rename[q]: v for q, v in obtained.items() if q in rename},
                              {rename[q]: expected[q] for q in rename}, i,
                              _twice(_renamed(tolerance, rename)), exact=False,
                              values=point))
    return out


def _twice(tolerance: dict) -> dict:
    return {q: None if b is None else 2 * b for q, b in tolerance.items()}
