"""op.compile's calls, run in the op's own process (:meth:`gradcheck.checking.opcheck.
server.Server.call_compile`; judged by :mod:`gradcheck.checking.opcheck.compiled`): the
op's call under ``torch.compile`` at one point, its outputs and vᵀJ through them, and
one tensor passed in two argument slots of the compiled call.

``fullgraph=True`` is tried first: where it holds, its graph is the one ``fullgraph=
False`` would give (no break to split it), so the op pays one compile. Where it raises,
Dynamo's cache is reset (a frame compiled with breaks would otherwise be reused) and the
call compiled again with ``fullgraph=False``: its first line is the graph break's, told
beside the result; where that raises too, the op raised under torch.compile."""

from __future__ import annotations

import re
import warnings

from .storage import plain

_TEXT = 2000   # characters of an error's text sent back
#: torch.compile refusing a torch.library op without a fake impl (register_fake): it
#: plans with fake tensors, so the op does not support compile (as op.registration
#: notes the sub-tests that need one)
_UNFAKED = re.compile(r"no fake impl registered|UnsupportedOperatorException")


def compiled(runner, point: dict, vs: list, plan: dict) -> dict:
    """The op under ``torch.compile(backend=plan["backend"])`` at ``point``, vᵀJ for the
    cotangents ``vs``: ``{"outputs": [...], "grads": {...}}``, with ``"graph_break"``
    (the first line of what ``fullgraph=True`` raised) where the op breaks the graph,
    or ``{"raised": what}`` where the compiled op raised (not ``"error"``: that is a
    call's own failure, :mod:`~gradcheck.checking.opcheck.server`), or
    ``{"unsupported": why}`` for an op torch.compile cannot plan for (no fake impl);
    and ``"pair"``: for ``plan
    ["pair"]`` (``[first, second]``, or None), :func:`_shared`'s gradients, or an
    error."""
    import torch
    import torch._functorch.config

    # the runner's vᵀJ keeps the graph (retain_graph, as every other check calls the
    # op's backward): a compiled backward whose buffers are donated refuses that, an
    # error of the call's, not the op's (a kink op's backward met it)
    torch._functorch.config.donated_buffer = False
    backend = str(plan["backend"])
    names = [s.name for s in runner.case.inputs]
    call = _call(runner, names)
    done: dict = {}
    try:
        leaves, outs = _forward(runner, torch.compile(call, backend=backend,
                                                      fullgraph=True), names, point)
    except Exception as exc:   # a graph break, or the op failing under compile
        torch._dynamo.reset()
        try:
            leaves, outs = _forward(runner, torch.compile(call, backend=backend), names,
                                    point)
        except Exception as again:   # the op's failure under compile, not a break
            if _UNFAKED.search(str(again)):
                return {"unsupported": _first_line(again)}
            return {"raised": _text(again), "pair": None}
        done["graph_break"] = _first_line(exc)
    done["outputs"] = [plain(y) for y in outs]
    try:
        done["grads"] = {n: plain(g) for n, g in _quiet(runner.vjp, leaves, outs,
                                                        vs).items()}
    except Exception as exc:   # its compiled backward raised
        return {"raised": "in backward: " + _text(exc), "pair": None}
    done["pair"] = None
    pair = plan.get("pair")
    if pair:
        # (fullgraph=False: PyTorch graph-breaks around a Function given one tensor twice)
        loose = torch.compile(call, backend=backend)
        try:
            done["pair"] = _shared(runner, loose, names, point, vs, *pair)
        except Exception as exc:
            done["pair"] = {"error": _text(exc)}
    return done


def _call(runner, names: list[str]):
    """The op's call as a function of the inputs' tensors (in the case's order): the
    plain arguments and keywords fixed outside it, so that what Dynamo traces is the
    op's code, not gradcheck's."""
    positional, keywords = runner.arguments()
    fn = runner.kind.obj.apply if runner.kind.function else runner.kind.obj
    where = {n: j for j, n in enumerate(names)}
    args = [(where.get(a.input), a.value) for a in positional]
    kwargs = [(k, where.get(a.input), a.value) for k, a in keywords]

    def call(*tensors):
        out = fn(*[v if j is None else tensors[j] for j, v in args],
                 **{k: v if j is None else tensors[j] for k, j, v in kwargs})
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    return call


def _forward(runner, fn, names: list[str], point: dict) -> tuple[dict, tuple]:
    """The leaves made at ``point`` and ``fn``'s (the compiled call's) outputs."""
    leaves = runner.leaves(point)
    return leaves, _quiet(fn, *[leaves[n] for n in names])


def _quiet(fn, *args, **kwargs):
    """``fn(...)``, Dynamo's and the op's warnings silenced (they would fill the op's
    output, which the report shows)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _shared(runner, fn, names: list[str], point: dict, vs: list, first: str,
            second: str) -> dict:
    """``first``'s tensor passed for ``second`` too, at ``point`` with ``second``
    holding ``first``'s values: the gradients of every input but ``second`` under
    ``fn`` (``shared``) and eagerly (``eager``: the op's own call), and every input's
    eagerly with two separate tensors (``separate``)."""
    at = {**point, second: point[first]}
    kept = [n for n in runner.wanted if n != second]

    def one_tensor(call) -> dict:
        leaves = runner.leaves(at)
        leaves[second] = leaves[first]
        outs = _quiet(call, *[leaves[n] for n in names])
        return {n: plain(g) for n, g in _quiet(runner.vjp, leaves, outs, vs,
                                               names=kept).items()}

    leaves = runner.leaves(at)
    separate = runner.vjp(leaves, runner.forward(leaves), vs)
    return {"shared": one_tensor(fn), "eager": one_tensor(_call(runner, names)),
            "separate": {n: plain(g) for n, g in separate.items()}}


def _text(exc: BaseException) -> str:
    """What the op raised, less Dynamo's advice on its own logging (a report is no
    place to set TORCHDYNAMO_VERBOSE)."""
    from ...base.errors import describe_exception

    lines = describe_exception(exc).strip().splitlines()
    kept = [line for line in lines if not line.startswith(_ADVICE)]
    return "\n".join(kept).strip()[:_TEXT]


_ADVICE = ("Set TORCHDYNAMO_VERBOSE=", "For even more developer context, set TORCH_LOGS")


def _first_line(exc: BaseException) -> str:
    """An exception's type and its first line (Dynamo explains a break at length)."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()] or [""]
    return f"{type(exc).__name__}: {lines[0][:500]}"
