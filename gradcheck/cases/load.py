"""Reading case files and folders of them into validated cases (:func:`read_file`,
:func:`read_paths`, :func:`load_cases`), and a case from a dict (:func:`case_from_dict`).

Every problem is a :class:`CaseFileError` naming the file, the case and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..base.errors import CaseFileError
from .files import Lines, read_text
from .model import Case
from .vocabulary import SUFFIXES
from .reader import DEFAULT_KEYS, CaseReader, unknown

__all__ = ["read_file", "read_paths", "read_entries", "case_files", "load_cases",
           "case_from_dict"]


def read_file(path: str | Path) -> tuple[list[Case], list[CaseFileError]]:
    """All valid cases of one file, and the errors of the invalid ones.

    A file that cannot be read or parsed at all gives no cases and one error.
    """
    return _split(_file_entries(Path(path)))


def _file_entries(path: Path) -> list[Case | CaseFileError]:
    """The cases of one file, each invalid one's error in its place (a file that
    cannot be read at all: its one error)."""
    file = str(path)
    try:
        data, lines = read_text(path)
    except CaseFileError as exc:
        return [exc]
    if not isinstance(data, dict):
        return [CaseFileError("the file must be a table with [[case]] entries", file=file)]
    def fail(message: str, key: str | None = None) -> CaseFileError:
        return CaseFileError(message, file=file, line=lines.top(key) if key else None)

    defaults = data.get("defaults", {})
    try:
        unknown(data, {"defaults", "case"}, "the file's top level", fail)
        if not isinstance(defaults, dict):
            raise fail("[defaults] must be a table", "defaults")
        unknown(defaults, DEFAULT_KEYS, "[defaults]",
                lambda message, key: fail(message, f"defaults.{key}"))
    except CaseFileError as exc:
        return [exc]
    raws = data.get("case", [])
    if not isinstance(raws, list):
        return [CaseFileError("case must be an array of tables ([[case]])", file=file)]
    entries: list[Case | CaseFileError] = []
    seen: dict[str, int | None] = {}
    for index, raw in enumerate(raws):
        reader = CaseReader(raw, index, file, lines, defaults)
        try:
            case = reader.read()
        except CaseFileError as exc:
            entries.append(exc)
            continue
        except (RecursionError, MemoryError) as exc:   # past the budgets: still the case's
            entries.append(reader.fail(f"the case is too large or nests too deeply to be "
                                       f"read ({type(exc).__name__})"))
            continue
        if case.name in seen:
            entries.append(reader.fail(f"duplicate case name (first defined on line "
                                       f"{seen[case.name]})", "name"))
            continue
        seen[case.name] = case.line
        entries.append(case)
        twin = reader.as_written(case)   # an expr_function's code, run as written
        if twin is not None:
            entries.append(twin)
    return entries


def _split(entries: list[Case | CaseFileError]) -> tuple[list[Case], list[CaseFileError]]:
    cases = [e for e in entries if not isinstance(e, CaseFileError)]
    return cases, [e for e in entries if isinstance(e, CaseFileError)]


# never case files, in a folder that is searched: the project's own settings, and what
# tools keep in folders of their own (a virtualenv, node_modules, .git, .github's YAML)
_NOT_SEARCHED = ("pyproject.toml",)
_FOLDERS_NOT_SEARCHED = ("node_modules", "site-packages", "__pycache__")


def _searched(relative: Path) -> bool:
    """Whether a file found in a searched folder (``relative`` to it) may be a case
    file: not ``pyproject.toml``, nor under a hidden folder (``.git``, ``.github``,
    ``.venv``) or a folder of installed packages; a file named on the command line is
    read whatever its folder."""
    folders = relative.parts[:-1]
    return (relative.name not in _NOT_SEARCHED
            and not any(f.startswith(".") or f in _FOLDERS_NOT_SEARCHED for f in folders))


def case_files(paths: Iterable[str | Path]) -> list[Path]:
    """The case files named by ``paths``: files as given, folders searched recursively
    (but for what is never a case file: :func:`_searched`).

    Raises:
        CaseFileError: a path does not exist or is not a case file.
    """
    if isinstance(paths, (str, Path)):   # one path, not a sequence of its characters
        paths = [paths]
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES
                              and f.is_file() and _searched(f.relative_to(p))))
        elif p.is_file():
            if p.suffix not in SUFFIXES:
                raise CaseFileError(f"not a case file (expected {', '.join(SUFFIXES)})",
                                    file=str(p))
            out.append(p)
        else:
            raise CaseFileError("no such file or folder", file=str(p))
    return list(dict.fromkeys(out))


def read_entries(paths: Iterable[str | Path]) -> list[Case | CaseFileError]:
    """Every case under ``paths`` in file order: the files as :func:`case_files` lists
    them, each file's cases as written, the error of an invalid case in that case's
    place and that of a file that cannot be read in the file's. A report keeps this
    order, so a broken case is found next to its neighbours."""
    return [entry for f in case_files(paths) for entry in _file_entries(f)]


def read_paths(paths: Iterable[str | Path]) -> tuple[list[Case], list[CaseFileError]]:
    """Cases and errors of every case file under ``paths`` (each list in file order;
    :func:`read_entries` keeps them in one)."""
    return _split(read_entries(paths))


def load_cases(path: str | Path) -> list[Case]:
    """The cases of a file or folder, strictly.

    Raises:
        CaseFileError: the first problem found.
    """
    cases, errors = read_paths([path])
    if errors:
        raise errors[0]
    return cases


def case_from_dict(raw: dict, *, defaults: dict | None = None,
                   file: str = "<memory>") -> Case:
    """One case from a table of case-file keys (what a ``[[case]]`` holds).

    Raises:
        CaseFileError: the table is not a valid case.
    """
    unknown(defaults or {}, DEFAULT_KEYS, "defaults",
            lambda message, key: CaseFileError(message, file=file))
    return CaseReader(raw, 0, file, Lines(), defaults or {}).read()
