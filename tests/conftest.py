"""Shared test set-up: a repeatable Hypothesis profile and small helpers."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Repeatable everywhere: derandomized (fixed seed), no example database, no deadline
# (SymPy compile times vary with the machine's load).
settings.register_profile(
    "repeatable", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def make_case(expr: str, inputs: dict, **keys):
    """A validated Case from an expression and ``{name: shape or input table}``."""
    from gradcheck.cases import case_from_dict

    table = {n: ({"shape": list(v)} if isinstance(v, (list, tuple)) else v)
             for n, v in inputs.items()}
    return case_from_dict({"name": keys.pop("name", "t"), "expr": expr, "inputs": table,
                           **keys})


def check(case, dtype: str = "float64"):
    """Run one case in one dtype; the CaseResult."""
    from gradcheck.runner import run_case

    return run_case(case, dtype, timeout=None)


@pytest.fixture
def run_check():
    return check
