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


class ApproximateGradient(UserWarning):
    """A float64 check that is approximate: beyond float64's tolerance, within
    float32's (no failure unless strict). ``assert_gradients``, ``assert_op`` and the
    pytest plugin's case items pass with this warning."""


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, whatever the exception: one an op raised may have a ``__str__`` that
    raises or returns no str, and saying so is the op's error, not an internal one of
    gradcheck's (``<unprintable: TypeError in __str__>``)."""
    try:
        text = str(exc)
    except Exception as inner:   # str() of a __str__ returning a non-str raises too
        return f"<unprintable: {type(inner).__name__} in __str__>"
    return "".join((text,))   # an exact str: a str subclass's own methods never run later


def describe_exception(exc: BaseException) -> str:
    """``TypeName: message``, as every message about an exception reads (see
    :func:`exception_text`)."""
    return f"{type(exc).__name__}: {exception_text(exc)}"
