"""Section (g)'s measurements in the child process (:mod:`gradcheck.cli.bench.child`
runs them through :mod:`.jobs`; the parent's side, the rows, is :mod:`.speed`)."""

from __future__ import annotations

from .config import Config


def bench_case(name: str, keys: dict, shapes: dict, **more):
    """The case of a workload's keys at its inputs' shapes (``more``: other keys)."""
    from ...cases import case_from_dict

    return case_from_dict({"name": name, **{k: v for k, v in keys.items() if k != "inputs"},
                           "inputs": {n: {"shape": shapes[n], **spec}
                                      for n, spec in keys["inputs"].items()}, **more},
                          file="<bench>")


def speed_job(job: dict) -> dict:
    """The workload's checkers side by side (see :mod:`.speed`'s docstring);
    ``{"seconds": {checker: (median, runs)}, "status": gradcheck's verdict}``."""
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
    gradcheck_one_point()   # (warm-up: imports, first use; not measured)
    cfg = Config(repeat=job["repeat"], quick=job["quick"])
    seconds = side_by_side(fns, cfg, budget=job["budget"], block=1)
    return {"seconds": seconds, "status": sorted(set(status)),
            "threads": torch.get_num_threads()}


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
