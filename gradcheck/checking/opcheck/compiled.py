"""op.compile: the op under ``torch.compile`` at the first point (the op's side:
:mod:`gradcheck.checking.opcheck.compile_op`), with the case's ``compile_backend``
(``aot_eager`` unless it says otherwise).

- **the compiled call**: its outputs and vᵀJ through them for the point's first
  cotangent, every input requiring grad, held to the op's own (eager) call at the same
  values with twice op.forward's and op.backward's tolerances there (the compiled
  graph may round otherwise: fused or reordered operations), and, where that call is
  within them of the exact values (else op.forward or op.backward fails already), to
  the exact values with them: op.compile fails only where compiling changes what the
  op does;
- **one tensor in two argument slots** (the first two inputs requiring grad of one
  shape and domain, as op.contract pairs them): the compiled call's gradient of the
  shared tensor held to the op's own call with one tensor in both slots and, where that
  call gives the sum of the two slots' gradients with separate tensors (else op.contract
  fails already), to that sum; twice op.backward's tolerances at that point, the shared
  one the sum of the two slots';
- **graph breaks**: ``fullgraph=True`` is tried first; where it raises and the call
  compiles without it, a note ("torch.compile: graph break ..."), no failure.

An op that raises under torch.compile (it ran eagerly) fails naming the path. The check
is skipped, saying why, for a gradcheck.engine op (no torch code to trace), where
torch.compile is unavailable, and for ``compile_backend = "inductor"`` without the
compiler it generates code for (a C++ compiler on CPU, triton on CUDA)."""

from __future__ import annotations

import shutil

import numpy as np

from ..compare import Comparison, Finding, Outcome, Tally
from .contract import PathJudge, SUMMED, pair_tolerance, shared_pair, shared_point, summed
from .exact import grad_quantities
from .loader import wanted
from .replies import Complexity, listed, named, path as path_reply, real
from .vmap import _agrees, _judged, _renamed, _renaming

ENGINE = ("op.compile not run: a gradcheck.engine op is no torch code for "
          "torch.compile to trace")
_warm = False   # whether this process compiled its own function once (warm)
_imported = False   # whether it imported what an op's process is forked with


def unavailable(case, info: dict) -> str | None:
    """Why op.compile does not run for this case's op (None: it does)."""
    if info.get("engine"):
        return ENGINE
    try:
        import torch._dynamo
        supported = torch._dynamo.is_dynamo_supported()
    except Exception as exc:   # (a torch without Dynamo, or one that fails to load it)
        return f"op.compile not run: torch.compile is unavailable: {_first_line(exc)}"
    if not supported:
        return ("op.compile not run: torch.compile is unavailable: torch._dynamo does "
                "not support this Python or platform")
    if case.compile_backend == "inductor":
        return _no_compiler(case.device)
    return None


def _no_compiler(device: str) -> str | None:
    """Why inductor cannot generate code here (None: it can)."""
    if device == "cpu":
        if shutil.which("c++") or shutil.which("g++"):
            return None
        return ("op.compile not run: compile_backend = \"inductor\" needs a C++ compiler "
                "on CPU, and neither c++ nor g++ is on PATH")
    import importlib.util

    if importlib.util.find_spec("triton") is not None:
        return None
    return (f"op.compile not run: compile_backend = \"inductor\" needs triton on "
            f"{device}, and it is not installed")


def warm(case) -> bool:
    """Compile and run a function of gradcheck's own (no op's) once, forward and
    backward, with aot_eager, in the judge before it forks the op's process of a case
    that runs op.compile: Dynamo's and AOTAutograd's lazy imports and first-compile
    setup (most of a compile's cost in a fresh process) are then paid once per judge,
    not in every op's process (one started as a new interpreter, a CUDA case's, gains
    nothing). :func:`gradcheck.checking.case.run_case` calls it before the case's time
    limit starts (a short limit is the op's, not the judge's setup's), a pool worker's
    supervisor before it forks the case process (:mod:`gradcheck.session.worker`), the
    fork again: a no-op after the first. Whatever fails here is left to op.compile in
    the op's process to meet and report. Before all that, for any op case, the modules
    an op's process is forked with are imported. True where it imported or warmed just
    now."""
    global _warm, _imported
    if case.op is None:
        return False
    fresh = False
    if not _imported:
        # what the op's process is forked with (torch, and torch._dynamo, which
        # torch.func's transforms read), imported here, outside any case's time limit:
        # an import a limit cuts short leaves a module half made in sys.modules, and
        # every later op case of the process fails on it
        _imported = fresh = True
        try:
            import torch  # noqa: F401
            import torch._dynamo  # noqa: F401
        except Exception:   # (an engine op needs neither)
            pass
    if _warm or case.device != "cpu" or "op.compile" in case.skip_checks:
        return fresh
    _warm = True
    try:
        import torch
        import torch._dynamo

        if not torch._dynamo.is_dynamo_supported():
            return fresh

        def trivial(x):
            return (torch.sin(x) * 2).sum()

        x = torch.ones(3, requires_grad=True)
        torch.compile(trivial, backend="aot_eager", fullgraph=True)(x).backward()
        torch._dynamo.reset()   # (its cache holds nothing an op's process needs)
    except Exception:
        pass
    return True


def plan(case) -> dict:
    """What op.compile asks of the op: the backend, and the pair passed as one tensor
    (``[first, second]``, or None)."""
    return {"backend": case.compile_backend, "pair": shared_pair(case, wanted(case))}


def ask(op, case, point: dict, vs: list, todo: dict) -> dict:
    """The op's process's answer (:func:`gradcheck.checking.opcheck.compile_op.
    compiled`), its form checked: ``{"unsupported": why}``, ``{"raised": text}`` or
    ``{"outputs", "grads"}``, with ``"graph_break"`` where fullgraph=True broke, and
    ``"pair"`` (None, or ``{"shared", "eager", "separate"}``, or ``{"error"}``)."""
    reply = op.call("compile", point=point, vs=vs, plan=todo)
    out: dict = {}
    if "unsupported" in reply:
        return {"unsupported": str(reply["unsupported"])}
    if reply.get("graph_break") is not None:
        out["graph_break"] = str(reply["graph_break"])
    if "raised" in reply:
        out["raised"] = str(reply["raised"])
        return out
    names, kinds = wanted(case), Complexity(case)   # (complex ones in the layout)
    out["outputs"] = [real(y, f"output {k} under torch.compile", kinds.output(k))
                      for k, y in enumerate(listed(reply, "outputs"))]
    out["grads"] = named(reply.get("grads"), names, kinds.inputs)
    pair = todo.get("pair")
    one = [n for n in names if not pair or n != pair[1]]
    out["pair"] = None if not pair else path_reply(reply.get("pair"), kinds.inputs,
                                                   shared=one, eager=one, separate=names)
    return out


def compiled(check, i: int, point: dict, vs: list, values: dict, got: dict,
             wanted_values: dict, expected: dict, tolerance: dict, loose) -> None:
    """op.compile at point ``i``, recorded in ``check``'s tally (``check``: the
    :class:`~gradcheck.checking.opcheck.driver.OpCheck`): ``values`` and ``got`` the
    op's own outputs and vᵀJ for ``vs``; ``wanted_values`` and ``expected`` the exact
    ones; ``tolerance`` op.forward's and op.backward's there; ``loose`` the same in
    float32 (asked on a float64 mismatch), or None."""
    case, tally = check.case, check.tallies["compile"]
    path = f"under torch.compile (backend {case.compile_backend})"
    todo = plan(case)
    done = ask(check.op, case, point, vs, todo)
    if "unsupported" in done:   # (a note alone: the check is reported as skipped)
        tally.record([Finding(note=f"torch.compile not supported: the op has no fake "
                                   f"impl (register_fake): {done['unsupported']}")])
        return
    if "graph_break" in done:
        tally.record([Finding(note=f"torch.compile: graph break (fullgraph=True "
                                   f"raised, the call compiled without it): "
                                   f"{done['graph_break']}")])
    if "raised" in done:
        tally.record([Finding(problem=f"{path}, the op raised {done['raised']}")])
        return
    outcomes = _main(i, point, done, values, got, wanted_values, expected, tolerance,
                     loose)
    tally.merge(_judged(lambda: _tally(check), path, outcomes))
    if done["pair"] is not None:
        scratch = _tally(check)
        scratch.record(_pair(check, scratch, i, todo["pair"], done["pair"], point, vs,
                             path))
        tally.merge(scratch)


def _tally(check) -> Tally:
    return Tally("op.compile", check.dtype, check.case.atol, check.case.rtol)


def _main(i: int, point: dict, done: dict, values: dict, got: dict, wanted_values: dict,
          expected: dict, tolerance: dict, loose) -> list[Outcome]:
    """The compiled call's outputs and vᵀJ against the exact values (where the op's own
    call is within tolerance of them) and against the op's own call (twice it)."""
    if len(done["outputs"]) != len(values):
        return [Finding(problem=f"the op returned {len(done['outputs'])} outputs under "
                                f"torch.compile; {len(values)} otherwise")]
    obtained = {f"out{k}": y for k, y in enumerate(done["outputs"])}
    obtained.update(grad_quantities(done["grads"]))
    exact = {**wanted_values, **expected}
    own = dict(values)
    # (autograd's None is zeros where the exact gradient is not None: as op.vmap)
    own.update({q: np.zeros(np.shape(expected[q])) if g is None and expected.get(q)
                is not None else g for q, g in grad_quantities(got).items()})
    names = {q: f"{q} (compiled)" for q in obtained
             if _agrees(own.get(q), exact.get(q), tolerance.get(q))}
    mine = {q: f"{q} (compiled, against the op's own call)" for q in obtained}
    return [Comparison(_renamed(obtained, names), _renamed(exact, names), i,
                       _renamed(tolerance, names), loose=_renaming(loose, names),
                       values=point),
            Comparison(_renamed(obtained, mine), _renamed(own, mine), i,
                       {q: None if b is None else 2 * b
                        for q, b in _renamed(tolerance, mine).items()},
                       exact=False, values=point)]


def _pair(check, tally: Tally, i: int, pair: list[str], done: dict, point: dict,
          vs: list, path: str) -> list[Outcome]:
    """The compiled call with one tensor in both slots of ``pair``: its gradients
    against the op's own call so (always) and against the sum of the two slots' with
    separate tensors (where the op's own call gives that sum)."""
    first, second = pair
    at = shared_point(point, pair)
    judge = PathJudge(tally, i, at)
    what = (f"{path}, with {first} passed as both {first} and {second} (one tensor in "
            "both slots)")
    label = f"compiled, {first} as both {first} and {second}"
    if "error" in done:
        return judge(what, label, done, {}, {}, "")
    allowed = pair_tolerance(check, pair, point, vs)
    compiled_grads = {"grads": done["shared"]}
    out = judge(what, f"{label}, against the op's own call", compiled_grads,
                done["eager"], allowed, "its gradients are not the op's own (eager) with "
                "one tensor in both slots")
    separate = summed(done["separate"], pair)
    eager, sums = grad_quantities(done["eager"]), grad_quantities(separate)
    if all(_agrees(eager[q], sums.get(q), None if b is None else 2 * b)
           for q, b in ((q, allowed.get(q)) for q in eager)):
        out += judge(what, label, compiled_grads, separate, allowed,
                     SUMMED.format(first=first, second=second))
    return out


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()] or [""]
    return f"{type(exc).__name__}: {lines[0][:500]}"
