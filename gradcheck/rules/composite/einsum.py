"""einsum's subscripts: parsed and validated once, with the messages a user needs, and
rewritten into the equations its adjoints are (the adjoint of an einsum is an einsum of
the output's cotangent with the other operands, Laue et al.).

``"bij,bjk->bik"``: one term of labels (letters) per operand, ``->`` and the output's
labels; without ``->`` the output is every label that appears once, sorted (NumPy's and
PyTorch's implicit mode); ``...`` stands for the same leading dimensions in each operand
that has it. Any number of operands: PyTorch contracts three or more pairwise, in the
order :func:`pairs` states (opt_einsum's path where torch would take one, else left to
right); the engine's einsum and the rounding bound's :func:`steps` and
:func:`back_steps` follow that order. Not taken: a label repeated within one operand
(a diagonal), ellipsis dimensions that differ between operands (broadcasting).
"""

from __future__ import annotations

import functools
import itertools
import string
import sys
from dataclasses import dataclass

import numpy as np

from ...base.shapes import ShapeError

ELLIPSIS = "..."
LETTERS = string.ascii_uppercase + string.ascii_lowercase   # PyTorch's label order


@dataclass(frozen=True)
class Equation:
    """A parsed einsum: ``terms`` (per operand, its labels, ``...`` as one item),
    ``output`` (the same for the result) and ``sizes`` (each label's size; ``...``'s
    dimensions as ``ellipsis``)."""

    terms: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    sizes: dict
    ellipsis: tuple[int, ...]

    def shape(self, labels) -> tuple[int, ...]:
        out: list[int] = []
        for label in labels:
            out.extend(self.ellipsis if label == ELLIPSIS else (self.sizes[label],))
        return tuple(out)

    def explicit(self) -> "Equation":
        """The same equation with ``...`` spelled as letters it does not use (the
        adjoints' equations are then plain)."""
        used = {l for t in self.terms + (self.output,) for l in t}
        fresh = tuple(c for c in LETTERS if c not in used)[: len(self.ellipsis)]

        def spelled(term):
            return tuple(l for x in term for l in (fresh if x == ELLIPSIS else (x,)))

        sizes = dict(self.sizes, **dict(zip(fresh, self.ellipsis)))
        return Equation(tuple(map(spelled, self.terms)), spelled(self.output), sizes, ())


def _labels(term: str, where: str) -> tuple[str, ...]:
    out: list[str] = []
    rest = term.replace(" ", "")
    while rest:
        if rest.startswith(ELLIPSIS):
            if ELLIPSIS in out:
                raise ShapeError(f"{where} has more than one '...'")
            out.append(ELLIPSIS)
            rest = rest[3:]
            continue
        label, rest = rest[0], rest[1:]
        if label not in LETTERS:
            raise ShapeError(f"{label!r} in {where} is not a letter (subscripts "
                             "are letters, ',' between operands, '->' before the output "
                             "and '...')")
        if label in out:
            raise ShapeError(f"label {label!r} repeats in {where} (a diagonal); "
                             "each label may appear once per operand")
        out.append(label)
    return tuple(out)


def parse(subscripts: str, shapes) -> Equation:
    """The equation ``subscripts`` over operands of ``shapes``, validated.

    Raises:
        ShapeError: a malformed equation, or one that does not fit the shapes.
    """
    shapes = [tuple(s) for s in shapes]
    if not shapes:
        raise ShapeError("takes at least one operand")
    lhs, arrow, rhs = subscripts.partition("->")
    if "->" in rhs or "-" in lhs or ">" in lhs:
        raise ShapeError(f"{subscripts!r} has a stray '-' or '>'")
    pieces = lhs.split(",")
    if len(pieces) != len(shapes):
        raise ShapeError(f"{subscripts!r} has {len(pieces)} operand term"
                         f"{'s' if len(pieces) != 1 else ''} for {len(shapes)} operand"
                         f"{'s' if len(shapes) != 1 else ''}")
    terms = tuple(_labels(p, f"operand {k}") for k, p in enumerate(pieces))
    sizes: dict = {}
    ellipsis = None
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        named = [l for l in term if l != ELLIPSIS]
        if (ELLIPSIS in term and len(named) > len(shape)) or (
                ELLIPSIS not in term and len(named) != len(shape)):
            raise ShapeError(f"operand {k} has {len(shape)} dimensions (shape "
                             f"{list(shape)}) and {len(named)} labels "
                             f"{''.join(named)!r}{' and ...' if ELLIPSIS in term else ''}")
        dims = list(shape)
        if ELLIPSIS in term:
            at = term.index(ELLIPSIS)
            span = len(shape) - len(named)
            own = tuple(dims[at:at + span])
            if ellipsis is not None and own != ellipsis:
                raise ShapeError(f"'...' covers {list(ellipsis)} in one operand "
                                 f"and {list(own)} in operand {k}; they must be equal")
            ellipsis = own
            del dims[at:at + span]
        for label, n in zip(named, dims):
            if sizes.setdefault(label, n) != n:
                raise ShapeError(f"label {label!r} has size {sizes[label]} and "
                                 f"{n} in operand {k}")
    ellipsis = ellipsis or ()
    if arrow:
        output = _labels(rhs, "the output")
        for label in output:
            if label != ELLIPSIS and label not in sizes:
                raise ShapeError(f"output label {label!r} is in no operand")
    else:
        counts = [l for t in terms for l in t if l != ELLIPSIS]
        once = sorted((l for l in set(counts) if counts.count(l) == 1), key=LETTERS.index)
        output = ((ELLIPSIS,) if any(ELLIPSIS in t for t in terms) else ()) + tuple(once)
    return Equation(terms, output, sizes, ellipsis)


def shape(*args) -> tuple[int, ...]:
    """The shape rule of the einsum row: ``shape(*operand_shapes, subscripts)``."""
    *shapes, subscripts = args
    if subscripts is None:
        raise ShapeError('takes its subscripts first: einsum("ij,jk->ik", a, b)')
    eq = parse(subscripts, shapes)
    return eq.shape(eq.output)


def summed(eq: Equation) -> bool:
    """Whether the equation sums over some label (or the ellipsis' dimensions)."""
    inside = {l for t in eq.terms for l in t}
    return bool(inside - set(eq.output) - {ELLIPSIS}) or (
        ELLIPSIS in inside and ELLIPSIS not in eq.output and bool(eq.ellipsis))


def final_node(*args) -> str:
    """The grad_fn of einsum's result in PyTorch (aten/src/ATen/native/Linear.cpp):
    one operand, a sum over its summed labels, else its permute; two, the view that
    drops the summed dimensions after the bmm, else their product."""
    *operands, subscripts = args
    eq = parse(subscripts, [np.shape(getattr(a, "data", a)) for a in operands])
    if len(operands) == 1:
        return "SumBackward1" if summed(eq) else "PermuteBackward0"
    return "ViewBackward0" if summed(eq) else "MulBackward0"


def text(terms, output) -> str:
    return ",".join("".join(t) for t in terms) + "->" + "".join(output)


def adjoint(subscripts: str, shapes, k: int, batched: bool = False):
    """Operand ``k``'s adjoint: ``(equation, others, missing)``: the equation of
    einsum(ḡ, *others) (the other operands in order, ``others`` their indices) giving
    the cotangent of operand ``k`` over its labels that appear in ḡ or another operand,
    and ``missing``, the positions of operand ``k``'s labels that appear nowhere else
    (its cotangent is broadcast along them). ``batched``: ḡ has one more leading axis,
    which the result keeps."""
    eq = parse(subscripts, shapes).explicit()
    others = [j for j in range(len(eq.terms)) if j != k]
    have = set(eq.output).union(*(eq.terms[j] for j in others))
    mine = eq.terms[k]
    kept = tuple(l for l in mine if l in have)
    missing = tuple(d for d, l in enumerate(mine) if l not in have)
    lead = ()
    if batched:
        used = {l for t in eq.terms + (eq.output,) for l in t}
        lead = (next(c for c in LETTERS if c not in used),)
    terms = (lead + eq.output,) + tuple(eq.terms[j] for j in others)
    return text(terms, lead + kept), others, missing


@functools.lru_cache(maxsize=None)
def _installed_opt_einsum():
    """opt_einsum, or None where it does not import (asked once: a failed import
    searches the path each time)."""
    try:
        import opt_einsum
    except ImportError:
        return None
    return opt_einsum


def _path_finder():
    """(opt_einsum, strategy) as torch.einsum would use them, or None where it contracts
    left to right. Read from torch's own flags (``torch.backends.opt_einsum``: enabled,
    is_available(), strategy, get_opt_einsum()) where torch is loaded; where it is not,
    torch's defaults, which importing it would set: enabled exactly when opt_einsum
    imports, strategy "auto". This module imports no torch (the engine runs without it),
    and the defaults make the order the same before torch is imported as after, unless
    the user changes the flags, which takes torch."""
    flags = getattr(getattr(sys.modules.get("torch"), "backends", None), "opt_einsum", None)
    if flags is None:
        found = _installed_opt_einsum()
        return None if found is None else (found, "auto")
    if not (flags.enabled and flags.is_available()):
        return None
    return flags.get_opt_einsum(), flags.strategy


def pairs(subscripts: str, shapes) -> list[tuple[int, int, bool]]:
    """torch.einsum's pairwise contractions, in order: per step ``(i, j, last)``: the
    i-th and j-th of the operands left (i < j; the i-th is sumproduct_pair's left) are
    taken out and their contraction put last (``last``) or first.

    torch/functional.py einsum: three or more operands, with opt_einsum enabled and
    available, take ``opt_einsum.contract_path(equation, *operands,
    optimize=strategy)[0]``, flattened; at::native::einsum (Linear.cpp) reads it two
    indices at a time, swaps them so that i < j, erases ops[j] then ops[i] and appends
    the result. Otherwise it contracts ops[0] with ops[1] and puts the result first:
    left to right. The two differ even for a path of (0, 1)s: appended, the result is
    the right operand of the next step, not the left."""
    n = len(shapes)
    finder = _path_finder() if n > 2 else None
    if finder is None:
        return [(0, 1, False)] * (n - 1)
    return list(_path_pairs(subscripts, tuple(tuple(s) for s in shapes), *finder))


@functools.lru_cache(maxsize=256)
def _path_pairs(subscripts: str, shapes: tuple, module, strategy) -> tuple:
    """:func:`pairs` where opt_einsum's path is taken, kept per (equation, shapes,
    module, strategy): the engine, the bounds' steps and each operand's back_steps ask
    for the same order (720 times in one check of a 3-operand einsum, 6% of it)."""
    n = len(shapes)
    # the path depends on the equation and the shapes alone: zero-stride stand-ins of
    # the operands' shapes (no memory, any opt_einsum version reads .shape)
    stand_ins = [np.broadcast_to(np.empty(()), s) for s in shapes]
    path = module.contract_path(subscripts, *stand_ins, optimize=strategy)[0]
    flat = list(itertools.chain.from_iterable(path))
    if len(flat) != 2 * (n - 1):
        raise ShapeError(f"opt_einsum's path {path} is not {n - 1} pairs")
    out = []
    for step in range(n - 1):
        i, j = sorted(flat[2 * step: 2 * step + 2])
        if i == j or i < 0 or j >= n - step:
            raise ShapeError(f"opt_einsum's path {path} names no pair at step {step}")
        out.append((i, j, True))
    return tuple(out)


def replay(order, ops: list, combine):
    """``ops`` (a list, emptied to one in place) contracted in ``order`` (:func:`pairs`),
    as at::native::einsum does: per step ops[j] then ops[i] erased (i < j) and
    ``combine(a, b, ops)`` (``ops``: those left) put last or first; the one left."""
    for i, j, last in order:
        a, b = ops[i], ops[j]
        del ops[j], ops[i]
        ops.insert(len(ops) if last else 0, combine(a, b, ops))
    return ops[0]


def steps(subscripts: str, shapes) -> list[int]:
    """The number of terms each stage of PyTorch's pairwise contraction (in the order of
    :func:`pairs`) sums, one per step (one operand: its one sum): a step sums the labels
    of its pair that neither another operand left nor the output has (sums of a label
    one operand has alone included: their terms multiply)."""
    eq = parse(subscripts, shapes).explicit()
    if len(eq.terms) == 1:
        return [contracted(subscripts, shapes)]
    return [_terms(eq, (a | b) - kept)
            for (a, _), (b, _), kept in _chain(eq, pairs(subscripts, shapes))]


def _terms(eq: Equation, labels) -> int:
    n = 1
    for label in labels:
        n *= eq.sizes[label]
    return n


def _chain(eq: Equation, order) -> list[tuple]:
    """Per pairwise step of ``order`` (:func:`pairs`): ((its left's labels, the operands
    it holds), the same of its right, the labels its result keeps: those the output or
    another operand left has)."""
    out = []

    def step(a, b, left):
        kept = (a[0] | b[0]) & set(eq.output).union(*(labels for labels, _ in left))
        out.append((a, b, kept))
        return kept, a[1] | b[1]

    replay(order, [(set(t), {k}) for k, t in enumerate(eq.terms)], step)
    return out


def back_steps(subscripts: str, shapes, k: int) -> list[int]:
    """Operand ``k``'s gradient through PyTorch's pairwise contractions (:func:`pairs`):
    the terms each contraction on its way back sums, from the last step down to the
    operand. Back through a step T = contract(A, B) whose operand A holds operand k:
    A's gradient sums ḡ_T times B over the labels A lacks ((T's labels ∪ B's) − A's)."""
    eq = parse(subscripts, shapes).explicit()
    grad, out = set(eq.output), []
    for a, b, _ in reversed(_chain(eq, pairs(subscripts, shapes))):
        if k not in a[1] | b[1]:
            continue
        (target, _), (other, _) = (a, b) if k in a[1] else (b, a)
        out.append(_terms(eq, (grad | other) - target))
        grad = target
    return out


def contracted(subscripts: str, shapes, k: int | None = None) -> int:
    """The number of terms each element of the result sums (``k`` None: the forward's;
    else operand ``k``'s adjoint's): the product of the sizes of the labels summed."""
    eq = parse(subscripts, shapes).explicit()
    if k is None:
        inside, result = set().union(*eq.terms), set(eq.output)
    else:
        others = [j for j in range(len(eq.terms)) if j != k]
        inside = set(eq.output).union(*(eq.terms[j] for j in others))
        result = set(eq.terms[k])
    n = 1
    for label in inside - result:
        n *= eq.sizes[label]
    return n
