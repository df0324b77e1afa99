"""What a child process of the bench runs (:mod:`gradcheck.cli.bench.child`): each job takes
the job's JSON object and returns its answer's."""

from __future__ import annotations

import gc
import signal
import time

from ...process.peak_memory import PeakMemory
from .checkers import check_passed, elementwise_case
from .formulas import formula_case, formula_point
from .speed_jobs import block_job, speed_job


class _Capped(Exception):
    pass


def lowered(case):
    """The formula as one SymPy expression, built by SymPy's usual evaluation, and its
    input symbols (what plain SymPy starts from)."""
    from ...reference.lowering import lower, symbol

    syms = {s.name: symbol(s.name) for s in case.inputs}
    return (lower(case.output, syms, scalar=True, evaluated=True),
            [syms[s.name] for s in case.inputs])


def _gradient(job: str, case, point) -> list[float]:
    """The gradient at ``point`` by ``Reference`` (``reference``) or by plain SymPy
    (``sympy``), built from scratch."""
    import numpy as np
    import sympy

    from ...reference import Reference

    if job == "reference":
        out = Reference(case).evaluate(point, np.ones(()))
        # an input the formula does not use has no gradient (None): 0 for sympy
        return [0.0 if out.grads[s.name] is None else float(out.grads[s.name])
                for s in case.inputs]
    body, syms = lowered(case)
    fn = sympy.lambdify(syms, [sympy.diff(body, s) for s in syms], cse=True)
    return [float(g) for g in fn(*(float(point[s.name]) for s in case.inputs))]


def compile_job(job: dict) -> dict:
    """Time ``Reference(case)`` + one evaluation (``reference``), or ``sympy.diff`` of the
    lowered expression w.r.t. every input + ``lambdify(cse=True)`` + one evaluation
    (``sympy``), stopped at ``job["cap"]`` seconds."""
    import sympy

    point = formula_point()
    # warm-up on a one-op formula: the first lambdify's one-time imports are not the
    # formula's cost
    _gradient(job["job"], formula_case("sin(x0)"), point)
    sympy.core.cache.clear_cache()
    case = formula_case(job["expr"])

    def expire(signum, frame):
        raise _Capped

    signal.signal(signal.SIGALRM, expire)
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, job["cap"])
    try:
        grads = _gradient(job["job"], case, point)
        seconds = time.perf_counter() - start
    except _Capped:
        return {"capped": True}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"seconds": seconds, "grads": grads}


def memory_job(job: dict) -> dict:
    """Every witness on ``job["n"]`` elements after a warm-up and the reference compile:
    seconds, and the peak resident memory of the check above the memory before it."""
    import sympy
    import torch

    from ...reference import Reference
    from ...checking.case import run_case

    torch.set_num_threads(1)
    check_passed(run_case(elementwise_case(10, "warm-up"), "float64", timeout=None))
    case = elementwise_case(job["n"])
    sympy.core.cache.clear_cache()  # the warm-up compiled the same formula
    start = time.perf_counter()
    cache = {id(case): Reference(case)}
    compile_seconds = time.perf_counter() - start
    gc.collect()
    memory = PeakMemory()
    start = time.perf_counter()
    result = run_case(case, "float64", cache=cache, timeout=None)
    check_seconds = time.perf_counter() - start
    check_passed(result)
    return {"compile_seconds": compile_seconds, "check_seconds": check_seconds,
            "baseline_bytes": memory.baseline, "peak_bytes": memory.peak(),
            "method": memory.method, "witnesses": [w.witness for w in result.witnesses]}


#: every job by its name (``job["job"]``)
JOBS = {"memory": memory_job, "reference": compile_job, "sympy": compile_job,
        "speed": speed_job, "block": block_job}
