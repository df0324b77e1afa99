"""``gradcheck trace module:function --input x=4,8``: a PyTorch function as the formula a
case's ``reference_function``/``expr_function`` would check, traced as a run traces it
(in a child process), its text read by the safe parser; ``-v`` shows the ATen graph it
came from. And ``gradcheck functions --aten``: the ATen ops the tracer maps."""

from __future__ import annotations

import argparse
import sys

from ..base.errors import CaseFileError

KINDS = {"float": None, "int64": "int64", "int32": "int32", "bool": "bool"}


def add_parser(sub) -> None:
    p = sub.add_parser(
        "trace", help="show the formula a PyTorch function traces to",
        description="Trace module:function (found from the current folder, as a case "
                    "file's reference_function is) on inputs of the given shapes, in a "
                    "child process, and print the formula text a case would check: its "
                    "lets and one formula per output, with their shapes; -v also prints "
                    "the ATen graph they were built from.")
    p.add_argument("function", metavar="MODULE:FUNCTION")
    p.add_argument("--input", action="append", default=[], metavar="NAME=SHAPE[:DTYPE]",
                   help="an input, in the function's argument order: x=4,8 (float), "
                        "i=3:int64, m=4,4:bool, s= (a scalar); repeatable")
    p.add_argument("--call", metavar="TEXT",
                   help="how the function is called, as reference_call: "
                        "\"ref(x, w, eps=1e-6)\" (default: every input, in order)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print the traced ATen graph too")


def _argument(text: str):
    from ..tracing.apart import kind_of_dtype
    from ..tracing.trace import Argument

    name, eq, rest = text.partition("=")
    shape_text, _, dtype = rest.partition(":")
    dtype = dtype or "float"
    if not eq or not name.isidentifier() or dtype not in KINDS:
        raise CaseFileError(f"--input {text!r}: expected NAME=SHAPE[:DTYPE], e.g. x=4,8 "
                            f"or i=3:int64 (dtypes: {', '.join(KINDS)})")
    try:
        shape = tuple(int(n) for n in shape_text.split(",") if n.strip())
    except ValueError:
        raise CaseFileError(f"--input {text!r}: the shape is comma-separated integers") \
            from None
    if any(n < 0 for n in shape):
        raise CaseFileError(f"--input {text!r}: a negative size")
    return Argument(name, shape, kind_of_dtype(KINDS[dtype])), KINDS[dtype]


def command(args: argparse.Namespace) -> int:
    """Print the translation of ``args.function``; 0, or 2 when it cannot be traced."""
    from ..cases.call import parse_call
    from ..cases.traced import renamed
    from ..formula.parser import CONSTANTS, parse
    from ..formula.tree import Node
    from ..report.text import printable
    from ..tracing.apart import TraceFailed, translate_named

    if not args.input:
        raise CaseFileError("give the function's inputs: --input x=4,8 (repeatable)")
    pairs = [_argument(t) for t in args.input]
    arguments = [a for a, _ in pairs]
    call = (parse_call(args.call, [a.name for a in arguments], callee="ref",
                       key="--call") if args.call else None)
    try:
        t = translate_named(args.function, "", arguments, call)
    except TraceFailed as exc:
        print(f"gradcheck: error: {printable(args.function)} cannot be written as a "
              f"formula: {printable(exc)}", file=sys.stderr)
        return 2
    nodes = {a.name: Node("input", shape=a.shape, name=a.name, dtype=dtype)
             for a, dtype in pairs}
    outputs, lets = renamed(t, set(nodes) | set(CONSTANTS))
    out = []
    if args.verbose:
        out += ["ATen graph:", *(f"  {line}" for line in t["graph"].splitlines()), ""]
    out.append("formula:")
    for name, text in lets:
        body = parse(text, nodes)
        nodes[name] = Node("let", (body,), body.shape, name=name, const=body.const,
                           dtype=body.dtype, complex=body.complex)
        out.append(f"  let {name} = {text}")
    for k, text in enumerate(outputs):
        shape = list(parse(text, nodes).shape)
        label = "output" if len(outputs) == 1 else f"output {k}"
        out.append(f"  {label} {shape}: {text}")
    out.append(f"ATen ops: {', '.join(t['ops'])}")
    print(printable("\n".join(out)))
    return 0


def aten_table() -> str:
    """The mapped ATen op packets, each with an example call that traces to it."""
    from ..tracing.aten import ATEN, SOURCES

    width = max(map(len, ATEN))
    lines = [f"{p:<{width}}  {SOURCES.get(p, '')}".rstrip() for p in sorted(ATEN)]
    return ("ATen ops a traced function may use (op packet, an example that traces to "
            "it):\n" + "\n".join(lines) + f"\n{len(ATEN)} ops mapped\n")
