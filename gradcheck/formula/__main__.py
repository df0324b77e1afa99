"""``python -m gradcheck.formula [--markdown]``: the expression language, one line per row
of the table (as ``gradcheck functions`` prints it; see :mod:`.docs`)."""

from __future__ import annotations

import sys

from .docs import markdown, text


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    sys.stdout.write(markdown() if "--markdown" in argv else text())


if __name__ == "__main__":
    main()
