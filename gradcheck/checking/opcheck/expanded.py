"""op.layout's expanded inputs, at the first point: each input whose gradient is
checked given as one slice broadcast along its first axis of more than one element
(stride 0, as ``x[:1].expand(...)`` or a broadcast in the caller's code hands it on),
the op's own side in :func:`gradcheck.checking.opcheck.calls.expanded`.

Such an input holds equal values along that axis, so it is compared at a point of its
own: the first point with those inputs' first slices repeated along the axis. The op's
outputs and vᵀJ there, for the expanded inputs, are held to its own call with the same
values contiguous (twice the tolerance at that point, as op.layout's other layouts):
a kernel that reads its input's memory as if it were contiguous, or writes into it,
reads or writes one slice where it meant many. Where the contiguous call raises at
those values too (a matrix made singular by its repeated rows), nothing is said about
the layout: a note, not a failure."""

from __future__ import annotations

import numpy as np

from ..compare import Finding, Outcome
from .checks import layout
from .exact import exact_rows, forward_values, grad_quantities
from .loader import wanted
from .tolerances import OpTolerance


def plan(case, point: dict) -> tuple[dict, dict] | None:
    """(axis by input name, the point with those inputs constant along it), or None where
    no input whose gradient is checked has an axis of more than one element."""
    axes = {}
    for name in wanted(case):
        spec = case.input[name]
        if spec.value is not None:
            continue   # (a pinned value is the case's to choose)
        # (a complex input's axes, never the layout's (re, im) one: the op broadcasts
        # the complex tensor)
        axis = next((a for a, size in enumerate(spec.complex_shape) if size > 1), None)
        if axis is not None:
            axes[name] = axis
    if not axes:
        return None
    at = dict(point)
    for name, axis in axes.items():
        x = np.asarray(point[name])
        at[name] = np.broadcast_to(np.take(x, [0], axis=axis), x.shape).copy()
    return axes, at


def expanded(check, i: int, vs: list) -> list[Outcome]:
    """op.layout's outcomes for expanded inputs at the case's first point (``check``: the
    :class:`~gradcheck.checking.opcheck.driver.OpCheck`; ``vs``: the point's cotangents)."""
    todo = plan(check.case, check.first)
    if todo is None:
        return []
    axes, at = todo
    done = check.op.expanded(at, axes, vs)
    which = ", ".join(f"{n} along axis {a}" for n, a in axes.items())
    if "refused" in done:
        first = (done["refused"].strip().splitlines() or ["an error"])[0][:300]
        return [Finding(note=f"expanded inputs ({which}) not checked: the op raises at "
                             f"their values contiguous too: {first}")]
    if "raised" in done:
        return [Finding(problem=f"the op raised for expanded inputs ({which}: one slice "
                                f"broadcast, stride 0) where it takes contiguous ones "
                                f"of the same values: {done['raised']}")]
    (ex,) = exact_rows(check.refs, at, [vs], check.keep)
    wanted_at = (forward_values(check.forward_refs, at) if check.forward_refs
                 else ex.retained)
    # the point is another one: its tolerances of their own (the kept forward passes
    # are the first point's)
    tolerance = OpTolerance(check.case, check.dtype)(
        at, vs, dict(wanted_at, **grad_quantities(ex.grads)), keep=False)
    contiguous = done["contiguous"]
    values = {f"out{k}": y for k, y in enumerate(contiguous["outputs"])}
    return layout({"expanded": done["expanded"]}, values, contiguous["grads"], i,
                  tolerance, at)
