"""A project's own settings for gradcheck: the ``[tool.gradcheck]`` table of the nearest
``pyproject.toml`` at or above a folder (a case file's, else the current one).

Settings live with the project, not in case files: a case file is data that anyone may
hand to a run, while the pyproject is the project's own word (it says, for one, which
installed modules a case's ``op`` may import: ``allow-op-modules``). ``gradcheck run``
takes its settings from the table found from the current folder (its keys, and how the
command line overrides them: :mod:`gradcheck.cli.settings`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import CaseFileError

__all__ = ["Settings", "SettingsError", "project_root", "pyproject_above", "root_settings",
           "settings", "string_list"]


class SettingsError(CaseFileError):
    """The pyproject.toml's ``[tool.gradcheck]`` table cannot be read or is invalid."""


@dataclass(frozen=True)
class Settings:
    """The ``[tool.gradcheck]`` table (``{}`` when there is none) and the pyproject.toml
    it was read from (None when no pyproject.toml was found)."""

    path: Path | None = None
    table: dict[str, Any] = field(default_factory=dict)


def project_root(start: str | Path | None = None) -> Path:
    """The project's root folder, resolved: the nearest folder at or above ``start`` (a
    folder; a file's folder when it is none; the current folder when None or "")
    holding a ``pyproject.toml`` or a ``.git``, else the current folder. The one
    definition: where an op module may be found, where a run may write, which
    pyproject's ``allow-op-modules`` count."""
    return _marked(start) or Path.cwd().resolve()


def _marked(start: str | Path | None) -> Path | None:
    """:func:`project_root` without its fallback: None where no folder is marked."""
    here = Path(start).resolve() if start else Path.cwd().resolve()
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").exists() or (folder / ".git").exists():
            return folder
    return None


def root_settings(start: str | Path | None = None) -> Settings:
    """The settings of the project root's own ``pyproject.toml`` (see
    :func:`project_root`; ``Settings()`` when the root holds none, or no folder above
    ``start`` is a project's): never those of a pyproject.toml nested nearer
    ``start``, nor of one above the root."""
    root = _marked(start)
    pyproject = root / "pyproject.toml" if root else None
    return settings(pyproject) if pyproject and pyproject.is_file() else Settings()


def pyproject_above(start: str | Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` (a folder; a file's folder when it is
    a file; the current folder when None) or in a folder above it."""
    here = Path(start).resolve() if start else Path.cwd()
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def settings(start: str | Path | None = None) -> Settings:
    """The ``[tool.gradcheck]`` settings of the project around ``start`` (see
    :func:`pyproject_above`). Read afresh on each call: it is one small file.

    Raises:
        SettingsError: the pyproject.toml cannot be read, is not valid TOML, or its
            ``tool.gradcheck`` is not a table.
    """
    path = pyproject_above(start)
    if path is None:
        return Settings()
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read: {exc}", file=str(path)) from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise SettingsError(f"invalid TOML: {exc}", file=str(path)) from None
    tool = data.get("tool", {})
    table = tool.get("gradcheck", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise SettingsError("[tool.gradcheck] must be a table", file=str(path))
    return Settings(path, table)


def string_list(found: Settings, key: str) -> tuple[str, ...]:
    """``[tool.gradcheck] key`` as a list of non-empty strings (``()`` when absent).

    Raises:
        SettingsError: the value is not a list of non-empty strings.
    """
    value = found.table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SettingsError(f"[tool.gradcheck] {key} must be a list of non-empty "
                            f"strings, got {value!r}", file=str(found.path))
    return tuple(value)
