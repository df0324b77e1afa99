"""The expression language's documentation, generated from the rows themselves: what
``gradcheck functions`` (and ``python -m gradcheck.formula``) prints, and the
function table of docs/functions.md (``--markdown``; a test keeps the page equal to it).
One listing of both tables: the real table's rows, each marked where the complex table
has a row of its name (it takes a complex operand), then the complex table's functions
of complex values that no real row names (conj, real, imag...).
"""

from __future__ import annotations

from ..rules.complex import COMPLEX
from ..rules.table import RULES
from .tree import Node

#: The inputs every row's ``example`` is written over (name: shape); ``idx`` holds
#: integers (class labels, positions), ``mask`` booleans.
EXAMPLE_INPUTS: dict[str, tuple[int, ...]] = {
    "x": (3, 4), "y": (3, 4), "v": (4,), "u": (4,), "W": (4, 5), "s": (),
    "img": (2, 3, 8, 8), "k": (4, 3, 3, 3), "seq": (2, 3, 16), "w1": (4, 3, 5),
    "idx": (3,), "idx2": (3, 2), "mask": (3, 4), "z": (4,), "w": (4,),
}

#: The inputs of EXAMPLE_INPUTS that hold integers, booleans or complex values (their
#: shape the complex shape), and their dtypes.
EXAMPLE_DTYPES: dict[str, str] = {"idx": "int64", "idx2": "int64", "mask": "bool",
                                  "z": "complex", "w": "complex"}


def example_nodes() -> dict[str, Node]:
    """The input nodes of EXAMPLE_INPUTS, as a case file's inputs give them to the
    parser (a complex one in the view_as_real layout: its shape and a last axis of 2)."""
    out = {}
    for name, shape in EXAMPLE_INPUTS.items():
        dtype = EXAMPLE_DTYPES.get(name)
        if dtype == "complex":
            out[name] = Node("input", shape=shape + (2,), name=name, complex=True)
        else:
            out[name] = Node("input", shape=shape, name=name, dtype=dtype)
    return out


def signature(rule) -> str:
    """How a formula spells the row: ``a + b``, ``-x``, ``sum(x, axis=None, ...)``."""
    names = ["x"] if rule.arity == 1 else ["a", "b", "c"][: rule.arity]
    if rule.variadic == "list":
        names = ["[a, b, ...]"]
    elif rule.variadic == "star":
        names = [*(f"{p.name}" for p in rule.params if p.kind == "text"), "a, b, ..."]
    if rule.symbol is not None:
        return f"{rule.symbol}x" if rule.arity == 1 else f" {rule.symbol} ".join(names)
    keyed = [p.name for p in rule.params if p.kind == "key"]   # written x[key], f(...)[i]
    params = [f"{p.name}={p.default!r}" for p in rule.params if p.kind not in ("text", "key")]
    if keyed and not params:
        return f"x[{keyed[0]}]"
    return f"{rule.name}({', '.join(names + params)})" + ("[i]" if keyed else "")


def example(rule) -> str:
    """The row's example formula (its own, else the row applied to ``x``)."""
    return rule.example or (rule.spell(["x"]) if rule.arity == 1 and not rule.variadic
                            else rule.spell(["x", "y"]))


def grad_fn(rule) -> str:
    name = rule.engine.grad_fn
    return name if isinstance(name, str) else "(by operands)" if name else "-"


#: The complex column of a row: "yes" where the complex table lowers the row with a
#: complex operand, "only" for a function of complex values (or giving them: rfft) that
#: no real row spells, lowered to real rows whose nodes the graph records.
def complex_cell(name: str) -> str:
    row = COMPLEX.get(name)
    return "" if row is None else "only" if row.only and name not in RULES else "yes"


def complex_only() -> list:
    """The complex table's rows that no row of the real table names."""
    return [r for name, r in COMPLEX.items() if name not in RULES]


def rows() -> list[tuple[str, str, str, str, str]]:
    """(signature, example, PyTorch's grad_fn, complex, what it computes) for every row,
    then the complex table's own functions, then the constant constructors and literals
    (:mod:`gradcheck.formula.constructors`: written in rows, they record no node)."""
    from .constructors import CONSTRUCTORS

    return [(signature(r), example(r), grad_fn(r), complex_cell(r.name), r.doc)
            for r in RULES.values()] + [
        (signature(r), r.example, "(its lowering's)", complex_cell(r.name), r.doc)
        for r in complex_only()] + [
        (sig, ex, "-", "", doc) for sig, ex, doc in CONSTRUCTORS.values()]


def text() -> str:
    """One aligned line per row, for a terminal (``complex``: takes complex operands;
    ``only``: a function of complex values)."""
    table = rows()
    width = max(len(sig) for sig, *_ in table)
    return "".join(f"{sig:<{width}}  {node:<22}  {cplx:<7}  {doc}".rstrip() + "\n"
                   for sig, _, node, cplx, doc in table)


def markdown() -> str:
    """The function table of docs/functions.md."""
    lines = ["| function | example | `grad_fn` | complex | computes |",
             "|---|---|---|---|---|"]
    for sig, ex, node, cplx, doc in rows():
        cells = [f"`{sig}`", f"`{ex}`", node, cplx, doc]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
