"""Case files (TOML, or YAML with the same keys) -> validated :class:`Case` objects.

Every problem is a :class:`CaseFileError` naming the file, the case and the line.
The contract is section 3 of DESIGN.md; the README documents the keys.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from . import dtypes
from .errors import CaseFileError
from .expr import CONSTANTS, MAX_ELEMENTS, parse
from .rules import FUNCTIONS
from .tree import Node, differentiable_names

DTYPES = dtypes.NAMES     # float64, float32, float16, bfloat16
WITNESSES = ("symbolic", "engine", "torch", "numeric", "op")
FORMULA_WITNESSES = ("symbolic", "engine", "torch", "numeric")   # default for expr cases
DEVICES = ("cpu", "cuda")
DOMAINS = ("real", "positive", "nonnegative", "nonzero", "unit")
GRADIENTS = ("scalar", "ones", "random")
SUFFIXES = (".toml", ".yaml", ".yml")
MAX_POINTS = 1000
EXTREME_POINTS = 2   # points at large and small magnitudes, after the bulk (sampling.py)

_DEFAULT_KEYS = {"dtype", "points", "extreme_points", "seed", "atol", "rtol", "witnesses"}
_OP_KEYS = {"op", "reference", "args", "order", "device", "nondet_tol", "strict_shapes"}
_CASE_KEYS = _DEFAULT_KEYS | _OP_KEYS | {"name", "description", "expr", "inputs", "let",
                                         "gradient",
                              "retain_grad", "expect"}
_INPUT_KEYS = {"shape", "domain", "value", "requires_grad"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class InputSpec:
    """One declared input: its shape, where it is sampled, and an optional pinned value."""

    name: str
    shape: tuple[int, ...]
    domain: str | tuple[float, float] = "real"
    value: np.ndarray | None = field(default=None, compare=False)
    requires_grad: bool = True


@dataclass(frozen=True, eq=False)
class Case:
    """One validated case. ``output`` and the ``lets`` are nodes of one formula DAG."""

    name: str
    file: str
    line: int | None
    expr: str
    inputs: tuple[InputSpec, ...]
    lets: tuple[tuple[str, str], ...]          # (name, expression text), in order
    nodes: dict[str, Node]                     # input and let names -> their nodes
    output: Node
    gradient: str | np.ndarray = "scalar"
    retain_grad: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("float64",)
    points: int = 3
    extreme_points: int = EXTREME_POINTS
    seed: int = 0
    atol: float | None = None
    rtol: float | None = None
    witnesses: tuple[str, ...] = WITNESSES
    expect: str = "pass"
    description: str = ""
    op: str | None = None                      # "module:attr" of a custom op
    outputs: tuple[Node, ...] = ()             # the reference, one node per op output
    args: tuple = ()                           # extra positional arguments of the op
    kwargs: dict = field(default_factory=dict)  # keyword arguments of the op
    order: int = 1
    device: str = "cpu"
    nondet_tol: float = 0.0
    # op.shapes fails what autograd accepts but changes (an expandable gradient it sums
    # back, trailing Nones, a gradient for an input that needs none, a cast dtype)
    strict_shapes: bool = False

    @property
    def input(self) -> dict[str, InputSpec]:
        return {spec.name: spec for spec in self.inputs}

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


# --------------------------------------------------------------------------- reading

def _read(path: Path) -> tuple[Any, "_Lines"]:
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
        return data, _TomlLines(text)
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
    return ({} if data is None else data), _YamlLines(node)


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


class _Lines:
    """Where each case, and each key of a case, starts in the file."""

    def case(self, index: int) -> int | None:
        return None

    def key(self, index: int, dotted: str) -> int | None:
        return self.case(index)

    def text(self, index: int, dotted: str) -> int | None:
        """The line of the first character of the string value of ``dotted``."""
        return self.key(index, dotted)


class _TomlLines(_Lines):
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


class _YamlLines(_Lines):
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


# --------------------------------------------------------------------------- validation

class _CaseReader:
    """Validates one case's raw table. ``fail`` raises with file, case and line."""

    def __init__(self, raw: dict, index: int, file: str, lines: _Lines, defaults: dict):
        self.raw, self.index, self.file, self.lines = raw, index, file, lines
        self.defaults = defaults
        self.name: str | None = None

    def fail(self, message: str, key: str | None = None) -> CaseFileError:
        line = self.lines.key(self.index, key) if key else self.lines.case(self.index)
        return CaseFileError(message, file=self.file, case=self.name, line=line)

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, self.defaults.get(key, default))

    def read(self) -> Case:
        raw = self.raw
        if not isinstance(raw, dict):
            raise self.fail("each [[case]] must be a table")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self.fail("a case needs a name (a non-empty string)", "name")
        self.name = name
        _unknown(raw, _CASE_KEYS, "case", self.fail)
        inputs = self.read_inputs()
        nodes: dict[str, Node] = {spec.name: Node("input", shape=spec.shape, name=spec.name)
                                  for spec in inputs}
        lets = self.read_lets(nodes)
        op = self.read_op()
        key = "reference" if op else "expr"
        if op and "expr" in raw:
            raise self.fail("a case with op checks it against reference; expr is for "
                            "formula cases", "expr")
        if key not in raw:
            raise self.fail("a case needs expr, the formula to check" if not op else
                            "a case with op needs reference, the formula the op claims "
                            "to compute", key)
        texts = raw[key] if isinstance(raw[key], list) and op else [raw[key]]
        if not texts:
            raise self.fail("reference must name at least one formula", key)
        outputs = tuple(parse(t, nodes, file=self.file, case=name,
                              line=self.lines.text(self.index, key)) for t in texts)
        output = outputs[0]
        retain = self.read_retain(nodes)
        reach = differentiable_names(output)
        if not any(s.requires_grad and s.name in reach for s in inputs):
            raise self.fail("no input that requires grad reaches expr through a "
                            "differentiable path, so there is no gradient to check", "expr")
        for let in retain:
            if let not in reach:
                raise self.fail(f"retain_grad names {let!r}, but expr does not use it "
                                "through a differentiable path", "retain_grad")
            if not any(s.requires_grad and s.name in differentiable_names(nodes[let])
                       for s in inputs):  # PyTorch: can't retain_grad without requires_grad
                raise self.fail(f"retain_grad names {let!r}, but no input that requires "
                                "grad reaches it, so it has no grad to retain",
                                "retain_grad")
        if op and len(outputs) > 1 and not isinstance(raw.get("gradient", "random"), str):
            raise self.fail("an op with several outputs takes gradient = \"random\" or "
                            "\"ones\"", "gradient")
        args, kwargs = self.read_args() if op else ((), {})
        return Case(
            name=name, file=self.file, line=self.lines.case(self.index),
            expr=" ; ".join(map(str, texts)),
            inputs=inputs, lets=lets, nodes=nodes, output=output,
            gradient=self.read_gradient(output), retain_grad=retain,
            dtypes=self.read_dtypes(), points=self.read_int("points", 3, 1, MAX_POINTS),
            extreme_points=self.read_int("extreme_points", EXTREME_POINTS, 0, MAX_POINTS),
            seed=self.read_int("seed", 0, 0, 2**63 - 1), atol=self.read_tol("atol"),
            rtol=self.read_tol("rtol"), witnesses=self.read_witnesses(bool(op)),
            expect=self.read_expect(), description=str(raw.get("description", "")),
            op=op, outputs=outputs, args=args, kwargs=kwargs,
            order=self.read_int("order", 1, 1, 2), device=self.read_device(),
            nondet_tol=self.read_tol("nondet_tol") or 0.0,
            strict_shapes=self.read_bool("strict_shapes", False),
        )

    def read_op(self) -> str | None:
        op = self.raw.get("op")
        if op is None:
            present = sorted(k for k in _OP_KEYS & set(self.raw) if k != "device")
            if present:
                raise self.fail(f"{', '.join(present)} only apply to a case with op",
                                present[0])
            return None
        if not isinstance(op, str) or not re.match(
                r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$", op):
            raise self.fail(f"op must be \"package.module:Name\", got {op!r}", "op")
        return op

    def read_args(self) -> tuple[tuple, dict]:
        raw = self.raw.get("args", [])
        if isinstance(raw, list):
            return tuple(raw), {}
        if isinstance(raw, dict):
            return (), dict(raw)
        raise self.fail("args must be a list (positional, after the inputs) or a table "
                        "(keywords)", "args")

    def read_device(self) -> str:
        device = self.raw.get("device", "cpu")
        if device not in DEVICES:
            raise self.fail(f"device must be one of {', '.join(DEVICES)}, got {device!r}",
                            "device")
        return device

    def read_inputs(self) -> tuple[InputSpec, ...]:
        raw = self.raw.get("inputs")
        if not isinstance(raw, dict) or not raw:
            raise self.fail("a case needs inputs, e.g. inputs.x = { shape = [3] }", "inputs")
        return tuple(self.read_input(n, s) for n, s in raw.items())

    def read_input(self, name: str, spec: Any) -> InputSpec:
        key = f"inputs.{name}"
        self.check_name(name, key)
        if isinstance(spec, list):
            spec = {"shape": spec}
        if not isinstance(spec, dict):
            raise self.fail(f"input {name!r} must be a table such as {{ shape = [3] }}", key)
        _unknown(spec, _INPUT_KEYS, f"input {name!r}",
                 lambda m, k: self.fail(m, f"{key}.{k}"))
        shape = spec.get("shape", [])
        if not isinstance(shape, list) or not all(
                type(n) is int and 0 < n for n in shape) or len(shape) > 8:
            raise self.fail(f"input {name!r}: shape must be a list of at most 8 positive "
                            f"integers, got {shape!r}", key)
        if math.prod(shape) > MAX_ELEMENTS:
            raise self.fail(f"input {name!r} has {math.prod(shape)} elements; the limit is "
                            f"{MAX_ELEMENTS}", key)
        domain = self.read_domain(name, spec.get("domain", "real"), key)
        requires_grad = spec.get("requires_grad", True)
        if not isinstance(requires_grad, bool):
            raise self.fail(f"input {name!r}: requires_grad must be true or false", key)
        value = None
        if "value" in spec:
            value = _numbers(spec["value"], lambda m: self.fail(f"input {name!r}: {m}", key))
            if value.shape != tuple(shape):
                if value.ndim != 0:
                    raise self.fail(f"input {name!r}: value has shape {list(value.shape)} "
                                    f"but the input's shape is {shape}", key)
                value = np.full(shape, float(value))
            if not np.all(in_domain(value, domain)):
                raise self.fail(f"input {name!r}: value lies outside its domain {domain!r}",
                                key)
        return InputSpec(name, tuple(shape), domain, value, requires_grad)

    def read_domain(self, name: str, domain: Any, key: str) -> str | tuple[float, float]:
        if isinstance(domain, str):
            if domain not in DOMAINS:
                raise self.fail(f"input {name!r}: unknown domain {domain!r}; use one of "
                                f"{', '.join(DOMAINS)} or [lo, hi]", key)
            return domain
        if (isinstance(domain, list) and len(domain) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v) and abs(v) <= 1e6 for v in domain)
                and domain[0] < domain[1]):
            return (float(domain[0]), float(domain[1]))
        raise self.fail(f"input {name!r}: a domain is a name or [lo, hi] with finite "
                        f"lo < hi, got {domain!r}", key)

    def check_name(self, name: str, key: str) -> None:
        if not isinstance(name, str) or not _IDENT.match(name):
            raise self.fail(f"{name!r} is not a valid name", key)
        if name in FUNCTIONS or name in CONSTANTS:
            raise self.fail(f"{name!r} is a built-in name and cannot be redefined", key)

    def read_lets(self, nodes: dict[str, Node]) -> tuple[tuple[str, str], ...]:
        raw = self.raw.get("let", {})
        if not isinstance(raw, dict):
            raise self.fail("let must be a table of name = \"expression\"", "let")
        out = []
        for name, text in raw.items():
            key = f"let.{name}"
            self.check_name(name, key)
            if name in nodes:
                raise self.fail(f"let name {name!r} is already an input", key)
            body = parse(text, nodes, file=self.file, case=self.name,
                         line=self.lines.text(self.index, key))
            nodes[name] = Node("let", (body,), body.shape, name=name, const=body.const)
            out.append((name, text))
        return tuple(out)

    def read_retain(self, nodes: dict[str, Node]) -> tuple[str, ...]:
        raw = self.raw.get("retain_grad", [])
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list):
            raise self.fail("retain_grad must be a list of let names", "retain_grad")
        for name in raw:
            if not isinstance(name, str) or nodes.get(name) is None or \
                    nodes[name].op != "let":
                raise self.fail(f"retain_grad names {name!r}, which is not a let name",
                                "retain_grad")
        if len(set(raw)) != len(raw):
            raise self.fail("retain_grad repeats a name", "retain_grad")
        return tuple(raw)

    def read_gradient(self, output: Node) -> str | np.ndarray:
        raw = self.raw.get("gradient", "scalar" if output.shape == () else "random")
        if isinstance(raw, str):
            if raw not in GRADIENTS:
                raise self.fail(f"gradient must be one of {', '.join(GRADIENTS)} or numbers, "
                                f"got {raw!r}", "gradient")
            if raw == "scalar" and output.shape != ():
                raise self.fail(f"gradient = \"scalar\" needs a scalar output, but expr has "
                                f"shape {list(output.shape)}; use \"random\", \"ones\" or "
                                "explicit numbers", "gradient")
            return raw
        value = _numbers(raw, lambda m: self.fail(f"gradient: {m}", "gradient"))
        if value.shape != output.shape:
            raise self.fail(f"gradient has shape {list(value.shape)} but expr has shape "
                            f"{list(output.shape)}", "gradient")
        return value

    def read_dtypes(self) -> tuple[str, ...]:
        raw = self.get("dtype", "float64")
        raw = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw, list) or not raw or any(d not in DTYPES for d in raw):
            raise self.fail(f"dtype must be one of {', '.join(DTYPES)} or a list of them, "
                            f"got {raw!r}", "dtype")
        return tuple(dict.fromkeys(raw))

    def read_int(self, key: str, default: int, lo: int, hi: int) -> int:
        value = self.get(key, default)
        if type(value) is not int or not lo <= value <= hi:
            raise self.fail(f"{key} must be an integer from {lo} to {hi}, got {value!r}", key)
        return value

    def read_bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{key} must be true or false, got {value!r}", key)
        return value

    def read_tol(self, key: str) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                0 <= value < math.inf):
            raise self.fail(f"{key} must be a non-negative number, got {value!r}", key)
        return float(value)

    def read_witnesses(self, op: bool = False) -> tuple[str, ...]:
        raw = self.get("witnesses", ["op"] if op else list(FORMULA_WITNESSES))
        raw = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw, list) or any(w not in WITNESSES for w in raw):
            raise self.fail(f"witnesses must be a list drawn from {', '.join(WITNESSES)}, "
                            f"got {raw!r}", "witnesses")
        if "op" in raw and not op:
            raise self.fail("the op witness needs op = \"module:Name\"", "witnesses")
        return tuple(w for w in WITNESSES if w in raw or w == "symbolic")

    def read_expect(self) -> str:
        value = self.raw.get("expect", "pass")
        if value not in ("pass", "fail"):
            raise self.fail(f"expect must be \"pass\" or \"fail\", got {value!r}", "expect")
        return value


def _unknown(raw: dict, allowed: set[str], what: str, fail) -> None:
    """``fail(message, key)`` for unknown keys; ``key`` is the first, to locate the line."""
    extra = sorted(set(raw) - allowed, key=str)
    if extra:
        raise fail(f"unknown key{'s' if len(extra) > 1 else ''} "
                   f"{', '.join(map(str, extra))} in {what} (allowed: "
                   f"{', '.join(sorted(allowed))})", str(extra[0]))


def _numbers(raw: Any, fail) -> np.ndarray:
    """Nested lists of finite numbers -> float64 array (ragged lists are an error)."""
    def ok(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    flat, stack = 0, [raw]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif not ok(item):
            raise fail(f"expected numbers, found {item!r}")
        else:
            flat += 1
            if flat > MAX_ELEMENTS:
                raise fail("too many numbers")
    try:
        value = np.array(raw, dtype=np.float64)
    except ValueError:
        raise fail("nested lists must be rectangular") from None
    if not np.all(np.isfinite(value)):
        raise fail("numbers must be finite")
    return value


def in_domain(value: np.ndarray, domain: str | tuple[float, float]) -> np.ndarray:
    """Elementwise: does ``value`` lie in ``domain``?"""
    if isinstance(domain, tuple):
        return (domain[0] <= value) & (value <= domain[1])
    return {"real": lambda v: np.isfinite(v), "positive": lambda v: v > 0,
            "nonnegative": lambda v: v >= 0, "nonzero": lambda v: v != 0,
            "unit": lambda v: np.abs(v) < 1}[domain](value)


# --------------------------------------------------------------------------- files

def read_file(path: str | Path) -> tuple[list[Case], list[CaseFileError]]:
    """All valid cases of one file, and the errors of the invalid ones.

    A file that cannot be read or parsed at all gives no cases and one error.
    """
    path = Path(path)
    file = str(path)
    try:
        data, lines = _read(path)
    except CaseFileError as exc:
        return [], [exc]
    if not isinstance(data, dict):
        return [], [CaseFileError("the file must be a table with [[case]] entries", file=file)]
    extra = sorted(map(str, set(data) - {"defaults", "case"}))
    if extra:
        return [], [CaseFileError(f"unknown top-level key {', '.join(extra)} (allowed: "
                                  "defaults, case)", file=file)]
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        return [], [CaseFileError("[defaults] must be a table", file=file)]
    bad = sorted(map(str, set(defaults) - _DEFAULT_KEYS))
    if bad:
        return [], [CaseFileError(f"unknown key {', '.join(bad)} in [defaults] (allowed: "
                                  f"{', '.join(sorted(_DEFAULT_KEYS))})", file=file)]
    raws = data.get("case", [])
    if not isinstance(raws, list):
        return [], [CaseFileError("case must be an array of tables ([[case]])", file=file)]
    cases, errors, seen = [], [], {}
    for index, raw in enumerate(raws):
        reader = _CaseReader(raw, index, file, lines, defaults)
        try:
            case = reader.read()
        except CaseFileError as exc:
            errors.append(exc)
            continue
        if case.name in seen:
            errors.append(reader.fail(f"duplicate case name (first defined on line "
                                      f"{seen[case.name]})", "name"))
            continue
        seen[case.name] = case.line
        cases.append(case)
    return cases, errors


def case_files(paths: Iterable[str | Path]) -> list[Path]:
    """The case files named by ``paths``: files as given, folders searched recursively.

    Raises:
        CaseFileError: a path does not exist or is not a case file.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES
                              and f.is_file()))
        elif p.is_file():
            if p.suffix not in SUFFIXES:
                raise CaseFileError(f"not a case file (expected {', '.join(SUFFIXES)})",
                                    file=str(p))
            out.append(p)
        else:
            raise CaseFileError("no such file or folder", file=str(p))
    return list(dict.fromkeys(out))


def read_paths(paths: Iterable[str | Path]) -> tuple[list[Case], list[CaseFileError]]:
    """Cases and errors of every case file under ``paths``."""
    cases, errors = [], []
    for f in case_files(paths):
        c, e = read_file(f)
        cases += c
        errors += e
    return cases, errors


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
    bad = sorted(set(defaults or {}) - _DEFAULT_KEYS)
    if bad:
        raise CaseFileError(f"unknown default {', '.join(bad)}", file=file)
    return _CaseReader(raw, 0, file, _Lines(), defaults or {}).read()
