"""A-priori rounding-error bounds: how far a *correct* computation of a formula's value
and of its vᵀJ can be from the exact numbers in a given dtype, element by element.

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
  contraction over n terms adds γ(n)·u_acc·Σ|terms| instead (:func:`accumulation`), the
  bound for blocked pairwise summation, at the unit roundoff of the accumulator (float32
  at least, as PyTorch's CPU kernels accumulate half precision in float32; where torch
  adds a convolution's cotangent from parts rounded into the dtype, aten's own kernels
  for float16 on a CPU without avx512_fp16, m·u·Σ|parts|: :mod:`gradcheck.bounds.conv`);
- a VJP c = vjp(ḡ, t, a...): E(c) = |vjp|(E(ḡ)) (the cotangent's own error, through
  |J|) + the change of c when t and each aⱼ move by their errors E(t), E(aⱼ) plus one
  more u·|t|, u·|aⱼ| for the rounding where the formula uses them (x*x inside
  exp(-x*x) is amplified by x²), measured by perturbing each in the direction that
  increases |c| (exact for the elementwise and product forms the table uses), plus
  (2ρ + 1)·u·|c| for the formula's own operations;
- summing cotangents back over broadcast axes and over several parents adds the
  accumulation bound of those sums.

Inputs and the cotangent v are exact (points are rounded to the dtype before anything
runs), a constant that the dtype cannot represent carries u·|c|. The result is
absolute, per element, keyed like :meth:`gradcheck.base.evaluation.Evaluation.quantities`;
:mod:`gradcheck.checking.compare` turns it into tolerances.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..base.dtypes import round_to, smallest_normal, unit_roundoff
from ..rules import AXIS, BILINEAR, COMPARISON, POOLING, REDUCTION, RULES, STRUCTURE
from .pooling import pool_cotangent, pool_value
from .conv import conv_rounding
from ..rules.conv.rows import CONVOLUTIONS, POOLS
from .summation import BLOCK, accumulation, terms as sum_terms   # noqa: F401 (BLOCK: API)
from ..base.arrays import unbroadcast
from .composite import composite_cotangent, composite_value
from .elementwise import cotangent, finite as _finite, plus as _plus
from .elementwise import Spare, by_rows, piece, reduction_bound, value_bound
from .elementwise import vjp
from ..rules.composite.bounds import Bound
from .structure import structure_cotangent, structure_value
from ..formula.tree import Node, ordered, twins, walk
from .slab import slab_error_bounds, slabbed
from .kept import kept, last_uses, parameters_read, placeholder


@functools.lru_cache(maxsize=None)
def _units(dtype: str) -> tuple[float, float, float]:
    """(u, u_acc, η): the storage and accumulation unit roundoffs of ``dtype``, and its
    underflow: a result below the smallest normal is rounded to the subnormal grid, an
    absolute error of up to its spacing (Higham's model, fl(x) = x(1 + δ) + η), smallest
    normal · 2u; formed as 2u first: 2^-1022 · 2^-53 itself underflows."""
    u = unit_roundoff(dtype)
    return u, min(u, unit_roundoff("float32")), smallest_normal(dtype) * (2 * u)


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


def _batched(node: Node, rule, g, t, args, lead: tuple[int, ...]):
    """A VJP's (g, ans, args, params) when ``g`` carries many cotangents along a leading
    axis of length ``lead``. Elementwise rows broadcast g against their operands from
    the right, and matmul and transpose work on the last two axes: they take the batch
    as it is. A row with an axis parameter (a reduction) names its axes from the left:
    they move one past the batch axis, and its operands get that axis too (broadcast
    views, no copies). dot multiplies its 0-d result's cotangent by the vectors: g gets
    a trailing axis to line up with them."""
    params = node.params
    if any(p.kind == AXIS for p in rule.params):
        params = tuple((name, tuple(d + 1 for d in value) if p.kind == AXIS else value)
                       for p, (name, value) in zip(rule.params, params))
        # (None: a value the VJP does not read, dropped after the forward)
        t = None if t is None else np.broadcast_to(t, lead + np.shape(t))
        args = [None if a is None else np.broadcast_to(a, lead + np.shape(a))
                for a in args]
    elif node.op == "dot":
        g = g[..., None]
    return g, t, args, params


#: whether probes of values a VJP does not read are skipped (a test turns it off to
#: check that the bounds are the same)
SKIP_UNREAD = True


def _read(rule, k: int, j: int | None) -> bool:
    """Whether the engine's VJP into argument ``k`` reads the forward's result (``j``
    None) or argument ``j``: its code loads that parameter (a static fact of its
    bytecode; a VJP that cannot be inspected reads everything). A node that saves no
    tensor reads none."""
    if not SKIP_UNREAD:
        return True
    if not rule.engine.saves:
        return False
    names = parameters_read(rule.engine.vjps[k])
    return names is None or (1 if j is None else 2 + j) in names




class _Bounds:
    """One evaluation of the bounds of one formula at one point."""

    def __init__(self, dtype: str, device: str = "cpu", watch=None):
        self.dtype, self.device = dtype, device   # (the device: torch's kernels differ)
        # a gradcheck.sampling.overflow.Watch: sees every cotangent and VJP of the backward
        self.watch = watch
        self.u, self.u_acc, self.eta = _units(dtype)   # (η: underflow, see _units)
        self.lead: tuple[int, ...] = ()   # (n,): the backward carries n cotangents
        self.val: dict[int, Any] = {}
        self.err: dict[int, np.ndarray] = {}
        self.spare = Spare()   # arrays dropped, to be written over (layer sizes)
        # the probes' largest relative moves over a whole formula this evaluates one
        # slab of, by node id (gradcheck.bounds.slab); None: taken from the arrays here
        self.tops: dict[int, Any] | None = None
        # node id -> its arguments as a witness held them (the branch it took, decisions)
        self.pins: dict[int, list] = {}

    def arg(self, node: Node, j: int) -> Any:
        """``node``'s argument ``j`` as the row reads it (pinned, or its own; None where
        dropped)."""
        pinned = self.pins.get(id(node))
        return pinned[j] if pinned is not None and isinstance(pinned[j], np.ndarray) \
            else self.val.get(id(node.args[j]))

    # ------------------------------------------------------------------ forward
    def forward(self, root: Node, point: dict[str, np.ndarray],
                overrides: dict[str, np.ndarray] | None = None) -> None:
        """Values and error bounds of every node. ``overrides``: input or ``let`` names
        set to values computed in this dtype (a perturbed point, x + h): each carries
        its own rounding, u·|value|."""
        same = twins(root)   # a computation written twice has one value and bound
        # what no VJP reads is dropped after its last use here (forward_kept)
        keep = kept(root) if SKIP_UNREAD else None
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
        return self._forward(node, point)

    def _integer_error(self, x: np.ndarray) -> np.ndarray:
        """An integer input's error where float arithmetic takes it: none, but where the
        dtype cannot hold it (above 2^11 in float16, 2^8 in bfloat16: torch rounds the
        integer into the dtype before it multiplies)."""
        off = np.abs(round_to(x, self.dtype) - x)
        return off if off.any() else _exact(np.shape(x))

    def _forward(self, node: Node, point):
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
        if isinstance(rule.rounding, Bound):   # a composite row: its own bound
            return composite_value(self, node, rule, args, errs)
        if rule.family == COMPARISON:
            t = np.asarray(node.call("numpy", args))
            return t, np.zeros(np.shape(t))
        if rule.family == REDUCTION:
            x = _arr(args[0])
            t = _arr(node.call("numpy", [x]))
            return t, reduction_bound(self, node, rule, t, x, errs[0])
        if rule.family in (BILINEAR, POOLING):
            return self._linalg(node, rule, args, errs)
        if rule.family == STRUCTURE:   # exact linear maps: the bound goes through the map
            return structure_value(self, node, args, errs)
        # elementwise (where included): |∂f/∂aₖ|·E(aₖ) from the VJP with ḡ = 1
        t = _arr(node.call("numpy", args))
        return t, value_bound(self, node, rule, t, args, errs)

    def _linalg(self, node, rule, args, errs):
        """A pooling, or a bilinear row (matmul, dot, a convolution):
        E(a ∘ b) = |a| ∘ E(b) + E(a) ∘ |b| + γ(n)·u_acc·(|a| ∘ |b|) + u·|t|."""
        if node.op in POOLS:
            return pool_value(self, node, rule, _arr(args[0]), errs[0])
        a, b = _arr(args[0]), _arr(args[1])

        def f(p, q):
            return _arr(node.call("numpy", [p, q]))

        t = f(a, b)
        abs_a, abs_b = np.abs(a), np.abs(b)
        # (summed in place as they come, as in _vjp: the same sums, fewer arrays at once)
        bound = _plus(f(abs_a, errs[1]), f(errs[0], abs_b))
        own = f(abs_a, abs_b)
        del abs_a, abs_b
        own *= accumulation(sum_terms(node, None)) * self.u_acc
        own = _plus(own, self.u * np.abs(t))
        return t, _plus(_plus(bound, own), self.eta)

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
                self._accumulate(grad, gerr, node.args[0], g, ge)
                continue
            rule = RULES[node.op]
            if rule.family == COMPARISON:
                continue
            for k, arg in enumerate(node.args):   # (a variadic row: one VJP for all)
                if rule.engine_vjp(k) is None or arg.op == "const":
                    continue
                c, ce = self._vjp(node, rule, k, g, ge)
                if self.watch is not None and not (
                        arg.op == "input" and np.shape(c) == self.lead + tuple(arg.shape)):
                    self.watch.see(node, c, "backward")
                self._accumulate(grad, gerr, arg, c, ce)
                self._give(c, grad, gerr), self._give(ce, grad, gerr)
            del grad[id(node)], gerr[id(node)]
            self._give(g, grad, gerr), self._give(ge, grad, gerr)
            if release and node is not root:
                value, bound = self.val.pop(id(node), None), self.err.pop(id(node), None)
                self._give(value, grad, gerr), self._give(bound, grad, gerr)
        return grad, gerr

    def _give(self, array, grad: dict, gerr: dict) -> None:
        """Hand ``array``, which the backward no longer uses, to :attr:`spare` unless a
        forward value or bound or a cotangent still holds it."""
        self.spare.give(array, self.val, self.err, grad, gerr)

    def _call(self, node, rule, k, g, t, args):
        if self.lead and (node.op in CONVOLUTIONS | POOLS or rule.family == STRUCTURE):
            # one cotangent at a time (their parameters name axes from the left)
            return np.stack([_arr(vjp(node, rule, k, gi, t, args)) for gi in g])
        if self.lead:
            g, t, args, params = _batched(node, rule, g, t, args, self.lead)
            return _arr(rule.vjp(k, g, t, args, params))
        return _arr(vjp(node, rule, k, g, t, args))

    def _vjp(self, node, rule, k, g, ge):
        """The VJP into argument ``k`` and its error bound."""
        # (None: a value no VJP reads, dropped after the forward; see forward_kept)
        t = placeholder(node, rule, self.val.get(id(node)))
        args = [placeholder(a, rule, self.arg(node, j)) for j, a in enumerate(node.args)]
        errs = [self.err.get(id(a)) for a in node.args]
        if not (isinstance(rule.rounding, Bound) or rule.family in (STRUCTURE, BILINEAR, POOLING)):
            # Elementwise and reduction VJPs are ḡ times a factor, diagonal (or
            # broadcast) in ḡ: the cotangent's error goes through |factor|, and the
            # factor moves with the forward's errors (probes of what the VJP reads)
            return cotangent(self, node, rule, k, g, ge, t, args, errs,
                             lambda j: _read(rule, k, j))
        c = self._call(node, rule, k, g, t, args)
        u, u_acc = self.u, self.u_acc
        if isinstance(rule.rounding, Bound):
            return c, composite_cotangent(self, node, rule, k, g, ge, c, _batched)
        if node.op in POOLS:
            return c, pool_cotangent(self, node, rule, k, g, ge, t, args)
        if rule.family == STRUCTURE:
            return c, structure_cotangent(self, node, rule, k, g, ge, t, args)
        absargs = [np.abs(_arr(a)) for a in args]
        abs_t = np.abs(t)
        through_g = np.abs(self._call(node, rule, k, ge, abs_t, absargs))
        if len(args) != 2:    # transpose: exact
            return c, through_g
        # bilinear: c is linear in the *other* operand. The terms are summed as they come,
        # in place (_plus), each dropped once added: at a layer's size (attention's
        # [16, 256, 256] cotangent) five arrays of c's size fewer at once, the same sums
        other = list(absargs)
        other[1 - k] = errs[1 - k]
        abs_g = np.abs(g)
        # (through_g + through_args) + own, own = (γ·u_acc·full + into) + η
        bound = _plus(through_g, np.abs(self._call(node, rule, k, abs_g, abs_t, other)))
        del through_g, other
        own = np.abs(self._call(node, rule, k, abs_g, abs_t, absargs))
        del abs_g, abs_t, absargs
        own *= accumulation(sum_terms(node, k)) * u_acc
        # rounding into the dtype: once (u·|c|), or where torch adds parts in it
        own = _plus(own, conv_rounding(self, node, k, g, args, c) if node.op in CONVOLUTIONS
                   else u * np.abs(c))
        return c, _plus(bound, _plus(own, self.eta))

    def _accumulate(self, grad, gerr, arg: Node, c, ce) -> None:
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
                return _plus(_plus(both, sizes), self.eta)

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


def forward_bound(root: Node, env: dict[str, np.ndarray],
                  overrides: dict[str, np.ndarray] | None = None,
                  dtype: str = "float64") -> tuple[np.ndarray, np.ndarray]:
    """The value of ``root`` (as :func:`gradcheck.formula.forward.evaluate` computes it) and a
    bound on its rounding error in ``dtype``, per element: what finite differences of
    the float64 forward are allowed for rounding (log(cosh(x)) near 0 errs by u, not
    u·|value|)."""
    if not overrides and _last and _last[0] == _point_key(root, env, dtype):
        return _last[1], _last[2]
    b = _Bounds(dtype)
    with np.errstate(all="ignore"):
        b.forward(root, env, overrides)
    return b.val[id(root)], _finite(np.array(b.err[id(root)], dtype=float))


# The root's value and bound of the last forward :func:`error_bounds` ran, with its
# point: the numeric witness asks :func:`forward_bound` for the same at the same point
# (a full forward of the running bound, at a layer's size hundreds of MB and a second).
# The entry holds the formula and the point's arrays, so their identities cannot be
# reused while it is kept; :func:`forget` drops it (after each point).
_last: list = []


def _point_key(root: Node, env: dict, dtype: str) -> tuple:
    return (id(root), dtype, tuple(sorted((name, id(a)) for name, a in env.items())))


def forget() -> None:
    """Drop the forward kept for :func:`forward_bound` (see ``_last``)."""
    _last.clear()


def error_bounds(case, point: dict[str, np.ndarray], v: np.ndarray, dtype: str,
                 forward: dict | None = None, batch: bool = False, watch=None,
                 pins: dict | None = None) -> dict[str, np.ndarray]:
    """Per-element bounds on the rounding error of a correct computation in ``dtype`` of
    the value and of vᵀJ (``"value"``, ``"x.grad"`` for every input, ``"h.grad"`` for
    every retained ``let``), absolute, at ``point``. Non-finite bounds (an overflow in
    the probe) count as 0: the comparison is then strict rather than blind.

    ``forward``: a dict the caller keeps for one point, where the forward pass is kept
    and reused for every v (the Jacobian's one-hot cotangents). ``batch``: ``v`` holds
    many cotangents along its first axis (the Jacobian's one-hots), bounded in one
    backward pass; each gradient's bound then has that axis in front, the value's not.
    ``watch`` (a :class:`gradcheck.sampling.overflow.Watch`) sees every cotangent and VJP of the
    backward, which is autograd's as written: what passes the dtype's range. ``pins``:
    node id -> arguments as a witness held them: the bounds of the branch it took
    (:mod:`gradcheck.checking.decisions`); nothing of it is kept for the numeric witness."""
    root = case.output
    split = None if forward is not None or batch or pins else slabbed(root)
    if split is not None:   # a large elementwise formula: by slabs, the same numbers
        device = getattr(case, "device", "cpu")
        with np.errstate(all="ignore"):
            out, value = slab_error_bounds(lambda: _Bounds(dtype, device, watch), case,
                                           split, point, v)
        out = {k: _finite(_arr(e)) for k, e in out.items()}   # (fresh arrays already)
        return _keep_last(out, root, point, dtype, value)
    b = None if forward is None else forward.get(key := (id(root), dtype))
    fresh = b is None
    with np.errstate(all="ignore"):
        if fresh:
            b = _Bounds(dtype, getattr(case, "device", "cpu"))
            b.pins = dict(pins or {})
            b.forward(root, point)
            if forward is not None:
                forward[key] = b
        b.watch = watch
        grad, gerr = b.backward(root, v, batch, release=forward is None)
    out = {"value": b.err[id(root)]}
    nodes = {n.name: n for n in walk(root) if n.op in ("input", "let")}
    for spec in case.inputs:
        node = nodes.get(spec.name)
        out[f"{spec.name}.grad"] = (np.zeros(b.lead + tuple(spec.shape)) if node is None
                                    or id(node) not in gerr else gerr[id(node)])
    out.update({f"{n}.grad": gerr[id(nodes[n])] for n in getattr(case, "retain_grad", ())
                if n in nodes and id(nodes[n]) in gerr})
    # fresh arrays, as the caller may keep them (the value's bound is kept per point)
    out = {k: _finite(np.array(e, dtype=float)) for k, e in out.items()}
    if fresh and not pins:   # (after the backward: not alive beside its peak)
        return _keep_last(out, root, point, dtype, b.val[id(root)])
    return out


def _keep_last(out: dict, root: Node, point: dict, dtype: str, value) -> dict:
    """Keep the root's ``value`` and bound (``out["value"]``) for :func:`forward_bound`
    at this point (``_last``); returns ``out``."""
    out["value"].flags.writeable = False    # shared with _last: nobody may change it
    _last[:] = [_point_key(root, point, dtype), value, out["value"], (root, dict(point))]
    return out
