"""``gradcheck explain``: what autograd does with one formula, as data.

The formula is built as a case (:func:`gradcheck.cases.case_from_dict`) and evaluated at
its first sampled point (:func:`gradcheck.sampling.points.case_points`) in float64, so every
value shown is real: PyTorch's ``grad_fn`` graph and the engine's (walked through
``next_functions``, each node with the rule table's words for what it computes), each
input's exact gradient as a tensor formula (the tensor reference's
:meth:`~gradcheck.reference.tensor.TensorReference.formulas`), what ``backward(v)``
computes for a non-scalar output (vᵀJ, and J itself from one-hot VJPs of the reference
when it is small), and the ``.grad`` of every leaf and named intermediate, with PyTorch's
own words for why a non-retained one is None. Rendering is
:mod:`gradcheck.report.explain`'s.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

from .base.errors import CaseFileError

# NumPy is imported by the functions that compute: the CLI's parser imports this module
# for its arguments, and ``gradcheck --help`` loads no NumPy

#: a Jacobian is shown when the output and the input each have at most this many elements
JACOBIAN_LIMIT = 64
#: elements (inputs and output together) an explanation holds at most: it shows every
#: value, and its JSON writes them all
ELEMENTS = 1_000_000
#: characters of a subexpression shown beside its graph node
LABEL = 48


@dataclass(frozen=True)
class GraphNode:
    """One node of a backward graph: ``name`` is its class (``TanhBackward0``),
    ``computes`` the rule table's words, ``next`` the indices (in the graph's list) of
    its ``next_functions`` (None for an edge to nothing: a constant operand), ``of`` the
    subexpression (or, for ``AccumulateGrad``, the leaf) it belongs to."""

    index: int
    name: str
    computes: str
    next: tuple[int | None, ...]
    of: str = ""
    shape: tuple[int, ...] | None = None
    #: the row's exact VJP on the node's operand shapes, ḡ the gradient arriving at the
    #: node (``x.grad = ḡ ⊙ (1 - tanh(x)**2)``); "" where there is none to show
    vjp: str = ""


@dataclass(frozen=True)
class GradEntry:
    """The ``.grad`` of one tensor after ``backward``: a leaf (an input), a ``let``
    intermediate or the output. ``value`` is None where PyTorch leaves it None, and
    ``why`` says why; ``exact`` is the reference's value, ``error`` the largest
    |torch - exact|."""

    name: str
    kind: str                        # "leaf", "intermediate" or "output"
    shape: tuple[int, ...]
    retained: bool
    value: np.ndarray | None
    exact: np.ndarray | None = None
    error: float | None = None
    why: str = ""


@dataclass(frozen=True)
class Explanation:
    """Everything :func:`explain` found; see the module's doc."""

    expr: str
    lets: tuple[tuple[str, str], ...]
    inputs: dict[str, tuple[int, ...]]
    output_shape: tuple[int, ...]
    gradient: str                    # "scalar", "ones", "random" or "given"
    point: dict[str, np.ndarray]
    value: np.ndarray
    v: np.ndarray
    shared: tuple[str, ...]          # ``t1 = ...`` lines the formulas refer to
    formulas: dict[str, str]         # quantity name -> exact gradient formula
    backward: tuple[str, ...]        # what backward() computes, in sentences
    errors: dict[str, str]           # what PyTorch says for a v that is missing / wrong
    torch_graph: tuple[GraphNode, ...]
    engine_graph: tuple[GraphNode, ...]
    grads: tuple[GradEntry, ...]
    jacobian: dict[str, np.ndarray] = field(default_factory=dict)
    jacobian_note: str = ""
    seed: int = 0


_SHAPE = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*\[([\d\s,]*)\]\s*(,|$)")


def parse_inputs(text: str) -> dict[str, list[int]]:
    """``'x=[3],W=[3,2]'`` -> ``{"x": [3], "W": [3, 2]}`` (``s=[]`` is a scalar).

    Raises:
        CaseFileError: the text is not of that form.
    """
    out: dict[str, list[int]] = {}
    at = 0
    while at < len(text):
        m = _SHAPE.match(text, at)
        if m is None:
            raise CaseFileError(f"--inputs: expected NAME=[D1,D2,...] at {text[at:]!r}")
        dims = [d for d in m.group(2).replace(" ", "").split(",") if d]
        out[m.group(1)] = [int(d) for d in dims]
        at = m.end()
    if not out:
        raise CaseFileError("--inputs: no input given (e.g. 'x=[3],W=[3,2]')")
    return out


def arguments(p) -> None:
    """``gradcheck explain``'s arguments on the argparse parser ``p``."""
    from .project.arguments import gradient_argument

    p.add_argument("expr", metavar="EXPR", help="the formula, e.g. 'sum(tanh(x @ W))'")
    p.add_argument("--inputs", required=True, metavar="SHAPES",
                   help="each input's shape: 'x=[2,3],W=[3,2]' (s=[] for a scalar)")
    p.add_argument("--gradient", type=gradient_argument, metavar="ones|random|NUMBERS",
                   help="the v of y.backward(v) for a non-scalar output: ones (the "
                        "default), random, or numbers of y's shape ('[[1, 0], [0, 1]]')")
    p.add_argument("--let", action="append", default=[], metavar="NAME=EXPR",
                   help="a named intermediate the formula may use (repeatable)")
    p.add_argument("--retain", action="append", default=[], metavar="NAME",
                   help="call retain_grad() on this --let intermediate (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="the sampled point's seed")
    p.add_argument("--format", choices=("text", "json"), default="text")


def command(args) -> str:
    """``gradcheck explain``'s output for its parsed ``args`` (the CLI prints it)."""
    from .report.explain import render_json, render_text

    found = explain(args.expr, parse_inputs(args.inputs), gradient=args.gradient,
                    let=parse_let(args.let), retain=args.retain, seed=args.seed)
    return render_json(found) if args.format == "json" else render_text(found)


def parse_let(items) -> dict[str, str]:
    """``["h=x @ W"]`` -> ``{"h": "x @ W"}`` (the first ``=`` splits)."""
    out = {}
    for item in items:
        name, eq, expr = item.partition("=")
        if not eq or not name.strip().isidentifier():
            raise CaseFileError(f"--let: expected NAME=EXPR, got {item!r}")
        out[name.strip()] = expr.strip()
    return out


def explain(expr: str, inputs: Mapping[str, Any], *, gradient: Any = None,
            let: Mapping[str, str] | None = None, retain=(), seed: int = 0) -> Explanation:
    """Explain what autograd computes for ``expr`` (see the module's doc).

    Args:
        inputs: name -> shape (or a case-file input table, or an array).
        gradient: the v of ``y.backward(v)``: None ("scalar" for a scalar output, else
            "ones"), "ones", "random" or numbers of the output's shape.
        let: named intermediates (name -> formula), usable in ``expr``.
        retain: the ``let`` names whose ``.grad`` is kept (``retain_grad()``).

    Raises:
        CaseFileError: the formula or an option is invalid.
    """
    import numpy as np

    from .cases import case_from_dict
    from .checking.case import cotangent
    from .reference import TensorReference
    from .sampling.points import case_points
    from .testing import _input_table

    raw = {"name": expr, "expr": expr, "inputs": _input_table(inputs), "seed": seed,
           "let": dict(let or {}), "retain_grad": list(retain), "points": 1}
    if gradient is not None:
        raw["gradient"] = gradient if isinstance(gradient, str) else np.asarray(
            gradient, dtype=float).tolist()
    case = case_from_dict(raw, file="<explain>")
    if gradient is None and case.output.shape != ():   # a vector's default v: ones
        case = case_from_dict({**raw, "gradient": "ones"}, file="<explain>")
    _check_size(case)
    point = next(case_points(case, "float64")).values
    v = cotangent(case, "float64", 0)
    ref = TensorReference(case)
    exact = ref.evaluate(point, v)
    torch_side = _run_torch(case, point, v)
    engine_graph = _run_engine(case, point, v)
    formulas = ref.formulas()
    shared = tuple(formulas.pop("", "").splitlines())
    jac, note = _jacobian(case, ref, point)
    mode = case.gradient if isinstance(case.gradient, str) else "given"
    return Explanation(
        expr=expr, lets=case.lets, inputs={s.name: s.shape for s in case.inputs},
        output_shape=case.output.shape, gradient=mode, point=point,
        value=torch_side["value"], v=np.asarray(v), shared=shared, formulas=formulas,
        backward=_backward_text(case, mode), errors=torch_side["errors"],
        torch_graph=torch_side["graph"], engine_graph=engine_graph,
        grads=_grads(case, torch_side, exact), jacobian=jac, jacobian_note=note,
        seed=seed)


def _check_size(case) -> None:
    import math

    n = sum(math.prod(s.shape) for s in case.inputs) + math.prod(case.output.shape)
    if n > ELEMENTS:
        raise CaseFileError(f"explain shows every value: its inputs and output may hold "
                            f"{ELEMENTS:,} elements in all, these hold {n:,}; use smaller "
                            "shapes")


# --------------------------------------------------------------------------- the graphs

def _graph(y, made: dict[int, Any], leaves: dict[str, Any]) -> tuple[GraphNode, ...]:
    """``y``'s backward graph as data: ``made`` maps ``id(grad_fn)`` to the formula node
    that recorded it, ``leaves`` names the inputs (found back from AccumulateGrad)."""
    from .witnesses.drive import grad_fns

    nodes = grad_fns(y)
    index = {id(fn): i for i, fn in enumerate(nodes)}
    by_leaf = {id(t): n for n, t in leaves.items()}
    docs = _docs_by_name()
    inside: dict[int, Any] = {}   # a node one row recorded several of -> that row's node
    out = []
    for i, fn in enumerate(nodes):
        owner = made.get(id(fn), inside.get(id(fn)))
        for f, _ in fn.next_functions:   # (the walk is depth first: parents come first)
            if f is not None and id(f) not in made and owner is not None:
                inside.setdefault(id(f), owner)
        name = type(fn).__name__
        nexts = tuple(None if f is None else index.get(id(f))
                      for f, _ in fn.next_functions)
        if name == "AccumulateGrad":
            leaf = by_leaf.get(id(fn.variable), "?")
            out.append(GraphNode(i, name, f"adds the incoming gradient into {leaf}.grad",
                                 nexts, leaf, tuple(fn.variable.shape)))
            continue
        node = made.get(id(fn))
        if node is None:   # one of the nodes a row records several of (a @ W on 3-d a)
            part = f"part of {_label(owner)}" if owner is not None else ""
            out.append(GraphNode(i, name, docs.get(name, part), nexts, f"({part})"
                                 if part else ""))
            continue
        out.append(GraphNode(i, name, _computes(node.rule), nexts, _label(node),
                             tuple(node.shape), _vjp(node)))
    return tuple(out)


def _label(node) -> str:
    from .checking.diagnose.points import _text

    label = _text(node)
    return label if len(label) <= LABEL else label[: LABEL - 1] + "…"


def _vjp(node) -> str:
    """The row's VJP as the tensor reference prints it, for the row alone applied to
    operands of the node's shapes (named as ``gradcheck functions`` names them)."""
    names = iter(["x"] if len(node.args) == 1 else "abcdefgh")
    inputs, operands = {}, []
    for arg in node.args:
        if arg.op == "const" and arg.shape == ():
            text = arg.exact or repr(arg.const)
            operands.append(text if not text.startswith("-") else f"({text})")
        elif arg.dtype is not None or arg.const is not None:
            return ""   # an index or a constant tensor: the row alone would differ
        else:
            name = next(names)
            inputs[name] = tuple(arg.shape)
            operands.append(name)
    rule = node.rule
    return _row_vjp(rule.spell(operands, rule.keywords(node.params)),
                    tuple(inputs.items()), node.shape == ())


@functools.lru_cache(maxsize=256)   # a formula repeats its rows; SymPy is slow
def _row_vjp(expr: str, inputs: tuple, scalar: bool) -> str:
    from .cases import case_from_dict
    from .base.errors import GradcheckError
    from .reference import TensorReference

    try:
        case = case_from_dict({"name": expr, "expr": expr,
                               "inputs": {n: {"shape": list(s)} for n, s in inputs},
                               "gradient": "scalar" if scalar else "ones"})
        shown = TensorReference(case).formulas()
    except (GradcheckError, ValueError, TypeError):
        return ""   # a row that cannot stand alone so (a variadic row's spelling)
    shared = shown.pop("", "")
    return "; ".join(([shared.replace("\n", "; ")] if shared else [])
                     + [f"{k} = {w}" for k, w in shown.items()])


def _computes(rule) -> str:
    """What a node of ``rule`` does: the backward of the row (as ``gradcheck functions``
    spells it), with the row's own words where it has them."""
    from .formula.docs import signature

    sig = signature(rule)
    return f"backward of {sig}" + (f": {rule.doc}" if rule.doc and rule.doc != sig else "")


def _docs_by_name() -> dict[str, str]:
    """PyTorch node name -> what the row that records it computes (rows with one name;
    a name several rows record, fft's and ifft's FftC2CBackward0, says none of them)."""
    from collections import Counter

    from .rules import RULES

    named = [r for r in RULES.values() if isinstance(r.engine.grad_fn, str)]
    count = Counter(r.engine.grad_fn for r in named)
    return {r.engine.grad_fn: _computes(r) for r in named if count[r.engine.grad_fn] == 1}


def _recording(apply, made: dict[int, Any]):
    """``apply``, remembering which formula node recorded each ``grad_fn``."""
    def recorded(node, args):
        out = apply(node, args)
        fn = getattr(out, "grad_fn", None)
        if fn is not None:
            made.setdefault(id(fn), node)
        return out
    return recorded


def _run_torch(case, point: dict, v: np.ndarray) -> dict:
    """Rebuild the formula in PyTorch (float64), record what it says for a missing or
    mis-shaped v, run backward as the case says, and read every ``.grad`` back."""
    import torch

    from .witnesses import torch as tb
    from .witnesses.drive import rebuild
    from .base.dtypes import to_numpy

    leaves = tb.leaves(case, point, "float64")
    made: dict[int, Any] = {}
    lets: dict[str, Any] = {}

    def on_let(node, value):
        if node.name in case.retain_grad and getattr(value, "requires_grad", False):
            value.retain_grad()
        lets[node.name] = value

    y = rebuild(case.output, leaves, _recording(tb.applier(case, "float64"), made),
                on_let)
    errors = _v_errors(y) if y.dim() else {}
    graph = _graph(y, made, leaves)
    if isinstance(case.gradient, str) and case.gradient == "scalar":
        y.backward()
    else:
        y.backward(torch.tensor(v, dtype=torch.float64))
    grads, why = {}, {}
    for name, t in [*leaves.items(), *lets.items(), ("", y)]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            grads[name] = to_numpy(t.grad) if t.grad is not None else None
        if seen:   # PyTorch's words, less where in its build it was raised
            why[name] = str(seen[0].message).split(" (Triggered internally")[0]
    return {"value": to_numpy(y), "graph": graph, "errors": errors, "grads": grads,
            "why": why, "lets": lets}


def _v_errors(y) -> dict[str, str]:
    """What PyTorch raises for ``y.backward()`` on a non-scalar ``y`` and for a v of
    the wrong shape (both raise before any gradient is computed)."""
    import torch

    out = {}
    wrong = (y.numel(),) if y.dim() != 1 else (y.numel(), 1)
    for key, call in (("no_v", lambda: y.backward(retain_graph=True)),
                      ("wrong_shape", lambda: y.backward(
                          torch.ones(wrong, dtype=y.dtype), retain_graph=True))):
        try:
            call()
        except RuntimeError as exc:
            out[key] = str(exc)
    return out


def _run_engine(case, point: dict, v: np.ndarray) -> tuple[GraphNode, ...]:
    """The same formula on gradcheck's engine: its backward graph."""
    from .witnesses import engine as eb
    from .witnesses.drive import rebuild

    leaves = {s.name: eb.leaf(s, point[s.name], "float64") for s in case.inputs}
    made: dict[int, Any] = {}
    y = rebuild(case.output, leaves, _recording(eb.applier("float64"), made))
    return _graph(y, made, leaves)


# --------------------------------------------------------------------------- the answers

def _backward_text(case, mode: str) -> tuple[str, ...]:
    import numpy as np

    shape = list(case.output.shape)
    names = ", ".join(f"{n}.grad" for n in [s.name for s in case.inputs])
    if mode == "scalar":
        return ("y is a scalar: y.backward() seeds it with 1 (ḡ = 1), and the .grad of "
                f"each leaf is ∂y/∂leaf, shaped like the leaf ({names}).",)
    size = int(np.prod(shape, dtype=np.int64))
    return (f"y has shape {shape} ({size} elements): y.backward() alone raises, since "
            "a vector has no single gradient.",
            f"y.backward(v) needs a v shaped like y, {shape} (ḡ = v), and computes the "
            "vector-Jacobian product vᵀJ: leaf.grad[j] = Σᵢ v[i] ∂y[i]/∂leaf[j], the "
            "gradient of sum(v ⊙ y), shaped like the leaf.",
            {"ones": "Here v = ones: each .grad is the sum of the rows of J, the gradient "
                     "of sum(y).",
             "random": "Here v is random (seeded): one random projection of J.",
             "given": "Here v is the numbers given."}[mode])


def _jacobian(case, ref, point) -> tuple[dict[str, np.ndarray], str]:
    """J of each input (output elements × input elements, both flat in row-major
    order) from one one-hot VJP of the reference per output element, when small."""
    import numpy as np

    m = case.output.size
    if case.output.shape == ():
        return {}, "y is a scalar: its Jacobian is the gradient itself"
    wrt = [n for n in ref.wrt if case.input[n].shape is not None]
    big = [n for n in wrt if int(np.prod(case.input[n].shape, dtype=np.int64))
           > JACOBIAN_LIMIT]
    if m > JACOBIAN_LIMIT or big:
        return {}, (f"not shown: J is shown when y and each input have at most "
                    f"{JACOBIAN_LIMIT} elements (y has {m})")
    rows: dict[str, list] = {n: [] for n in wrt}
    for i in range(m):
        onehot = np.zeros(m)
        onehot[i] = 1.0
        got = ref.evaluate(point, onehot.reshape(case.output.shape))
        for n in wrt:
            rows[n].append(np.asarray(got.grads[n], dtype=float).ravel())
    return ({n: np.array(r) for n, r in rows.items()},
            "J[i, j] = ∂y[i]/∂input[j], both flattened row-major; vᵀJ is each .grad")


def _grads(case, torch_side: dict, exact) -> tuple[GradEntry, ...]:
    out = []
    got, why = torch_side["grads"], torch_side["why"]
    for s in case.inputs:
        value = got[s.name]
        reason = ("" if value is not None else
                  "requires_grad=False" if not s.requires_grad else
                  "no differentiable path from it to y")
        out.append(_entry(s.name, "leaf", s.shape, True, value,
                          exact.grads.get(s.name), reason))
    for name, _ in case.lets:
        kept = name in case.retain_grad
        value = got.get(name)
        if name not in torch_side["lets"]:
            reason = "never computed: the formula does not use it"
        elif name in why:   # PyTorch's warning on reading .grad of a non-leaf
            reason = f"not retained (add --retain {name}): PyTorch: {why[name]}"
        else:
            reason = "no gradient reached it"
        out.append(_entry(name, "intermediate", case.nodes[name].shape, kept, value,
                          exact.retained.get(name) if kept else None, reason))
    reason = f"PyTorch: {why['']}" if "" in why else "no gradient reached it"
    out.append(_entry("y", "output", case.output.shape, False, got[""], None,
                      "the output is not a leaf: " + reason))
    return tuple(out)


def _entry(name, kind, shape, retained, value, exact, why) -> GradEntry:
    import numpy as np

    error = None
    if value is not None and exact is not None:
        a, b = np.asarray(value, dtype=float), np.asarray(exact, dtype=float)
        with np.errstate(invalid="ignore"):   # inf against inf agrees: no difference
            diff = np.where(a == b, 0.0, np.abs(a - b))
        error = float(np.max(diff, initial=0.0))
    return GradEntry(name, kind, tuple(shape), retained, value,
                     None if exact is None else np.asarray(exact, dtype=float), error,
                     why if value is None else "")
