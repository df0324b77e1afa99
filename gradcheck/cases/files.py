"""Reading a case file: TOML or YAML text to plain data, and where each case and each of
its keys starts in the text (tomllib reports no lines; YAML's nodes do), so that every
problem can name its line."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from ..process import budgets
from ..base.errors import CaseFileError
from .scan import check_depth, check_size, scan_toml, scan_yaml


def read_text(path: Path) -> tuple[Any, "Lines"]:
    """The data of the case file ``path`` and its line locator. The text passes the
    budgets' linear scans (:mod:`.scan`) before it is parsed.

    Raises:
        CaseFileError: the file cannot be read, is a link out of the project, is not
            valid TOML or YAML, or exceeds a limit of :mod:`gradcheck.process.budgets`.
    """
    file = str(path)
    try:
        text = _read(path, file)
        if path.suffix == ".toml":
            return _toml(text, file)
        return _yaml(text, file)
    except (RecursionError, MemoryError) as exc:   # past the scans: a safety net
        raise CaseFileError(f"cannot read: the file is too large or nests too deeply "
                            f"({type(exc).__name__})", file=file) from None


def _read(path: Path, file: str) -> str:
    """The text of ``path``: a regular file of the project, within the size limit."""
    outside = outside_project(path)
    if outside:
        raise CaseFileError(outside, file=file)
    try:
        # not blocking: a FIFO named as a case file is refused, not waited on
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise CaseFileError("cannot read: not a regular file", file=file)
            check_size(info.st_size, file)
            # as much as fstat says (a buffer of the limit would be 2 MiB for any
            # file), and what it grew by meanwhile, up to the limit
            raw = f.read(info.st_size + 1)
            if len(raw) > info.st_size:
                raw += f.read(max(0, budgets.MAX_FILE_BYTES + 1 - len(raw)))
        check_size(len(raw), file)
        # newlines as text mode reads them (\r\n and \r: \n)
        return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"cannot read: {exc}", file=file) from None


def project_folder(path: Path) -> Path:
    """The project of a case file named ``path``: the nearest folder above it, as
    given (links not followed), holding a ``pyproject.toml`` or ``.git``; else its
    folder."""
    here = Path(os.path.abspath(path)).parent
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").exists() or (folder / ".git").exists():
            return folder
    return here


def outside_project(path: Path) -> str:
    """Why ``path`` may not be read ("" when it may): it is reached through a symbolic
    link (the file's or a folder's) to a place outside its project. A case file's
    lines are quoted in errors, so a link must not turn a checkout's case file into
    any file of the machine; named on the command line or found in a folder alike."""
    try:
        root, target = project_folder(path).resolve(), path.resolve()
    except (OSError, RuntimeError):   # a loop of links
        return "cannot read: a loop of symbolic links"
    if target == root or target.is_relative_to(root):
        return ""
    return (f"refused: a symbolic link to {target}, outside the project {root}; case "
            "files are read only from inside their project (name the file itself to "
            "run it)")


def _toml(text: str, file: str) -> tuple[Any, "Lines"]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    scan_toml(text, file)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise CaseFileError(f"invalid TOML: {exc}", file=file,
                            line=int(m.group(1)) if m else None) from None
    except RecursionError:
        raise CaseFileError("invalid TOML: nested too deeply", file=file) from None
    check_depth(data, file)
    return data, TomlLines(text)


def _yaml(text: str, file: str) -> tuple[Any, "Lines"]:
    import yaml

    # libyaml's parser when PyYAML has it: the same results, ten times faster
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        scan_yaml(text, file, loader)
        parser = loader(text)
        try:
            node = parser.get_single_node()
            _yaml_check(node, file)
            data = parser.construct_document(node) if node is not None else None
        finally:
            parser.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        # libyaml stops at 1,000 levels of flow nesting, before the scan sees the 33rd
        why = ("nested too deeply" if "maximum nesting depth" in str(exc) else str(exc))
        raise CaseFileError(f"invalid YAML: {why}", file=file,
                            line=mark.line + 1 if mark else None) from None
    except RecursionError:
        raise CaseFileError("invalid YAML: nested too deeply", file=file) from None
    data = {} if data is None else data
    check_depth(data, file)
    return data, YamlLines(node)


def _yaml_check(root, file: str) -> None:
    """Reject a key repeated in one mapping (YAML silently keeps the last; TOML rejects
    it). Aliases, whose expansion can grow exponentially, are refused by the scan."""
    import yaml

    repeated = []
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            keys = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in keys:
                        repeated.append((k.start_mark.line + 1, k.value))
                    keys.add(k.value)
                stack.extend((k, v))
    if repeated:
        line, key = min(repeated)
        raise CaseFileError(f"invalid YAML: duplicate key {key!r}", file=file, line=line)


class Lines:
    """Where each case, and each key of a case, starts in the file."""

    def case(self, index: int) -> int | None:
        return None

    def key(self, index: int, dotted: str) -> int | None:
        return self.case(index)

    def text(self, index: int, dotted: str) -> int | None:
        """The line of the first character of the string value of ``dotted``."""
        return self.key(index, dotted)

    def top(self, dotted: str) -> int | None:
        """The line of a key outside the cases (``defaults.seed``, a top-level key)."""
        return None


class TomlLines(Lines):
    """Line numbers by scanning the TOML text (tomllib does not report them)."""

    _header = re.compile(r"^\s*\[\[\s*case\s*\]\]")
    _table = re.compile(r"^\s*\[\s*case\.([A-Za-z0-9_.\"-]+)\s*\]")
    _key = re.compile(r"^\s*([A-Za-z0-9_.\"-]+)\s*=")

    def __init__(self, text: str):
        self.cases: list[int] = []
        self.keys: list[dict[str, int]] = []
        self.tops: dict[str, int] = {}   # the keys outside the cases, dotted
        self.source = text.splitlines()
        prefix, outside = "", True
        for number, line in enumerate(self.source, 1):
            if self._header.match(line):
                self.cases.append(number)
                self.keys.append({})
                prefix, outside = "", False
            elif m := self._table.match(line):
                prefix = m.group(1).replace('"', "") + "."
                if self.keys:
                    self.keys[-1].setdefault(prefix[:-1], number)
            elif m := re.match(r"^\s*\[\[?\s*([A-Za-z0-9_.\"-]+)\s*\]", line):
                # some other table ([defaults], [[cases]]): not a case's
                prefix, outside = m.group(1).replace('"', "") + ".", True
                self.tops.setdefault(prefix[:-1], number)
            elif re.match(r"^\s*\[", line):
                prefix, outside = "\0", False
            elif (m := self._key.match(line)) and prefix != "\0":
                dotted = prefix + m.group(1).replace('"', "")
                keys = self.tops if outside else self.keys[-1] if self.keys else {}
                parts = dotted.split(".")
                for i in range(1, len(parts) + 1):
                    keys.setdefault(".".join(parts[:i]), number)

    def case(self, index: int) -> int | None:
        return self.cases[index] if index < len(self.cases) else None

    def key(self, index: int, dotted: str) -> int | None:
        keys = self.keys[index] if index < len(self.keys) else {}
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in keys:
                return keys[".".join(parts[:i])]
        return self.case(index)

    def top(self, dotted: str) -> int | None:
        return self.tops.get(dotted)

    def text(self, index: int, dotted: str) -> int | None:
        line = self.key(index, dotted)
        if line is not None:  # a multi-line string drops the newline after its opening
            src = self.source[line - 1].rstrip()
            if any(src.endswith(q) and src.count(q) == 1 for q in ('"""', "'''")):
                return line + 1
        return line


class YamlLines(Lines):
    def __init__(self, root):
        self.cases = []
        self.root = root
        import yaml

        if isinstance(root, yaml.MappingNode):
            for k, v in root.value:
                if k.value == "case" and isinstance(v, yaml.SequenceNode):
                    self.cases = list(v.value)

    def case(self, index: int) -> int | None:
        return self.cases[index].start_mark.line + 1 if index < len(self.cases) else None

    def key(self, index: int, dotted: str) -> int | None:
        return self._find(index, dotted)[0]

    def text(self, index: int, dotted: str) -> int | None:
        line, value = self._find(index, dotted)
        if value is None:
            return line
        # a block scalar (| or >) starts on the line after its indicator
        return value.start_mark.line + 1 + (getattr(value, "style", None) in ("|", ">"))

    def top(self, dotted: str) -> int | None:
        return self._find(None, dotted)[0]

    def _find(self, index: int | None, dotted: str):
        """(line of the deepest key of ``dotted`` found, its value node if all found),
        in case ``index`` (None: from the top of the file)."""
        import yaml

        if index is None:
            node, best = self.root, None
        elif index >= len(self.cases):
            return None, None
        else:
            node, best = self.cases[index], self.case(index)
        for part in dotted.split("."):
            if not isinstance(node, yaml.MappingNode):
                return best, None
            for k, v in node.value:
                if k.value == part:
                    node, best = v, k.start_mark.line + 1
                    break
            else:
                return best, None
        return best, node
