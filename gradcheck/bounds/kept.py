"""Which forward values and bounds the rounding model's backward reads
(:class:`gradcheck.bounds.model.RoundingModel`): the others are dropped as soon as the
forward has used them, so that a layer's bounds hold the arrays its backward needs, not
one value and one bound per node (layer norm over [4096, 1024]: four of ten arrays of 32
MB are read by no VJP).

What a VJP reads is a static fact of its bytecode (:func:`parameters_read`): a node is
kept when a VJP of a consumer loads the node's position among its parameters, or the
consumer's own result when the node is that consumer. Rows whose bounds are their own
code (the families whose handler says ``own_code``: composites, bilinear rows,
structure, pools; and rows with terms) keep everything they touch. A row whose PyTorch
node saves no tensor (sum, mean: ``saves=False`` in the rule table) reads its operands'
shapes only: a dropped operand is handed to it as a
zero-stride :func:`placeholder` of its shape.
"""

from __future__ import annotations

import dis
import functools
import inspect

import numpy as np

from ..rules import RULES
from ..formula.tree import Node, ordered, twins
from .families import family


@functools.lru_cache(maxsize=None)
def parameters_read(fn) -> frozenset[int] | None:
    """The positions of ``fn``'s parameters its code (nested functions included) loads;
    None when that cannot be told (not Python code, or ``*args``)."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_flags & inspect.CO_VARARGS:
        return None
    params = code.co_varnames[:code.co_argcount]
    loaded: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if "FAST" in ins.opname or "DEREF" in ins.opname or "CLOSURE" in ins.opname:
                value = ins.argval
                loaded.update(value if isinstance(value, tuple) else (value,))
        stack.extend(x for x in c.co_consts if inspect.iscode(x))
    return frozenset(i for i, name in enumerate(params) if name in loaded)


def _loads(rule, k: int, j: int | None) -> bool:
    """Whether the VJP into argument ``k`` loads the result (``j`` None) or argument j
    (a VJP that cannot be inspected loads everything)."""
    names = parameters_read(rule.engine.vjps[k])
    return names is None or (1 if j is None else 2 + j) in names


def _own_code(rule) -> bool:
    return family(rule).own_code or bool(getattr(rule.rounding, "vjps", ()))


@functools.lru_cache(maxsize=1024)
def kept(root: Node) -> frozenset[int]:
    """The ids of the nodes whose forward value and bound the backward may read: the
    root (its bound is the value's), inputs, constants, ``let`` s and twins (their
    arrays are shared), and what a VJP loads."""
    same = twins(root)
    keep = {id(root)} | set(same) | {id(n) for n in same.values()}
    for node in ordered(root):
        if node.op in ("input", "const", "let"):
            keep.add(id(node))
            keep.update(id(a) for a in node.args)
            continue
        rule = RULES[node.op]
        if family(rule).cotangent is None:   # (a comparison: none flows)
            continue
        for k, arg in enumerate(node.args):
            if rule.engine_vjp(k) is None or arg.op == "const":
                continue
            if _own_code(rule):
                keep.add(id(node))
                keep.update(id(a) for a in node.args)
                continue
            if not rule.engine.saves:   # its VJP reads shapes only: see placeholder()
                continue
            if _loads(rule, k, None):
                keep.add(id(node))
            keep.update(id(a) for j, a in enumerate(node.args) if _loads(rule, k, j))
    return frozenset(keep)


def placeholder(node: Node, rule, value):
    """``value``, or for a value dropped after the forward (None) a stand-in without
    memory: zeros of the node's shape for a row that reads shapes only, else None (a
    VJP that read it would fail loudly, never compute from made-up values)."""
    if value is not None or rule.engine.saves:
        return value
    return np.broadcast_to(0.0, node.shape)


@functools.lru_cache(maxsize=1024)
def last_uses(root: Node) -> dict[int, list[Node]]:
    """For each node's id, the arguments whose last consumer (in forward order) it is."""
    last: dict[int, Node] = {}
    for node in ordered(root):
        for a in node.args:
            last[id(a)] = node
    out: dict[int, list[Node]] = {}
    for arg_id, node in last.items():
        out.setdefault(id(node), []).append(arg_id)
    return out
