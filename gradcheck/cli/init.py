"""``gradcheck init MODULE:CLASS``: a starter case file for a custom op, a pytest test
that runs it and the CI workflow, written into ``--dir`` (texts: ``cli/starter.py``;
the op's signature read from its source, never imported: ``project/opsource.py``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .exit_codes import ExitCode

#: where each file goes, below --dir
CASES, TESTS, WORKFLOW_FILE = "cases", "tests", ".github/workflows/gradcheck.yml"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "init", help="write a starter case, test and CI workflow for a custom op",
        description="Read the op's forward signature from its source (the module is "
                    "not imported) and write, below --dir: cases/NAME.toml (its inputs, "
                    "the reference left to fill in), tests/test_NAME_gradients.py (the "
                    "pytest plugin's marker on that file) and "
                    ".github/workflows/gradcheck.yml (docs/ci.md's CI recipe). Existing "
                    "files are left alone unless --force.")
    p.add_argument("op", metavar="MODULE:CLASS",
                   help="the op as a case file names it (mymodule:MyOp, pkg.ops:MyOp) or "
                        "by its file (path/to/mymodule.py:MyOp); a plain function works "
                        "too")
    p.add_argument("--dir", default=".", metavar="DIR",
                   help="the folder the files are written below (default: the current "
                        "one; the project's root, where the workflow belongs)")
    p.add_argument("--force", action="store_true", help="replace files that exist")


def _planned(args) -> tuple[dict[Path, str], str]:
    """Each file to write and its text, and the command to run next. Raises
    OpSourceError."""
    from ..project.opsource import read_op
    from .starter import WORKFLOW, case_name, case_text, test_text

    root = Path(args.dir)
    name = case_name(args.op.rpartition(":")[2])
    stem = name.replace("-", "_")
    case_file = root / CASES / f"{name}.toml"
    test_file = root / TESTS / f"test_{stem}_gradients.py"
    op = read_op(args.op, case_file)
    run = f"gradcheck run {_shown(case_file)}"
    shown_module = os.path.relpath(op.file, case_file.parent).replace(os.sep, "/")
    relative = os.path.relpath(case_file, test_file.parent).replace(os.sep, "/")
    return {case_file: case_text(op, name, shown_module, run),
            test_file: test_text(op, name, relative),
            root / WORKFLOW_FILE: WORKFLOW}, run


def _shown(path: Path) -> str:
    """``path`` relative to the current folder where it lies below it."""
    here = Path.cwd().resolve()
    full = path.resolve()
    return str(full.relative_to(here)) if full.is_relative_to(here) else str(full)


def command(args) -> int:
    from ..base.io import write_atomic
    from ..formula.suggestions import suggest
    from ..project.opsource import OpSourceError
    from ..report.text import printable   # names and paths come from the user's files

    try:
        files, run = _planned(args)
    except (OpSourceError, SyntaxError, UnicodeDecodeError, OSError) as exc:
        known = getattr(exc, "known", ())
        hint = (suggest(exc.name, known, suffix="") or f"; it defines {', '.join(known)}"
                if known else "")
        print(f"gradcheck: error: {printable(exc)}{hint}", file=sys.stderr)
        return ExitCode.USAGE
    # a file that already holds the same text (the workflow, for a second op) is kept
    todo = {p: t for p, t in files.items()
            if not (p.is_file() and p.read_text(encoding="utf-8", errors="replace") == t)}
    existing = [p for p in todo if p.exists()]
    if existing and not args.force:
        names = ", ".join(printable(_shown(p)) for p in existing)
        print(f"gradcheck: error: {names} already exist{'s' if len(existing) == 1 else ''}"
              "; --force replaces them", file=sys.stderr)
        return ExitCode.USAGE
    for path, text in todo.items():
        write_atomic(path, text)
    for path in files:
        print(f"{'wrote' if path in todo else 'kept '} {printable(_shown(path))}")
    print("next: fill in the case file's TODO lines (its reference, the inputs' shapes), "
          "then run")
    print(f"    {printable(run)}")
    print(f"(and replace OWNER in {printable(_shown(Path(args.dir) / WORKFLOW_FILE))} "
          "with the account that hosts gradcheck)")
    return ExitCode.OK
