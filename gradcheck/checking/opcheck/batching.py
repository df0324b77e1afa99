"""The op's side of op.vmap and op.registration, run in the op's own process
(:mod:`gradcheck.checking.opcheck.server`): the op under ``torch.func.vmap`` (its outputs,
vᵀJ through torch.autograd.grad of them, and ``torch.func.vjp`` inside the vmap) with the
batch axis first, in the middle and last of each input, and ``torch.library.opcheck`` on
a torch.library op. Judged by
:mod:`gradcheck.checking.opcheck.vmap`."""

from __future__ import annotations

import re
import warnings

from .storage import plain

#: where op.vmap puts the batch axis of each input (and of each cotangent)
PLACEMENTS = ("first", "middle", "last")
#: what torch says when vmap cannot run an op at all (rather than the op failing there):
#: an autograd.Function without vmap support, data-dependent control flow, .item()
_REFUSED = re.compile(r"functorch transforms|does not have vmap support|^vmap: |"
                      r"Batching rule not implemented|vmap.*not (yet )?supported")
#: torch.library.opcheck's sub-tests that op.registration runs
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")
_TEXT = 2000   # characters of an error's text sent back


def axis(ndim: int, placement: str) -> int:
    """Where the batch axis goes in a tensor of ``ndim`` axes (the batched one has one
    more): first, in the middle or last."""
    return {"first": 0, "middle": (ndim + 1) // 2, "last": ndim}[placement]


def claimed(obj) -> bool:
    """Whether the op says it supports vmap itself: a Function with a ``vmap``
    staticmethod or ``generate_vmap_rule = True``, a custom op with ``register_vmap``
    (where such an op raises under vmap, it fails). A Function with neither does not
    support vmap; a plain function (or a library op without a vmap rule) runs by
    PyTorch's batching rules."""
    import torch

    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
        return (bool(getattr(obj, "generate_vmap_rule", False))
                or obj.vmap is not torch.autograd.Function.vmap)
    return getattr(obj, "_vmap_fn", None) is not None


def unsupported(kind) -> str | None:
    """Why vmap cannot be asked of this op at all (None: it can)."""
    if kind.function and not claimed(kind.obj):
        return (f"{kind.name} is a torch.autograd.Function with neither a vmap "
                "staticmethod nor generate_vmap_rule = True")
    return None


def vmapped(runner, points: list[dict], vs: list[list]) -> dict:
    """The op on the batch of ``points`` (cotangents ``vs``, one list per point) under
    ``torch.func.vmap``, for each placement of the batch axis whose axes differ from an
    earlier one's: ``{"claimed": bool, "placements": [{"placement", "axes": {input:
    axis}, "cotangent_axes", "outputs": [...], "backward": {...}, "grads": {...}},
    ...]}`` (:func:`_placed`), every array with the batch first (``out_dims = 0``), each
    of the three an ``{"error": ...}`` where the op raised; after torch's refusal of an
    op that claims no support, no further placement. An error is ``{"text", "refused"}``: refused where torch
    says vmap cannot run the op (no failure unless the op claims support, :func:`claimed`);
    ``{"unsupported": why}`` where vmap is not asked of the op at all."""
    import torch

    why = unsupported(runner.kind)
    if why is not None:
        return {"unsupported": why}
    # (an op without a batching rule runs through vmap's loop, saying so on stderr: the
    # op's output, where the report would show it)
    quiet = getattr(torch._C._functorch, "_set_vmap_fallback_warning_enabled", None)
    if quiet is not None:
        quiet(False)
    samples = [runner.leaves(p) for p in points]
    names = [s.name for s in runner.case.inputs]
    seen, out = set(), []
    for placement in PLACEMENTS:
        axes = {n: axis(samples[0][n].dim(), placement) for n in names}
        if tuple(axes.values()) in seen:
            continue
        seen.add(tuple(axes.values()))
        out.append(_placed(runner, samples, vs, placement, axes))
        if _refused(out[-1]["outputs"]) and not claimed(runner.kind.obj):
            break   # (torch refuses it wherever the batch axis is)
    return {"placements": out, "claimed": claimed(runner.kind.obj)}


def _refused(done) -> bool:
    return isinstance(done, dict) and done["error"]["refused"]


def _placed(runner, samples: list[dict], vs: list[list], placement: str,
            axes: dict) -> dict:
    """One placement's three paths: the outputs under vmap, vᵀJ through autograd of
    those outputs (``backward``), and ``torch.func.vjp`` inside the vmap (``grads``)."""
    import torch

    names, wanted = list(axes), runner.wanted
    batched = {n: torch.stack([s[n].detach() for s in samples], dim=axes[n])
               .requires_grad_(samples[0][n].requires_grad) for n in names}
    dims = tuple(axes[n] for n in names)
    # (a complex output's tensor has one axis fewer than its layout)
    cot_axes = [axis(len(node.shape) - node.complex, placement)
                for node in runner.case.outputs]
    done = {"placement": placement, "axes": axes, "cotangent_axes": cot_axes}

    def forward(*xs):
        return runner.forward(dict(zip(names, xs)))

    outs = _attempt(lambda: torch.func.vmap(forward, in_dims=dims, out_dims=0)(
        *[batched[n] for n in names]))
    done["outputs"] = outs if isinstance(outs, dict) else [plain(y) for y in outs]
    if not wanted or isinstance(outs, dict):   # (vjp's forward would raise the same)
        return done
    done["backward"] = _attempt(lambda: _backward(runner, batched, axes, outs, vs))

    def pulled(*args):
        xs, cts = dict(zip(names, args[:len(names)])), args[len(names):]

        def differentiated(*ws):
            return runner.forward({**xs, **dict(zip(wanted, ws))})

        ys, pull = torch.func.vjp(differentiated, *[xs[n] for n in wanted])
        return pull(tuple(cts[:len(ys)]))

    each = [runner.cotangents(v) for v in vs]
    cotangents = [torch.stack([c[k] for c in each], dim=cot_axes[k])
                  for k in range(len(cot_axes))]
    plainly = [batched[n].detach() for n in names]
    done["grads"] = _attempt(lambda: dict(zip(wanted, map(plain, torch.func.vmap(
        pulled, in_dims=dims + tuple(cot_axes), out_dims=0)(*plainly, *cotangents)))))
    return done


def _backward(runner, batched: dict, axes: dict, outs: tuple, vs: list[list]) -> dict:
    """vᵀJ of the vmapped outputs (batch first) by torch.autograd.grad, each element's
    cotangent its point's: ``{input: batch-first array or None}``."""
    import torch

    wanted = runner.wanted
    each = [runner.cotangents(v) for v in vs]
    pairs = [(y, torch.stack([c[k] for c in each]))
             for k, y in enumerate(outs) if y.requires_grad and k < len(vs[0])]
    if not pairs:
        return dict.fromkeys(wanted)
    grads = torch.autograd.grad([y for y, _ in pairs], [batched[n] for n in wanted],
                                [v for _, v in pairs], allow_unused=True)
    return {n: None if g is None else plain(g.movedim(axes[n], 0))
            for n, g in zip(wanted, grads)}


def _attempt(call):
    """What ``call()`` gives, or ``{"error": {"text", "refused"}}`` for what it raised
    (torch's performance warnings for ops without a batching rule silenced: they would
    fill the op's output)."""
    from ...base.errors import describe_exception

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call()
    except Exception as exc:   # the op's, judged by the judge
        text = describe_exception(exc)
        return {"error": {"text": text[:_TEXT],
                          "refused": bool(_REFUSED.search(str(exc)))}}


def registration(runner, point: dict) -> dict:
    """``torch.library.opcheck`` on the op at ``point``, called as the case calls it:
    ``{"tests": {sub-test: {"verdict": "SUCCESS" | "failed" | "unsupported", "text":
    the first line of what it raised}}}``; "unsupported" where the op has no fake impl
    (``register_fake``): it does not support the paths that need one. An overloaded
    ``torch.ops.ns.name`` is checked by its default overload (opcheck takes one); one
    without: ``{"unsupported": why}``."""
    import torch

    op = runner.kind.obj
    if isinstance(op, torch._ops.OpOverloadPacket):
        names = op.overloads()
        if "default" not in names and len(names) != 1:
            return {"unsupported": f"{op} has the overloads {names}, none of them "
                                   "default: torch.library.opcheck takes one"}
        op = getattr(op, "default" if "default" in names else names[0])
    leaves = runner.leaves(point)
    positional, keywords = runner.arguments()

    def given(a):
        return leaves[a.input] if a.input is not None else a.value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.library.opcheck(
            op, tuple(given(a) for a in positional), {k: given(a) for k, a in keywords},
            test_utils=OPCHECK_TESTS, raise_exception=False)
    return {"tests": {str(name): _verdict(result) for name, result in got.items()}}


def _verdict(result) -> dict:
    if isinstance(result, str) and result == "SUCCESS":
        return {"verdict": "SUCCESS", "text": ""}
    text = _first_line(result)
    unfaked = ("no fake impl registered" in str(result)
               or type(result).__name__ == "UnsupportedOperatorException")
    return {"verdict": "unsupported" if unfaked else "failed", "text": text}


def _first_line(exc) -> str:
    """An exception's type and the first line of its text (opcheck wraps the cause in
    a long explanation: the first line says what failed)."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()] or [""]
    return f"{type(exc).__name__}: {lines[0][:_TEXT]}"
