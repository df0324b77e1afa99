"""Witnesses: each computes the output and vᵀJ of a case at a point, its own way.

Every witness is a function ``(case, point, v, dtype) -> Evaluation``; the symbolic
reference (:mod:`gradcheck.symbolic`) is compared against each of them.
"""

from __future__ import annotations

from typing import Callable


#: The dtypes a witness runs in, where it does not run in every dtype (float16 and
#: bfloat16 are then skipped with the reason, never failed). The engine's kernels are
#: NumPy code written and tested in float64 and float32 only. The numeric witness
#: differentiates the float64 forward at the rounded point whatever the run's dtype:
#: in a float16 or bfloat16 run it would check no arithmetic in that dtype, only the
#: formula again, so it is kept to the dtypes it has been validated in rather than
#: reported as if it had checked the low dtype.
RUNS_IN: dict[str, tuple[str, ...]] = {"engine": ("float64", "float32"),
                                       "numeric": ("float64", "float32")}


def skip_reason(name: str, dtype: str) -> str | None:
    """Why the witness ``name`` does not run in ``dtype``, or None when it does; the
    runner reports such a witness as skipped with this reason, which fails no case."""
    dtypes = RUNS_IN.get(name)
    if dtypes is None or dtype in dtypes:
        return None
    return f"the {name} witness runs in {' and '.join(dtypes)} only"


def witness(name: str) -> Callable:
    """The run function of the witness ``name`` (imported on first use)."""
    if name == "torch":
        from .torch import run
    elif name == "engine":
        from .engine import run
    elif name == "numeric":
        from .numeric import run
    else:
        raise KeyError(name)
    return run


# Shared by the torch and engine witnesses; importable from here as before.
from .drive import drive, grad_fn_chain, rebuild  # noqa: E402,F401
