"""The exit codes of the ``gradcheck`` command, and the one a run earns (kept apart from
cli.py so that the commands' own modules share them without importing the parser)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode", "exit_code"]


class ExitCode(IntEnum):
    OK = 0          # every case passed (or failed as expect = "fail" said), approximate
    #                 ones included (a strict case's approximation is status failed)
    MISMATCH = 1    # a gradient mismatch, an op that raised, a case past its time limit,
    #                 or an expect = "fail" case that every check agreed with (XPASS)
    USAGE = 2       # a usage or case-file error (an op that cannot be imported included)
    INTERNAL = 3    # an internal error
    NO_CASES = 5    # no case selected (pytest's code for "no tests collected")
    SIGINT = 130    # interrupted: 128 + the signal, as a shell counts it; the report
    SIGTERM = 143   # holds the cases that finished, marked incomplete


def exit_code(result) -> ExitCode:
    """The exit code a run earns (see :class:`ExitCode`)."""
    if not result.cases:
        return ExitCode.NO_CASES
    kinds = {c.error_kind for c in result.cases if c.status == "error"}
    if "internal" in kinds:
        return ExitCode.INTERNAL
    if "case" in kinds:
        return ExitCode.USAGE
    # a time-out is a check that did not pass, as a CI counts a test that hung (the op's
    # failures, "op raised", are status failed already, and so is an XPASS: pytest's
    # strict xfail)
    if "timeout" in kinds or any(c.status == "failed" for c in result.cases):
        return ExitCode.MISMATCH
    return ExitCode.OK
