"""op.jvp's calls in the op's own process (:meth:`gradcheck.checking.opcheck.server.Server.
call_jvp`): the op's tangent outputs under forward-mode AD, ``torch.autograd.forward_ad``
dual numbers, for tangents the judge draws (judged by :mod:`gradcheck.checking.opcheck.jvp`).

Whether the op claims forward mode decides what an exception means: a
``torch.autograd.Function`` with a ``jvp`` of its own claims it (whatever it raises then
is its failure); a Function without one does not (autograd raises "You must implement
the jvp function", a note); a plain function claims what PyTorch derives for the ops it
calls, so PyTorch's own "not implemented for forward AD" is a note and anything else
the op's failure. An output that requires grad but carries no tangent (a
``torch.library`` custom op with a backward and no forward-mode rule: PyTorch drops the
tangent silently) is "not supported" as well, where the op defines no ``jvp``.
"""

from __future__ import annotations

from .storage import plain

#: words of PyTorch's errors for an operation without a forward-mode formula
_UNSUPPORTED = ("forward ad", "forward-mode", "forward mode", "jvp", "not implemented",
                "does not support", "not supported", "fwad")


def claims_jvp(kind) -> bool:
    """Whether the op defines forward mode itself: a Function with its own ``jvp``."""
    import torch

    return bool(kind.function) and getattr(kind.obj, "jvp", None) is not getattr(
        torch.autograd.Function, "jvp", None)


def tangents(runner, kind, point: dict, directions: list[dict]) -> dict:
    """The op's tangent outputs at ``point`` for each tangent of ``directions`` (arrays
    by input name, one per input whose gradient is checked): ``{"tangents": [[out0's
    tangent, ...], ...]}``, a tangent None where the output carries none; or
    ``{"unsupported": why}`` (the op does not do forward mode), or ``{"raised": what the
    op raised}`` (it claims to and fails)."""
    out: list = []
    refused = _attempt(kind, lambda: out.extend(_one(runner, point, u) for u in directions))
    if refused is not None:
        return refused
    if not claims_jvp(kind) and any(t is None and grad for row in out for t, grad in row):
        return {"unsupported": "an output that requires grad carries no tangent "
                               "(no forward-mode rule: PyTorch drops the tangent)"}
    return {"tangents": [[t for t, _ in row] for row in out]}


def over_reverse(runner, kind, point: dict, vs: list, us: dict) -> dict:
    """Forward-over-reverse (``order = 2``): the tangent of the op's vᵀJ, computed by
    autograd with a graph of its own, along ``us`` (the inputs made dual): the
    Hessian-vector product Σₖ ∇²(vₖᵀyₖ) u, as torch's gradgradcheck(check_fwd_over_rev)
    takes it. ``{"grads": {name: array or None}}``, or ``{"unsupported": why}``, or
    ``{"raised": ...}``, as :func:`tangents` decides."""
    grads: dict = {}
    refused = _attempt(kind, lambda: grads.update(_over_reverse(runner, point, vs, us)))
    return refused if refused is not None else {"grads": grads}


def _attempt(kind, run) -> dict | None:
    """``run()`` under forward mode, or what its failure means: ``{"unsupported": why}``
    where the op does not claim forward mode (a Function without ``jvp``, or PyTorch's
    own "not implemented for forward AD"), ``{"raised": what}`` where it claims it; None
    where it ran."""
    from ...base.errors import describe_exception

    if kind.engine:
        return {"unsupported": "gradcheck.engine has no forward mode"}
    try:
        run()
    except Exception as exc:
        text = describe_exception(exc)
        first = (text.strip().splitlines() or [type(exc).__name__])[0][:500]
        if not claims_jvp(kind) and (kind.function or _unsupported(exc)):
            return {"unsupported": first}
        return {"raised": text[:2000]}
    return None


def _over_reverse(runner, point: dict, vs: list, us: dict) -> dict:
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        given = _duals(runner, point, us)
        outs = runner.forward(given)
        # (create_graph: the backward's own operations then carry the tangents)
        grads = runner.vjp(given, outs, vs, create_graph=True)
        return {n: None if g is None else plain(fwad.unpack_dual(g).tangent)
                for n, g in grads.items()}


def _unsupported(exc: BaseException) -> bool:
    """Whether PyTorch raised ``exc`` for an operation without forward mode."""
    text = str(exc).lower()
    return isinstance(exc, NotImplementedError) or any(w in text for w in _UNSUPPORTED)


def _one(runner, point: dict, u: dict) -> list[tuple]:
    """(each output's tangent as an array or None, whether it requires grad) for one
    tangent ``u``: the inputs it moves made dual, the others as the runner makes them."""
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        outs = runner.forward(_duals(runner, point, u))
        row = []
        for y in outs:
            tangent = fwad.unpack_dual(y).tangent if hasattr(y, "requires_grad") else None
            row.append((plain(tangent), _moves(y, tangent)))
    return row


def _duals(runner, point: dict, u: dict) -> dict:
    """The leaves at ``point``, those of ``u`` made dual with its tangents (inside a
    ``dual_level``). The dual inputs require grad as the leaves do: an output's graph
    then shows that reverse mode would differentiate it."""
    import torch.autograd.forward_ad as fwad

    return {n: (fwad.make_dual(t, runner.direction(n, u[n]).reshape(t.shape)) if n in u else t)
            for n, t in runner.leaves(point).items()}


def _moves(y, tangent) -> bool:
    """Whether an output without a tangent should have had one: it is a float tensor
    that autograd's reverse mode would differentiate (its forward recorded a graph)."""
    return tangent is None and getattr(y, "grad_fn", None) is not None
