"""A PyTorch function traced to formula text: ``make_fx`` with fake tensors gives its
ATen graph (:func:`graph_of`), and each ATen op becomes the rows :mod:`.aten` maps it
to (:func:`translate`). A value used twice becomes a ``let``, so the formula is the
graph's DAG, not a tree grown from it.

The decomposition table is chosen, not the whole core table: an op the mapping takes
whole (``aten.gelu``, ``aten._softmax``, ``aten.detach``) stays whole, for the rows'
own rounding and derivatives, and ``.detach()`` keeps its stop-gradient (the core table
turns it into ``aten.alias``); composite ops with no row (``native_layer_norm``,
``var_mean``, group and batch norm) are decomposed into ops that have one.

Tracing runs the user's code; the judge calls :func:`trace` only inside the op's own
process (:mod:`gradcheck.checking.opcheck.server`), and what comes back is text its
safe parser reads.
"""

from __future__ import annotations

import functools
import operator
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .aten import ATEN, Out
from .values import Traced, TraceError, number, unreadable

#: ops decomposed before mapping although the core table keeps them (no row of their own)
DECOMPOSED = ("native_layer_norm", "var_mean", "std_mean", "native_group_norm",
              "_native_batch_norm_legit_no_training", "native_batch_norm",
              "mse_loss", "huber_loss", "smooth_l1_loss",
              "binary_cross_entropy_with_logits", "nll_loss_forward", "nll_loss2d_forward",
              "embedding", "upsample_nearest2d", "upsample_bilinear2d", "hardswish",
              "hardsigmoid", "index", "threshold", "addcmul", "addcdiv", "lerp", "logit",
              "glu", "celu", "selu", "frac")
LONG_TEXT = 240            # characters after which an operand becomes a let


@dataclass(frozen=True)
class Argument:
    """One input of the traced function: its name, shape and kind (float, int, bool)."""

    name: str
    shape: tuple[int, ...]
    kind: str = "float"


@dataclass
class Translation:
    """The function as formula text: ``outputs`` (one expression per output), the
    ``lets`` they read, in order, and ``graph``, the traced ATen graph as text."""

    outputs: tuple[str, ...]
    lets: tuple[tuple[str, str], ...]
    graph: str
    ops: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        return {"outputs": list(self.outputs), "lets": [list(p) for p in self.lets],
                "graph": self.graph, "ops": list(self.ops)}


@functools.lru_cache(maxsize=1)
def decompositions() -> dict:
    """The decomposition table: the core one, less the ops :mod:`.aten` maps whole,
    plus :data:`DECOMPOSED` (built once per process: every trace reads it, none
    changes it)."""
    import torch
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = {op: fn for op, fn in core_aten_decompositions().items()
             if _packet(op) not in ATEN}
    aten = torch.ops.aten
    wanted = [getattr(aten, name) for name in DECOMPOSED if hasattr(aten, name)]
    extra = get_decompositions(wanted)
    table.update(extra)
    return table


def _packet(op) -> str:
    """``aten.mm.default`` -> ``aten.mm``."""
    packet = getattr(op, "overloadpacket", op)
    return f"{packet._qualified_op_name.replace('::', '.')}" \
        if hasattr(packet, "_qualified_op_name") else str(packet)


def _kind(value) -> str:
    if value.dtype.is_floating_point or value.dtype.is_complex:
        return "float"
    return "bool" if str(value.dtype) == "torch.bool" else "int"


_TORCH_DTYPES = {"float": "float64", "int": "int64", "bool": "bool"}


def example_tensors(arguments: Sequence[Argument]) -> list:
    import torch
    return [torch.zeros(a.shape, dtype=getattr(torch, _TORCH_DTYPES[a.kind]))
            for a in arguments]


def graph_of(fn: Callable, arguments: Sequence[Argument]):
    """The ATen graph of ``fn`` over tensors of ``arguments``' shapes (fake tensors:
    nothing is computed), with :func:`decompositions`."""
    from torch.func import functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    from .rewrites import rewriting

    def rewritten(*tensors):
        with rewriting():
            return fn(*tensors)

    def traced(f):
        return make_fx(f, decomposition_table=decompositions(),
                       tracing_mode="fake")(*example_tensors(arguments))

    try:   # functionalized: an in-place op inside fn is its out-of-place value
        return traced(functionalize(rewritten))
    except TraceError:
        raise
    except Exception as exc:
        first = exc
    try:   # a transform refuses an old-style autograd.Function (no setup_context):
        return traced(rewritten)   # traced as it is (its in-place ops: _in_place)
    except TraceError:
        raise
    except Exception:
        raise TraceError(f"tracing failed: {type(first).__name__}: "
                         f"{str(first).splitlines()[0] if str(first) else ''}") from None


# long: one walk over the graph's nodes, each kind of node a branch
def translate(gm, arguments: Sequence[Argument], fn: Callable | None = None) -> Translation:
    """The formula text of a traced graph ``gm`` whose placeholders are ``arguments``."""
    import torch.fx as fx

    env: dict[Any, Any] = {}
    lets: list[tuple[str, str]] = []
    taken = {a.name for a in arguments}
    places = iter(arguments)
    outputs: tuple[str, ...] = ()
    used: list[str] = []

    def let(node, traced: Traced) -> Traced:
        if _plain(traced.text):
            return traced
        name = f"t{len(lets) + 1}"
        while name in taken:
            name += "_"
        taken.add(name)
        lets.append((name, traced.text))
        return Traced(name, traced.shape, traced.kind)

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            a = next(places)
            env[node] = Traced(a.name, tuple(a.shape), a.kind)
        elif node.op == "call_function" and node.target is operator.getitem:
            env[node] = env[node.args[0]][node.args[1]]
        elif node.op == "get_attr":   # a constant tensor made inside fn
            env[node] = _constant(getattr(gm, node.target))
        elif node.op == "call_function":
            packet = _in_place(node, _packet(node.target))
            emit = ATEN.get(packet)
            if emit is None:
                raise TraceError(f"ATen op {packet} has no mapping to the rule table "
                                 "(gradcheck functions --aten lists the mapped ops)",
                                 op=packet, where=_line_of(fn, gm, arguments, packet))
            used.append(packet)
            args = fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
            kwargs = {k: v for k, v in kwargs.items()
                      if k not in ("dtype", "layout", "device", "pin_memory",
                                   "memory_format", "non_blocking")}
            value = node.meta.get("val")
            reason = unreadable([*args, *kwargs.values()])
            if reason is not None:
                raise TraceError(f"{packet} reads a value with no formula: {reason}",
                                 op=packet, where=_line_of(fn, gm, arguments, packet))
            try:
                if isinstance(value, (tuple, list)):
                    texts = emit(tuple(Out(tuple(v.shape), _kind(v)) for v in value),
                                 *args, **kwargs)
                    env[node] = tuple(Traced(t, tuple(v.shape), _kind(v))
                                      for t, v in zip(texts, value))
                    continue
                out = Out(tuple(value.shape), _kind(value))
                traced = Traced(emit(out, *args, **kwargs), out.shape, out.kind)
            except TraceError as exc:
                raise TraceError(str(exc), op=packet,
                                 where=_line_of(fn, gm, arguments, packet)) from None
            except (TypeError, ValueError) as exc:
                raise TraceError(f"ATen op {packet} called as {node.format_node()} "
                                 f"is not mapped that way: {exc}", op=packet,
                                 where=_line_of(fn, gm, arguments, packet)) from None
            # a condition is written where it is used (a comparison is no let's body)
            shared = traced.kind != "bool" and (len(node.users) > 1
                                                or len(traced.text) > LONG_TEXT)
            env[node] = let(node, traced) if shared else traced
        elif node.op == "output":
            results = node.args[0]
            results = results if isinstance(results, (tuple, list)) else (results,)
            reason = unreadable([env[r] for r in results if not isinstance(r, (int, float))])
            if reason is not None:
                raise TraceError(f"the function returns a value with no formula: {reason}")
            outputs = tuple(_output_text(env, r) for r in results)
    return Translation(outputs, tuple(lets), _graph_text(gm, arguments),
                       tuple(dict.fromkeys(used)))


def _in_place(node, packet: str) -> str:
    """An in-place op a decomposition left (``aten.add_``) as its out-of-place packet,
    where nothing else reads the tensor it overwrites; ``aten.as_strided`` as a view
    where it reads a contiguous tensor in its own order."""
    if packet == "aten.as_strided":
        source, size, stride = node.args[0].meta.get("val"), node.args[1], node.args[2]
        offset = node.args[3] if len(node.args) > 3 else 0
        if source is None or not source.is_contiguous() or offset \
                or source.numel() != _numel(size) or list(stride) != _strides(size):
            raise TraceError("as_strided over a strided tensor has no formula",
                             op=packet)
        return "aten.view"
    if not packet.endswith("_") or packet.endswith("__") or packet[:-1] not in ATEN:
        return packet
    target = node.args[0]
    if len(target.users) != 1:
        raise TraceError(f"{packet} overwrites a tensor read elsewhere: no formula",
                         op=packet)
    return packet[:-1]


def _numel(size) -> int:
    n = 1
    for s in size:
        n *= int(s)
    return n


def _strides(size) -> list[int]:
    strides, step = [], 1
    for s in reversed(list(size)):
        strides.append(step)
        step *= max(int(s), 1)
    return strides[::-1]


def _constant(value) -> Traced:
    """A constant tensor of the traced function: a number, or an array literal."""
    kind = _kind(value)
    if value.ndim == 0:
        return Traced(number(value.item()), (), kind)
    if kind != "float":
        raise TraceError("an integer or boolean constant tensor has no formula")
    return Traced(repr(value.tolist()), tuple(value.shape), kind)


def _output_text(env, result) -> str:
    value = env[result] if not isinstance(result, (int, float)) else result
    return value.text if isinstance(value, Traced) else number(value)


def _plain(text: str) -> bool:
    """A name or a number: nothing a let would save."""
    t = text.lstrip("-")
    return t.replace("_", "").isalnum() or t.replace(".", "", 1).isdigit()


def _graph_text(gm, arguments: Sequence[Argument] = ()) -> str:
    """The graph, one op a line: ``name = aten.op(args)``; the placeholders named as
    the case's inputs (``x: input [4, 8]``)."""
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    own = {n.name: a.name for n, a in zip(places, arguments)
           if a.name not in {m.name for m in gm.graph.nodes}}
    def name(value) -> str:
        return own.get(str(value), str(value))

    lines = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            target = _packet(node.target) if node.target is not operator.getitem else "getitem"
            args = ", ".join([*(_shown(a, name) for a in node.args),
                              *(f"{k}={_shown(v, name)}" for k, v in node.kwargs.items())])
            lines.append(f"{node.name} = {target}({args})")
        elif node.op == "placeholder":
            shape = list(getattr(node.meta.get("val"), "shape", ()))
            lines.append(f"{name(node.name)}: input {shape}")
        elif node.op == "output":
            lines.append(f"return {_shown(node.args[0], name)}")
    return "\n".join(lines)


def _shown(value, name) -> str:
    """An argument of a graph line: a node by its (input's) name, lists of them too."""
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_shown(v, name) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return name(value) if hasattr(value, "op") else str(value)


def _line_of(fn, gm, arguments, packet: str) -> str:
    """The line of ``fn`` (or what it calls outside torch) that dispatched ``packet``
    first, found by running ``fn`` again on fake tensors and watching the dispatch; ""
    where it cannot be told (an op made by a decomposition)."""
    if fn is None:
        return ""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    torch_dir = os.path.dirname(torch.__file__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not found and _packet(func) == packet:
                for frame in reversed(traceback.extract_stack()[:-1]):
                    name = os.path.abspath(frame.filename)
                    if not name.startswith((torch_dir, here)) and "/python3" not in name:
                        found.append(f"{frame.filename}:{frame.lineno}: "
                                     f"{(frame.line or '').strip()}")
                        break
            return func(*args, **(kwargs or {}))

    try:
        with FakeTensorMode() as mode:
            tensors = [mode.from_tensor(t) for t in example_tensors(arguments)]
            with Watch():
                fn(*tensors)
    except Exception:
        pass
    return found[0] if found else ""


def trace(fn: Callable, arguments: Sequence[Argument]) -> Translation:
    """``fn`` called with tensors of ``arguments``, as formula text."""
    return translate(graph_of(fn, arguments), arguments, fn)
