"""op.double (``order = 2``): double backward against the exact second derivatives, as
gradgradcheck: differentiate s = Σ uᵀ(vᵀJ) with respect to the inputs (the
Hessian-vector product of vᵀy along u) and to each grad_output v (J u, the
Jacobian-vector product). Tolerances: :func:`gradcheck.bounds.tolerance.second_order_tolerance`,
or twice what torch's double backward of the reference formula errs by (the peer); in a
float64 run, where an element fails, the same in float32 (an approximation within it is
no failure: :mod:`gradcheck.checking.approximate`)."""

from __future__ import annotations

import numpy as np

from ..approximate import JUDGED, LOOSE
from ..compare import Comparison, Finding
from ...base.dtypes import round_to, to_numpy, torch_dtype
from ...sampling.points import case_rng
from ...bounds.tolerance import peer_tolerance, second_order_tolerance

ENGINE = "order = 2 needs a torch op (the engine has no double backward)"


OVER_REVERSE = "forward-over-reverse (forward-mode AD of the op's backward)"


def second(op, refs, case, dtype: str, point: dict, vs: list, i: int, *,
           double: bool = True, over_reverse: bool = False) -> tuple[list, list]:
    """The outcomes at point ``i`` for the cotangents ``vs`` of op.double and of op.jvp's
    forward-over-reverse (each where asked): one u, one exact side for both. The tangent
    of vᵀJ along u is the Hessian-vector product ∇²(vᵀy) u, the very quantity op.double
    takes by reverse over reverse (∇ of uᵀ(vᵀJ), the Hessian being symmetric), so both
    are held to the same exact values and tolerances (``op``: the
    :class:`~gradcheck.checking.opcheck.process.OpProcess` at that point)."""
    from .loader import wanted

    if op.info.get("engine"):   # (no forward mode either: op.jvp's note says so)
        return ([Finding(problem=ENGINE)] if double else []), []
    rng = case_rng(case, dtype, i, "op-u")
    us = {n: round_to(rng.standard_normal(case.input[n].shape), dtype)
          for n in wanted(case)}
    got = op.double(vs, us) if double else None
    over, over_out = None, []
    if over_reverse:
        done = op.over_reverse(point, vs, us)
        if "unsupported" in done:
            over_out = [Finding(note=f"{OVER_REVERSE} not supported: "
                                     f"{done['unsupported']}")]
        elif "raised" in done:
            over_out = [Finding(problem=f"the op raised under {OVER_REVERSE}: "
                                        f"{done['raised']}")]
        else:
            over = {f"{n}.grad": g for n, g in done["grads"].items()}
    if got is None and over is None:
        return [], over_out
    # an input the op is not given (reference-only) does not move: u = 0 there, and
    # its second derivatives are not the op's to compute
    us = {s.name: us.get(s.name, np.zeros(s.shape)) for s in case.inputs
          if s.requires_grad}
    expected, size = _exact(refs, point, vs, us)
    tolerance = _tolerance(case, dtype, point, vs, us, expected, size)
    loose = ((lambda: _tolerance(case, LOOSE, point, vs, us, expected, size))
             if dtype == JUDGED else None)
    out = ([] if got is None else
           [_compared(got, expected, tolerance, loose, i, point)])
    if over is not None:
        over_out = [_compared(over, expected, tolerance, loose, i, point,
                              label=" (forward-over-reverse)")]
    return out, over_out


def _compared(got: dict, expected: dict, tolerance: dict, loose, i: int, point: dict,
              label: str = "") -> Comparison:
    """The op's second derivatives ``got`` against the exact ones (each quantity named
    with ``label``)."""
    expected = {q: e for q, e in expected.items() if q in got}
    # No gradient where one is due is a zero gradient for this comparison: autograd
    # returns None when the first derivative does not depend on that input.
    got = {q: (np.zeros(np.shape(expected[q])) if g is None and q in expected else g)
           for q, g in got.items()}
    name = {q: q + label for q in got}
    looser = None if loose is None else (
        lambda: {name[q]: b for q, b in loose().items() if q in name})
    return Comparison({name[q]: g for q, g in got.items()},
                      {name[q]: e for q, e in expected.items()}, i,
                      {name[q]: tolerance.get(q) for q in got}, loose=looser,
                      values=point)


def _tolerance(case, dtype: str, point: dict, vs: list, us: dict, expected: dict,
               size: dict) -> dict:
    """The second derivatives' tolerances in ``dtype``: the model, or the peer's rule."""
    tolerance = second_order_tolerance(expected, size, dtype)
    peer = peer_double(case, dtype, point, vs, us)
    if peer is not None:
        tolerance = peer_tolerance(tolerance, peer, expected, dtype)
    return tolerance


def _exact(refs, point: dict, vs: list, us: dict) -> tuple[dict, dict]:
    """The exact second derivatives, and the magnitudes they are sums of."""
    expected, size = {}, {}
    for k, (ref, v) in enumerate(zip(refs, vs)):
        for n, h in ref.hvp(point, v, us).items():
            expected[f"{n}.grad"] = h + expected.get(f"{n}.grad", 0.0)
        for n, h in ref.hvp(point, v, us, absolute=True).items():
            size[f"{n}.grad"] = h + size.get(f"{n}.grad", 0.0)
        expected[f"d/d grad_output{k}"] = ref.jvp(point, us)
        size[f"d/d grad_output{k}"] = ref.jvp(point, us, absolute=True)
    return expected, size


def peer_double(case, dtype: str, point: dict, vs: list, us: dict) -> dict | None:
    """The same second derivatives by PyTorch's double backward of the reference
    formula in the op's dtype (the peer baseline at second order); None where torch
    cannot run it."""
    try:
        return _peer_double(case, dtype, point, vs, us)
    except Exception:   # no peer: the model alone decides
        return None


def _peer_double(case, dtype: str, point: dict, vs: list, us: dict) -> dict:
    import torch

    from ...witnesses.drive import rebuild
    from ...witnesses.torch import applier, leaves as torch_leaves

    tdtype, device = torch_dtype(dtype), case.device
    leaves = torch_leaves(case, point, dtype)
    apply = applier(case, dtype)
    wanted = [s.name for s in case.inputs if s.requires_grad]
    out: dict = {}
    for k, (node, v) in enumerate(zip(case.outputs, vs)):
        y = rebuild(node, leaves, apply)
        vt = torch.tensor(v, dtype=tdtype, device=device, requires_grad=True)
        if not y.requires_grad:
            continue
        first = torch.autograd.grad(y, [leaves[n] for n in wanted], vt,
                                    create_graph=True, allow_unused=True)
        pairs = [(g, n) for g, n in zip(first, wanted) if g is not None and g.requires_grad]
        if not pairs:
            continue
        second = torch.autograd.grad(
            [g for g, _ in pairs], [leaves[n] for n in wanted] + [vt],
            grad_outputs=[torch.tensor(us[n], dtype=tdtype, device=device)
                          for _, n in pairs], allow_unused=True)
        for n, h in zip(wanted, second[:-1]):
            if h is not None:
                out[f"{n}.grad"] = to_numpy(h) + out.get(f"{n}.grad", 0.0)
        if second[-1] is not None:
            out[f"d/d grad_output{k}"] = to_numpy(second[-1])
    return out
