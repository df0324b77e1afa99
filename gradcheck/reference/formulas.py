"""Tensor expressions (:mod:`.texpr`) as text: the gradient formulas a report shows, e.g.
``W.grad = xᵀ @ (broadcast(ḡ, [4, 2]) ⊙ (1 - tanh(x @ W)**2))``.

A tensor used more than once in the printed formulas is named once (``t1 = x @ W``) and
the formulas refer to it; ``ḡ`` is the output's cotangent (the v of ``y.backward(v)``),
``⊙`` the elementwise product, ``sum_to(a, shape)`` the sum of ``a`` over the axes
broadcasting added (broadcasting's adjoint).
"""

from __future__ import annotations

import inspect

from ..rules import RULES
from ..rules.keys import text
from .texpr import T, order

LONGEST = 2000     # characters a formula is cut to


def _children(node: T) -> tuple[T, ...]:
    """What a node's text is made of: a kernel's part is printed from the kernel's
    arguments (the kernel itself has no text of its own)."""
    return node.args[0].args if node.op == "part" else node.args


def show(named: dict[str, T]) -> dict[str, str]:
    """``{label: formula}`` for each tensor in ``named``; the shared subexpressions
    first, under the label ``""`` (one ``t1 = ...`` per line)."""
    nodes = order(list(named.values()))
    uses: dict[int, int] = {}
    for node in nodes:
        if node.op == "kernel":
            continue
        for c in _children(node):
            uses[id(c)] = uses.get(id(c), 0) + 1
    text: dict[int, tuple[str, bool]] = {}   # id -> (text, atomic)
    shared: list[str] = []
    for node in nodes:
        if node.op == "kernel":
            continue
        body, atomic = _text(node, [text[id(c)] for c in _children(node)])
        if uses.get(id(node), 0) > 1 and not atomic:
            name = f"t{len(shared) + 1}"
            shared.append(f"{name} = {body}")
            body, atomic = name, True
        text[id(node)] = (body, atomic)
    out = {"": "\n".join(shared)} if shared else {}
    for label, node in named.items():
        body = text[id(node)][0]
        out[label] = body if len(body) <= LONGEST else body[:LONGEST] + "…"
    return out


def _number(x: float) -> str:
    """``x`` as short text: ``1/1024`` for the reciprocal of an integer (a mean's
    scale), else the shortest repr."""
    if 0 < abs(x) < 1 and float(round(1 / x)) == 1 / x:
        return f"{'-' if x < 0 else ''}1/{abs(round(1 / x))}"
    return repr(int(x)) if x == int(x) else repr(x)


def _wrap(arg: tuple[str, bool]) -> str:
    return arg[0] if arg[1] else f"({arg[0]})"


def _text(node: T, args: list[tuple[str, bool]]) -> tuple[str, bool]:
    op = node.op
    if op == "leaf":
        return node.data, True
    if op == "const":
        return _number(node.data), node.data >= 0 and "/" not in _number(node.data)
    if op == "part":
        return _part(node, args)
    if op == "mul":
        return f"{_wrap(args[0])} ⊙ {_wrap(args[1])}", False
    if op == "add":
        return " + ".join(_wrap(a) for a in args), False
    if op in ("reshape", "broadcast", "sum_to"):
        return f"{op}({args[0][0]}, {list(node.shape)})", True
    if op == "embed":
        return f"embed({args[0][0]}, {list(node.shape)}, {text(node.data)})", True
    if op == "others":
        return f"prod_others({args[0][0]}, axis={node.data})", True
    if op == "apply":
        return _applied(node, args), True
    name, params = node.data
    rule = RULES[name]
    if op == "select":
        return f"{name}_mask({', '.join([args[0][0], *rule.keywords(params)])})", True
    if name == "transpose" and _last_two(params, len(node.shape)):
        return f"{_wrap(args[0])}ᵀ", True
    if rule.symbol is None:
        return rule.spell([a[0] for a in args], rule.keywords(params)), True
    return rule.spell([_wrap(a) for a in args]), False


def _applied(node: T, args: list[tuple[str, bool]]) -> str:
    """A named function's call, with the parameters that differ from its defaults (its
    result's shape never: that is the node's)."""
    fn, params = node.data
    defaults = inspect.signature(fn).parameters
    shown = [f"{name}={list(v) if isinstance(v, tuple) else v}" for name, v in params
             if name != "shape" and (name not in defaults or defaults[name].default != v)]
    return f"{fn.__name__}({', '.join([a[0] for a in args] + shown)})"


def _last_two(params, ndim: int) -> bool:
    """Whether transpose's axes are the last two (written ᵀ)."""
    return {d % ndim for _, d in params} == {ndim - 2, ndim - 1}


def _part(node: T, names: list[tuple[str, bool]]) -> tuple[str, bool]:
    return node.args[0].data.shown(names, node.data), False
