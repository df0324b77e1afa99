"""The exact side of an op check: one compiled symbolic reference per output of the op,
and its values and vᵀJ at a point, named as the op's quantities are (``out{k}``,
``x.grad``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ...base.evaluation import Evaluation


def references(case, cache: dict) -> list:
    """One compiled symbolic reference per output of the op."""
    from ...reference import Reference

    key = ("op", id(case))
    if key not in cache:
        cache[key] = [Reference(dataclasses.replace(case, output=node, retain_grad=(),
                                                    outputs=(node,)))
                      for node in case.outputs]
    return cache[key]


def forward_references(case, cache: dict) -> list | None:
    """A surrogate's forward formulas, one compiled reference each (their values are
    what the op's outputs must equal); None for a case without ``forward``."""
    from ...reference import Reference

    if not case.forward:
        return None
    key = ("op forward", id(case))
    if key not in cache:
        cache[key] = [Reference(dataclasses.replace(case, output=node, retain_grad=(),
                                                    outputs=(node,), forward=()))
                      for node in case.forward]
    return cache[key]


def forward_values(refs, point) -> dict:
    """``out{k}``: the values of the forward formulas ``refs`` at ``point``."""
    return {f"out{k}": r.evaluate(point, np.zeros(r.case.output.shape)).value
            for k, r in enumerate(refs)}


def exact(refs, point, vs, keep=None) -> Evaluation:
    """Values and Σ_k v_kᵀ J_k of all outputs (the gradients of the inputs in ``keep``
    only, when given)."""
    return _combined([r.evaluate(point, v) for r, v in zip(refs, vs)], keep)


def exact_rows(refs, point, rows: list[list], keep=None) -> list[Evaluation]:
    """``[exact(refs, point, vs, keep) for vs in rows]``, each reference evaluated for
    all the rows' cotangents in one :meth:`~gradcheck.reference.Reference.evaluations`
    call (a small elementwise formula then runs its kernel once, not once per row)."""
    per_ref = [list(r.evaluations([point] * len(rows), [vs[k] for vs in rows]))
               for k, r in enumerate(refs)]
    return [_combined([evals[j] for evals in per_ref], keep) for j in range(len(rows))]


def _combined(evals: list, keep=None) -> Evaluation:
    grads: dict = {}
    for e in evals:
        for name, g in e.grads.items():
            if keep is not None and name not in keep:
                continue   # a reference-only input: the op is not given it
            if g is None:
                grads.setdefault(name, None)
                continue
            grads[name] = g if grads.get(name) is None else grads[name] + g
    return Evaluation(value=None, grads=grads,
                      retained={f"out{k}": e.value for k, e in enumerate(evals)})


def sum_outputs(per_output: list[dict], key: str = "value") -> dict:
    """Quantities of several outputs' evaluations as the op's: ``out{k}`` for each
    output's ``key`` entry, and each ``x.grad`` summed over the outputs (None as 0)."""
    out: dict = {}
    for k, q in enumerate(per_output):
        out[f"out{k}"] = q.get(key)
        for name, g in q.items():
            if name == key or g is None:
                continue
            out[name] = g if out.get(name) is None else out[name] + g
    return out


def grad_quantities(grads: dict) -> dict:
    """``{x: g}`` as quantities: ``{"x.grad": g}``."""
    return {f"{n}.grad": g for n, g in grads.items()}


def one_hots(outputs):
    """Every one-hot cotangent of the op's outputs: ``(k, index text, vs)`` with a 1 at
    that element of output k and zeros elsewhere."""
    for k, node in enumerate(outputs):
        for flat in range(int(np.prod(node.shape, dtype=np.int64))):
            vs = [np.zeros(n.shape) for n in outputs]
            vs[k].reshape(-1)[flat] = 1.0
            yield k, ",".join(map(str, np.unravel_index(flat, node.shape))), vs
