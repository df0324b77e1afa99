"""Shared test set-up: a repeatable Hypothesis profile and small helpers."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, settings

from gradcheck.process.threads import one_thread_each

one_thread_each()   # before NumPy loads (xdist workers each import this file first)

# Repeatable everywhere: derandomized (fixed seed), no example database, no deadline
# (SymPy compile times vary with the machine's load).
settings.register_profile(
    "repeatable", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# `gradcheck run` runs each case in a worker process by default: a fresh interpreter that
# imports torch (seconds) for every main([...]) the tests call. The suite runs its cases
# in-process instead; the tests of the worker path (tests/test_hostile_isolation.py,
# tests/test_parallel.py) take this variable out of their runs' environment.
os.environ["GRADCHECK_IN_PROCESS"] = "1"
# Under GitHub Actions, `gradcheck run` appends its Markdown report to the job summary:
# the suite's own runs must not fill the summary of the job that runs the suite.
os.environ.pop("GITHUB_STEP_SUMMARY", None)


#: Python function calls a rejection of hostile input may take: a measure of work that,
#: unlike seconds, does not depend on how busy the machine is (the largest rejection in
#: tests/test_parser.py makes about 3e4, reading the deepest hostile case file 1e5).
WORK_LIMIT = 1_000_000


@contextmanager
def bounded_work(limit: int = WORK_LIMIT):
    """Fail when the code in the block makes more than ``limit`` Python function calls
    (counted with a profile hook; a hang or blow-up shows as millions)."""
    calls = [0]

    def count(frame, event, arg):
        if event == "call":
            calls[0] += 1

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        yield calls
    finally:
        sys.setprofile(previous)
    assert calls[0] <= limit, f"{calls[0]} Python calls (limit {limit})"


def count_numeric_evaluations(monkeypatch) -> list:
    """A list that grows by one for each evaluation of a formula by the numeric witness:
    the value at the point, then each perturbed one (through the compiled forward; the
    rounding bound is taken once per input)."""
    from gradcheck.witnesses import numeric

    calls: list = []

    def counting(real):
        def call(*args, **kwargs):
            calls.append(1)
            return real(*args, **kwargs)
        return call

    compiled = numeric.program
    monkeypatch.setattr(numeric, "evaluate", counting(numeric.evaluate))
    monkeypatch.setattr(numeric, "program", lambda *args: counting(compiled(*args)))
    return calls


def make_case(expr: str, inputs: dict, **keys):
    """A validated Case from an expression and ``{name: shape or input table}``."""
    from gradcheck.cases import case_from_dict

    table = {n: ({"shape": list(v)} if isinstance(v, (list, tuple)) else v)
             for n, v in inputs.items()}
    return case_from_dict({"name": keys.pop("name", "t"), "expr": expr, "inputs": table,
                           **keys})


def check(case, dtype: str = "float64"):
    """Run one case in one dtype; the CaseResult."""
    from gradcheck.checking.case import run_case

    return run_case(case, dtype, timeout=None)


@pytest.fixture
def run_check():
    return check


#: The source of a correct op the op-module fixtures of several tests share (x * x, its
#: backward 2 * x * g); it needs ``import torch`` above it.
SQUARE_OP = """
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g
"""


def assert_torch_within_bounds(case, point, v, dtype) -> None:
    """PyTorch's own float computation of ``case`` at ``point`` errs by at most the
    rounding model's bound in ``dtype`` (plus the float64 reference's own, the same bound
    at float64's u), without the witnesses' safety factor."""
    import numpy as np

    from gradcheck.witnesses.torch import run as torch_run
    from gradcheck.base.dtypes import unit_roundoff
    from gradcheck.reference import Reference
    from gradcheck.bounds.point import error_bounds

    exact = Reference(case).evaluate(point, v).quantities()
    got = torch_run(case, point, v, dtype).quantities()
    both = 1 + unit_roundoff("float64") / unit_roundoff(dtype)
    bounds = {q: both * b for q, b in error_bounds(case, point, v, dtype).items()}
    for q, e in exact.items():
        err = np.abs(got[q] - e)
        assert np.all(err <= bounds[q]), (q, float(np.max(err - bounds[q])))


def skipped_saying_why(w) -> bool:
    """An op check the op does not support (op.jvp without forward mode, op.vmap without
    a vmap rule): skipped, its reason as its message, never a failure."""
    return w.status == "skipped" and bool(w.message)
