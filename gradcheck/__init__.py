"""gradcheck: check gradients against the exact symbolic derivative.

A formula is parsed once, lowered to a SymPy tree, differentiated by SymPy and compiled
with lambdify; PyTorch autograd and finite differences are compared against that exact
reference.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import CaseFileError, GradcheckError, GradientMismatch, UnsupportedOpError


def load_cases(path):
    """The validated cases of a case file or folder (see :func:`gradcheck.cases.load_cases`)."""
    from .cases import load_cases as _load

    return _load(path)


def run(paths, **options):
    """Run the cases under ``paths``; returns a :class:`gradcheck.result.RunResult`.

    Options: ``keyword``, ``dtype``, ``seed``, ``points``, ``witnesses``, ``timeout``.
    """
    from .runner import run as _run

    return _run(paths, **options)


def check_op(op, reference, inputs, **options):
    """Check a custom op against its formula; see :func:`gradcheck.testing.check_op`."""
    from .testing import check_op as _check_op

    return _check_op(op, reference, inputs, **options)


def assert_op(op, reference, inputs, **options):
    """Like :func:`check_op`, raising :class:`GradientMismatch` on a failure."""
    __tracebackhide__ = True
    from .testing import assert_op as _assert_op

    return _assert_op(op, reference, inputs, **options)


__all__ = ["__version__", "run", "load_cases", "check_op", "assert_op", "GradcheckError", "CaseFileError",
           "UnsupportedOpError", "GradientMismatch"]
