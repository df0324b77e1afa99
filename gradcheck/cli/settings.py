"""``gradcheck run``'s options: the command line over the ``[tool.gradcheck]`` table of
the nearest pyproject.toml (found from the current folder) over the defaults.

The parser gives every option that the table may set a default of None ("not given"),
so that :func:`merge` can tell an option the command line gave from one it left to the
project. Keys are kebab-case, as pytest's and ruff's are. The table's ``paths`` and
``reports`` are relative to the pyproject.toml's folder (running from a subfolder finds
the same files); the command line's are relative to the current folder. What only a CI
decides (``--exit-zero``, ``-k``, ``--device``) is no key: it belongs on that CI's
command line, not in every run of the project.

An unknown key or a value of the wrong type is a :class:`~gradcheck.project.settings.
SettingsError` naming the pyproject.toml, the key and what it expects (exit 2); so is an
``allow-op-modules`` pattern that would admit the standard library
(:mod:`gradcheck.project.op_patterns`) and a configured path that resolves outside the project
(:mod:`gradcheck.project.confine`; report paths are judged with the command line's, in
:func:`gradcheck.cli.output.report_problem`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..base.spelling import did_you_mean
from ..cases.vocabulary import MAX_POINTS
from ..process import limits
from ..process.timelimit import DEFAULT_TIMEOUT
from ..project.settings import Settings, SettingsError

__all__ = ["Report", "KEYS", "merge", "parse_report", "DEFAULTS"]

# What an option left to neither the command line nor the table is.
DEFAULTS = {"timeout": DEFAULT_TIMEOUT, "jobs": 1, "color": "auto", "step_summary": True,
            "format": "text", "strict_shapes": False, "strict": False}

COLORS = ("auto", "always", "never")


@dataclass(frozen=True)
class Report:
    """One report file: its format, its path, and where it was asked for (``--report``,
    ``--output``, or the pyproject's ``reports``), for the messages about it."""

    fmt: str
    path: str
    origin: str


def parse_report(text: str) -> tuple[str, str]:
    """``"FMT:PATH"`` as (FMT, PATH).

    Raises:
        ValueError: no colon, an unknown FMT or an empty PATH (the message says which).
    """
    from ..report import FORMATS

    fmt, colon, path = str(text).partition(":")
    if not colon or fmt not in FORMATS:
        raise ValueError(f"{text!r} is not FMT:PATH with FMT one of {', '.join(FORMATS)}")
    if not path:
        raise ValueError(f"{text!r} names no file after {fmt}:")
    return fmt, path


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def _one_of(names: Callable[[], tuple[str, ...]]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and value in names()


def _every(names: Callable[[], tuple[str, ...]]) -> Callable[[Any], bool]:
    return lambda value: _strings(value) and all(v in names() for v in value)


def _dtypes() -> tuple[str, ...]:
    from ..base.dtypes import NAMES

    return NAMES


def _checks() -> tuple[str, ...]:
    from ..cases.vocabulary import SKIPPABLE

    return tuple(f"op.{c}" for c in SKIPPABLE)


def _witnesses() -> tuple[str, ...]:
    from ..witnesses.registry import names

    return names()


def _formats() -> tuple[str, ...]:
    from ..report import FORMATS

    return tuple(FORMATS)


def _reports(value) -> bool:
    try:
        return _strings(value) and all(parse_report(v) for v in value)
    except ValueError:
        return False


@dataclass(frozen=True)
class Key:
    """One key of the table: the option it sets (None: read elsewhere, only checked
    here), what it expects (for the message) and the check."""

    attr: str | None
    expected: str
    check: Callable[[Any], bool]
    names: Callable[[], tuple[str, ...]] | None = None   # the values it may take

    def expects(self) -> str:
        return self.expected + (f" ({', '.join(self.names())})" if self.names else "")


KEYS: dict[str, Key] = {
    "paths": Key("paths", "a list of case files or folders (strings)", _strings),
    "dtype": Key("dtype", "a dtype name", _one_of(_dtypes), _dtypes),
    "seed": Key("seed", "an integer", _int),
    "points": Key("points", f"an integer from 1 to {MAX_POINTS}",
                  lambda v: _int(v) and 1 <= v <= MAX_POINTS),
    "extreme-points": Key("extreme_points", f"an integer from 0 to {MAX_POINTS}",
                          lambda v: _int(v) and 0 <= v <= MAX_POINTS),
    "timeout": Key("timeout", f"a number of seconds above 0 and at most "
                   f"{limits.MAX_TIMEOUT:,.0f} (one day)",
                   lambda v: not limits.timeout_problem(v)),
    "jobs": Key("jobs", f"an integer from 0 (one per CPU core) to {limits.MAX_JOBS}",
                lambda v: not limits.jobs_problem(v)),
    "witnesses": Key("witness", "a list of witness names", _every(_witnesses), _witnesses),
    "reports": Key("reports", 'a list of "FMT:PATH" strings, FMT a report format',
                   _reports, _formats),
    "strict-shapes": Key("strict_shapes", "true or false", lambda v: isinstance(v, bool)),
    "strict": Key("strict", "true or false", lambda v: isinstance(v, bool)),
    "skip-checks": Key("skip_check", "a list of op check names (\"op.jvp\")",
                       _every(_checks), _checks),
    # read by the op loader (gradcheck.checking.opcheck.loader) from the case file's pyproject
    "allow-op-modules": Key(None, "a list of module name patterns (strings)", _strings),
    "max-memory": Key("max_memory", 'a size from 1M to 1P, such as "4G" or "512M", or '
                      'a number of bytes', lambda v: not limits.max_memory_problem(v)),
    "step-summary": Key("step_summary", "true or false", lambda v: isinstance(v, bool)),
    "color": Key("color", "a colour mode", _one_of(lambda: COLORS), lambda: COLORS),
}


def check(found: Settings) -> None:
    """Raise :class:`SettingsError` for an unknown key or a value of the wrong type in
    ``found``'s table."""
    for key, value in found.table.items():
        spec = KEYS.get(key)
        if spec is None:
            hint = did_you_mean(str(key), KEYS)
            raise SettingsError(f"[tool.gradcheck] has no key {key!r}{hint} (known keys: "
                                f"{', '.join(KEYS)})", file=str(found.path),
                                line=_key_line(found, str(key)))
        if not spec.check(value):
            raise SettingsError(f"[tool.gradcheck] {key} must be {spec.expects()}, got "
                                f"{value!r}", file=str(found.path),
                                line=_key_line(found, str(key)))
    _vet_patterns(found)


def _key_line(found: Settings, key: str) -> int | None:
    """The line of ``key`` under ``[tool.gradcheck]`` in ``found``'s pyproject.toml
    (tomllib reports no lines; None where the scan does not find it: a key written
    as ``tool.gradcheck.seed`` under ``[tool]``, an inline table)."""
    import re

    try:
        text = Path(found.path).read_text(encoding="utf-8")
    except (OSError, TypeError, UnicodeDecodeError):
        return None
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*\[", line):
            inside = re.match(r"^\s*\[\s*tool\s*\.\s*gradcheck\s*\]", line) is not None
        elif inside and re.match(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return number
    return None


def _vet_patterns(found: Settings) -> None:
    """Raise :class:`SettingsError` for an ``allow-op-modules`` pattern that would admit
    the standard library (see :mod:`gradcheck.project.op_patterns`)."""
    from ..project.op_patterns import problem

    for pattern in found.table.get("allow-op-modules", []):
        why = problem(pattern)
        if why:
            raise SettingsError(f"[tool.gradcheck] allow-op-modules: {why}",
                                file=str(found.path))


def _configured_paths(found: Settings) -> list[str]:
    """The table's ``paths``, as the current folder reaches them (see :func:`_relative`).

    Raises:
        SettingsError: one resolves (links followed) outside the project root, or does
            not exist. A path on the command line is the user's to choose; one of the
            table is the project's, which a pull request may change, so ``/``,
            ``/usr`` or ``../other`` would run other projects' files and op modules.
    """
    from ..project.confine import outside
    from ..project.settings import project_root

    paths = [_relative(found, p) for p in found.table.get("paths", [])]
    root = project_root()
    for path in paths:
        problem = outside(path, root)
        if problem:
            raise SettingsError(f"[tool.gradcheck] paths: {problem}: the configured "
                                "paths stay in the project, whose pyproject a pull request "
                                "may change (a PATH on the command line may lie anywhere)",
                                file=str(found.path))
    missing = [p for p in paths if not Path(p).exists()]
    if missing:   # said as the table's, not as a path the user typed
        raise SettingsError(f"[tool.gradcheck] paths: {missing[0]} does not exist "
                            f"(paths are relative to {found.path.parent})",
                            file=str(found.path))
    return paths


def _relative(found: Settings, given: str) -> str:
    """A path of the table, relative to its pyproject.toml's folder, as the current
    folder reaches it (relative when it is under the current folder, else absolute)."""
    path = Path(given)
    if path.is_absolute() or found.path is None:
        return given
    joined = found.path.parent / path
    try:
        return str(joined.relative_to(Path.cwd()))
    except ValueError:
        return str(joined)


def merge(args, found: Settings) -> None:
    """Fill in ``args``' options the command line did not give (None) from ``found``'s
    table, then from :data:`DEFAULTS`; ``args.reports`` becomes the report files
    (:class:`Report`): the command line's (``--output``, ``--report``) when it gives any,
    else the table's.

    Raises:
        SettingsError: see :func:`check`.
    """
    check(found)
    table = found.table
    for key, spec in KEYS.items():
        if spec.attr is None or key not in table or spec.attr in ("paths", "reports"):
            continue
        if getattr(args, spec.attr) is None:
            value = table[key]
            if spec.attr == "max_memory" and isinstance(value, str):
                from ..process.budgets import parse_size

                value = parse_size(value)
            setattr(args, spec.attr, value)
    if not args.paths:
        args.paths = _configured_paths(found)
    given = [Report(args.format or "text", args.output, "--output")] if args.output else []
    given += [Report(fmt, path, "--report") for fmt, path in args.report or ()]
    configured = [Report(*parse_report(r), f"{found.path}: [tool.gradcheck] reports")
                  for r in table.get("reports", [])]
    args.reports = given or [Report(r.fmt, _relative(found, r.path), r.origin)
                             for r in configured]
    for attr, value in DEFAULTS.items():
        if getattr(args, attr) is None:
            setattr(args, attr, value)
