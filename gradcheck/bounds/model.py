"""The rounding model (:class:`RoundingModel`): a-priori rounding-error bounds, how far a
*correct* computation of a formula's value and of its vᵀJ can be from the exact numbers
in a given dtype, element by element.

This is a running error analysis (Wilkinson; Higham, *Accuracy and Stability of
Numerical Algorithms*, §3.3), done to first order in the unit roundoff u and evaluated
in float64 at the point. It follows the computation autograd performs: the forward pass
through the rule table's ``numpy`` column, then the backward pass through the
``engine`` column's VJPs, which are PyTorch's own backward formulas (``1 - y*y`` for
tanh, ``y * (1 - y)`` for sigmoid): the bound sees the cancellation *inside* those
formulas, not only the size of the result.

For every computed quantity q (a node's value, a VJP, an accumulated cotangent) it keeps
E(q) >= |fl(q) - q|:

- a primitive t = f(a₁, ..., aₙ): E(t) = Σₖ |∂f/∂aₖ|·E(aₖ) + ρ_f·u·|t|, with ρ_f the
  primitive's own rounding (the rule table's ``rounding`` column, relative to the terms
  its formula adds where they cancel: :mod:`gradcheck.rules.terms`); a sum or
  contraction over n terms adds γ(n)·u_acc·Σ|terms| instead
  (:func:`gradcheck.bounds.summation.accumulation`), the bound for blocked pairwise
  summation, at the unit roundoff of the accumulator (float32 at least, as PyTorch's
  CPU kernels accumulate half precision in float32; where torch adds a convolution's
  cotangent from parts rounded into the dtype, aten's own kernels for float16 on a CPU
  without avx512_fp16, m·u·Σ|parts|: :mod:`gradcheck.bounds.bilinear`);
- a VJP c = vjp(ḡ, t, a...): E(c) = |vjp|(E(ḡ)) (the cotangent's own error, through
  |J|) + the change of c when t and each aⱼ move by their errors E(t), E(aⱼ) plus one
  more u·|t|, u·|aⱼ| for the rounding where the formula uses them (x*x inside
  exp(-x*x) is amplified by x²), measured by perturbing each in the direction that
  increases |c| (exact for the elementwise and product forms the table uses), plus
  (2ρ + 1)·u·|c| for the formula's own operations;
- summing cotangents back over broadcast axes and over several parents adds the
  accumulation bound of those sums.

Inputs and the cotangent v are exact (points are rounded to the dtype before anything
runs), a constant that the dtype cannot represent carries u·|c|.

This module walks the formula; what each node adds is its family's
(:mod:`gradcheck.bounds.families`: one module per family, picked by ``rule.family``).
:func:`gradcheck.bounds.point.error_bounds` and ``forward_bound`` run it at a point;
their result is absolute, per element, keyed like
:meth:`gradcheck.base.evaluation.Evaluation.quantities`, and
:mod:`gradcheck.bounds.tolerance` turns it into tolerances.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..base.arrays import unbroadcast
from ..base.dtypes import (accumulator_roundoff, info, round_to, smallest_normal,
                           unit_roundoff)
from ..formula.tree import Node, ordered, twins
from ..rules import AXIS, RULES
from ..rules.row import ELEMENTWISE
from .blocks import Spare, by_rows, piece, plus
from .elementwise import vjp
from .families import family
from .kept import kept, last_uses, parameters_read, placeholder
from .summation import accumulation


@functools.lru_cache(maxsize=None)
def _units(dtype: str) -> tuple[float, float, float]:
    """(u, u_acc, η): the unit roundoffs of ``dtype`` and of its accumulator
    (:attr:`gradcheck.base.dtypes.Format.accumulator`), and its underflow: a result
    below the smallest normal is rounded to the subnormal grid, an absolute error of up
    to its spacing (Higham's model, fl(x) = x(1 + δ) + η), smallest normal · 2u; formed
    as 2u first: 2^-1022 · 2^-53 itself underflows."""
    u = unit_roundoff(dtype)
    return u, accumulator_roundoff(dtype), smallest_normal(dtype) * (2 * u)


@functools.lru_cache(maxsize=1024)
def _exact(shape: tuple[int, ...]) -> np.ndarray:
    """An exact value's bound: 0 of ``shape``, read-only and without memory (one per
    shape: a point's inputs get the same at every forward)."""
    return np.broadcast_to(0.0, shape)


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


@functools.lru_cache(maxsize=1024)
def _representable(c: float, dtype: str) -> bool:
    """Whether ``dtype`` holds the constant ``c`` exactly."""
    return bool(np.all(round_to(c, dtype) == c))


class RoundingModel:
    """One evaluation of the bounds of one formula at one point in one dtype: the
    forward (:meth:`forward`), then the backward from a cotangent (:meth:`backward`).

    The family modules (:mod:`gradcheck.bounds.families`) read it through this
    protocol, and through nothing else:

    - ``dtype``, ``device``; ``u``, ``u_acc``, ``eta``: the unit roundoffs of storage
      and of accumulation, and the underflow η (:func:`_units`); ``flush``: the
      smallest normal of the format values are computed in, below which an elementwise
      VJP's factor may come out as 0;
    - ``val``, ``err``: each node's value and bound by ``id(node)``, as the forward
      left them; ``lead``: ``(n,)`` where the backward carries n cotangents along a
      leading axis, else ``()``; ``spare``: arrays to write over
      (:class:`gradcheck.bounds.blocks.Spare`); ``tops``: the probes' largest moves
      over a whole formula this evaluates one slab of (:mod:`gradcheck.bounds.slab`),
      or None;
    - :meth:`arg`, :meth:`operands`: what a node's row reads; :meth:`call`,
      :meth:`each`, :meth:`together`, :meth:`batched`: its VJP, at one cotangent or
      at many; :meth:`reads`: whether that VJP reads a value.
    """

    def __init__(self, dtype: str, device: str = "cpu", watch=None, *,
                 skip_unread: bool = True):
        self.dtype, self.device = dtype, device   # (the device: torch's kernels differ)
        # a gradcheck.sampling.overflow.Watch: sees every cotangent and VJP of the backward
        self.watch = watch
        # whether the probes of values a VJP does not read are skipped, and those values
        # dropped after the forward (a test turns it off: the bounds must be the same)
        self.skip_unread = skip_unread
        self.u, self.u_acc, self.eta = _units(dtype)   # (η: underflow, see _units)
        # λ of the format values are computed in (float32 for the half precisions, as
        # torch's CPU kernels compute them): a factor below it may come out as 0
        # (gradcheck.bounds.elementwise._flushed)
        self.flush = smallest_normal(info(dtype).accumulator)
        self.lead: tuple[int, ...] = ()   # (n,): the backward carries n cotangents
        self.val: dict[int, Any] = {}
        self.err: dict[int, np.ndarray] = {}
        self.spare = Spare()   # arrays dropped, to be written over (layer sizes)
        # the probes' largest relative moves over a whole formula this evaluates one
        # slab of, by node id (gradcheck.bounds.slab); None: taken from the arrays here
        self.tops: dict[int, Any] | None = None
        # node id -> its arguments as a witness held them (the branch it took, decisions)
        self.pins: dict[int, list] = {}
        # the ids of the nodes whose forward bound is read; an elementwise row outside
        # it gets its value alone (a slab's second forward, gradcheck.bounds.slab, whose
        # backward reads the bounds of the values it probes only); None: every node
        self.bounded: set[int] | None = None

    # ------------------------------------------------------------------ protocol
    def arg(self, node: Node, j: int) -> Any:
        """``node``'s argument ``j`` as the row reads it (pinned, or its own; None where
        dropped)."""
        pinned = self.pins.get(id(node))
        return pinned[j] if pinned is not None and isinstance(pinned[j], np.ndarray) \
            else self.val.get(id(node.args[j]))

    def operands(self, node: Node, rule) -> tuple[Any, list, list]:
        """(t, args, errs): ``node``'s value, its arguments as its row reads them, and
        their bounds; a value dropped after the forward (no VJP reads it) as
        :func:`gradcheck.bounds.kept.placeholder` hands it over."""
        t = placeholder(node, rule, self.val.get(id(node)))
        args = [placeholder(a, rule, self.arg(node, j)) for j, a in enumerate(node.args)]
        return t, args, [self.err.get(id(a)) for a in node.args]

    def reads(self, rule, k: int, j: int | None) -> bool:
        """Whether the engine's VJP into argument ``k`` reads the forward's result (``j``
        None) or argument ``j``: its code loads that parameter (a static fact of its
        bytecode; a VJP that cannot be inspected reads everything). A node that saves
        no tensor reads none. Always True where :attr:`skip_unread` is off."""
        if not self.skip_unread:
            return True
        if not rule.engine.saves:
            return False
        names = parameters_read(rule.engine.vjps[k])
        return names is None or (1 if j is None else 2 + j) in names

    def call(self, node: Node, rule, k: int, g, t, args) -> np.ndarray:
        """The engine's VJP into argument ``k`` at the cotangent ``g``: with many
        cotangents (:attr:`lead`) as the row's family takes them."""
        if self.lead:
            return _arr(family(rule).many(self, node, rule, k, g, t, args))
        return _arr(vjp(node, rule, k, g, t, args))

    def each(self, node: Node, rule, k: int, g, t, args) -> np.ndarray:
        """The VJP at many cotangents, one at a time, stacked."""
        return np.stack([_arr(vjp(node, rule, k, gi, t, args)) for gi in g])

    def together(self, node: Node, rule, k: int, g, t, args):
        """The VJP at many cotangents in one call, arranged by :meth:`batched`."""
        g, t, args, params = self.batched(node, rule, g, t, args)
        return rule.vjp(k, g, t, args, params)

    def batched(self, node: Node, rule, g, t, args):
        """A VJP's (g, ans, args, params) when ``g`` carries many cotangents along a
        leading axis (:attr:`lead`). Elementwise rows broadcast g against their operands
        from the right: they take the batch as it is. A row with an axis parameter (a
        reduction) names its axes from the left: they move one past the batch axis, and
        its operands get that axis too (broadcast views, no copies)."""
        params = node.params
        if any(p.kind == AXIS for p in rule.params):
            params = tuple((name, tuple(d + 1 for d in value) if p.kind == AXIS
                            else value) for p, (name, value) in zip(rule.params, params))
            # (None: a value the VJP does not read, dropped after the forward)
            t = None if t is None else np.broadcast_to(t, self.lead + np.shape(t))
            args = [None if a is None else np.broadcast_to(a, self.lead + np.shape(a))
                    for a in args]
        return g, t, args, params

    # ------------------------------------------------------------------ forward
    def forward(self, root: Node, point: dict[str, np.ndarray],
                overrides: dict[str, np.ndarray] | None = None) -> None:
        """Values and error bounds of every node. ``overrides``: input or ``let`` names
        set to values computed in this dtype (a perturbed point, x + h): each carries
        its own rounding, u·|value|."""
        same = twins(root)   # a computation written twice has one value and bound
        # what no VJP reads is dropped after its last use here (kept)
        keep = kept(root) if self.skip_unread else None
        done = last_uses(root)
        for node in ordered(root):
            key = id(node)
            self.val[key], self.err[key] = self._node(node, point, overrides,
                                                      same.get(key))
            for a in done.get(key, ()) if keep is not None else ():
                if a not in keep:
                    value, bound = self.val.pop(a, None), self.err.pop(a, None)
                    self.spare.give(bound, self.val, self.err)
                    self.spare.give(value, self.val, self.err)

    def _node(self, node: Node, point, overrides, first: Node | None):
        if overrides and node.op in ("input", "let") and node.name in overrides:
            x = _arr(overrides[node.name])
            return x, self.u * np.abs(x)
        if first is not None:
            return self.val[id(first)], self.err[id(first)]
        return self.node_value(node, point)

    def _integer_error(self, x: np.ndarray) -> np.ndarray:
        """An integer input's error where float arithmetic takes it: none, but where the
        dtype cannot hold it (above 2^11 in float16, 2^8 in bfloat16: torch rounds the
        integer into the dtype before it multiplies)."""
        off = np.abs(round_to(x, self.dtype) - x)
        return off if off.any() else _exact(np.shape(x))

    def node_value(self, node: Node, point) -> tuple[Any, np.ndarray]:
        """``node``'s value and bound from its arguments' (in :attr:`val`, :attr:`err`)
        or, for an input, from ``point``: what its family adds."""
        if node.op == "input":   # exact: a view, no memory (an integer input as it is)
            x = np.asarray(point[node.name])
            if x.dtype.kind in "biu":
                return x, self._integer_error(x)
            return _arr(x), _exact(np.shape(x))
        if node.op == "const":
            c = _arr(node.const)
            exact = _representable(float(node.const), self.dtype)
            return c, (np.zeros_like(c) if exact else self.u * np.abs(c))
        args = [self.arg(node, j) for j in range(len(node.args))]
        errs = [self.err[id(a)] for a in node.args]
        if node.op == "let":
            return args[0], errs[0]
        rule = RULES[node.op]
        if self.bounded is not None and id(node) not in self.bounded and \
                rule.family == ELEMENTWISE:   # (the value elementwise_value computes)
            return _arr(node.call("numpy", args)), None
        return family(rule).value(self, node, rule, args, errs)

    # ------------------------------------------------------------------ backward
    def backward(self, root: Node, v: np.ndarray, batch: bool = False,
                 release: bool = False, v_bound: np.ndarray | None = None
                 ) -> tuple[dict, dict]:
        """Cotangents and their error bounds of the inputs and ``let`` s, by node id.
        ``batch``: ``v`` holds many cotangents along its first axis, carried through
        together, each as it would be alone (every cotangent and bound then has that
        axis in front). ``release``: drop each node's forward value and bound once its
        backward is done (its parents' came before), when the forward is not kept for
        another v: a large formula then holds about half the arrays at its peak.
        ``v_bound``: the bound of ``v`` where it was computed (default exact)."""
        order = ordered(root)
        self.lead = (int(np.shape(v)[0]),) if batch else ()
        shape = self.lead + root.shape
        grad: dict[int, np.ndarray] = {id(root): _arr(np.broadcast_to(v, shape))}
        gerr: dict[int, np.ndarray] = {id(root): np.zeros(shape) if v_bound is None
                                       else _arr(v_bound)}
        for node in reversed(order):
            g = grad.get(id(node))
            if g is not None and self.watch is not None and node.op != "input":
                self.watch.see(node, g)   # (a gradient is compared: it may pass)
            if g is None or node.op in ("input", "const"):
                continue
            ge = gerr[id(node)]
            if node.op == "let":
                self.accumulate(grad, gerr, node.args[0], g, ge)
                continue
            rule = RULES[node.op]
            if family(rule).cotangent is None:   # (a comparison: none flows)
                continue
            for k, arg in enumerate(node.args):   # (a variadic row: one VJP for all)
                if rule.engine_vjp(k) is None or arg.op == "const":
                    continue
                c, ce = self.cotangent(node, rule, k, g, ge)
                if self.watch is not None and not (
                        arg.op == "input" and np.shape(c) == self.lead + tuple(arg.shape)):
                    self.watch.see(node, c, "backward")
                self.accumulate(grad, gerr, arg, c, ce)
                self._give(c, grad, gerr), self._give(ce, grad, gerr)
            del grad[id(node)], gerr[id(node)]
            self._give(g, grad, gerr), self._give(ge, grad, gerr)
            if release and node is not root:
                value, bound = self.val.pop(id(node), None), self.err.pop(id(node), None)
                self._give(value, grad, gerr), self._give(bound, grad, gerr)
        return grad, gerr

    def cotangent(self, node: Node, rule, k: int, g, ge) -> tuple[np.ndarray, np.ndarray]:
        """The VJP of ``node`` into argument ``k`` at the cotangent ``g`` (bound ``ge``)
        and its bound: its family's."""
        return family(rule).cotangent(self, node, rule, k, g, ge)

    def _give(self, array, grad: dict, gerr: dict) -> None:
        """Hand ``array``, which the backward no longer uses, to :attr:`spare` unless a
        forward value or bound or a cotangent still holds it."""
        self.spare.give(array, self.val, self.err, grad, gerr)

    def accumulate(self, grad: dict, gerr: dict, arg: Node, c, ce) -> None:
        """Sum ``c`` back to ``arg``'s shape and add it to ``arg``'s cotangent (a large
        one a block of rows at a time, :func:`by_rows`: the same arithmetic)."""
        shape = arg.shape
        n = max(1, int(np.size(c) // max(1, math.prod(self.lead + shape))))
        summed = self._unbroadcast(c, shape)
        err = self._unbroadcast(ce if np.shape(ce) == np.shape(c) else
                                np.broadcast_to(ce, np.shape(c)), shape)
        if n > 1:
            err = err + accumulation(n) * self.u_acc * self._sum_abs(c, shape)
        key = id(arg)
        if key in grad:
            old, olde, new, newe = grad[key], gerr[key], summed, err
            full, u = self.lead + tuple(shape), self.u

            def bound(rows):   # both bounds, plus the sum's rounding u·(|old| + |new|) + η
                sizes = np.abs(piece(old, len(full), rows))
                sizes += np.abs(piece(new, len(full), rows))
                sizes *= u
                both = piece(newe, len(full), rows) + piece(olde, len(full), rows)
                return plus(plus(both, sizes), self.eta)

            err = by_rows(full, bound, spare=self.spare)
            summed = by_rows(full, lambda rows: piece(old, len(full), rows)
                             + piece(new, len(full), rows), spare=self.spare)
            grad[key], gerr[key] = _arr(summed), _arr(err)
            self._give(old, grad, gerr), self._give(olde, grad, gerr)
            return
        grad[key], gerr[key] = _arr(summed), _arr(err)

    def _sum_abs(self, c, shape: tuple[int, ...]) -> np.ndarray:
        """Σ|c| back to ``shape``; where the sums keep axis 0 (over trailing axes, each
        row on its own) |c| is taken a block of rows at a time, not as a whole copy."""
        c = np.asarray(c)
        if self.lead:
            return self._unbroadcast(np.abs(c), shape)
        if c.ndim != len(shape) or c.shape[0] != shape[0]:
            # (summed over axis 0 too, in NumPy's order: |c| whole, in a spare array)
            size = np.abs(c, out=self.spare.empty(c.shape))
            total = unbroadcast(size, shape)
            self.spare.give(size, {0: total})
            return total

        def rows_of(rows):
            block = np.abs(piece(c, c.ndim, rows))
            return unbroadcast(block, block.shape[:1] + tuple(shape[1:]))

        return by_rows(c.shape, rows_of, result=shape)

    def _unbroadcast(self, array, shape: tuple[int, ...]) -> np.ndarray:
        """:func:`gradcheck.base.arrays.unbroadcast` of each cotangent the backward carries
        (summed over the same axes, one past the batch axis)."""
        if not self.lead:
            return unbroadcast(array, shape)
        array = np.asarray(array)
        extra = array.ndim - 1 - len(shape)
        if extra > 0:
            array = np.sum(array, axis=tuple(range(1, extra + 1)))
        axes = tuple(d + 1 for d, n in enumerate(shape)
                     if n == 1 and array.shape[d + 1] != 1)
        if axes:
            array = np.sum(array, axis=axes, keepdims=True)
        full = self.lead + tuple(shape)
        return np.broadcast_to(array, full) if array.shape != full else array
