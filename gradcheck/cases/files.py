"""Reading a case file: TOML or YAML text to plain data, and where each case and each of
its keys starts in the text (tomllib reports no lines; YAML's nodes do), so that every
problem can name its line."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from ..errors import CaseFileError


def read_text(path: Path) -> tuple[Any, "Lines"]:
    """The data of the case file ``path`` and its line locator.

    Raises:
        CaseFileError: the file cannot be read or is not valid TOML or YAML.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"cannot read: {exc}", file=str(path)) from None
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise CaseFileError(f"invalid TOML: {exc}", file=str(path),
                                line=int(m.group(1)) if m else None) from None
        except RecursionError:
            raise CaseFileError("invalid TOML: nested too deeply", file=str(path)) from None
        return data, TomlLines(text)
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        _yaml_check(text, node, str(path))
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise CaseFileError(f"invalid YAML: {exc}", file=str(path),
                            line=mark.line + 1 if mark else None) from None
    except RecursionError:
        raise CaseFileError("invalid YAML: nested too deeply", file=str(path)) from None
    return ({} if data is None else data), YamlLines(node)


def _yaml_check(text: str, root, file: str) -> None:
    """Reject what YAML allows but a case file must not hold: aliases (their expansion
    can grow exponentially) and a key repeated in one mapping (YAML silently keeps the
    last; TOML rejects it)."""
    import yaml

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise CaseFileError("invalid YAML: aliases (*name) are not allowed in case files",
                                file=file, line=event.start_mark.line + 1)
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


class TomlLines(Lines):
    """Line numbers by scanning the TOML text (tomllib does not report them)."""

    _header = re.compile(r"^\s*\[\[\s*case\s*\]\]")
    _table = re.compile(r"^\s*\[\s*case\.([A-Za-z0-9_.\"-]+)\s*\]")
    _key = re.compile(r"^\s*([A-Za-z0-9_.\"-]+)\s*=")

    def __init__(self, text: str):
        self.cases: list[int] = []
        self.keys: list[dict[str, int]] = []
        self.source = text.splitlines()
        prefix = ""
        for number, line in enumerate(self.source, 1):
            if self._header.match(line):
                self.cases.append(number)
                self.keys.append({})
                prefix = ""
            elif m := self._table.match(line):
                prefix = m.group(1).replace('"', "") + "."
                if self.keys:
                    self.keys[-1].setdefault(prefix[:-1], number)
            elif re.match(r"^\s*\[", line):
                prefix = "\0"  # some other table: not a case's
            elif (m := self._key.match(line)) and self.keys and prefix != "\0":
                dotted = prefix + m.group(1).replace('"', "")
                parts = dotted.split(".")
                for i in range(1, len(parts) + 1):
                    self.keys[-1].setdefault(".".join(parts[:i]), number)

    def case(self, index: int) -> int | None:
        return self.cases[index] if index < len(self.cases) else None

    def key(self, index: int, dotted: str) -> int | None:
        keys = self.keys[index] if index < len(self.keys) else {}
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in keys:
                return keys[".".join(parts[:i])]
        return self.case(index)

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

    def _find(self, index: int, dotted: str):
        """(line of the deepest key of ``dotted`` found, its value node if all found)."""
        import yaml

        if index >= len(self.cases):
            return None, None
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
