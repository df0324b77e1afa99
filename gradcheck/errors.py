"""The exception hierarchy: every error gradcheck raises on purpose is a GradcheckError."""

from __future__ import annotations


class GradcheckError(Exception):
    """Base class of gradcheck's own errors."""


class CaseFileError(GradcheckError):
    """A case file or an expression in it is invalid.

    The message always starts with where the problem is: ``file:line: case 'name': ...``,
    with whatever parts of that location are known.
    """

    def __init__(self, message: str, *, file: str | None = None, case: str | None = None,
                 line: int | None = None):
        self.reason = message
        self.file = file
        self.case = case
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        elif self.line:
            where = f"line {self.line}: "
        if self.case:
            where += f"case {self.case!r}: "
        return where + self.reason

    def located(self, *, file: str | None = None, case: str | None = None,
                line: int | None = None) -> "CaseFileError":
        """Fill in location parts that are not known yet (inner knowledge wins)."""
        return CaseFileError(self.reason, file=self.file or file, case=self.case or case,
                             line=self.line or line)


class UnsupportedOpError(GradcheckError):
    """A formula uses an operation that a witness cannot evaluate."""


class GradientMismatch(GradcheckError, AssertionError):
    """A witness's gradient disagrees with the symbolic reference."""
