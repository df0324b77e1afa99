"""Section (a), ``checkers``: gradcheck's full check against ``torch.autograd.gradcheck``
(slow and fast mode) and, when JAX is importable, ``jax.test_util.check_grads``, on one
elementwise formula at growing sizes. Each row says what that checker verified."""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import replace
from typing import Callable

from .config import ELEMENTWISE, Config, Row, Workload

GRADCHECK_VERIFIED = ("every element of the gradient against the exact symbolic "
                      "derivative, for each witness (engine, torch autograd, central "
                      "finite differences)")


def timed(fn: Callable[[], object], cfg: Config) -> tuple[float, int]:
    """Median of ``cfg.repeat`` runs, or of fewer when one run takes over
    ``cfg.once_over`` seconds; returns (seconds, runs)."""
    times = []
    for _ in range(cfg.repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if times[-1] > cfg.once_over:
            break
    return statistics.median(times), len(times)


def side_by_side(fns: dict[str, Callable[[], object]], cfg: Config,
                 budget: float = 2.0, block: int = 10,
                 most: int = 200) -> dict[str, tuple[float, int]]:
    """Each of ``fns`` timed in turns, ``block`` runs of one and then of the next, again
    and again, so that a ratio of two of them is measured under the same load (a busy
    moment slows both) while each run still follows runs of its own (the caches as a
    loop of checks leaves them, not as the other function's left them). At least
    ``cfg.repeat`` runs each, and more while all the runs so far took under ``budget``
    seconds (up to ``most``): the median of milliseconds-long runs needs dozens.
    Returns name -> (median seconds, runs)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    spent = 0.0
    size = 1 if cfg.quick else block
    while True:
        for name, fn in fns.items():
            for _ in range(size):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
                spent += times[name][-1]
        runs = len(times[name])
        if runs >= cfg.repeat and (spent >= budget or runs >= most or cfg.quick):
            break
    return {name: (statistics.median(t), len(t)) for name, t in times.items()}


def elementwise_case(n: int, name: str | None = None):
    from ...cases import case_from_dict

    # one point, as the other checkers measured beside it check (no extreme points)
    return case_from_dict({"name": name or f"n{n}", "expr": ELEMENTWISE, "points": 1,
                           "extreme_points": 0, "inputs": {"x": {"shape": [n]}}})


def check_passed(result) -> None:
    if result.status != "passed":
        raise RuntimeError(f"bench case failed: {result.message}")


def _gradcheck_rows(n: int, cfg: Config) -> list[Row]:
    import sympy

    from ...reference import Reference
    from ...checking.case import run_case

    def fresh():
        sympy.core.cache.clear_cache()  # compile from scratch every time
        check_passed(run_case(elementwise_case(n), "float64", timeout=None))

    seconds, runs = timed(fresh, cfg)
    case = elementwise_case(n)
    cache = {id(case): Reference(case)}
    reused, reused_runs = timed(
        lambda: check_passed(run_case(case, "float64", cache=cache, timeout=None)), cfg)
    return [Row("checkers", "gradcheck", {"n": n}, seconds,
                GRADCHECK_VERIFIED + "; reference compile included", runs),
            Row("checkers", "gradcheck, compiled reference reused", {"n": n}, reused,
                GRADCHECK_VERIFIED + "; the reference compiled once before (as for a "
                "case's further points and dtypes)", reused_runs)]


def _warm_up(cfg: Config) -> list[Row]:
    """The first run of each checker pays one-time costs (imports, lazy set-up):
    run them all once at a small size before anything is measured."""
    once = replace(cfg, repeat=1)
    _gradcheck_rows(10, once)
    _torch_rows(10, once)
    return []


def _torch_rows(n: int, cfg: Config) -> list[Row]:
    import torch

    def f(x):
        return (torch.log(1 + torch.exp(x)) * torch.tanh(x) + torch.sigmoid(x) ** 2).sum()

    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                    requires_grad=True)
    slow, slow_runs = timed(lambda: torch.autograd.gradcheck(f, (x,)), cfg)
    fast, fast_runs = timed(lambda: torch.autograd.gradcheck(f, (x,), fast_mode=True), cfg)
    return [Row("checkers", "torch.autograd.gradcheck", {"n": n}, slow,
                "every element of the Jacobian (here 1×n, the gradient) against central "
                "finite differences: 2n evaluations of f (float64)", slow_runs),
            Row("checkers", "torch.autograd.gradcheck fast_mode", {"n": n}, fast,
                "one random projection uᵀJv against a finite-difference directional "
                "derivative (float64)", fast_runs)]


def load_jax(pin: bool = True):
    """``(jax, jax.numpy, check_grads, pinned)``, float64 enabled. Raises on any failure
    (JAX is optional). ``pinned``: XLA was asked for one thread before it started (only
    with ``pin``: a process measuring the default threads leaves XLA its own)."""
    pinned = pin and "jax" not in sys.modules and "XLA_FLAGS" not in os.environ
    if pinned:
        # read when XLA's CPU backend starts; one thread, as torch and NumPy here
        os.environ["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")
    try:
        import jax
        import jax.numpy as jnp
        from jax.test_util import check_grads

        jax.config.update("jax_enable_x64", True)
        jax.devices()  # start the backend now, while the flags are set
    finally:
        if pinned:
            del os.environ["XLA_FLAGS"]
    return jax, jnp, check_grads, pinned


def _jax_rows(n: int, cfg: Config, mods) -> list[Row]:
    import numpy as np

    jax, jnp, check_grads, _ = mods

    def f(x):
        return jnp.sum(jnp.log(1 + jnp.exp(x)) * jnp.tanh(x) + jax.nn.sigmoid(x) ** 2)

    x = jnp.asarray(np.random.default_rng(0).standard_normal(n), dtype=jnp.float64)

    def check():
        check_grads(f, (x,), order=1, modes=["rev"])

    start = time.perf_counter()
    check()  # JAX compiles every op for this shape on the first call
    first = time.perf_counter() - start
    seconds, runs = timed(check, cfg)
    verified = ("one random projection: ⟨u, Jᵀw⟩ from the VJP against ⟨central-difference "
                "JVP along u, w⟩ (order 1, modes ['rev'], float64)")
    return [Row("checkers", "jax.test_util.check_grads", {"n": n}, seconds, verified, runs,
                extra={"first_call_seconds": first}),
            Row("checkers", "jax.test_util.check_grads, first call", {"n": n}, first,
                verified + "; includes compiling each op for this shape", 1)]


def checker_workloads(cfg: Config, notes: dict, absent: dict) -> list[Workload]:
    """The section's workloads; JAX's absence goes to ``absent``, its set-up to ``notes``
    (both by section)."""
    plan: list[Workload] = [Workload("checkers", "warm-up (imports, first compile, first "
                                     "torch.autograd.gradcheck; not reported)",
                                     lambda: _warm_up(cfg))]
    try:
        jax_mods = load_jax()
    except Exception as exc:  # JAX is optional: any failure to import it means "absent"
        jax_mods = None
        absent["checkers"].append({"name": "jax.test_util.check_grads",
                                   "reason": f"jax is not importable "
                                             f"({type(exc).__name__}: {exc})"})
    else:
        notes["checkers"].append(
            f"JAX {jax_mods[0].__version__}: float64 (jax_enable_x64), f not jitted; "
            "the timed runs follow a first call per size, which compiles each op for that "
            "shape (its own row). XLA " + ("pinned to one thread (XLA_FLAGS)." if jax_mods[3]
                                           else "threads as configured by the caller."))
    for n in cfg.sizes:
        plan.append(Workload("checkers", f"gradcheck n={n}",
                             lambda n=n: _gradcheck_rows(n, cfg)))
        plan.append(Workload("checkers", f"torch.autograd.gradcheck n={n}",
                             lambda n=n: _torch_rows(n, cfg)))
        if jax_mods is not None:
            plan.append(Workload("checkers", f"jax check_grads n={n}",
                                 lambda n=n: _jax_rows(n, cfg, jax_mods)))
    plan.append(Workload("checkers", f"gradcheck n={cfg.big}",
                         lambda: _gradcheck_rows(cfg.big, cfg)))
    return plan


def ratios_to_gradcheck(rows: list[Row]) -> None:
    """Give every other checker's row (in place) its ratio to gradcheck's at its n."""
    ours = {r.sizes["n"]: r.seconds for r in rows
            if r.section == "checkers" and r.name == "gradcheck"}
    for i, r in enumerate(rows):
        if r.section == "checkers" and r.name != "gradcheck" and ours.get(r.sizes["n"]):
            rows[i] = replace(r, ratio=r.seconds / ours[r.sizes["n"]],
                              ratio_of="seconds / gradcheck's seconds at the same n")
