"""What the errors of a failing check have in common across all its :class:`Sample` s
(points, cotangents, repeated backward calls), per input (:func:`diagnose_points`): only
repeated calls wrong, NaN/inf where the exact gradient is finite, a right Jacobian but a
wrong dense vᵀJ, the same few indices wrong at every point, a small constant relative
error, the wrong elements exactly one side of a branch condition of the reference, or
exactly beyond a magnitude of an input; failing all, how much is right.

An element counts as evidence that a gradient is right only where the exact gradient is
clearly non-zero (any wrong factor matches a zero)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...process.budgets import KEPT_POINTS
from ...rules import COMPARISON, RULES
from .elements import (PATTERN_ATOL, PATTERN_RTOL, SYSTEMATIC, array, at, label, listing, matches,
                       round_between, strong)
from .structure import jacobian_structure, slice_structure


#: elements (its gradients and the point's values) a sample of a point where every
#: comparison agreed may hold for a diagnosis; a larger one is not kept (memory at layer
#: sizes) but counted, as the ``unkept`` points of :func:`diagnose_points`
KEPT_ELEMENTS = 1 << 18


@dataclass(frozen=True)
class Sample:
    """One comparison of a failing check: the op's (or witness's) gradients at one point
    for one cotangent v, with what the patterns across samples need to know about it."""

    point: int                                  # the point's index, as reports number it
    draw: int                                   # which cotangent v at that point
    obtained: dict                              # input name -> gradient (or None)
    expected: dict                              # input name -> exact gradient (or None)
    ones: dict | None = None                    # exact VJP for v = ones
    values: dict | None = None                  # the point: input name -> value
    repeat: bool = False                        # an earlier backward went through the
    #                                             same graph (same forward call)
    # input name -> the per-element tolerance the verdict allowed (a witness's); absent:
    # the patterns' own (gradcheck.bounds.tolerance.PATTERN_TOLERANCES)
    tolerance: dict | None = None

    @property
    def elements(self) -> int:
        """The elements it holds of its own: the gradients obtained and the point."""
        return sum(np.size(a) for a in (*self.obtained.values(),
                                        *(self.values or {}).values()) if a is not None)


@dataclass
class Kept:
    """Which points' samples a check keeps for its diagnosis (memory at layer sizes):
    every sample of a point of up to :data:`KEPT_ELEMENTS`; of a larger point, none
    where every comparison agreed (counted: ``unkept``), and those of the first
    :data:`KEPT_POINTS` that did not (later ones counted: ``unseen``), the two counts
    :func:`diagnose_points` takes."""

    unkept: int = 0
    unseen: int = 0
    large: int = 0     # larger points kept

    def admits(self, elements: int, agreed: bool) -> bool:
        """Whether a point's samples of ``elements`` (:attr:`Sample.elements`) are kept;
        counted where not."""
        if elements <= KEPT_ELEMENTS:
            return True
        if agreed:
            self.unkept += 1
            return False
        if self.large >= KEPT_POINTS:
            self.unseen += 1
            return False
        self.large += 1
        return True


@dataclass(frozen=True)
class _Condition:
    """A branch of the reference at one point: where ``text`` holds (``mask``)."""

    node: object            # the reference node the condition belongs to (its identity)
    text: str               # "x > 0"
    negation: str           # "x <= 0"
    mask: np.ndarray


_NEGATION = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _symbol(node) -> str | None:
    """The operator that spells the node's row (``+``, ``<``...), from the rule table."""
    return RULES[node.op].symbol if node.op in RULES else None


def _text(node) -> str:
    """A reference node as the formula a user writes (infix, parenthesised), with the
    parameters it was given (``sum(x, axis=1)``, ``clamp(x, min=0.0)``)."""
    def operand(n) -> str:
        t = _text(n)
        return f"({t})" if _symbol(n) else t

    if node.op in ("input", "let"):
        return node.name
    if node.op == "const":
        return node.exact if node.exact is not None else f"{node.const:g}"
    rule = RULES[node.op]
    # a condition reads unbracketed, but conditions combined (& | ~) bracket theirs
    plain = rule.family == COMPARISON and not any(
        a.op in RULES and RULES[a.op].family == COMPARISON for a in node.args)
    if rule.symbol is None or plain:
        return rule.spell([_text(a) for a in node.args], rule.keywords(node.params))
    return rule.spell([operand(a) for a in node.args])


def _conditions(roots, values: dict) -> list[_Condition]:
    """Every branch condition of the reference at the point ``values``: the comparisons
    (conditions of ``where``), the sign of the argument of ``relu``/``abs``/``sign`` and
    which argument of ``maximum``/``minimum`` wins; in the order they are evaluated."""
    from ...formula.forward import evaluate

    found: dict[object, _Condition] = {}

    def add(node, left: str, op: str, right: str, mask) -> None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), node.shape)
        found.setdefault(node, _Condition(node, f"{left} {op} {right}",
                                          f"{left} {_NEGATION[op]} {right}", mask))

    def on_node(node, args, value) -> None:
        if node.op in RULES and RULES[node.op].family == COMPARISON:
            if _symbol(node) in _NEGATION:
                add(node, _text(node.args[0]), _symbol(node), _text(node.args[1]), value)
            else:   # conditions combined (& | ~): the whole, and its negation
                text = _text(node)
                found.setdefault(node, _Condition(node, text, f"~({text})", np.broadcast_to(
                    np.asarray(value, dtype=bool), node.shape)))
        elif node.op in ("relu", "abs", "sign"):
            add(node, _text(node.args[0]), ">", "0", np.asarray(args[0]) > 0)
        elif node.op in ("maximum", "minimum"):
            a, b = (np.asarray(x) for x in args)
            op = ">" if node.op == "maximum" else "<"
            add(node, _text(node.args[0]), op, _text(node.args[1]),
                a > b if op == ">" else a < b)

    env = {n: np.asarray(v, dtype=float) for n, v in values.items()}
    for root in roots:
        try:
            evaluate(root, env, on_node=on_node)
        except Exception:  # a reference this point cannot evaluate has no branches to offer
            return []
    return list(found.values())



class _Evidence:
    """One input's gradients over the samples of a failing check, element by element.

    ``samples``: one per (point, draw), the first computed (a repeated backward with the
    same v adds nothing to the counts); ``every``: all of them, repeats included.
    """

    def __init__(self, name: str, every: list[Sample], rtol: float, atol: float,
                 conditions: Callable[[Sample], list[_Condition]], jacobian_right: bool,
                 unkept: int = 0, unseen: int = 0, jacobians=(), complex: bool = False):
        self.name, self.label, self.rtol, self.atol = name, label(name), rtol, atol
        self.complex = complex   # a complex input: its elements named by part (at())
        self.jacobians = list(jacobians)   # whole Jacobians (structure.Jacobian)
        #: points not kept: where every comparison agreed, and where some did not
        self.unkept, self.unseen = unkept, unseen
        self.every = [s for s in every if s.expected.get(name) is not None]
        seen: set = set()
        self.samples = []
        for s in self.every:
            if (s.point, s.draw) not in seen:
                seen.add((s.point, s.draw))
                self.samples.append(s)
        self.conditions, self.jacobian_right = conditions, jacobian_right
        self.expected = [array(s.expected[name]) for s in self.samples]
        self.obtained = [array(s.obtained.get(name)) for s in self.samples]
        #: every obtained gradient present, of its exact gradient's shape
        self.aligned = all(o is not None and o.shape == e.shape
                           for o, e in zip(self.obtained, self.expected))
        self.ok = [self._matches(s, o, e) if o is not None and o.shape == e.shape
                   else None for s, o, e in zip(self.samples, self.obtained, self.expected)]
        self.strong = [strong(e, atol) for e in self.expected]

    def _matches(self, s: Sample, o: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Elementwise: right as the verdict judged it (the sample's tolerance), or by
        the patterns' tolerance where the sample has none."""
        allowed = (s.tolerance or {}).get(self.name)
        if allowed is None or np.shape(allowed) != e.shape:
            return matches(o, e, self.rtol, self.atol)
        with np.errstate(all="ignore"):
            ok = np.abs(o - e) <= allowed
        return ok | (o == e) | (np.isnan(o) & np.isnan(e))

    def right(self, s: Sample) -> bool:
        o, e = array(s.obtained.get(self.name)), array(s.expected[self.name])
        return (o is not None and o.shape == e.shape
                and bool(np.all(self._matches(s, o, e))))

    def by_point(self, masks: list[np.ndarray]) -> dict[int, np.ndarray]:
        """Point -> the union of ``masks`` (one per sample) over its cotangents."""
        out: dict[int, np.ndarray] = {}
        for s, m in zip(self.samples, masks):
            out[s.point] = out[s.point] | m if s.point in out else m
        return out

    def counts(self) -> tuple[int, int, int]:
        """(right elements, all elements, right elements that are evidence)."""
        right = sum(int(ok.sum()) for ok in self.ok if ok is not None)
        informative = sum(int((ok & st).sum()) for ok, st in zip(self.ok, self.strong)
                          if ok is not None)
        return right, sum(e.size for e in self.expected), informative

    def values(self, s: Sample, shape) -> dict[str, np.ndarray]:
        """The point's inputs that have ``shape``, i.e. line up element by element with
        this gradient (a gradient has its input's shape)."""
        return {n: np.asarray(v, dtype=float) for n, v in (s.values or {}).items()
                if np.shape(v) == shape}



def _threshold(ev: _Evidence, wrong: list[np.ndarray], right: list[np.ndarray]) -> str | None:
    """``"|x| > 20"`` when the ``wrong`` elements are exactly those beyond a threshold on
    an input aligned with the gradient (tried as |x|, x and -x): every wrong element
    beyond it, every ``right`` one within it. At least 3 wrong elements, so that a few
    cannot line up by chance."""
    if not ev.aligned or sum(int(w.sum()) for w in wrong) < 3:
        return None
    names = ev.values(ev.samples[0], ev.expected[0].shape) if ev.samples else {}
    for n in names:
        per = [ev.values(s, e.shape).get(n) for s, e in zip(ev.samples, ev.expected)]
        if any(v is None for v in per):
            continue
        for how, f in ((f"|{n}| >", np.abs), (f"{n} >", lambda a: a),
                       (f"{n} <", lambda a: -a)):
            bad = np.concatenate([f(v)[w] for v, w in zip(per, wrong)])
            good = np.concatenate([f(v)[r] for v, r in zip(per, right)])
            if good.size and bad.min() > good.max():
                t = round_between(float(good.max()), float(bad.min()))
                t = -t + 0.0 if how.endswith("<") else t  # -x > t is x < -t (no "-0")
                return f"{how} {t:.12g}"
    return None


# Each pattern below takes the evidence for one input whose gradient is wrong somewhere
# and returns a one-line message or None. The first that fits explains the input.

def _repeats(ev: _Evidence) -> str | None:
    first = [s for s in ev.every if not s.repeat]
    again = [s for s in ev.every if s.repeat]
    if not first or not again or not all(ev.right(s) for s in first):
        return None
    wrong = sum(not ev.right(s) for s in again)
    if not wrong:
        return None
    return (f"{ev.label} is right on the first backward and wrong on repeats ({wrong} of "
            f"{len(again)} later backward calls through the same graph): state modified "
            "in place?")


def _nonfinite(ev: _Evidence) -> str | None:
    if not ev.aligned:
        return None
    bad = [~np.isfinite(o) & np.isfinite(e) for o, e in zip(ev.obtained, ev.expected)]
    per_point = ev.by_point(bad)
    n = sum(int(b.sum()) for b in per_point.values())
    if not n:
        return None
    nan = any(np.isnan(o[b]).any() for o, b in zip(ev.obtained, bad))
    inf = any(np.isinf(o[b]).any() for o, b in zip(ev.obtained, bad))
    kind = "NaN/inf" if nan and inf else "NaN" if nan else "inf"
    hit = sum(bool(b.any()) for b in per_point.values())
    where = (f"at {hit} of {len(per_point) + ev.unkept} points" if not ev.unseen else
             f"at {hit} of the {len(per_point)} points examined, {ev.unseen} more wrong")
    beyond = _threshold(ev, bad, [ok & np.isfinite(o) for ok, o in zip(ev.ok, ev.obtained)])
    if beyond:
        where += f", where {beyond}"
    return (f"{ev.label} is {kind} at {n} element{'s' * (n != 1)} where the exact gradient "
            f"is finite ({where}): overflow?")


def _cross_terms(ev: _Evidence) -> str | None:
    # The Jacobian's rows are the VJPs of one-hot v: right there but wrong for a dense v
    # means the backward is not linear in its cotangents, as when it drops or mixes up
    # the terms of several non-zero cotangents.
    if not ev.jacobian_right:
        return None
    return (f"{ev.label}: the Jacobian is right (every one-hot v) but vᵀJ is wrong when "
            "several outputs have non-zero cotangents: cross terms?")


def _fixed_indices(ev: _Evidence) -> str | None:
    if not ev.aligned or ev.unkept or ev.unseen:   # (points it cannot tell of)
        return None
    wrong, strong = ev.by_point([~ok for ok in ev.ok]), ev.by_point(ev.strong)
    fixed = np.logical_or.reduce(list(wrong.values()))
    k = int(fixed.sum())
    # The same few elements wrong at every point where they can show it (a point of tiny
    # inputs can have an exact gradient of about 0 there, which the bug then matches).
    if (not 1 <= k <= _LISTED or k >= fixed.size or sum(w.any() for w in wrong.values()) < 2
            or any(np.any(fixed & strong[p] & ~wrong[p]) for p in wrong)):
        return None
    right, _, informative = ev.counts()
    if 2 * informative < right:  # the elements called right must be mostly evidence
        return None
    wrong_at = [at(ev.label, tuple(int(j) for j in idx), ev.complex)
                for idx in np.argwhere(fixed)]
    verb = "is" if k == 1 else "are"
    return f"only {listing(wrong_at)} {verb} wrong, at every point: an off-by-one?"


def _systematic(ev: _Evidence) -> str | None:
    if not ev.aligned or ev.unkept or ev.unseen:   # (points it cannot tell of)
        return None
    with np.errstate(all="ignore"):
        r = np.concatenate([(o[st] / e[st] - 1) for o, e, st
                            in zip(ev.obtained, ev.expected, ev.strong)])
    wrong_everywhere = all(bool(np.all(~ok[st])) for ok, st in zip(ev.ok, ev.strong))
    if r.size < 2 or not wrong_everywhere or not np.all(np.isfinite(r)):
        return None
    mid = float(np.median(r))
    # nearly constant: same sign, within a quarter of the typical size everywhere
    if not 0 < abs(mid) <= SYSTEMATIC or np.max(np.abs(r - mid)) > 0.25 * abs(mid):
        return None
    return (f"{ev.label} is {100 * abs(mid):.2g}% off everywhere (obtained/exact ≈ "
            f"{1 + mid:.6g}): an approximation or a wrong constant?")


_BRANCH_COVER = 0.9  # share of one side's evidence that must be wrong


def _branch(ev: _Evidence) -> str | None:
    # The wrong elements line up with one side of one condition of the reference: all of
    # them on that side, (nearly) every element there that can show an error wrong, and
    # right elements with evidence on the other side.
    if not ev.aligned or not ev.samples:
        return None
    per_sample = [{c.node: c for c in ev.conditions(s)} for s in ev.samples]
    for node, c0 in per_sample[0].items():
        cs = [p.get(node) for p in per_sample]
        if any(c is None or c.mask.shape != e.shape for c, e in zip(cs, ev.expected)):
            continue
        for side in (False, True):
            sides = [c.mask if side else ~c.mask for c in cs]
            wrong = [~ok for ok in ev.ok]
            if any(np.any(w & ~s) for w, s in zip(wrong, sides)):
                continue
            n_wrong = sum(int(w.sum()) for w in wrong)
            there = sum(int((s & st).sum()) for s, st in zip(sides, ev.strong))
            other = sum(int((~s & st & ok).sum())
                        for s, st, ok in zip(sides, ev.strong, ev.ok))
            if n_wrong and other and n_wrong >= _BRANCH_COVER * there:
                right, total, _ = ev.counts()
                where, otherwise = (c0.text, c0.negation) if side else (c0.negation, c0.text)
                return (f"{ev.label} is wrong where {where} and right where {otherwise} "
                        f"({right} of {total} elements right): a wrong branch of a "
                        "piecewise?")
    return None


def _magnitude(ev: _Evidence) -> str | None:
    if not ev.aligned:
        return None
    right, total, informative = ev.counts()
    if not informative:
        return None
    beyond = _threshold(ev, [~ok for ok in ev.ok], ev.ok)
    if beyond is None:
        return None
    return (f"{ev.label} is wrong where {beyond} and right elsewhere ({right} of "
            f"{total} elements right)")


def _structure(ev: _Evidence) -> str | None:
    # What the error is made of (gradcheck.checking.diagnose.structure): from the whole
    # Jacobian where op.jacobian kept it, else from vᵀJ along one axis at a time.
    found = jacobian_structure(ev.name, ev.jacobians, ev.rtol, ev.atol, ev.complex) \
        if ev.jacobians else None
    if found or not ev.aligned or ev.unkept or ev.unseen:   # (points it cannot tell of)
        return found
    return slice_structure(ev.name, [(o, e, ev.values(s, e.shape)) for s, o, e in zip(
        ev.samples, ev.obtained, ev.expected)], ev.rtol, ev.atol)


_LISTED = 3  # wrong elements listed by value when there are at most this many


def _partly_right(ev: _Evidence) -> str | None:
    # No pattern: say how much is right, which is evidence only where the exact gradient
    # is clearly non-zero.
    right, total, informative = ev.counts()
    if informative == 0 or right == total:
        return None
    by_point: dict[int, bool] = {}
    wrong: list[str] = []
    for s, o, e, ok in zip(ev.samples, ev.obtained, ev.expected, ev.ok):
        by_point[s.point] = by_point.get(s.point, True) and ok is not None and bool(ok.all())
        if ok is None:
            continue
        for idx in np.argwhere(~ok)[:_LISTED + 1]:
            i = tuple(int(j) for j in idx)
            wrong.append(f"{at(ev.label, i, ev.complex)} at point {s.point} (got {o[i]:.6g}, "
                         f"expected {e[i]:.6g})")
    points_right = sum(by_point.values()) + ev.unkept
    points = len(by_point) + ev.unkept + ev.unseen
    if points > 1 and points_right:
        where = f"{points_right} of {points} points ({right} of {total} elements)"
    else:
        where = f"{right} of {total} elements"
    message = f"{ev.label} is right at {where} and wrong elsewhere"
    if total - right <= _LISTED and ev.aligned:
        message += "; wrong: " + ", ".join(wrong)
    return message


#: Tried in this order for each input wrong somewhere; the first that fits explains it.
POINT_PATTERNS: list[Callable[[_Evidence], str | None]] = [
    _repeats, _nonfinite, _cross_terms, _fixed_indices, _systematic, _branch, _magnitude,
    _structure, _partly_right,
]


def diagnose_points(samples: list, *, rtol: float = PATTERN_RTOL, atol: float = PATTERN_ATOL,
                    reference=(), jacobian_right: bool = False, unkept: int = 0,
                    unseen: int = 0, jacobians=(), complex=()) -> list[str]:
    """What the errors have in common across several points and cotangents, per input.

    Args:
        samples: :class:`Sample` records, or plain ``(obtained, expected)`` pairs (each
            its own point).
        reference: the reference's output nodes, whose branch conditions (evaluated at
            each sample's ``values``) a wrong branch must line up with.
        jacobian_right: the whole Jacobian (every one-hot v) was checked and is right.
        unkept: points where every comparison agreed whose samples were not kept (over
            :data:`KEPT_ELEMENTS`): counted among the points, and no pattern is said to
            hold at every point.
        unseen: points where some comparison disagreed whose samples were not kept
            (past :data:`KEPT_POINTS` large ones): counted among the wrong points, and
            no pattern is said to hold at every point.
        jacobians: whole Jacobians (:class:`~gradcheck.checking.diagnose.structure.
            Jacobian`, op.jacobian's rows at some points) for the error's structure.
        complex: the complex inputs' names, whose elements are named by part.
    """
    samples = [s if isinstance(s, Sample) else Sample(p, 0, s[0], s[1])
               for p, s in enumerate(samples)]
    cache: dict[int, list[_Condition]] = {}

    def conditions(s: Sample) -> list[_Condition]:
        if not reference or s.values is None:
            return []
        if s.point not in cache:
            cache[s.point] = _conditions(reference, s.values)
        return cache[s.point]

    names = list(dict.fromkeys(n for s in samples for n, v in s.expected.items()
                               if v is not None))
    out = []
    for name in names:
        ev = _Evidence(name, samples, rtol, atol, conditions, jacobian_right, unkept,
                       unseen, jacobians, name in complex)
        if all(ev.right(s) for s in ev.every):
            continue
        for pattern in POINT_PATTERNS:
            if pattern is not _repeats and all(ev.right(s) for s in ev.samples):
                break  # only repeats are wrong, and _repeats did not explain them
            message = pattern(ev)
            if message:
                out.append(message)
                break
    return out


def allowed(tolerance: dict, expected, along: set, atol, rtol) -> dict:
    """Each gradient's per-element tolerance as the comparison allowed it (the
    witness's, plus the case's atol + rtol·|exact|): a diagnosis calls wrong what the
    verdict did, so that its counts agree with the message's."""
    out = {}
    for n, e in expected.grads.items():
        t = tolerance.get(f"{n}.grad")
        if n in along or t is None or e is None:
            continue
        out[n] = np.asarray(t, dtype=float) + (atol or 0.0) + \
            (rtol or 0.0) * np.abs(np.asarray(e, dtype=float))
    return out
