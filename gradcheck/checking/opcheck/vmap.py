"""op.vmap and op.registration, the judge's side (the op's:
:mod:`gradcheck.checking.opcheck.batching`).

op.vmap: the op on a batch of the case's first points (:data:`BATCH` of them, the first
repeated where the case has fewer) under ``torch.func.vmap``, the batch axis first, in
the middle and last of each input (``out_dims = 0``), vᵀJ through torch.autograd.grad
of its outputs, and ``torch.func.vjp`` inside the vmap, with each point's first
cotangent: each batch element's outputs and vᵀJ against the op's own call on that point
alone (twice op.forward's and op.backward's tolerances there, as op.layout: the batched
call may round otherwise) and, where that call agrees with the exact values (else
op.forward or op.backward fails already), against them with those tolerances. Where the op does not support vmap (a Function with neither
a ``vmap`` staticmethod nor ``generate_vmap_rule``; torch refusing an op that claims
nothing), a note; where it raises otherwise, a failure naming the path.

op.registration: ``torch.library.opcheck``'s sub-tests on a torch.library op, each a
verdict: "SUCCESS" passes, anything else fails naming the sub-test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..compare import Comparison, Finding, Outcome, Tally
from ...report.mismatch import witness_message
from .exact import grad_quantities

BATCH = 3                 # points in op.vmap's batch
ELEMENTS = 1 << 18        # the op's input and output elements up to which it runs


@dataclass(frozen=True)
class Element:
    """One point of op.vmap's batch: what the op and the exact reference gave there."""

    index: int            # the point's number
    point: dict
    vs: list              # its first cotangent
    values: dict          # the op's outputs on this point alone (out{k})
    grads: dict           # its vᵀJ there, by input name
    wanted: dict          # the exact outputs
    expected: dict        # the exact vᵀJ (x.grad)
    tolerance: dict       # op.forward's and op.backward's tolerances at the point
    loose: Callable[[], dict] | None = None   # the same in float32, asked on a mismatch


def vmap(done: dict, batch: list[Element], tally: Callable[[], Tally]) -> list[Tally]:
    """op.vmap's outcomes, one tally per path (``tally()``: an empty one for op.vmap):
    the first failing path's message names it and what failed, and lists the other
    paths that fail; ``done``: what the op's process returned
    (:meth:`gradcheck.checking.opcheck.process.OpProcess.vmap`)."""
    if "unsupported" in done:
        return [_noted(tally, f"vmap not supported: {done['unsupported']}")]
    out: list[tuple[str, Tally]] = []
    refused = ""
    for placed in done["placements"]:
        for key, path, short in _paths(placed):
            got = placed[key]
            if isinstance(got, dict) and "error" in got:
                error = got["error"]
                if error["refused"] and not done["claimed"]:
                    refused = refused or f"vmap not supported: {path}: {error['text']}"
                    continue
                out.append((short, _judged(tally, path, [Finding(
                    problem=f"{path}, the op raised {error['text']}")])))
                continue
            label = short.replace(" with the", ",")   # (in a quantity's name)
            out.append((short, _judged(tally, path, _compared(got, batch, key, label))))
    failing = [(short, t) for short, t in out if t.mismatched]
    if len(failing) > 1:
        for _, t in failing[1:]:
            t.problems.clear()
        failing[0][1].problems.append(
            f"the same on {len(failing) - 1} more paths: "
            + ", ".join(short for short, _ in failing[1:]))
    tallies = [t for _, t in out]
    return tallies + ([_noted(tally, refused)] if refused else [])


def _paths(placed: dict):
    """(key, path in words, short name) of each path one placement took."""
    where = _where(placed["placement"], placed["axes"])
    cot = ", ".join(map(str, sorted(set(placed["cotangent_axes"]))))
    paths = {"outputs": ("vmap", f"under torch.func.vmap with the batch axis {where}"),
             "backward": ("grad of vmap", f"in torch.autograd.grad of the outputs of "
                                          f"torch.func.vmap with the batch axis {where}"),
             "grads": ("vmap of vjp", f"under torch.func.vmap of torch.func.vjp with the "
                                      f"batch axis {where} (the cotangents' at {cot})")}
    for key, (name, path) in paths.items():
        if key in placed:
            yield key, path, f"{name} with the batch axis {placed['placement']}"


def _where(placement: str, axes: dict) -> str:
    """``at 1``, or ``last (x at 1, W at 2)`` where the inputs' axes differ."""
    at = set(axes.values())
    if len(at) == 1:
        return f"at {at.pop()}"
    return f"{placement} ({', '.join(f'{n} at {a}' for n, a in axes.items())})"


def _compared(got, batch: list[Element], key: str, label: str) -> list[Outcome]:
    """Each batch element's outputs (``key`` "outputs") or vᵀJ ("grads") against the
    exact values and against the op's own call on its point."""
    out: list[Outcome] = []
    for j, e in enumerate(batch):
        if key == "outputs":   # (else "backward" or "grads": vᵀJ)
            if len(got) != len(e.values):
                return [Finding(problem=f"the op returned {len(got)} outputs under vmap; "
                                        f"{len(e.values)} otherwise")]
            obtained = {f"out{k}": y[j] for k, y in enumerate(got)}
            exact, own = e.wanted, e.values
        else:
            exact = e.expected
            obtained = {q: _row(got[q[:-len(".grad")]], j, exact.get(q)) for q in exact}
            own = {q: np.zeros(np.shape(exact[q])) if g is None and exact.get(q) is not None
                   else g for q, g in grad_quantities(e.grads).items()}
        # against the exact values where the op's own call agrees with them (where it
        # does not, op.forward or op.backward fails already: op.vmap fails only where
        # the batch changes what the op does)
        names = {q: f"{q} ({label})" for q in obtained
                 if _agrees(own.get(q), exact.get(q), e.tolerance.get(q))}
        mine = {q: f"{q} ({label}, against the op's own call)" for q in obtained}
        out.append(Comparison(_renamed(obtained, names), _renamed(exact, names), e.index,
                              _renamed(e.tolerance, names),
                              loose=_renaming(e.loose, names), values=e.point))
        out.append(Comparison(_renamed(obtained, mine), _renamed(own, mine), e.index,
                              {q: None if b is None else 2 * b
                               for q, b in _renamed(e.tolerance, mine).items()},
                              exact=False, values=e.point))
    return out


def _agrees(own, exact, tolerance) -> bool:
    """The op's own call is within ``tolerance`` of the exact values everywhere."""
    if own is None or exact is None:
        return own is None and exact is None
    own, exact = np.asarray(own, dtype=float), np.asarray(exact, dtype=float)
    if own.shape != exact.shape:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(own - exact) <= (0.0 if tolerance is None else tolerance)))


def _row(stacked, j: int, exact):
    """Batch element ``j`` of a stacked vᵀJ; None where the exact gradient is None and
    the row is zero (vmap's vjp has no None), zeros for None where it is not (autograd
    takes None as zero)."""
    if stacked is None:
        return None if exact is None else np.zeros(np.shape(exact))
    row = stacked[j]
    return None if exact is None and not np.any(row) else row


def _renamed(quantities: dict, names: dict) -> dict:
    return {names[q]: v for q, v in quantities.items() if q in names}


def _renaming(loose, names: dict):
    return None if loose is None else (lambda: _renamed(loose(), names))


def _judged(tally: Callable[[], Tally], path: str, outcomes: list[Outcome]) -> Tally:
    """``outcomes`` in a tally of their own, whose message (where elements differ and
    nothing else was wrong) begins with the path."""
    t = tally()
    t.record(outcomes)
    if t.mismatched and not t.problems:
        t.problems.append(f"{path}: {witness_message(t.worst, t.mismatched, t.checked)}")
    return t


def _noted(tally: Callable[[], Tally], note: str) -> Tally:
    t = tally()
    t.record([Finding(note=note)])
    return t


def too_large(case) -> str | None:
    """Why op.vmap does not run for this case's op (None: it does)."""
    size = sum(int(np.prod(s.shape, dtype=np.int64)) for s in case.inputs)
    size += sum(int(np.prod(n.shape, dtype=np.int64)) for n in case.outputs)
    if size <= ELEMENTS:
        return None
    return (f"op.vmap not run: the op's inputs and outputs hold {size} elements, more "
            f"than {ELEMENTS} (a batch of {BATCH} would hold them {BATCH} times over)")


def registration(done: dict) -> list[Finding]:
    """op.registration: each of torch.library.opcheck's sub-tests a verdict ("SUCCESS"
    passes; a sub-test the op has no fake impl for, a note; anything else fails)."""
    if "unsupported" in done:
        return [Finding(note=f"op.registration not run: {done['unsupported']}")]
    out = []
    for name, (verdict, text) in done["tests"].items():
        if verdict == "SUCCESS":
            out.append(Finding(checked=1))
        elif verdict == "unsupported":
            out.append(Finding(note=f"torch.library.opcheck's {name} not run: the op "
                                    f"has no fake impl (register_fake): {text}"))
        else:
            out.append(Finding(checked=1, problem=f"torch.library.opcheck's {name} "
                                                  f"failed: {text}"))
    return out
