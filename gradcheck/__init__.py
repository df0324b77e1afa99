"""gradcheck: check gradients against the exact symbolic derivative.

A formula is parsed once, lowered to a SymPy tree, differentiated by SymPy and compiled
with lambdify; gradcheck's own engine, PyTorch autograd, finite differences and a user's
custom op are compared against that exact reference.

Public API (imported on first use, so ``import gradcheck`` stays light):

- :func:`check`, :func:`assert_gradients`: a formula, in a test;
- :func:`check_op`, :func:`assert_op`: a custom autograd op against its formula;
- :func:`assert_passed`: a result (``CaseResult`` or ``RunResult``) that did not pass
  fails with its text report (also the method ``assert_passed()`` of the results these
  calls and the pytest plugin give);
- :func:`run` (its options: :class:`RunOptions`), :func:`load_cases`: case files;
- :func:`explain`: what autograd computes for one formula (``gradcheck explain``);
- :func:`doctor`, :func:`assert_healthy`: a training setup's wiring (``gradcheck.health``);
- ``gradcheck.engine`` (``Tensor``, ``Function``, ``no_grad``), ``gradcheck.strategies``;
- errors: :class:`GradcheckError` > :class:`CaseFileError`, :class:`UnsupportedOpError`,
  :class:`GradientMismatch` (also an ``AssertionError``).
"""

from __future__ import annotations

import importlib

from .base.errors import (ApproximateGradient, CaseFileError, GradcheckError, GradientMismatch,
                          UnsupportedOpError)

from .base import __version__

_LAZY = {
    "check": ("testing", "check"),
    "assert_gradients": ("testing", "assert_gradients"),
    "check_op": ("testing", "check_op"),
    "assert_op": ("testing", "assert_op"),
    "assert_passed": ("testing", "assert_passed"),
    "run": ("session.runner", "run"),
    "RunOptions": ("session.runner", "RunOptions"),
    "load_cases": ("cases", "load_cases"),
    "engine": ("engine", None),
    "strategies": ("strategies", None),
    "explain": ("explanation", "explain"),
    "doctor": ("health", "doctor"),
    "assert_healthy": ("health", "assert_healthy"),
    "DoctorReport": ("health", "DoctorReport"),
}

__all__ = ["__version__", "check", "assert_gradients", "check_op", "assert_op",
           "assert_passed", "run",
           "RunOptions", "load_cases", "explain", "engine", "strategies", "GradcheckError", "CaseFileError",
           "UnsupportedOpError", "GradientMismatch", "ApproximateGradient", "doctor",
           "assert_healthy", "DoctorReport"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'gradcheck' has no attribute {name!r}")
    module, attr = _LAZY[name]
    mod = importlib.import_module(f".{module}", __name__)
    return mod if attr is None else getattr(mod, attr)


def __dir__():
    return sorted(set(globals()) | set(__all__))
