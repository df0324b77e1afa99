"""The rounding bounds (:func:`gradcheck.bounds.point.error_bounds`) of a large elementwise
formula, one slab of rows at a time: the same numbers, to the bit, without a value and
a bound of every node at full size.

Over whole arrays the model holds the forward's value and bound of every node its
backward reads, then the cotangents: at 10⁶ elements of ``sum(log(1 + exp(x)) * tanh(x)
+ sigmoid(x)**2)`` nineteen arrays of 8 MB at once. An elementwise body (every node
of one shape, no broadcasting; :func:`gradcheck.formula.tree.elementwise_split`) bounds each
element from that element alone, but for one number per probe of the backward: its
scale, from the largest relative move over the whole value
(:func:`gradcheck.bounds.elementwise.probe_scales`). An elementwise row's probe of a
float value takes each element's own scale instead, so where every probed value is a
float (or a comparison's 0/1, never moved) the work is one pass over the slabs, which
are the row blocks the whole arrays' bounds are cut into
(:func:`gradcheck.bounds.blocks.row_blocks`): the final sum or mean's VJP first (it reads
its operand's shape alone), then each slab's forward, its value and bound kept whole
(what the final reduction reduces, and the numeric witness's forward), and its backward
(:meth:`_Slabs.one_pass`). Where an integer or boolean input is probed, two:

1. the forward of each slab: each probed value's largest moves per block, and the
   body's value and bound, kept whole;
2. each slab's forward again and its backward from the body's cotangent, the probes'
   scales taken from pass 1; each slab's input and ``let`` bounds written into whole
   arrays.

Each element then gets the arithmetic the whole arrays give it (tested bit for bit,
``tests/test_slab_bounds.py``), and the bounds hold about five arrays of the full size
at once instead of nineteen.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .blocks import piece, row_blocks
from .elementwise import block_tops, top_of
from ..rules import RULES
from ..rules.row import COMPARISON, COMPOSITE, ELEMENTWISE
from ..formula.tree import Node, elementwise_split, ordered, twins, walk


def slabbed(root: Node) -> tuple[Node, Node | None, list[slice]] | None:
    """``(body, reduction, slabs)`` where the bounds of ``root`` may run by slabs of rows: an
    elementwise formula, possibly under a final sum or mean, whose every node but its
    constants (and computations of constants) has the body's shape, of more than one
    row block; else None."""
    split = elementwise_split(root)
    if split is None:
        return None
    body, reduction = split
    blocks = row_blocks(body.shape)
    if blocks is None:
        return None
    for node in walk(body):
        if node.const is not None:   # (a constant, or a computation of constants)
            continue
        if node.shape != body.shape or (
                node.op not in ("input", "let")
                and RULES[node.op].family == COMPOSITE):
            return None
    return body, reduction, blocks


@functools.lru_cache(maxsize=64)
def _slab_tree(body: Node, rows: int) -> tuple[Node, tuple[Node, ...]]:
    """``body`` with every shape cut to ``rows`` rows, and its nodes in
    :func:`gradcheck.formula.tree.ordered`'s order (each the counterpart of the body's node at
    the same position)."""
    built: dict[int, Node] = {}
    for node in ordered(body):
        shape = node.shape if node.const is not None else (rows,) + tuple(node.shape[1:])
        built[id(node)] = dataclasses.replace(
            node, shape=shape, args=tuple(built[id(a)] for a in node.args))
    slab = built[id(body)]
    return slab, ordered(slab)


def probed(b, nodes: tuple[Node, ...]) -> set[int]:
    """The positions in ``nodes`` of the values some VJP reads (``b.reads``): those its
    probes may move (each row's every VJP counted, reached by a cotangent or not)."""
    at = {id(n): k for k, n in enumerate(nodes)}
    out = set()
    for k, node in enumerate(nodes):
        if node.op in ("input", "let", "const"):
            continue
        rule = RULES[node.op]
        for i in range(len(node.args)):
            # (a row without VJPs, a comparison's, has an empty column)
            if (rule.variadic or i < len(rule.engine.vjps)) and \
                    rule.engine_vjp(i) is not None:
                out.update(k if j is None else at[id(node.args[j])]
                           for j in [None, *range(len(node.args))]
                           if b.reads(rule, i, j))
    return out


def bounded(nodes: tuple[Node, ...], probed: set[int]) -> set[int]:
    """The positions in ``nodes`` (a slab's, in order) whose forward bound its backward
    reads: the values it probes (``probed``, those a VJP reads whose tops are known: a
    probe without one does not run, :func:`gradcheck.bounds.elementwise.probe_scales`),
    every row not
    elementwise (whose VJP's bound may read its operands' bounds), and what their bounds
    are computed from: their operands', and a twin's first computation (whose value and
    bound the twin takes). The rest, bounded, change no bound the backward computes."""
    at = {id(n): k for k, n in enumerate(nodes)}
    first = {k: at[id(f)] for k, f in
             ((at[i], f) for i, f in twins(nodes[-1]).items())}
    need = set(probed) | {k for k, n in enumerate(nodes) if n.op not in ("input", "let")
                          and n.const is None and RULES[n.op].family != ELEMENTWISE}
    for k in range(len(nodes) - 1, -1, -1):   # (an operand comes before its node)
        if k in need:
            need.update(at[id(a)] for a in nodes[k].args)
            if k in first:
                need.add(first[k])
    return need


def _cut(point: dict, ndim: int, rows: slice) -> dict:
    return {name: piece(np.asarray(a), ndim, rows) for name, a in point.items()}


class _Slabs:
    """The slabs of one formula at one point: ``b_of()`` a fresh
    :class:`gradcheck.bounds.model.RoundingModel` of the dtype."""

    def __init__(self, b_of, split, point: dict):
        self.b_of, self.point = b_of, point
        self.body, self.reduction, self.blocks = split
        self.shape = tuple(self.body.shape)
        self.trees = {rows: _slab_tree(self.body, rows) for rows in
                      {self._rows(s) for s in self.blocks}}
        self.body_bounds: list | None = None   # [value, bound] of the body (first_pass)

    def _rows(self, rows: slice) -> int:
        return min(rows.stop, self.shape[0]) - rows.start

    def forward(self, rows: slice, tops: dict | None = None):
        """The bounds' forward over one slab: (its bounds, its tree, the tree's nodes in
        order). ``tops``: the probes' tops, by position in the order; given, the
        forward bounds only what the backward reads (:func:`bounded`)."""
        slab, nodes = self.trees[self._rows(rows)]
        b = self.b_of()
        if tops is not None:
            b.tops = {id(nodes[k]): t for k, t in tops.items()}
            b.bounded = {id(nodes[k]) for k in bounded(nodes, probed(b, nodes) & set(tops))}
        b.forward(slab, _cut(self.point, len(self.shape), rows))
        return b, slab, nodes

    def first_pass(self) -> dict:
        """Each probed value's top over the whole, by position in the order (the values
        no probe moves left out); the body's value and bound, whole arrays, go to
        :attr:`body_bounds` (the only reference: :meth:`reduced_value` drops them)."""
        value, bound = np.empty(self.shape), np.empty(self.shape)
        runs: dict[int, bool] = {}
        largest: dict[int, list] = {}
        for rows in self.blocks:
            b, slab, nodes = self.forward(rows)
            value[rows], bound[rows] = b.val[id(slab)], b.err[id(slab)]
            for k, node in enumerate(nodes):
                if id(node) in b.val:
                    run, tops = block_tops(b, b.val[id(node)], b.err[id(node)])
                    runs[k] = runs.get(k, False) or run
                    largest.setdefault(k, []).extend(tops)
        self.body_bounds = [value, bound]
        tops = {k: top_of(largest[k]) for k in largest if runs[k]}
        return {k: t for k, t in tops.items() if t is not None}

    def reduced_cotangent(self, v):
        """The VJP of the final sum or mean at ``v`` and its bound, on the whole arrays:
        it reads its operand's shape, never its values (the body's are not given), so
        it comes before any slab's forward."""
        reduction, body = self.reduction, self.body
        b = self.b_of()
        t = np.broadcast_to(0.0, reduction.shape)   # (read for its shape alone)
        grad: dict = {}
        gerr: dict = {}
        c, ce = b.cotangent(reduction, RULES[reduction.op], 0,
                            np.asarray(np.broadcast_to(v, np.shape(t)), dtype=float),
                            np.zeros(np.shape(t)))
        b.accumulate(grad, gerr, body, c, ce)
        return grad[id(body)], _one_number(gerr[id(body)])

    def reduced_value(self):
        """The final sum or mean's value and bound, from the body's whole value and
        bound (:attr:`body_bounds`, dropped here: the only reference)."""
        b = self.b_of()
        b.val[id(self.body)], b.err[id(self.body)] = self.body_bounds
        self.body_bounds = None
        return b.node_value(self.reduction, self.point)

    def one_pass(self, g, ge, names: list[str]) -> dict[str, np.ndarray] | None:
        """:meth:`first_pass` and :meth:`second_pass` in one pass, where no probe needs
        a whole value's top: each slab's forward, bounding every node (the body's value
        and bound go to :attr:`body_bounds`), then its backward from ``g`` (bound
        ``ge``). No tops are given: an elementwise row's probe of a float value takes
        each element's own scale (``probe_scales(own=True)``), and a comparison's 0/1
        (bound 0) is never probed. None, having done one slab, where an integer or
        boolean input is probed (:func:`_whole_scaled`): :meth:`first_pass` then."""
        last = self._last()
        value, bound = np.empty(self.shape), np.empty(self.shape)
        found: dict[str, np.ndarray] = {}
        for rows in self.blocks:
            b, slab, nodes = self.forward(rows)
            if rows is self.blocks[0] and _whole_scaled(b, nodes):
                return None
            value[rows], bound[rows] = b.val[id(slab)], b.err[id(slab)]
            self._backward(b, slab, nodes, rows, g, ge, names, last, found)
        self.body_bounds = [value, bound]
        return found

    def _last(self) -> dict[str, int]:
        """The position in the order of the node error_bounds reads for each input
        and ``let`` name: the last."""
        return {node.name: k for k, node in enumerate(ordered(self.body))
                if node.op in ("input", "let")}

    def _backward(self, b, slab, nodes, rows, g, ge, names, last, found) -> None:
        """One slab's backward from ``g`` (bound ``ge``, None: exact); the bounds of
        ``names`` written into ``found``'s whole arrays."""
        n = len(self.shape)
        _, gerr = b.backward(slab, piece(g, n, rows), release=True,
                             v_bound=None if ge is None else piece(ge, n, rows))
        for name in names:
            key = id(nodes[last[name]]) if name in last else None
            if key in gerr:
                found.setdefault(name, np.empty(self.shape))[rows] = gerr[key]

    def second_pass(self, tops: dict, g, ge, names: list[str]) -> dict[str, np.ndarray]:
        """Each slab's forward and backward from the body's cotangent ``g`` (bound
        ``ge``, None: exact), the probes' scales from ``tops``: the bounds of the inputs
        and lets ``names``, as whole arrays (those the backward reaches)."""
        last = self._last()
        found: dict[str, np.ndarray] = {}
        for rows in self.blocks:
            b, slab, nodes = self.forward(rows, tops)
            self._backward(b, slab, nodes, rows, g, ge, names, last, found)
        return found


def _one_number(a):
    """``a``, or a view of its first element where every element has its bits (a sum's
    or a mean's cotangent bound at one v: no memory beside the body's whole value and
    bound, which :meth:`_Slabs.one_pass` holds while its slabs run)."""
    a = np.asarray(a)
    if a.ndim and a.dtype == np.float64 and a.size:
        bits = a.view(np.uint64) if a.flags.c_contiguous else None
        if bits is not None and (bits == bits.flat[0]).all():
            return np.broadcast_to(a.flat[0], a.shape)
    return a


def _whole_scaled(b, nodes: tuple[Node, ...]) -> bool:
    """Whether a value some VJP of the slab reads (:func:`probed`) is neither a float
    nor a comparison's 0/1: an integer or boolean input (or a ``let`` of it), whose
    probe takes one scale from its largest move over the whole value, not the slab."""
    for k in probed(b, nodes):
        if id(nodes[k]) not in b.val or \
                np.asarray(b.val[id(nodes[k])]).dtype.kind == "f":
            continue
        source = nodes[k]
        while source.op == "let":
            source = source.args[0]
        if source.op in ("input", "const") or RULES[source.op].family != COMPARISON:
            return True
    return False


def slab_error_bounds(b_of, case, split, point: dict, v: np.ndarray):
    """:func:`gradcheck.bounds.point.error_bounds`'s bounds of ``case`` at ``point``
    and ``v``, by slabs (``split``: :func:`slabbed`'s); ``b_of()`` a fresh
    :class:`gradcheck.bounds.model.RoundingModel` of the dtype. Returns (the bounds by
    quantity, as error_bounds names them; the root's value)."""
    slabs = _Slabs(b_of, split, point)
    retained = list(getattr(case, "retain_grad", ()))
    names = [s.name for s in case.inputs] + retained
    v = np.asarray(v, float)
    g, ge = (np.broadcast_to(v, slabs.shape), None) if slabs.reduction is None else \
        slabs.reduced_cotangent(v)
    found = slabs.one_pass(g, ge, names)
    if found is None:   # (an integer input is probed: its top first, then the slabs)
        tops = slabs.first_pass()
        found = slabs.second_pass(tops, g, ge, names)
    if slabs.reduction is None:
        t, e = slabs.body_bounds
    else:
        t, e = slabs.reduced_value()
    out = {"value": e}
    for spec in case.inputs:
        out[f"{spec.name}.grad"] = found.get(spec.name, np.zeros(tuple(spec.shape)))
    out.update({f"{name}.grad": found[name] for name in retained if name in found})
    return out, t
