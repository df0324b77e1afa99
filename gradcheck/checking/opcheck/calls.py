"""What the op's process computes beyond one call of the op (:mod:`gradcheck.checking.opcheck.server`):
vᵀJ the way training takes it, double backward, and how many gradients autograd expects
of the op's own backward."""

from __future__ import annotations

import inspect

from .storage import plain


def backward_method(runner, leaves: dict, outs: tuple, vs: list) -> dict:
    """vᵀJ as training takes it, accumulated into the leaves' ``.grad``: a single
    output's own ``.backward(v)`` (a method a tensor subclass may override), several
    outputs' in one ``torch.autograd.backward`` (their cotangents together, as one
    loss of all of them sends them)."""
    import torch

    wanted = runner.wanted
    for n in wanted:
        leaves[n].grad = None
    pairs = [(y, v) for y, v in zip(outs, runner.cotangents(vs))
             if getattr(y, "requires_grad", False)]
    if len(pairs) == 1:
        pairs[0][0].backward(pairs[0][1], retain_graph=True)
    elif pairs:
        torch.autograd.backward([y for y, _ in pairs], [v for _, v in pairs],
                                retain_graph=True)
    return {n: leaves[n].grad for n in wanted}


def argument_count(obj, positional: list, keywords: list) -> int:
    """How many gradients autograd expects of backward: one per argument forward was
    given, positional and keyword alike; a Function that defines ``setup_context`` has
    its defaults bound as well (``Function.apply`` binds them first)."""
    count = len(positional) + len(keywords)
    setup = getattr(obj, "setup_context", None)
    try:
        import torch
        from torch.autograd.function import _is_setup_context_defined
    except ImportError:
        return count
    if not (isinstance(obj, type) and issubclass(obj, torch.autograd.Function)
            and _is_setup_context_defined(setup)):
        return count
    try:
        bound = inspect.signature(obj.forward).bind(
            *range(len(positional)), **{k: None for k, _ in keywords})
    except (TypeError, ValueError):
        return count
    bound.apply_defaults()
    return len(bound.args) + len(bound.kwargs)


def second_derivatives(runner, leaves: dict, vs: list, us: dict) -> dict:
    """The op's second derivatives (``x.grad``, ``d/d grad_output{k}``) along the
    directions ``us`` (one per input whose gradient is checked): run in the op's own
    process (:meth:`gradcheck.checking.opcheck.server.Server.call_double`; judged by
    :mod:`gradcheck.checking.opcheck.double`)."""
    import torch

    outs = runner.forward(leaves)
    cotangents = [v.requires_grad_(True) for v in runner.cotangents(vs)]
    grads = runner.vjp(leaves, outs, vs, create_graph=True, tensors=cotangents)
    names = [n for n, g in grads.items() if g is not None and g.requires_grad]
    targets = [leaves[n] for n in grads] + cotangents
    if names:
        second = torch.autograd.grad(
            [grads[n] for n in names], targets,
            grad_outputs=[runner.direction(n, us[n]) for n in names], allow_unused=True)
    else:
        second = [None] * len(targets)
    got = {f"{n}.grad": plain(g) for n, g in zip(grads, second)}
    got.update({f"d/d grad_output{k}": plain(g)
                for k, g in enumerate(second[len(grads):])})
    return got


#: the layouts op.layout gives the op its inputs in, besides the contiguous one
LAYOUTS = ("strided", "transposed")


def layouts(runner, point: dict, vs: list) -> dict:
    """The op's outputs and vᵀJ with its inputs laid out otherwise (the same values):
    ``strided``, every other element of a buffer twice as long in the last axis;
    ``transposed``, the transpose of a contiguous tensor (inputs of two axes or more).
    ``{layout: {"outputs", "grads"} or {"error"}}``; a layout that changes no input is
    left out."""
    from ...base.errors import describe_exception

    out = {}
    for layout in LAYOUTS:
        try:
            got = _in_layout(runner, point, vs, layout)
        except Exception as exc:   # an op that cannot take such an input: its failure
            got = {"error": describe_exception(exc)[:2000]}
        if got is not None:
            out[layout] = got
    return out


def expanded(runner, point: dict, axes: dict, vs: list) -> dict:
    """The op at ``point`` (the inputs of ``axes`` constant along that axis) with those
    inputs given as one slice broadcast along it (stride 0, as ``x[:1].expand(...)``
    hands them on), and with the same values contiguous: ``{"expanded": ..., "contiguous":
    ...}`` (each ``{"outputs", "grads"}``), ``{"raised"}`` where only the expanded call
    raises, ``{"refused": why}`` where the contiguous call raises too (the values are
    the op's to refuse, a singular matrix: nothing about the layout)."""
    from ...base.errors import describe_exception

    try:
        contiguous = _outputs_and_grads(runner, runner.leaves(point), vs)
    except Exception as exc:
        return {"refused": describe_exception(exc)[:2000]}
    leaves = runner.leaves(point)
    given = {n: _broadcast(t, axes[n]) if n in axes else t for n, t in leaves.items()}
    try:
        got = _outputs_and_grads(runner, given, vs)
    except Exception as exc:   # an op that cannot take a stride-0 input: its failure
        return {"raised": describe_exception(exc)[:2000]}
    return {"expanded": got, "contiguous": contiguous}


def _broadcast(t, axis: int):
    """``t``'s first slice along ``axis``, a tensor of its own that requires grad as
    ``t`` does, expanded to ``t``'s shape (``t``'s values where ``t`` is constant along
    ``axis``)."""
    base = t.detach().narrow(axis, 0, 1).clone().requires_grad_(t.requires_grad)
    return base.expand(t.shape)


def _outputs_and_grads(runner, given: dict, vs: list) -> dict:
    """The op's outputs and vᵀJ with respect to the tensors it is ``given``."""
    outs = runner.forward(given)
    grads = runner.vjp(given, outs, vs)
    return {"outputs": [plain(y) for y in outs],
            "grads": {n: plain(g) for n, g in grads.items()}}


def _in_layout(runner, point: dict, vs: list, layout: str) -> dict | None:
    leaves = runner.leaves(point)
    given = {n: _arranged(t, layout) for n, t in leaves.items()}
    if all(given[n] is leaves[n] for n in leaves):
        return None
    # gradients with respect to the arranged views themselves: in the inputs' shapes
    return _outputs_and_grads(runner, given, vs)


def _arranged(t, layout: str):
    """``t``'s values in ``layout``, a view of a tensor of its own that requires grad as
    ``t`` does (``t`` itself where the layout does not apply to it)."""
    import torch

    grad = t.requires_grad
    if layout == "strided" and t.dim() >= 1 and t.shape[-1] > 0:
        base = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        base[..., ::2] = t.detach()
        return base.requires_grad_(grad)[..., ::2]
    if layout == "transposed" and t.dim() >= 2:
        base = t.detach().mT.contiguous().requires_grad_(grad)
        return base.mT
    return t


def torch_gradcheck(runner, point: dict, settings: dict, order: int,
                    chars: int = 300) -> dict:
    """``torch.autograd.gradcheck`` (and ``gradgradcheck`` at ``order = 2``) on the op at
    ``point``, called as gradcheck calls it (``call =``, integer inputs, keywords), the
    inputs whose gradients are checked perturbed and the others left as they are:
    ``{"verdict": "passed" | "mismatch" | "error: <type>", "message": ...}``. Torch's
    verdict, beside gradcheck's in the bench (:mod:`gradcheck.cli.bench.verdicts`); run in
    the op's own process like every other call of the op."""
    import warnings

    import torch
    from torch.autograd.gradcheck import GradcheckError

    leaves, wanted = runner.leaves(point), runner.wanted

    def fn(*xs):
        out = runner.forward({**leaves, **dict(zip(wanted, xs))})
        return out if len(out) > 1 else out[0]

    checks = [torch.autograd.gradcheck]
    if order == 2:
        checks.append(torch.autograd.gradgradcheck)
    try:
        with warnings.catch_warnings():
            # "not a double precision floating point": asked for on purpose in float32
            warnings.simplefilter("ignore", UserWarning)
            for check in checks:
                check(fn, tuple(leaves[n] for n in wanted), **settings)
    except GradcheckError as exc:
        return {"verdict": "mismatch", "message": _first_line(exc, chars)}
    except Exception as exc:   # anything else the op or the checker raised
        return {"verdict": f"error: {type(exc).__name__}",
                "message": _first_line(exc, chars)}
    return {"verdict": "passed", "message": ""}


def _first_line(exc: BaseException, chars: int) -> str:
    # torch's mismatch message goes on with both Jacobians in full: its first line says
    # what mismatched
    lines = str(exc).strip().splitlines() or [""]
    return lines[0][:chars]
