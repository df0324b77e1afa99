"""Section (e), ``tensor``: formulas that mix elements (matmul, softmax, layer norm) at
real sizes, each checked by ``gradcheck run`` in a fresh process (:mod:`.clirun`).

- the layers of :data:`~gradcheck.cli.bench.config.LAYERS`: wall time, and the case's peak
  resident memory (the JSON report's ``peak_memory``, less that of the same formula at
  small shapes) against the inputs' bytes;
- ``sum(tanh(x @ W))`` at 4096 inputs (:data:`~gradcheck.cli.bench.config.CHECKED`):
  ``gradcheck run`` with its compile against ``torch.autograd.gradcheck`` (full and
  ``fast_mode``) and, when importable, JAX's ``check_grads``;
- the bundled cases run once, and what compiling their references costs of that run.

A case gradcheck cannot check (a formula too large for the reference it has) is a row
whose ``extra["error"]`` is the case's message, its target not met.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Callable

from .cache import cache_rows, symbolic_rows
from .checkers import load_jax, side_by_side, timed
from .clirun import CLI_WALL, CliRun, case_toml, run_cli
from .config import (CHECKED, LAYERS, TARGET_LAYER_MEMORY, TARGET_LAYER_SECONDS, TARGET_OVER_FAST,
                     TARGET_OVER_FULL, Config, Row, Workload)

#: ``gradcheck run``'s options for one check: every witness, float64, one point
CHECK_ARGS = ("--dtype", "float64", "--points", "1", "--extreme-points", "0")


def _case(keys: dict, shapes: dict, name: str) -> dict:
    inputs = {n: {"shape": shapes[n], **spec} for n, spec in keys["inputs"].items()}
    return {"name": name, **{k: v for k, v in keys.items() if k != "inputs"},
            "inputs": inputs}


def _sizes(case: dict) -> dict:
    shapes = {n: spec["shape"] for n, spec in case["inputs"].items()}
    return {"n": sum(math.prod(s) for s in shapes.values()), "shapes": shapes}


def check(cases: list[dict], cfg: Config) -> CliRun:
    """``gradcheck run`` of ``cases`` (one file) with :data:`CHECK_ARGS` and
    ``--no-cache`` (every kernel compiled). Raises when the CLI
    wrote no report (it crashed)."""
    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-") as tmp:
        path = Path(tmp) / "cases.toml"
        path.write_text(case_toml(cases), encoding="utf-8")
        run = run_cli([str(path), *CHECK_ARGS, "--timeout", f"{cfg.cli_cap:g}",
                       "--no-cache"], timeout=cfg.cli_cap + 60)
    if run.report is None and not run.capped:
        raise RuntimeError(f"gradcheck run exited with {run.returncode} and wrote no "
                           f"report: {run.stderr}")
    return run


def outcome(run: CliRun, cfg: Config) -> dict:
    """What a run of one case says: status, reference mode, each witness's status, the
    case's own seconds; ``error``: why it did not pass."""
    case = run.case() or {}
    extra = {"status": case.get("status", "capped" if run.capped else "missing"),
             "mode": case.get("mode", ""), "case_seconds": case.get("seconds"),
             "witnesses": {w: r.get("status")
                           for w, r in (case.get("witnesses") or {}).items()},
             "returncode": run.returncode, "capped": run.capped,
             "cap_seconds": cfg.cli_cap + 60}
    if extra["status"] != "passed":
        extra["error"] = case.get("message") or (
            f"ran past {cfg.cli_cap + 60:g} s" if run.capped else run.stderr.strip())
    return extra


def verified(extra: dict) -> str:
    if extra["status"] != "passed":
        return f"nothing: the case's status is {extra['status']}"
    return (f"vᵀJ of every input element against the exact symbolic reference (mode "
            f"{extra['mode'] or '?'}) by every witness ({', '.join(extra['witnesses'])}), "
            "one point, float64")


def _start_up(label: str, cfg: Config) -> int:
    """The peak memory of ``label``'s formula at its small shapes, checked the same way
    (its case's ``peak_memory``): what a case takes whatever its size (the imports and
    compile it does first, the interpreter's pools); 0 where the layer itself runs at
    those shapes (--quick) or nothing was measured."""
    keys, shapes = LAYERS[label]
    if cfg.layers == "small":
        return 0
    run = check([_case(keys, shapes["small"], "layer")], cfg)
    return (run.case() or {}).get("peak_memory") or 0


def _layer_rows(label: str, cfg: Config) -> list[Row]:
    keys, shapes = LAYERS[label]
    case = _case(keys, shapes[cfg.layers], "layer")
    base = _start_up(label, cfg)
    run = check([case], cfg)
    extra = dict(outcome(run, cfg), formula=keys["expr"], let=keys.get("let", {}))
    sizes, passed, assess = _sizes(case), extra["status"] == "passed", not cfg.quick
    rows = [Row("tensor", f"gradcheck run: {label}", sizes,
                None if run.capped else run.seconds, verified(extra) + "; " + CLI_WALL, 1,
                target=f"< {TARGET_LAYER_SECONDS:g} s wall",
                met=(passed and run.seconds < TARGET_LAYER_SECONDS) if assess else None,
                extra=extra)]
    peak = (run.case() or {}).get("peak_memory")
    if peak is None or run.capped:   # (measured on Linux only)
        return rows
    above, inputs = max(0, peak - base), 8 * sizes["n"]
    rows.append(Row(
        "tensor", f"gradcheck run: {label}: peak memory", sizes, None,
        f"the same run's case: its process's resident set at its peak above what it held "
        f"as the case began (the JSON report's peak_memory, {peak / 2**20:.1f} MiB), less "
        f"that of the same formula at small shapes ({base / 2**20:.1f} MiB: the imports "
        f"and compile any case does first)", 1, ratio=above / inputs,
        ratio_of="the case's peak resident bytes above the small case's / the inputs' "
                 "bytes (float64)",
        target=f"< {TARGET_LAYER_MEMORY:g}× the inputs' bytes",
        met=(passed and above / inputs < TARGET_LAYER_MEMORY) if assess else None,
        extra={"peak_bytes": above, "input_bytes": inputs, "case_peak_bytes": peak,
               "start_up_bytes": base,
               "method": "VmHWM of the case process, reset as the case began"}))
    return rows


def _layer_torch(label: str, cfg: Config) -> list[Row]:
    """torch.autograd.gradcheck beside a layer, on the same formula through the rule
    table's torch column (float64, this process, one thread): fast_mode measured; the
    full check, 2 forwards per input element, estimated from one forward's time where it
    would take over a minute (hours at these sizes)."""
    import time

    import numpy as np
    import torch

    from ...witnesses.drive import rebuild
    from ...witnesses.torch import applier
    from ...cases import case_from_dict

    keys, shapes = LAYERS[label]
    case = case_from_dict(_case(keys, shapes[cfg.layers], "layer-torch"))
    rng = np.random.default_rng(0)
    tensors = [torch.tensor(rng.uniform(0.5, 1.5, spec.shape), dtype=torch.float64,
                            requires_grad=spec.requires_grad) for spec in case.inputs]
    apply = applier(case, "float64")

    def f(*xs):
        return rebuild(case.output, {s.name: x for s, x in zip(case.inputs, xs)}, apply)

    sizes = _sizes(_case(keys, shapes[cfg.layers], "layer"))
    fast, runs = timed(lambda: torch.autograd.gradcheck(f, tensors, fast_mode=True), cfg)
    start = time.perf_counter()
    with torch.no_grad():
        f(*tensors)
    forward = time.perf_counter() - start
    n = sum(t.numel() for t in tensors if t.requires_grad)
    rows = [Row("tensor", f"torch.autograd.gradcheck fast_mode: {label}", sizes, fast,
                "one random projection uᵀJv against a finite-difference directional "
                "derivative (float64, in the bench's process)", runs)]
    estimate = 2 * n * forward
    if estimate > 60 or cfg.quick:
        rows.append(Row("tensor", f"torch.autograd.gradcheck (full), estimated: {label}",
                        sizes, estimate, f"not run (this is its lower bound): every "
                        f"element of the Jacobian by central differences takes 2 forwards "
                        f"per input element ({n:,}; and a backward per output element), "
                        f"at {forward * 1000:.1f} ms per forward here (one timed)", 1,
                        extra={"estimated": True, "forward_seconds": forward}))
    else:
        full, runs = timed(lambda: torch.autograd.gradcheck(f, tensors), cfg)
        rows.append(Row("tensor", f"torch.autograd.gradcheck (full): {label}", sizes, full,
                        "every element of the Jacobian by central finite differences "
                        "(float64, in the bench's process)", runs))
    return rows


def layer_names(cfg: Config) -> list[str]:
    return [n for n in LAYERS if cfg.layer_names is None or n in cfg.layer_names]


def _checked_gradcheck(cfg: Config, state: dict) -> list[Row]:
    """gradcheck's whole check of the 4096-input formula in this process, timed in turns
    with ``torch.autograd.gradcheck(fast_mode=True)`` on the same function
    (:func:`~gradcheck.cli.bench.checkers.side_by_side`: their ratio is taken under one
    load): every witness, one point, compile included (SymPy's cache cleared and the
    kernel memo off for each run, each run a case of its own)."""
    import sympy

    from ...cases import case_from_dict
    from ...reference.kernelcache import turned_off
    from ...checking.case import run_case

    label, table = CHECKED[0], _checked_case(cfg)
    count = [0]

    def fresh():
        count[0] += 1
        sympy.core.cache.clear_cache()
        case = case_from_dict(dict(table, name=f"checked-{count[0]}", points=1,
                                   extreme_points=0))
        # (as gradcheck run's text report without -v: no formulas for a passing case)
        result = run_case(case, "float64", timeout=None, formulas=False)
        if result.status != "passed":
            raise RuntimeError(f"bench case failed: {result.message}")
        return result

    fast = _fast_mode(cfg)
    with turned_off():                            # (the bench runs with it off too)
        fresh()                                   # one-time costs (imports), not measured
        fast()
        timed = side_by_side({"gradcheck": fresh, "fast_mode": fast}, cfg)
        result = fresh()
    (seconds, runs), state["fast_mode"] = timed["gradcheck"], timed["fast_mode"]
    state["checked"] = seconds
    extra = {"status": result.status, "mode": result.mode, "formula": label,
             "witnesses": {w.witness: w.checked for w in result.witnesses},
             "no_cache": True}
    text = ("the exact gradient of every element by the tensor reference, against the "
            "engine and torch element by element and finite differences along 3 random "
            "directions per input (float64, one point, in this process after a warm-up, "
            "reference compile included, the gradient formulas not printed, as the text "
            "report leaves a passing case's out without -v; timed in turns with torch's "
            "fast_mode)")
    return [Row("tensor", f"gradcheck beside the checkers: {label}", _sizes(table),
                seconds, text, runs, extra=extra)]


def _checked_inputs(cfg: Config):
    """The function and inputs torch's checks of the 4096-input formula take."""
    import torch

    shapes = CHECKED[1][cfg.layers]
    gen = torch.Generator().manual_seed(0)
    x, w = (torch.randn(*shapes[n], dtype=torch.float64, generator=gen,
                        requires_grad=True) for n in ("x", "W"))

    def f(x, w):
        return torch.tanh(x @ w).sum()

    return f, (x, w)


def _fast_mode(cfg: Config) -> Callable[[], object]:
    import torch

    f, inputs = _checked_inputs(cfg)
    return lambda: torch.autograd.gradcheck(f, inputs, fast_mode=True)


def _ratio_row(name: str, seconds: float, runs: int, what: str, ours: float | None,
               target: str | None, at_least: float | None, cfg: Config) -> Row:
    ratio = seconds / ours if ours else None
    met = None
    if at_least is not None and not cfg.quick:
        met = ratio is not None and ratio >= at_least
    return Row("tensor", name, _sizes(_checked_case(cfg)), seconds, what, runs,
               ratio=ratio, ratio_of="seconds / gradcheck run's seconds on the same formula",
               target=target, met=met)


def _checked_case(cfg: Config) -> dict:
    label, shapes = CHECKED
    return _case({"expr": label, "inputs": {n: {} for n in shapes[cfg.layers]}},
                 shapes[cfg.layers], "checked")


def _checked_torch(cfg: Config, state: dict) -> list[Row]:
    import torch

    f, (x, w) = _checked_inputs(cfg)
    small = (x[:2, :3].detach().requires_grad_(), w[:3, :2].detach().requires_grad_())
    torch.autograd.gradcheck(f, small)  # one-time costs, not measured
    full, full_runs = timed(lambda: torch.autograd.gradcheck(f, (x, w)), cfg)
    fast, fast_runs = state["fast_mode"]
    ours = state.get("checked")
    return [
        _ratio_row("torch.autograd.gradcheck", full, full_runs,
                   "the whole Jacobian (1×n) by central finite differences, 2 evaluations "
                   "of f per input element, against backward's (float64, in this "
                   "process, after a warm-up)", ours,
                   f">= {TARGET_OVER_FULL:g}× gradcheck run's seconds", TARGET_OVER_FULL,
                   cfg),
        _ratio_row("torch.autograd.gradcheck fast_mode", fast, fast_runs,
                   "one random projection uᵀJv against a finite-difference directional "
                   "derivative (float64, in this process, after a warm-up; timed in "
                   "turns with gradcheck's check above)", ours,
                   f"gradcheck run within {TARGET_OVER_FAST:g}× of it (ratio >= "
                   f"{1 / TARGET_OVER_FAST:g})", 1 / TARGET_OVER_FAST, cfg)]


def _checked_jax(cfg: Config, state: dict, mods) -> list[Row]:
    import time

    import numpy as np

    jax, jnp, check_grads, _ = mods
    shapes = CHECKED[1][cfg.layers]
    rng = np.random.default_rng(0)
    args = tuple(jnp.asarray(rng.standard_normal(shapes[n]), dtype=jnp.float64)
                 for n in ("x", "W"))

    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w))

    start = time.perf_counter()
    check_grads(f, args, order=1, modes=["rev"])
    first = time.perf_counter() - start
    steady, runs = timed(lambda: check_grads(f, args, order=1, modes=["rev"]), cfg)
    row = _ratio_row("jax.test_util.check_grads, first call", first, 1,
                     "one random projection: ⟨u, Jᵀw⟩ from the VJP against ⟨central-"
                     "difference JVP along u, w⟩ (order 1, modes ['rev'], float64); the "
                     "first call, compiling each op for these shapes", state.get("checked"),
                     None, None, cfg)
    row.extra.update(steady_seconds=steady, steady_runs=runs)
    return [row]


def tensor_workloads(cfg: Config, notes: dict, absent: dict) -> list[Workload]:
    """The section's workloads, in order (gradcheck's 4096-input run before the
    checkers whose ratios divide by it); JAX's absence goes to ``absent``."""
    state: dict = {}
    plan = [Workload("tensor", f"gradcheck run {label} (fresh processes: small, real)",
                     lambda label=label: _layer_rows(label, cfg))
            for label in layer_names(cfg)]
    plan.append(Workload("tensor", "gradcheck run cases/",
                         lambda: cache_rows(cfg, state)))
    plan += [Workload("tensor", f"torch.autograd.gradcheck beside {label}",
                      lambda label=label: _layer_torch(label, cfg))
             for label in layer_names(cfg)]
    plan += [Workload("tensor", f"gradcheck {CHECKED[0]}, 4096 inputs (in this process)",
                      lambda: _checked_gradcheck(cfg, state)),
             Workload("tensor", "torch.autograd.gradcheck, 4096 inputs",
                      lambda: _checked_torch(cfg, state)),
             Workload("tensor", "the bundled cases' references, built cold and memoised",
                      lambda: symbolic_rows(cfg, state))]
    try:
        mods = load_jax()
    except Exception as exc:  # JAX is optional: any failure to import it means "absent"
        absent["tensor"].append({"name": "jax.test_util.check_grads",
                                 "reason": f"jax is not importable "
                                           f"({type(exc).__name__}: {exc})"})
    else:
        plan.append(Workload("tensor", "jax check_grads, 4096 inputs",
                             lambda: _checked_jax(cfg, state, mods)))
    return plan
