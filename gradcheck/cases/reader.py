"""Validation of one case's table (a ``[[case]]`` of a case file, or a dict) into a
:class:`~gradcheck.cases.model.Case`. Every problem is a :class:`CaseFileError` naming
the file, the case and the line; the messages are the documented contract (docs/case-files.md)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np

from ..base.errors import CaseFileError
from ..base.spelling import did_you_mean
from ..formula.parser import CONSTANTS, parse
from ..formula.tree import Node, differentiable_names
from ..witnesses.registry import OP, REFERENCE, case_names, formula_names
from .call import parse_call
from .files import Lines
from .inputs import INPUT_KEYS, numbers, read_input
from .traced import FUNCTION_KEYS, renamed, translation
from .model import Case, InputSpec
from .vocabulary import (COMPILE_BACKENDS, DEVICES, DTYPES, EXTREME_POINTS, GRADIENTS,
                         KINK_POINTS, MAX_POINTS, SECOND_ORDERS, SKIPPABLE)

# order under [defaults] is its op cases' order (a formula case has no second order)
DEFAULT_KEYS = {"dtype", "points", "extreme_points", "kink_points", "seed", "atol", "rtol",
                "witnesses", "strict", "order", "skip_checks", "compile_backend"}
_OP_KEYS = {"op", "reference", "args", "order", "second_order", "device", "nondet_tol",
            "strict_shapes", "forward", "call", "reference_function", "reference_call",
            "skip_checks", "compile_backend",
            "forward_function"}
_CASE_KEYS = DEFAULT_KEYS | _OP_KEYS | {"name", "description", "expr", "inputs", "let",
                                        "gradient", "retain_grad", "expect",
                                        "expr_function", "expr_call"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CaseReader:
    """Validates one case's raw table. ``fail`` raises with file, case and line."""

    def __init__(self, raw: dict, index: int, file: str, lines: Lines, defaults: dict):
        self.raw, self.index, self.file, self.lines = raw, index, file, lines
        self.defaults = defaults
        self.name: str | None = None
        self.inputs: tuple[InputSpec, ...] = ()
        self.traced_lets: list[tuple[str, str]] = []   # lets a traced function made

    def fail(self, message: str, key: str | None = None) -> CaseFileError:
        line = self.lines.key(self.index, key) if key else self.lines.case(self.index)
        return CaseFileError(message, file=self.file, case=self.name, line=line)

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, self.defaults.get(key, default))

    def read(self) -> Case:
        raw = self.raw
        name = self.read_name()
        unknown(raw, _CASE_KEYS, "case", self.fail)
        inputs = self.read_inputs()
        nodes: dict[str, Node] = {spec.name: Node("input", shape=spec.shape, name=spec.name,
                                                  dtype=spec.dtype, complex=spec.complex)
                                 for spec in inputs}
        lets = self.read_lets(nodes)
        op = self.read_op()
        texts, outputs = self.read_formulas(nodes, op)
        forward, forward_texts = self.read_forward(nodes, outputs)
        lets += tuple(self.traced_lets)
        output = outputs[0]
        retain = self.read_retain(nodes)
        self.check_reach(inputs, nodes, output, retain)
        if op and len(outputs) > 1 and not isinstance(raw.get("gradient", "random"), str):
            raise self.fail("an op with several outputs takes gradient = \"random\" or "
                            "\"ones\"", "gradient")
        call = self.read_call(inputs) if op else None
        args, kwargs = self.read_args() if op else ((), {})
        # the keys below are validated in the order they are written: a case with
        # several problems reports the first
        return Case(
            name=name, file=self.file, line=self.lines.case(self.index),
            expr=" ; ".join(map(str, texts)),
            inputs=inputs, lets=lets, nodes=nodes, output=output,
            gradient=self.read_gradient(output), retain_grad=retain,
            dtypes=self.read_dtypes(), points=self.read_int("points", 3, 1, MAX_POINTS),
            extreme_points=self.read_int("extreme_points", EXTREME_POINTS, 0, MAX_POINTS),
            kink_points=self.read_int("kink_points", KINK_POINTS, 0, MAX_POINTS),
            seed=self.read_int("seed", 0, 0, 2**63 - 1), atol=self.read_tol("atol"),
            rtol=self.read_tol("rtol"), witnesses=self.read_witnesses(bool(op)),
            witnesses_named=self.get("witnesses") is not None,
            expect=self.read_expect(), description=str(raw.get("description", "")),
            op=op, op_line=self.lines.key(self.index, "op") if op else None,
            outputs=outputs, args=args, kwargs=kwargs, forward=forward,
            forward_expr=forward_texts, call=call,
            order=self.read_order(bool(op)), second_order=self.read_second_order(),
            device=self.read_device(),
            nondet_tol=self.read_tol("nondet_tol") or 0.0,
            strict_shapes=self.read_bool("strict_shapes", False),
            strict=self.read_bool("strict", False),
            skip_checks=self.read_skip_checks(),
            compile_backend=self.read_compile_backend(),
        )

    def as_written(self, case: Case) -> Case | None:
        """For a formula case whose ``expr_function`` names ``module:function`` in a
        case file: its twin ``<name>/as-written``, an op case in which the function
        runs as written (its own kernels and torch's autograd through them, in the
        op's process: never the judge's) against the exact reference built from its
        trace. The formula case checks the trace in every witness; the twin checks
        that the code itself computes it. None for any other case."""
        spec = self.raw.get("expr_function")
        if not isinstance(spec, str) or case.op is not None:
            return None
        call = None
        if "expr_call" in self.raw:
            call = parse_call(self.raw["expr_call"], [s.name for s in case.inputs],
                              file=self.file, case=self.name, callee="f", key="expr_call",
                              line=self.lines.text(self.index, "expr_call"))
        return dataclasses.replace(case, name=f"{case.name}/as-written", op=spec,
                                   op_line=self.lines.key(self.index, "expr_function"),
                                   outputs=(case.output,), call=call,
                                   witnesses=(REFERENCE, OP), order=1)

    def read_name(self) -> str:
        if not isinstance(self.raw, dict):
            raise self.fail("each [[case]] must be a table")
        name = self.raw.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self.fail("a case needs a name (a non-empty string)", "name")
        self.name = name
        return name

    def read_formulas(self, nodes: dict[str, Node], op: str | None
                      ) -> tuple[list, tuple[Node, ...]]:
        """The formula texts (expr, or an op's reference: one or a list) and their nodes."""
        raw = self.raw
        key = "reference" if op else "expr"
        function = key + "_function"
        for wrong in (("expr", "expr_function", "expr_call") if op else ()):
            if wrong in raw:
                raise self.fail(f"a case with op checks it against reference; {wrong} is "
                                "for formula cases", wrong)
        if key in raw and function in raw:
            raise self.fail(f"give {key} or {function}, not both", function)
        call = "reference_call" if op else "expr_call"
        if call in raw and not ({function, "forward_function"} & set(raw)):
            raise self.fail(f"{call} says how {function} is called; it needs "
                            f"{function}", call)
        if function in raw:
            texts = self.traced(function, nodes)
        elif key not in raw:
            raise self.fail("a case needs expr (or expr_function), the formula to check"
                            if not op else "a case with op needs reference (or "
                            "reference_function), the formula the op claims to compute",
                            key)
        else:
            texts = raw[key] if isinstance(raw[key], list) and op else [raw[key]]
        if not texts:
            raise self.fail("reference must name at least one formula", key)
        if not op and len(texts) != 1:
            raise self.fail(f"{function} returns {len(texts)} tensors; a formula case "
                            "checks one (return one, or check it as an op case)", function)
        where = function if function in raw else key
        outputs = tuple(parse(t, nodes, file=self.file, case=self.name,
                              line=self.lines.text(self.index, where)) for t in texts)
        return texts, outputs

    def traced(self, key: str, nodes: dict[str, Node]) -> list[str]:
        """The formula texts of the function ``key`` names, traced; its lets are parsed
        into ``nodes`` (renamed where a name is taken) and kept for the case's lets."""
        call = FUNCTION_KEYS[key][0]
        t = translation(key, self.raw, self.inputs, self.file, self.fail,
                        self.lines.text(self.index, call) if call in self.raw else None,
                        self.name)
        texts, lets = renamed(t, set(nodes) | set(CONSTANTS))
        for name, text in lets:
            self.add_let(nodes, name, text, key)
            self.traced_lets.append((name, text))
        return texts

    def read_forward(self, nodes: dict[str, Node], outputs: tuple[Node, ...]
                     ) -> tuple[tuple[Node, ...], str]:
        """A surrogate's forward: what the op's outputs must equal (one formula per
        output), when the reference is the formula whose vᵀJ its backward computes."""
        if "forward" in self.raw and "forward_function" in self.raw:
            raise self.fail("give forward or forward_function, not both", "forward_function")
        if "forward_function" in self.raw:
            texts = self.traced("forward_function", nodes)
        elif "forward" not in self.raw:
            return (), ""
        else:
            raw = self.raw["forward"]
            texts = raw if isinstance(raw, list) else [raw]
        key = "forward_function" if "forward_function" in self.raw else "forward"
        if len(texts) != len(outputs):
            raise self.fail(f"forward gives {len(texts)} formula"
                            f"{'s' if len(texts) != 1 else ''}, reference {len(outputs)}: "
                            "one per output of the op", key)
        line = self.lines.text(self.index, key)
        forward = tuple(parse(t, nodes, file=self.file, case=self.name, line=line)
                        for t in texts)
        for k, (f, r) in enumerate(zip(forward, outputs)):
            if f.shape != r.shape:
                raise self.fail(f"forward{f' {k}' if len(texts) > 1 else ''} has shape "
                                f"{list(f.shape)}, but the reference has shape "
                                f"{list(r.shape)}", key)
        return forward, " ; ".join(map(str, texts))

    def read_call(self, inputs: tuple[InputSpec, ...]):
        """``call = "op(x, w, eps=1e-6)"``: exactly what the op receives (None: the
        inputs in order, then ``args``)."""
        if "call" not in self.raw:
            return None
        if "args" in self.raw:
            raise self.fail("call says everything the op receives: write its plain "
                            "arguments there, op(x, 0.5, eps=1e-6), not in args", "args")
        call = parse_call(self.raw["call"], [s.name for s in inputs], file=self.file,
                          case=self.name, line=self.lines.text(self.index, "call"))
        passed = {a.input for a in call[0]} | {a.input for _, a in call[1]}
        if not any(s.requires_grad and s.name in passed for s in inputs):
            raise self.fail("call passes the op no input that requires grad, so its "
                            "backward would not be checked", "call")
        return call

    def check_reach(self, inputs: tuple[InputSpec, ...], nodes: dict[str, Node],
                    output: Node, retain: tuple[str, ...]) -> None:
        """There is a gradient to check, and every retained let has a grad."""
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

    def read_order(self, op: bool) -> int:
        """1 or 2 (the case's key, else its file's [defaults]); a formula case's is 1: the
        file's default order is its op cases' (read_op refuses the key in the case)."""
        order = self.read_int("order", 1, 1, 2)
        return order if op else 1

    def read_args(self) -> tuple[tuple, dict]:
        raw = self.raw.get("args", [])
        if isinstance(raw, list):
            return tuple(raw), {}
        if isinstance(raw, dict):
            return (), dict(raw)
        raise self.fail("args must be a list (positional, after the inputs) or a table "
                        "(keywords)", "args")

    def read_second_order(self) -> str:
        """Which exact reference op.double's second derivatives come from (order = 2)."""
        value = self.raw.get("second_order", "tensor")
        if value not in SECOND_ORDERS:
            raise self.fail(f"second_order must be \"tensor\" or \"expanded\", got "
                            f"{value!r}", "second_order")
        if "second_order" in self.raw and self.get("order", 1) != 2:
            raise self.fail("second_order says how op.double's exact second derivatives "
                            "are built; it needs order = 2", "second_order")
        return value

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
        self.inputs = tuple(self.read_input(n, s) for n, s in raw.items())
        return self.inputs

    def read_input(self, name: str, spec: Any) -> InputSpec:
        key = f"inputs.{name}"
        self.check_name(name, key)
        if isinstance(spec, list):
            spec = {"shape": spec}
        if not isinstance(spec, dict):
            raise self.fail(f"input {name!r} must be a table such as {{ shape = [3] }}", key)
        unknown(spec, INPUT_KEYS, f"input {name!r}",
                 lambda m, k: self.fail(m, f"{key}.{k}"))
        return read_input(name, spec, lambda m: self.fail(m, key))

    def check_name(self, name: str, key: str) -> None:
        if not isinstance(name, str) or not _IDENT.match(name):
            raise self.fail(f"{name!r} is not a valid name", key)
        # a function's name may name an input or let (the language grows; written bare
        # it is the name, called the function); pi and E could not be told apart
        if name in CONSTANTS:
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
            self.add_let(nodes, name, text, key)
            out.append((name, text))
        return tuple(out)

    def add_let(self, nodes: dict[str, Node], name: str, text: str, key: str) -> None:
        """The let ``name = text`` parsed into ``nodes`` (``key``: where it is written)."""
        body = parse(text, nodes, file=self.file, case=self.name,
                     line=self.lines.text(self.index, key))
        # a let of an integer input (indexed, reshaped...) is one too (a mask for where)
        nodes[name] = Node("let", (body,), body.shape, name=name, const=body.const,
                           dtype=body.dtype, complex=body.complex)

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
        value = numbers(raw, lambda m: self.fail(f"gradient: {m}", "gradient"))
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

    def read_skip_checks(self) -> tuple[str, ...]:
        """``skip_checks = ["op.jvp", "op.vmap"]``: op checks switched off (of
        :data:`~.vocabulary.SKIPPABLE`; op.forward and op.backward always run)."""
        raw = self.get("skip_checks", [])
        raw = [raw] if isinstance(raw, str) else raw
        return skip_checks(raw, lambda message: self.fail(message, "skip_checks"))

    def read_compile_backend(self) -> str:
        """op.compile's torch.compile backend (:data:`~.vocabulary.COMPILE_BACKENDS`);
        under [defaults] it is its op cases' (a formula case naming one is refused with
        the other op keys, :meth:`read_op`)."""
        value = self.get("compile_backend", COMPILE_BACKENDS[0])
        if value not in COMPILE_BACKENDS:
            raise self.fail(f"compile_backend must be one of {', '.join(COMPILE_BACKENDS)}, "
                            f"got {value!r}", "compile_backend")
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
        """The names of :mod:`gradcheck.witnesses.registry`' registry (and the reference, which
        always runs), in the registry's order."""
        allowed = case_names()
        raw = self.get("witnesses", [OP] if op else list(formula_names()))
        raw = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw, list) or any(w not in allowed for w in raw):
            raise self.fail(f"witnesses must be a list drawn from {', '.join(allowed)}, "
                            f"got {raw!r}", "witnesses")
        if OP in raw and not op:
            raise self.fail(f"the {OP} witness needs op = \"module:Name\"", "witnesses")
        return tuple(w for w in allowed if w in raw or w == REFERENCE)

    def read_expect(self) -> str:
        value = self.raw.get("expect", "pass")
        if value not in ("pass", "fail"):
            raise self.fail(f"expect must be \"pass\" or \"fail\", got {value!r}", "expect")
        return value


def unknown(raw: dict, allowed: set[str], what: str, fail) -> None:
    """``fail(message, key)`` for unknown keys, with the allowed key closest to the first
    (``key``: that one, to locate the line). Every table of a case file is checked
    here: a case's keys, an input's, ``[defaults]``, the file's top level."""
    extra = sorted(set(raw) - allowed, key=str)
    if extra:
        raise fail(f"unknown key{'s' if len(extra) > 1 else ''} "
                   f"{', '.join(map(str, extra))} in {what}"
                   f"{did_you_mean(str(extra[0]), allowed)} (allowed: "
                   f"{', '.join(sorted(allowed))})", str(extra[0]))


def skip_checks(raw, fail) -> tuple[str, ...]:
    """The op checks named in ``raw`` (``"op.jvp"``), validated; ``fail(message)`` makes
    the error for a name that is no check one may switch off."""
    names = [f"op.{c}" for c in SKIPPABLE]
    if not isinstance(raw, (list, tuple)) or any(n not in names for n in raw):
        raise fail(f"skip_checks must be a list drawn from {', '.join(names)}, got {raw!r}")
    return tuple(dict.fromkeys(raw))
