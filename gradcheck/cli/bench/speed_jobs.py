"""Section (g)'s measurements in the child process (:mod:`gradcheck.cli.bench.child`
runs them through :mod:`.jobs`; the parent's side, the rows, is :mod:`.speed`). JAX,
where importable, is imported here first (no other module of the child imports it), so
that :func:`.checkers.load_jax` can pin XLA to one thread in the one-thread process;
its functions are :mod:`.jaxforms`'."""

from __future__ import annotations

from .config import Config


def bench_case(name: str, keys: dict, shapes: dict, **more):
    """The case of a workload's keys at its inputs' shapes (``more``: other keys)."""
    from ...cases import case_from_dict

    return case_from_dict({"name": name, **{k: v for k, v in keys.items() if k != "inputs"},
                           "inputs": {n: {"shape": shapes[n], **spec}
                                      for n, spec in keys["inputs"].items()}, **more},
                          file="<bench>")


def _load_jax(one_thread: bool) -> tuple[object, dict]:
    """:func:`.checkers.load_jax`'s modules (None where JAX cannot be imported) and what
    the answer says of them: ``{"version", "pinned"}`` or ``{"absent": reason,
    "unimportable": True}``."""
    from .checkers import load_jax

    try:
        # pinned to one thread in the one-thread process only (this is the first
        # import of JAX here: XLA reads its flags as it starts)
        mods = load_jax(pin=one_thread)
    except Exception as exc:  # JAX is optional: any failure to import it means "absent"
        return None, {"absent": f"jax is not importable ({type(exc).__name__}: {exc})",
                      "unimportable": True}
    return mods, {"version": mods[0].__version__, "pinned": mods[3]}


def _add_jax_check(fns: dict, job: dict, names: list[str], fixed: dict) -> dict:
    """Add ``check_grads`` of the workload's JAX form at the point's values (``fixed``:
    the torch leaves) to ``fns`` as "jax check_grads", after one call (JAX compiles each
    op per shape on its first call: not measured); returns :func:`_load_jax`'s info and
    the verdicts of its runs, or ``{"absent": why}`` where the workload has no JAX form
    or the first call raises other than a mismatch."""
    from .jaxforms import jax_function

    # (nothing before this imports JAX in the child: the pinning takes effect)
    mods, info = _load_jax(job["threads"] == 1)
    if mods is None:
        return info
    jnp, check_grads = mods[1], mods[2]
    values = {n: jnp.asarray(t.detach().numpy(), dtype=jnp.float64)
              for n, t in fixed.items()}
    f = jax_function(job["label"], names,
                     {n: values[n] for n in values if n not in names}, mods)
    if f is None:
        return {"absent": "no JAX form of this workload (jaxforms.FORMS)"}
    args = tuple(values[n] for n in names)
    verdicts: list[str] = []

    def check():
        try:
            check_grads(f, args, order=1, modes=["rev"])
        except AssertionError as exc:
            # past its default tolerances (as at the largest sizes, where its central
            # difference's step along a long u errs by more than rtol 1e-5): the check
            # did its work, and its time counts; the verdict says what it concluded
            verdicts.append("failed: " + " ".join(
                line.strip() for line in str(exc).splitlines()
                if line.strip().startswith(("Not equal", "Max relative"))))
        else:
            verdicts.append("passed")

    try:
        check()
    except Exception as exc:  # one checker failing leaves the others' rows standing
        return {"absent": f"check_grads raised on its first call "
                          f"({type(exc).__name__}: {str(exc)[:300]})"}
    fns["jax check_grads"] = check
    # (filled as the timed runs go: the answer is serialised after them)
    return {**info, "verdicts": verdicts}


def speed_job(job: dict) -> dict:
    """The workload's checkers side by side (see :mod:`.speed`'s docstring);
    ``{"seconds": {checker: (median, runs)}, "status": gradcheck's verdict, "jax":
    its version and pinning, or why it is absent}``."""
    import dataclasses

    import numpy as np
    import sympy
    import torch

    from ...checking.case import run_case
    from ...sampling.points import case_points
    from ...witnesses.drive import rebuild
    from ...witnesses.torch import applier, leaves
    from .checkers import side_by_side

    if job["threads"] == 1:
        torch.set_num_threads(1)
    case = bench_case(job["label"], job["keys"], job["shapes"], points=1,
                      extreme_points=0)
    point = next(case_points(case, "float64")).values
    apply = applier(case, "float64")
    names = [s.name for s in case.inputs if s.requires_grad]
    fixed = leaves(case, point, "float64")

    def f(*xs):
        return rebuild(case.output, {**fixed, **dict(zip(names, xs))}, apply)

    xs = [fixed[n] for n in names]
    y = f(*xs)
    v = torch.tensor(np.random.default_rng(0).standard_normal(tuple(y.shape)),
                     dtype=torch.float64)

    def forward_backward():
        for x in xs:
            x.grad = None
        f(*xs).backward(v)

    def gradcheck_one_point(case=case):
        sympy.core.cache.clear_cache()   # (compile included)
        result = run_case(case, "float64", timeout=None)
        status.append(result.status)

    # the same with its witnesses named: finite differences at every point, as before
    # they were spared where the exact witnesses agree (gradcheck.checking.spared)
    named = dataclasses.replace(case, witnesses_named=True)

    status: list[str] = []
    fns = {"torch fwd+bwd": forward_backward, "gradcheck": gradcheck_one_point,
           "gradcheck, finite differences at every point":
               lambda: gradcheck_one_point(named),
           "torch fast_mode": lambda: torch.autograd.gradcheck(f, xs, fast_mode=True)}
    if job["full"]:
        fns["torch full"] = lambda: torch.autograd.gradcheck(f, xs)
    jax_info = _add_jax_check(fns, job, names, fixed)
    gradcheck_one_point()   # (warm-up: imports, first use; not measured)
    cfg = Config(repeat=job["repeat"], quick=job["quick"])
    seconds = side_by_side(fns, cfg, budget=job["budget"], block=1)
    return {"seconds": seconds, "status": sorted(set(status)),
            "threads": torch.get_num_threads(), "jax": jax_info}


def block_job(job: dict) -> dict:
    """In the child: the transformer block checked with the default settings (its
    points and extreme points), compile included, once: seconds and the verdict."""
    import time

    from ...checking.case import run_case

    case = bench_case("transformer block", job["keys"], job["shapes"])
    start = time.perf_counter()
    result = run_case(case, "float64", timeout=None)
    return {"seconds": time.perf_counter() - start, "status": result.status,
            "witnesses": {w.witness: w.status for w in result.witnesses}}
