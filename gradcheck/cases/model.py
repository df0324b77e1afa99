"""The validated case: :class:`Case` and its :class:`InputSpec`, the values a case file
may give its keys, and how a case travels to another process (pickled, its formula
DAG as a flat table)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable

import numpy as np

from ..rules import DOMAINS  # noqa: F401  (the one vocabulary of domains)
from ..formula.tree import Node, walk
from ..sampling.domains import in_domain  # noqa: F401  (the cases' vocabulary)
from ..witnesses.registry import case_names
from .vocabulary import EXTREME_POINTS, KINK_POINTS


@dataclass(frozen=True)
class InputSpec:
    """One declared input: its shape, where it is sampled, and an optional pinned value.

    ``dtype`` None is the run's float dtype; ``"int64"``, ``"int32"`` or ``"bool"`` make
    it an integer or boolean input: sampled uniformly in ``domain`` ``(lo, hi)`` with
    ``hi`` exclusive (booleans: at random), requiring no grad, held exactly.

    ``complex`` (``dtype = "complex"`` in the file): a complex input in the run's
    precision, held as ``torch.view_as_real`` holds it: ``shape`` is its complex shape
    with a last axis of 2 (real, imaginary parts), each part a float input of
    ``domain``; ``dtype`` stays None."""

    name: str
    shape: tuple[int, ...]
    domain: Any = "real"           # a name, (lo, hi) or a complex input's Modulus
    value: np.ndarray | None = field(default=None, compare=False)
    requires_grad: bool = True
    dtype: str | None = None
    complex: bool = False

    @property
    def complex_shape(self) -> tuple[int, ...]:
        """The shape the user declared: a complex input's without its (re, im) axis."""
        return self.shape[:-1] if self.complex else self.shape

    @property
    def integer(self) -> bool:
        """An integer or boolean input (an exact constant of the formula)."""
        return self.dtype is not None


@dataclass(frozen=True)
class OpArgument:
    """One argument of the op's call: an input's tensor (``input``, its name) or a plain
    value written in the case file (``value``: a number, a list of numbers, True, False,
    None or a string)."""

    input: str | None = None
    value: Any = None

    def __repr__(self) -> str:
        return self.input if self.input is not None else repr(self.value)


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
    kink_points: int = KINK_POINTS
    seed: int = 0
    atol: float | None = None
    rtol: float | None = None
    # every name the witness registry holds when the case is made (an entry added to it
    # later, a test's or a plugin's, included), in the order they run
    witnesses: tuple[str, ...] = field(default_factory=case_names)
    # the case names its witnesses (``witnesses = [...]``): each runs at every point,
    # finite differences too (else a large case runs them where they are needed:
    # :func:`gradcheck.checking.case._FormulaCheck.numeric_settled`)
    witnesses_named: bool = False
    expect: str = "pass"
    description: str = ""
    op: str | None = None                      # "module:attr" of a custom op
    # the line of the key that names the op (op =, or an as-written twin's
    # expr_function =): an op that cannot be imported is that line's error
    op_line: int | None = None
    outputs: tuple[Node, ...] = ()             # the reference, one node per op output
    # a surrogate's forward: what the op's outputs must equal (one node per output),
    # when it is not the reference, whose vᵀJ the op's backward must be; () otherwise
    forward: tuple[Node, ...] = ()
    forward_expr: str = ""
    # call = "op(x, w, eps=1e-6)": exactly what the op receives, positional then
    # keywords; None: the inputs in order, then args/kwargs
    call: tuple[tuple[OpArgument, ...], tuple[tuple[str, OpArgument], ...]] | None = None
    args: tuple = ()                           # extra positional arguments of the op
    kwargs: dict = field(default_factory=dict)  # keyword arguments of the op
    order: int = 1
    second_order: str = "tensor"               # SECOND_ORDERS: op.double's reference
    device: str = "cpu"
    nondet_tol: float = 0.0
    # op.shapes fails what autograd accepts but changes (an expandable gradient it sums
    # back, trailing Nones, a gradient for an input that needs none, a cast dtype)
    strict_shapes: bool = False
    # an approximate result (a float64 check within float32's tolerance only) fails
    strict: bool = False
    # patterns of installed modules the op may be imported from (--allow-op-module); no
    # case-file key: a case file may not allow itself code (gradcheck.checking.opcheck.loader)
    allow_op_modules: tuple[str, ...] = ()
    # op checks switched off ("op.jvp"): skip_checks in the case, [defaults],
    # [tool.gradcheck] or --skip-check (cases.vocabulary.SKIPPABLE)
    skip_checks: tuple[str, ...] = ()
    # op.compile's torch.compile backend (cases.vocabulary.COMPILE_BACKENDS)
    compile_backend: str = "aot_eager"

    def __reduce__(self):
        # the formula DAG is written out as a flat table: pickle's own recursion (a few
        # C frames per node) would overflow on a deep formula, and the table keeps the
        # nodes that several parents share as one node
        return _rebuild_case, _case_state(self)

    @property
    def input(self) -> dict[str, InputSpec]:
        return {spec.name: spec for spec in self.inputs}

    @property
    def complex_inputs(self) -> frozenset[str]:
        """The names of the complex inputs (held in the view_as_real layout)."""
        return frozenset(spec.name for spec in self.inputs if spec.complex)

    @property
    def complex_quantities(self) -> frozenset[str]:
        """The quantities a report compares in the view_as_real layout, whose elements
        it names by complex index and part: a complex input's gradient (of a formula
        witness and of an op), a complex output's values ("value", an op's "out0")."""
        names = {f"{name}.grad" for name in self.complex_inputs}
        names |= {f"{name}.grad" for name in self.retain_grad
                  if name in self.nodes and self.nodes[name].complex}
        names |= {"value"} if self.output.complex else set()
        return frozenset(names | {f"out{k}" for k, node in enumerate(self.outputs)
                                  if node.complex})

    @property
    def surrogate(self) -> bool:
        """The op's forward is checked against ``forward``, its gradients against the
        reference (a straight-through estimator, a gradient reversal)."""
        return bool(self.forward)

    @property
    def values(self) -> tuple[Node, ...]:
        """The formulas the op's outputs must equal: ``forward``, else the reference."""
        return self.forward or self.outputs

    @property
    def passed(self) -> tuple[str, ...]:
        """The inputs the op receives, in the case's order (all of them without
        ``call``); the others are reference-only."""
        if self.call is None:
            return tuple(s.name for s in self.inputs)
        given = {a.input for a in self.call[0]} | {a.input for _, a in self.call[1]}
        return tuple(s.name for s in self.inputs if s.name in given)

    @property
    def reference_only(self) -> tuple[str, ...]:
        """Inputs the op is not given: they get gradients in the reference, and the op's
        are not checked for them."""
        passed = set(self.passed)
        return tuple(s.name for s in self.inputs if s.name not in passed)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


# --------------------------------------------------------------------------- pickling

_NODE_FIELDS = tuple(f.name for f in fields(Node) if f.init and f.name != "args")


def node_table(roots: Iterable[Node]) -> tuple[list[tuple], dict[int, int]]:
    """The DAG below ``roots`` as rows, children before parents: each row holds a node's
    fields (:data:`_NODE_FIELDS`) and then its arguments as row numbers; and
    ``id(node) -> row``. A node shared by several parents is one row. Iterative: any
    depth."""
    rows: list[tuple] = []
    row_of: dict[int, int] = {}
    for root in roots:
        for node in walk(root):
            if id(node) not in row_of:
                row_of[id(node)] = len(rows)
                rows.append(tuple(getattr(node, f) for f in _NODE_FIELDS)
                            + (tuple(row_of[id(a)] for a in node.args),))
    return rows, row_of


def nodes_from_table(names: tuple[str, ...], rows: list[tuple]) -> list[Node]:
    """The nodes of :func:`node_table`'s rows (``names``: the fields the rows hold)."""
    built: list[Node] = []
    for row in rows:
        built.append(Node(**dict(zip(names, row[:-1])),
                          args=tuple(built[i] for i in row[-1])))
    return built


def _case_state(case: "Case") -> tuple:
    state = {f.name: getattr(case, f.name) for f in fields(case) if f.init}
    rows, row_of = node_table([*case.nodes.values(), case.output, *case.outputs,
                               *case.forward])
    state["nodes"] = {name: row_of[id(n)] for name, n in case.nodes.items()}
    state["output"] = row_of[id(case.output)]
    state["outputs"] = tuple(row_of[id(n)] for n in case.outputs)
    state["forward"] = tuple(row_of[id(n)] for n in case.forward)
    return _NODE_FIELDS, rows, state


def _rebuild_case(names: tuple[str, ...], rows: list[tuple], state: dict) -> "Case":
    built = nodes_from_table(names, rows)
    state = dict(state, nodes={name: built[i] for name, i in state["nodes"].items()},
                 output=built[state["output"]],
                 outputs=tuple(built[i] for i in state["outputs"]),
                 forward=tuple(built[i] for i in state["forward"]))
    return Case(**state)
