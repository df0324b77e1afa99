"""op.contract: a backward's contract with autograd, at the first point (the op's side of
it: :mod:`gradcheck.checking.opcheck.contract_op`). Autograd hands a backward more than
the contiguous grad_output and the all-inputs-requiring-grad graph the other checks use:

- **grad_output's layout**: strided (every other element of a longer buffer),
  transposed (outputs of two axes or more) and expanded (one value broadcast with
  stride 0, as ``y.sum().backward()`` sends; held to the op's own vᵀJ for a contiguous
  tensor of ones): a backward that calls ``grad_output.view(-1)`` raises on the first
  two, one that reads its memory as contiguous computes garbage;
- **needs_input_grad**: every subset of the inputs requiring grad (up to
  :data:`SUBSETS_UP_TO` inputs; beyond, each input alone and all but each one) gives,
  for those that do, their gradients with every input requiring grad. Autograd drops
  whatever a backward returns for an input that needs none, unchecked (PyNode::apply,
  then validate_outputs skips an edge that is not valid), so what matters is the
  gradients that are kept: a backward that packs them by ``ctx.needs_input_grad`` into
  the wrong slots gives one input's gradient to another, or None;
- **aliasing**: the same tensor passed in two argument slots (the first two inputs
  requiring grad of one shape and domain): its gradient is the sum of the two slots'
  with two separate tensors of the same values (autograd accumulates them).

Each path is held to the op's own call at the same values (its contiguous grad_output,
every input requiring grad, separate tensors), to twice the tolerance of op.backward at
that point and cotangent, NaN for NaN: op.contract fails only where the path changes
what the op does, not again where op.backward fails. A failure says which path; an op
that raises on a path fails naming it."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..compare import Comparison, Finding, Outcome, Tally
from .checks import _renamed, _twice, jacobian_checked
from .contract_op import GRAD_OUTPUT_LAYOUTS
from .exact import exact_rows, grad_quantities
from .loader import wanted

#: inputs up to which every subset of them requiring grad is taken
SUBSETS_UP_TO = 4
#: elements (inputs and outputs) up to which the op is asked every path in one call
ONE_CALL_UP_TO = 1 << 16
GRAD_OUTPUT_WORDS = {"strided": "every other element of a longer buffer",
                     "transposed": "a transposed view",
                     "expanded": "ones broadcast from one element, stride 0"}
ENGINE = ("grad_output's layouts not checked: a gradcheck.engine op's tensors have no "
          "strides")


def plan(case) -> dict:
    """What op.contract asks of the op: grad_output's layouts (taken for a torch op,
    where they change a cotangent's layout), the subsets of the inputs requiring grad
    (each a list of names), and the pair passed as one tensor (``[first, second]``, or
    None)."""
    names = wanted(case)
    return {"layouts": list(GRAD_OUTPUT_LAYOUTS), "subsets": subsets(names),
            "pair": shared_pair(case, names)}


def subsets(names: list[str]) -> list[list[str]]:
    """The proper, non-empty subsets of ``names`` (in order), or for more than
    :data:`SUBSETS_UP_TO`, each name alone and all but each one."""
    n = len(names)
    if n <= 1:
        return []
    if n <= SUBSETS_UP_TO:
        return [[m for j, m in enumerate(names) if mask >> j & 1]
                for mask in range(1, (1 << n) - 1)]
    return [[m] for m in names] + [[m for m in names if m != k] for k in names]


def shared_pair(case, names: list[str]) -> list[str] | None:
    """The first two inputs requiring grad of one shape and domain, neither pinned (so
    that one tensor's values are in both domains), or None."""
    for a, b in combinations([case.input[n] for n in names], 2):
        if (a.shape == b.shape and a.dtype == b.dtype and a.domain == b.domain
                and a.value is None and b.value is None):
            return [a.name, b.name]
    return None


def shared_point(point: dict, pair: list[str]) -> dict:
    """``point`` with the second of ``pair`` holding the first's values."""
    first, second = pair
    return {**point, second: point[first]}


def contract(check, i: int, point: dict, vs: list, got: dict,
             tolerance: dict, exact_ones) -> None:
    """op.contract at point ``i``, recorded in ``check``'s tally as each path is judged
    (``check``: the :class:`~gradcheck.checking.opcheck.driver.OpCheck`; ``got``: the
    op's vᵀJ for ``vs`` with every input requiring grad, ``tolerance`` its tolerances;
    ``exact_ones``: the exact evaluation for v = ones). An op of up to
    :data:`ONE_CALL_UP_TO` elements is asked every path in one call; a larger one a path
    at a time, so that the judge holds one path's gradients, not a dozen."""
    case, judge = check.case, PathJudge(check.tallies["contract"], i, point)
    if check.op.info.get("engine"):
        check.record("contract", [Finding(note=ENGINE)])
    whole = plan(case)
    large = sum(int(np.prod(n.shape, dtype=np.int64))
                for n in (*case.inputs, *case.outputs)) > ONE_CALL_UP_TO
    for todo in (_paths(whole) if large else [whole]):
        done = check.op.contract(point, vs, todo)
        check.record("contract", _judged(check, judge, todo, done, point, vs, got,
                                         tolerance, exact_ones))
        del done


def _paths(whole: dict) -> list[dict]:
    """``whole`` (a :func:`plan`) as one plan per path."""
    nothing = {"layouts": [], "subsets": [], "pair": None}
    return ([{**nothing, "layouts": [layout]} for layout in GRAD_OUTPUT_LAYOUTS]
            + [{**nothing, "subsets": [names]} for names in whole["subsets"]]
            + ([{**nothing, "pair": whole["pair"]}] if whole["pair"] else []))


def _judged(check, judge, todo: dict, done: dict, point: dict, vs: list, got: dict,
            tolerance: dict, exact_ones) -> list[Outcome]:
    """The outcomes of the paths of ``todo`` the op took (``done``)."""
    case = check.case
    out: list[Outcome] = []
    for layout, d in done["grad_output"].items():
        what = f"with grad_output {layout} ({GRAD_OUTPUT_WORDS.get(layout, layout)})"
        base, allowed = got, tolerance
        if layout == "expanded" and "error" not in d:
            base = d["contiguous"]
            ones = [np.ones(np.shape(v)) for v in vs]
            (allowed,) = check.tolerance.many(
                point, [ones], [grad_quantities(exact_ones.grads)],
                keep=jacobian_checked(case.outputs))
        out += judge(what, f"grad_output {layout}", d, base, allowed,
                     "its gradients are not those for a contiguous grad_output"
                     + " of ones" * (layout == "expanded"))
    for names, d in zip(todo["subsets"], done["subsets"]):
        others = [n for n in wanted(case) if n not in names]
        what = (f"with only {', '.join(names)} requiring grad ({', '.join(others)} "
                "not)")
        out += judge(what, f"only {', '.join(names)} requiring grad", d, got, tolerance,
                     "its gradients are not those with every input requiring grad")
    if todo["pair"] and done["pair"] is not None:
        out += _pair(check, judge, todo["pair"], done["pair"], point, vs)
    return out


def _pair(check, judge, pair: list[str], done: dict, point: dict, vs: list):
    """The shared tensor's outcomes: its gradient against the sum of the two slots',
    every other input's against its own, with separate tensors."""
    first, second = pair
    what = f"with {first} passed as both {first} and {second} (one tensor in both slots)"
    label = f"{first} as both {first} and {second}"
    if "error" in done:
        return judge(what, label, done, {}, {}, SUMMED.format(first=first, second=second))
    return judge(what, label, {"grads": done["shared"]}, summed(done["separate"], pair),
                 pair_tolerance(check, pair, point, vs),
                 SUMMED.format(first=first, second=second))


#: what a shared tensor's gradient that is not the sum of its two slots' is
SUMMED = ("its gradient is not the sum of {first}'s and {second}'s with two separate "
          "tensors of the same values")


def pair_tolerance(check, pair: list[str], point: dict, vs: list) -> dict:
    """op.backward's tolerances at ``point`` with ``pair``'s second holding the first's
    values (:func:`shared_point`), for ``vs``: the first's is the sum of the two slots'
    (its gradient is their sum), None where either is. (The point is another one: its
    tolerances of their own; the kept forward passes are the first point's.)"""
    from .tolerances import OpTolerance

    first, second = pair
    at = shared_point(point, pair)
    (ex,) = exact_rows(check.refs, at, [vs], check.keep)
    allowed = OpTolerance(check.case, check.dtype)(at, vs, grad_quantities(ex.grads),
                                                   keep=False)
    a, b = allowed.get(f"{first}.grad"), allowed.get(f"{second}.grad")
    allowed[f"{first}.grad"] = None if a is None or b is None else a + b
    return allowed


def summed(separate: dict, pair: list[str]) -> dict:
    """Gradients with two separate tensors (by input name), the pair's two summed as
    the first's: what one tensor in both slots must get."""
    first, second = pair
    out = dict(separate)
    out[first] = _sum(out.pop(first), out.pop(second))
    return out


def _sum(a, b):
    """Two slots' gradients summed, None as zero (None where both are)."""
    if a is None or b is None:
        return b if a is None else a
    return a + b


class PathJudge:
    """One path's outcomes: its comparison with the op's own call, and, where it
    mismatches, a problem naming the path (the tally's message then says which)."""

    def __init__(self, tally: Tally, i: int, point: dict):
        self.tally, self.i, self.point = tally, i, point

    def __call__(self, what: str, label: str, done: dict, base: dict, tolerance: dict,
                 differ: str) -> list[Outcome]:
        if "error" in done:
            return [Finding(problem=f"{what}, the op raised {done['error']}")]
        obtained, expected = grad_quantities(done["grads"]), grad_quantities(base)
        rename = {q: f"{q} ({label})" for q in obtained}
        comparison = Comparison(
            {rename[q]: g for q, g in obtained.items()},
            {rename[q]: expected.get(q) for q in obtained}, self.i,
            _twice(_renamed(tolerance, rename)), exact=False, values=self.point)
        scratch = self.tally.fresh()
        scratch.maps = None
        scratch.record([comparison])
        if not scratch.mismatched:
            return [comparison]
        # the elements compared, and the path named once (a None the comparison would
        # name again on its own is counted, not recorded)
        counted = Finding(checked=scratch.checked) if scratch.problems else comparison
        return [counted, Finding(problem=f"{what}, {differ}: {scratch.result().message}")]
