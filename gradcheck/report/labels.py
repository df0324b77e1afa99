"""The word each outcome of a case run is shown with, and its colour: one vocabulary for
the text report and the progress lines (pytest's words for the expected failures:
``XFAIL`` caught as ``expect = "fail"`` said, ``XPASS`` expected to fail but agreed)."""

from __future__ import annotations

from ..base.result import APPROXIMATE, ERROR, FAILED, PASSED, SKIPPED, XFAIL, XPASS

#: outcome (:attr:`~gradcheck.base.result.CaseResult.outcome`) -> its word
LABEL = {PASSED: "PASS", APPROXIMATE: "APPROX", FAILED: "FAIL", ERROR: "ERROR",
         SKIPPED: "SKIP", XFAIL: "XFAIL", XPASS: "XPASS"}
#: the widest word: the column every report line gives it
LABEL_WIDTH = max(map(len, LABEL.values()))
#: ANSI colour of each (approximate bright yellow, apart from a skip's plain yellow;
#: an expected failure caught in cyan, an expected failure that passed red: it fails)
COLOR = {PASSED: "32", APPROXIMATE: "93", FAILED: "31", ERROR: "35", SKIPPED: "33",
         XFAIL: "36", XPASS: "31"}
#: and as rich names them (the progress display)
STYLE = {PASSED: "green", APPROXIMATE: "bold yellow", FAILED: "bold red",
         ERROR: "bold magenta", SKIPPED: "yellow", XFAIL: "cyan", XPASS: "bold red"}


def label(outcome: str) -> str:
    """The word of ``outcome`` (an unknown one in capitals, as it came)."""
    return LABEL.get(outcome, str(outcome).upper())
