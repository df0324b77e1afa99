"""The rounding model's families of elementwise rows, reductions and comparisons
(:data:`gradcheck.rules.row.ELEMENTWISE`, ``REDUCTION``, ``COMPARISON``): the bound of
their values and of their VJPs, a block of rows at a time where the arrays are large
(:mod:`gradcheck.bounds.blocks`). A comparison's value is exact (0/1), and no cotangent
flows through it.

An elementwise node t = f(a₁, ..., aₙ) errs by E(t) = Σₖ |∂f/∂aₖ|·E(aₖ) + ρ·u·|t| (+ η),
|∂f/∂aₖ| read off the VJP at ḡ = 1; its VJP into argument k (c) by |vjp|(E(ḡ)) (the
cotangent's own error), plus how far c moves when the forward's values move by their
errors (a probe per value the VJP reads: each moved by s·E in the direction of its sign,
|Δc| / s), plus (2ρ + 1)·(u·|c| + η) for the formula's own operations, plus |c| where
the factor c/ḡ is below the smallest normal λ (it may be flushed to 0: :func:`_flushed`).

Each term at an element is a function of the operands at that element alone (broadcast
to it; for a reduction, of the reduced slice it lies in), but for the probe's scale s:
one number per probe, from the largest relative move over the whole operand
(:func:`probe_scales`). So with the scales, and the tests of which operands have any
error, taken over the whole arrays first, the rest runs over blocks of rows (axis 0,
:func:`gradcheck.bounds.blocks.row_blocks`; a reduction's only where it keeps axis 0, so
that each reduced slice lies in one block and is summed as the whole array sums it): the
dozen temporaries of a probe then live in the cache a block at a time, instead of each
being a fresh full-size array (layer norm over [4096, 1024]: 32 MB each, paid in page
faults and memory traffic). Each element's arithmetic is the one the whole arrays get,
so the bounds are the same to the bit (tests/test_rounding_restructured.py). The value t
itself is always computed on the whole arrays: it is the forward the numeric witness
differences.
"""

from __future__ import annotations

import math

import numpy as np

from ..rules.row import ELEMENTWISE, REDUCTION
from ..rules.terms import rho, value_rounding, vjp_size
from .blocks import any_error, by_rows, finite, ones, piece, plus, row_blocks
from .summation import accumulation
from ..formula.tree import values_of

PERTURBATION = 2.0 ** -20   # relative size of the probes that measure sensitivities


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def vjp(node, rule, k: int, g, t, args):
    """``rule.vjp(k, g, t, args, node.params)``: the engine's VJP into argument ``k``."""
    return rule.engine_vjp(k)(g, t, *args, *values_of(node))


# ------------------------------------------------------------------ the family handlers
def elementwise_value(b, node, rule, args, errs):
    """An elementwise node's value t and E(t) = Σₖ |∂f/∂aₖ|·E(aₖ) + its own rounding
    (|∂f/∂aₖ| from the VJP at ḡ = 1), for the model ``b``."""
    t = _arr(node.call("numpy", args))
    return t, value_bound(b, node, rule, t, args, errs)


def reduction_value(b, node, rule, args, errs):
    """A reduction's value and bound (:func:`reduction_bound`)."""
    x = _arr(args[0])
    t = _arr(node.call("numpy", [x]))
    return t, reduction_bound(b, node, rule, t, x, errs[0])


def comparison_value(b, node, rule, args, errs):
    """A comparison's value: 0/1, exact."""
    t = np.asarray(node.call("numpy", args))
    return t, np.zeros(np.shape(t))


def elementwise_cotangent(b, node, rule, k: int, g, ge):
    """The VJP into argument ``k`` of an elementwise or reduction node and its bound.
    Such a VJP is ḡ times a factor, diagonal (or broadcast) in ḡ: the cotangent's error
    goes through |factor|, and the factor moves with the forward's errors (probes of
    what the VJP reads: :meth:`gradcheck.bounds.model.RoundingModel.reads`)."""
    t, args, errs = b.operands(node, rule)
    return cotangent(b, node, rule, k, g, ge, t, args, errs,
                     lambda j: b.reads(rule, k, j))


# ------------------------------------------------------------------------ forward
def value_bound(b, node, rule, t, args, errs) -> np.ndarray:
    """E(t) of the elementwise ``node`` whose value ``t`` the caller computed, for the
    bounds ``b``."""
    if rule.stops_gradient:   # detach: its operand's value, so its operand's error (a
        # copy: a bound is handed on to be reused once its node is done)
        e = errs[0]
        return np.array(np.broadcast_to(e, np.shape(t)) if any_error(e) else
                        np.zeros(np.shape(t)))
    # (skipped: an operand without error, such as a constant exponent, whose log(a) is
    # NaN: the same operands for every block)
    live = [k for k, (vjp, e) in enumerate(zip(rule.engine.vjps, errs))
            if vjp is not None and any_error(e)]
    if row_blocks(np.shape(t)) is None:   # (small: without the blocks' bookkeeping)
        return _value_bound(b, node, rule, live, t, args, errs)
    n = np.ndim(t)
    return by_rows(np.shape(t), lambda rows: _value_bound(
        b, node, rule, live, piece(t, n, rows), [piece(a, n, rows) for a in args],
        [piece(e, n, rows) for e in errs]), spare=b.spare)


def _value_bound(b, node, rule, live, t, args, errs):
    """Σₖ |∂f/∂aₖ|·E(aₖ) over the ``live`` operands, plus the row's own rounding."""
    # (the sum starts at its first term, not at 0 + it: the same bits once the own
    # rounding, never -0, is added)
    propagated = None if live else np.zeros(np.shape(t))
    for k in live:
        # (the partials have t's shape: ḡ has)
        term = partials(node, rule, k, t, args, finite_only=True) * errs[k]
        propagated = term if propagated is None else propagated + term
    return propagated + value_rounding(rule, t, args, node.params, b.u, b.eta)


def reduction_bound(b, node, rule, t, x, ex) -> np.ndarray:
    """E(t) of the reduction ``node`` (sum, mean, prod, max, min, logsumexp) of ``x``,
    whose value ``t`` the caller computed: Σ |∂t/∂x|·E(x) over each reduced slice plus
    its own rounding, slice by slice: by blocks of rows where axis 0 is not reduced."""
    def bound(rows):
        return _reduction_bound(b, node, rule, piece(t, np.ndim(t), rows),
                                piece(x, x.ndim, rows), piece(ex, x.ndim, rows))

    if 0 in node.axis:
        return bound(None)
    return by_rows(x.shape, bound, result=np.shape(t), spare=b.spare)


def partials(node, rule, k: int, t, args, finite_only: bool = False) -> np.ndarray:
    """|∂t/∂aₖ| at each element of ``args[k]`` (or of t, broadcast): the VJP into
    argument ``k`` at ḡ = 1 (``finite_only``: NaN as 0, inf as the largest float). A
    row whose node saves no tensor (add, sub, sum, mean) has a VJP that reads shapes
    only, so the same partials at every point: those of a small node are kept
    (read-only) for its next forward (finite differences run thousands); small in its
    operands too: a sum's partials have its operand's shape."""
    shape = np.shape(t)
    key = None
    if not rule.engine.saves and math.prod(shape) <= 4096 and \
            all(math.prod(np.shape(a)) <= 4096 for a in args):
        # (the row's VJPs in the key: a test may replace a row)
        key = (node, rule.engine.vjps, k, shape, tuple(np.shape(a) for a in args),
               finite_only)
        if key in _PARTIALS:
            return _PARTIALS[key]
    out = np.abs(_arr(vjp(node, rule, k, ones(shape), t, args)))
    if finite_only:
        out = finite(out, posinf=None)
    if key is not None:
        if len(_PARTIALS) >= 4096:
            _PARTIALS.clear()
        out = _PARTIALS[key] = np.asarray(out)
        out.flags.writeable = False
    return out


_PARTIALS: dict = {}   # partials(): by node, engine column, argument and shapes


def _reduction_bound(b, node, rule, t, x, ex):
    axis, keepdims = node.axis, node.keepdims
    partial = partials(node, rule, 0, t, [x])
    propagated = np.add.reduce(partial * ex, axis=axis, keepdims=keepdims)
    n = math.prod(x.shape[d] for d in axis)
    own = rho(rule) * b.u * np.abs(t)
    if node.op in ("sum", "mean"):
        terms = np.add.reduce(np.abs(x), axis=axis, keepdims=keepdims)
        own = own + accumulation(n) * b.u_acc * terms / (n if node.op == "mean" else 1)
    elif node.op == "prod":
        own = own + max(n - 1, 0) * b.u * np.abs(t)
    elif node.op == "logsumexp":   # log of a sum of positive terms
        own = own + (accumulation(n) + 1) * b.u
    return propagated + own + b.eta


# ------------------------------------------------------------------------ backward
def cotangent(b, node, rule, k: int, g, ge, t, args, errs, read):
    """The VJP of ``node`` into argument ``k`` and its error bound, for an elementwise
    or reduction row; ``read(j)``: whether that VJP reads the forward's result (``j``
    None) or argument ``j``."""
    values = [t] + list(args)
    bounds = [b.err.get(id(node))] + list(errs)
    scales = probe_scales(b, [(j, node if j is None else node.args[j], values[_at(j)],
                               bounds[_at(j)])
                              for j in [None] + list(range(len(args))) if read(j)],
                          own=rule.family == ELEMENTWISE)
    shape = _blocked_shape(b, node, rule)
    blocks = None if shape is None else row_blocks(shape)
    if blocks is None:
        c = b.call(node, rule, k, g, t, args)
        return c, _cotangent_bound(b, node, rule, k, g, ge, values, bounds, scales, c)

    def result(a, rows):    # (a reduction's result may have fewer axes: its own axis 0)
        return piece(a, np.ndim(a), rows)

    n = len(shape)
    c, out = None, b.spare.empty(shape)
    for rows in blocks:
        gp = result(g, rows)
        vp = [result(t, rows)] + [piece(a, n, rows) for a in args]
        cp = b.call(node, rule, k, gp, vp[0], vp[1:])
        if c is None:
            if np.shape(cp) != np.shape(out[rows]):   # (not the blocks' shape: whole)
                c = b.call(node, rule, k, g, t, args)
                return c, _cotangent_bound(b, node, rule, k, g, ge, values, bounds,
                                           scales, c)
            # (a VJP that is ḡ itself, add's: c is the whole ḡ, not a copy)
            c = g if cp is gp else b.spare.empty(shape)
        if c is g and cp is not gp:   # (ḡ itself only so far: a copy, then this block)
            c = np.array(g, dtype=float)
        if c is not g:
            c[rows] = cp
        out[rows] = _cotangent_bound(
            b, node, rule, k, gp, result(ge, rows), vp,
            [result(bounds[0], rows)] + [piece(e, n, rows) for e in errs], scales, cp)
    return c, out


def _blocked_shape(b, node, rule) -> tuple[int, ...] | None:
    """The shape of a VJP's arrays where they may be cut into blocks of rows: an
    elementwise row's, or the operand's of a reduction that keeps axis 0 (each reduced
    slice then lies within one block); None where the VJP takes the whole arrays (many
    cotangents at once, ``b.lead``, are small)."""
    if b.lead:
        return None
    if rule.family == ELEMENTWISE:
        return node.shape
    if rule.family == REDUCTION and node.axis is not None and 0 not in node.axis:
        return node.args[0].shape
    return None


def _at(j: int | None) -> int:
    """The position of the result (``j`` None) or argument ``j`` among t and the
    arguments."""
    return 0 if j is None else j + 1


def _moved(value, e, s: float, exact: bool, u: float, moves=None):
    """The probe's value + s·E·sign(value), E the value's bound plus u·|value| (the
    formula rounds where it uses the value, x*x inside exp(-x*x); a mask or an integer
    is exact there, off only where the dtype cannot hold it). ``moves``: E where the
    caller has it (:func:`own_scales`' second result, a fresh array: written over)."""
    if moves is not None:
        moved = moves
        moved *= s                                # (s·E: the same product as s * e)
    else:
        e = _arr(e) if exact else _arr(e) + u * np.abs(_arr(value))
        moved = np.array(s * e, dtype=float)      # value + s·e·sign(value), in place
        del e
    # (·(-1) negates exactly; NumPy's masked np.negative(where=) is several times slower)
    moved *= np.where(value < 0, -1.0, 1.0)
    return plus(moved, _arr(value))


def own_scales(value, e, u: float) -> tuple[np.ndarray, np.ndarray]:
    """The probe scale of each element on its own: each moves by PERTURBATION of its
    magnitude, or of its error where that exceeds the magnitude (as
    :func:`probe_scales`' one scale does for the element that moves most); and the
    move E + u·|value| it is taken from, which :func:`_moved` scales (the same sum,
    computed once). Each step writes over the temporary it no longer needs: the same
    operations, fewer arrays (a probe runs at every block of a layer's rows)."""
    v = np.abs(_arr(value))
    ep = _arr(e) + u * v
    with np.errstate(all="ignore"):
        # max(|value|, E): fresh, of the broadcast shape (an array where both are 0-d)
        rel = np.asarray(np.maximum(v, ep))
        np.maximum(rel, 1e-300, out=rel)
        np.divide(ep, rel, out=rel)
        np.maximum(rel, PERTURBATION * u, out=rel)
        return np.divide(PERTURBATION, rel, out=rel), ep


def probe_scales(b, probes, own: bool = False) -> list[tuple[int | None, float]]:
    """For each probe ``(j, node, value, E)`` whose moved value differs from the value
    somewhere, ``(j, s)``: one scale s for the whole probe (a reduction's factor mixes
    elements), so that each element moves by at most PERTURBATION of its magnitude, or
    of its error where that exceeds the magnitude (a value that is all noise, such as
    a - y cancelled to 1e-9 with an error of 1e-2, or an exact 0). Taken over the whole
    value, a block of rows at a time (:func:`block_tops`); where the bounds ``b`` run
    over one slab of a larger formula (:mod:`gradcheck.bounds.slab`), from the whole
    value's tops it was given (``b.tops``, by the ``id`` of the node read).

    ``own``: the reader is an elementwise row, whose probe of a float value moves each
    element by its own scale (:func:`own_scales`, in :func:`_cotangent_bound`): the top
    is not read, and it is not taken where no tops are given (a pass over the whole
    value); its only say, whether the probe runs, changes no bit: a value that moves
    nowhere (0 and bound 0 everywhere) moves by 0, and its probe adds 0."""
    out = []
    given = b.tops
    for j, node, value, e in probes:
        if own and given is None and np.asarray(value).dtype.kind == "f":
            out.append((j, 1.0))   # (a placeholder: own_scales gives the scales)
            continue
        top = given.get(id(node)) if given is not None else whole_top(b, value, e)
        if top is not None:
            out.append((j, PERTURBATION / max(float(top), PERTURBATION * b.u)))
    return out


def block_tops(b, value, e) -> tuple[bool, list]:
    """(whether the probe of ``value``, with bound ``e``, runs at all: a mask or an
    integer without error is exact; the largest relative move, ``E / max(|value|, E)``,
    of each block of rows where the move is not 0 everywhere)."""
    exact = np.asarray(value).dtype.kind in "biu"
    if exact and not any_error(e):
        return False, []
    shape = np.shape(value) if np.shape(e) == np.shape(value) else \
        np.broadcast_shapes(np.shape(value), np.shape(e))
    n, largest = len(shape), []
    for rows in row_blocks(shape) or [None]:
        v, ep = piece(value, n, rows), piece(e, n, rows)
        ep = _arr(ep) if exact else _arr(ep) + b.u * np.abs(_arr(v))
        if ep.any():
            largest.append((ep / np.maximum(np.maximum(np.abs(_arr(v)), ep),
                                            1e-300)).max())
    return True, largest


def top_of(largest: list):
    """The largest of the blocks' :func:`block_tops` (None where there are none: the
    probe moves nothing); np.max of their maxima, so that a NaN among them stays."""
    if not largest:
        return None
    return largest[0] if len(largest) == 1 else np.max(largest)


def whole_top(b, value, e):
    """:func:`top_of` the whole value's blocks, or None where the probe does not run."""
    runs, largest = block_tops(b, value, e)
    return top_of(largest) if runs else None


def _cotangent_bound(b, node, rule, k, g, ge, values, bounds, scales, c):
    """|vjp|(E(ḡ)) + the probes' |Δc| / s + (2ρ + 1)·(u·|c| + η), at these (whole or
    block) arrays: ``values`` are t and the arguments, ``bounds`` their bounds."""
    t, args = values[0], values[1:]
    through_g = np.abs(b.call(node, rule, k, ge, t, args))
    through_fwd = None   # (0 until a probe runs: 0 + a probe's |Δc| / s, never -0, is it)
    for j, s in scales:
        value = values[_at(j)]
        exact = np.asarray(value).dtype.kind in "biu"
        if rule.family == ELEMENTWISE and not exact:
            # each element's factor depends on its own elements alone: each is moved by
            # its own scale, as one scale for all moved some below their own spacing
            # (0.5·x·(1 + erf) at x = -44 has a relative error of 1, so s was 1e-6, and
            # moving gelu(-4.3) = 3e-5 by 1e-6 of its bound 1e-15 changed no bit)
            s, moves = own_scales(value, bounds[_at(j)], b.u)
        else:
            moves = None
        moved = _moved(value, bounds[_at(j)], s, exact, b.u, moves)
        if j is None:
            c2 = b.call(node, rule, k, g, moved, args)
        else:
            c2 = b.call(node, rule, k, g, t,
                         [moved if i == j else a for i, a in enumerate(args)])
        del moved
        with np.errstate(all="ignore"):
            delta = c2 - c      # (c2 may be the cotangent itself: a fresh difference)
            del c2
            delta = np.abs(delta, out=delta) if isinstance(delta, np.ndarray) else \
                np.abs(delta)
            delta /= s
            delta = finite(delta)
        if through_fwd is None and np.shape(delta) == np.shape(c):
            through_fwd = delta     # (a fresh array: finite() copies where it changes any)
        else:   # (c's shape: c2 is the same call's)
            through_fwd = plus(_zeros_like(c) if through_fwd is None else through_fwd,
                               delta)
    # |c|, or the size of the terms the VJP's formula adds (an elementwise row's Terms)
    own = vjp_size(rule, k, g, t, args, node.params, c)
    elementwise = rule.family == ELEMENTWISE and np.shape(g) == np.shape(own)
    quiet = elementwise and _quiet(b, rule, k, g, own)
    own *= b.u
    # an elementwise VJP is ḡ times its factor, whose intermediates may fall into the
    # subnormals (erf's 2/√π·exp(-x²) at x = -10 is 9 spacings in float32) before ḡ
    # multiplies them: η·max(1, |ḡ|), not η (nothing where it changes no bit: _quiet)
    if not quiet:
        own += _underflow(b.eta, g, np.shape(own)) if elementwise else b.eta
    own *= 2 * rho(rule) + 1          # (2ρ + 1)·(u·|c| + η·max(1, |ḡ|))
    if elementwise and not quiet:
        flushed = _flushed(b.flush, g, c)
        if flushed is not None:
            own += flushed
    if through_fwd is None:   # (no probe: through_g + 0, the same bits where the shapes are)
        through_fwd = _zeros_like(c) if np.shape(through_g) != np.shape(c) else 0.0
    return plus(plus(through_g, through_fwd), own)


def _quiet(b, rule, k: int, g, size) -> bool:
    """Whether, at an elementwise VJP ``c`` whose own rounding is relative to |c| (no
    Terms) and ``size`` = |c|, neither the underflow term nor the flushed factors change
    a bit (read-only passes: the least |c| and the largest |ḡ|, instead of the terms'
    arrays). No factor lies below λ where min|c| ≥ λ·max|ḡ| (:func:`_flushed`'s own
    test, taken at the extremes); and adding x = η·max(1, |ḡ|) ≤ η·max(1, max|ḡ|) to
    y = u·|c| leaves y where x is below half of y's spacing, which exceeds y·2⁻⁵⁴ for
    a normal y: so where max x < u·min|c|·2⁻⁵⁵ (the factor 2 covers that product's own
    rounding where it is subnormal; a NaN anywhere, a 0 or a subnormal y: False, and
    the terms are added as they are)."""
    sizes = getattr(rule.rounding, "vjps", ())
    if (k < len(sizes) and sizes[k] is not None) or not np.size(size):
        return False
    with np.errstate(all="ignore"):
        largest = float(np.max(np.abs(g), initial=0.0))
        least = float(np.min(size))
        return least >= b.flush * largest and \
            b.eta * max(1.0, largest) < least * b.u * 2.0 ** -55


def _zeros_like(c) -> np.ndarray:
    return np.zeros(np.shape(c))


def _flushed(flush: float, g, c):
    """|c| where the factor c/ḡ lies below ``flush``, the smallest normal of the format
    the factor is computed in; 0 elsewhere. Such a factor may come out as 0: flushed,
    or the reciprocal of an overflowed intermediate (sigmoid as 1/(1 + exp(-x)) in
    float32 is 0 below x = -88.7, where exp(-x) passes float32's largest, although
    σ(x) is a subnormal down to x = -103.3). Higham's underflow model with flush to
    zero: fl(f) = f(1 + δ) + η, |η| ≤ |f| for |f| < λ; times ḡ, |ḡ|·|f| = |c|. Once
    per element, not per operation: a factor that is 0 stays 0 (no (2ρ + 1)), and at a
    factor ≥ λ nothing changes (|c| < λ·|ḡ| is the test, no division)."""
    size = np.abs(c)
    # (no element below λ·max|ḡ|, none below λ·|ḡ|: nothing to add, and nothing
    # computed at full size past this test, as nearly always outside float32's tails;
    # a NaN in ḡ compares False in both tests)
    below = size < flush * np.max(np.abs(g), initial=0.0)
    if not below.any():
        return None
    below &= size < flush * np.abs(np.broadcast_to(g, np.shape(size)))
    return np.where(below, size, 0.0)


def _underflow(eta: float, g, shape: tuple[int, ...]):
    """η·max(1, |ḡ|) of ``shape``, in one fresh array written over (at a layer's size a
    fresh array per step costs its page faults), the same bits as the expression."""
    floor = np.abs(np.broadcast_to(g, shape))
    if not isinstance(floor, np.ndarray):   # (0-d: NumPy hands back a scalar)
        return eta * np.maximum(1.0, floor)
    np.maximum(floor, 1.0, out=floor)
    floor *= eta
    return floor
