"""The per-element tolerances of an op's values and vᵀJ at one point (the table in
:mod:`gradcheck.bounds.tolerance`): the rounding-error model of the reference formula in the
op's dtype, or twice what PyTorch's own autograd of that formula errs by (the peer),
whichever is larger. A surrogate's values are judged by its forward formula's."""

from __future__ import annotations

import dataclasses

import numpy as np

from ...base.dtypes import to_numpy
from ...bounds.tolerance import model_tolerance, peer_tolerance, with_nondeterminism
from .exact import sum_outputs


def _tensor_like(like, array):
    """``array`` as a torch tensor of ``like``'s dtype and device."""
    import torch

    return torch.tensor(np.asarray(array), dtype=like.dtype, device=like.device)


class OpTolerance:
    """``tolerance(point, vs, exact)`` for one op case in one dtype. The forward passes
    (of the rounding bound and of the peer) are kept for the current point and reused
    for every cotangent there: call :meth:`start_point` when the point changes."""

    def __init__(self, case, dtype: str):
        self.case, self.dtype = case, dtype
        # each output of the op as a formula case of its own, driven with its v: for the
        # rounding-error bounds and the peer baseline
        self.subcases = [dataclasses.replace(case, output=node, retain_grad=(),
                                             outputs=(node,), gradient="random")
                         for node in case.outputs]
        self.at_point: dict = {}

    def start_point(self) -> None:
        self.at_point = {}

    def __call__(self, point: dict, vs: list, exact: dict | None = None, *,
                 keep: bool = True) -> dict:
        """Per-element tolerances of the op's values (``out{k}``) and vᵀJ (``x.grad``):
        the rounding-error model, and, given the exact quantities, the peer baseline.
        ``keep``: the model's forward pass stays for more cotangents at this point."""
        model = self._model(point, vs, keep=keep)
        if exact is None:
            return model
        return self._with_peer(model, point, vs, exact)

    def many(self, point: dict, rows: list[list], exacts: list[dict], *,
             keep: bool = True) -> list[dict]:
        """``[self(point, vs, exact) for vs, exact in zip(rows, exacts)]``, the same
        tolerances element for element, with the rounding-error bounds of all the rows
        (the Jacobian's one-hot cotangents) in one backward pass per output, their peer
        in one pass of torch (:meth:`peer` with ``rows``), and the peer rule applied to
        all of them at once (it is elementwise, as the model's factors are: a row of
        the stacked result is that row's tolerance).

        ``keep``: the forward passes stay for more cotangents at this point (the
        Jacobian's rows). Else (an op whose Jacobian is not checked: larger outputs)
        the rows are taken one at a time, the model's forward pass and its arrays freed
        as its backward passes them, and what the point kept dropped at the end: a batched
        backward holds every array once per row (a channel layer norm op of 2²²
        elements, one point: the case's peak 1680 -> 1124 MiB, 10.9 -> 8.0 s).
        """
        if not keep:
            out = [self(point, vs, exact, keep=False) for vs, exact in zip(rows, exacts)]
            self.at_point.clear()   # (the peer's graph, a surrogate's forward bounds)
            return out
        n = len(rows)
        stacked = [np.stack([vs[k] for vs in rows]) for k in range(len(self.subcases))]
        values = {f"out{k}" for k in range(len(self.subcases))}
        model = {q: (np.broadcast_to(b, (n,) + np.shape(b)) if q in values else b)
                 for q, b in self._model(point, stacked, batch=True).items()}
        peer = self.peer(point, stacked, rows=n)   # every row in one pass
        peers = None
        if peer is None:   # torch cannot batch the pass (or runs no peer): row by row
            peers = [self.peer(point, vs) for vs in rows]
            peer = _stacked(peers)
        exact = _stacked(exacts)
        if peer is None or exact is None:   # no peer, or rows unlike
            if peers is None:
                peers = [{q: b[j] for q, b in peer.items()} for j in range(n)]
            return [self._peer_rule({q: b[j] for q, b in model.items()}, p, e)
                    for j, (p, e) in enumerate(zip(peers, exacts))]
        tolerance = peer_tolerance(model, peer, exact, self.dtype)
        return [{q: b[j] for q, b in tolerance.items()} for j in range(n)]

    def _model(self, point: dict, vs: list, batch: bool = False, keep: bool = True) -> dict:
        """The rounding-error model's tolerances (``batch``: each v holds many
        cotangents along its first axis, as do the gradients' tolerances then; ``keep``:
        the forward pass stays for more cotangents at this point)."""
        from ...bounds.point import error_bounds

        forward = self.at_point if keep else None
        bounds = [error_bounds(self.subcases[k], point, v, self.dtype, forward, batch)
                  for k, v in enumerate(vs)]
        if self.case.forward:   # a surrogate's values are its forward formulas'
            bounds = [dict(b, value=f) for b, f in zip(bounds, self._forward_bounds(point))]
        # (both elementwise: a row of batched bounds gives that row's tolerances)
        return with_nondeterminism(model_tolerance(sum_outputs(bounds), self.dtype),
                                   self.case.nondet_tol)

    def _forward_bounds(self, point: dict) -> list:
        """The rounding-error bounds of a surrogate's forward formulas at this point."""
        from ...bounds.point import forward_bound

        if "forward" not in self.at_point:
            self.at_point["forward"] = [forward_bound(node, point, dtype=self.dtype)[1]
                                        for node in self.case.forward]
        return self.at_point["forward"]

    def _with_peer(self, model: dict, point: dict, vs: list, exact: dict) -> dict:
        return self._peer_rule(model, self.peer(point, vs), exact)

    def _peer_rule(self, model: dict, peer: dict | None, exact: dict) -> dict:
        return model if peer is None else peer_tolerance(model, peer, exact, self.dtype)

    def _peer_graph(self, point: dict) -> tuple:
        """The peer's leaves, outputs and a surrogate's forward values at this point,
        built once per point and kept for every v (raises where torch cannot run the
        reference formula)."""
        from ...witnesses.drive import rebuild
        from ...witnesses.torch import applier, leaves as torch_leaves

        if "peer" not in self.at_point:
            leaves = torch_leaves(self.case, point, self.dtype)
            apply = applier(self.case, self.dtype)
            self.at_point["peer"] = leaves, [rebuild(node, leaves, apply)
                                             for node in self.case.outputs], [
                rebuild(node, leaves, apply) for node in self.case.forward]
        return self.at_point["peer"]

    def peer(self, point: dict, vs: list, rows: int | None = None) -> dict | None:
        """PyTorch's autograd of the reference formula, in the op's dtype, at this point:
        values and vᵀJ as quantities; None where torch cannot run it (an operation it
        lacks in this dtype or on this device). ``rows``: each v holds that many
        cotangents along a first axis, taken in one backward pass vectorised over them
        (``is_grads_batched``, torch's vmap), where a row at a time cost a pass each; the
        quantities are then stacked the same way (None also where torch cannot batch
        the pass: an operation without a batching rule)."""
        import warnings

        import torch

        wanted = [s.name for s in self.case.inputs if s.requires_grad]
        per_output = []
        try:
            leaves, ys, forwards = self._peer_graph(point)
            for k, (y, v) in enumerate(zip(ys, vs)):
                grads = [None] * len(wanted)
                if y.requires_grad and wanted:
                    with warnings.catch_warnings():  # vmap's "performance drop" fallback
                        warnings.simplefilter("ignore")
                        grads = torch.autograd.grad(
                            y, [leaves[n] for n in wanted], _tensor_like(y, v),
                            retain_graph=True, allow_unused=True,
                            is_grads_batched=rows is not None)
                # a surrogate's values: torch's of its forward formula
                value = to_numpy(forwards[k] if forwards else y)
                if rows is not None:
                    value = np.broadcast_to(value, (rows,) + value.shape)
                per_output.append(dict(value=value, **{
                    f"{n}.grad": to_numpy(g) for n, g in zip(wanted, grads)}))
        except Exception:   # no peer: the rounding-error model alone then decides
            return None
        return sum_outputs(per_output)


def _stacked(rows: list) -> dict | None:
    """The rows' quantities stacked along a new first axis (None for a quantity None in
    every row), or None where they cannot be: a row that is None (no peer), rows with
    other quantities, shapes, or None in some rows only."""
    if any(r is None for r in rows) or len({tuple(r) for r in rows}) != 1:
        return None
    out: dict = {}
    for q in rows[0]:
        items = [r[q] for r in rows]
        if all(x is None for x in items):
            out[q] = None
        elif any(x is None for x in items) or len({np.shape(x) for x in items}) != 1:
            return None
        else:
            out[q] = np.stack([np.asarray(x, dtype=float) for x in items])
    return out
