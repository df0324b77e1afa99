"""Why an op check reported nothing (:attr:`gradcheck.base.result.CaseResult.unchecked`):
each check of OP_CHECKS that neither ran nor was skipped saying why (a path the op does
not support is a skipped witness with its own reason) gets one here, so that every
report can say of each check of an op case whether it ran, and if not, why.

The reasons are what the driver decided from (the case's keys, what the op is: its
process's ``info``), said in a few words; no check is run to find them."""

from __future__ import annotations

from typing import Callable

from .checks import JACOBIAN_LIMIT, jacobian_checked
from .loader import wanted

SWITCHED_OFF = "switched off by skip_checks"
#: where no rule below applies: the check found nothing of this op to look at
NOTHING = "nothing of this op's for it to check"


def _jacobian(case, info: dict) -> str | None:
    if not jacobian_checked(case.outputs):
        return (f"the outputs have over {JACOBIAN_LIMIT} elements: op.backward's random "
                "cotangents check the gradients instead")
    return None


def _shapes(case, info: dict) -> str | None:
    if not info.get("function"):
        return "not a torch.autograd.Function: no backward of its own to judge"
    return None


def _layout(case, info: dict) -> str | None:
    if info.get("engine"):
        return "a gradcheck.engine op: its arrays have no strides"
    return None


def _double(case, info: dict) -> str | None:
    if case.order != 2:
        return "order = 1: no second derivatives asked"
    return None


def _jvp(case, info: dict) -> str | None:
    if not wanted(case):
        return "no input whose gradient is checked"
    return None


def _vmap(case, info: dict) -> str | None:
    if info.get("engine"):
        return "a gradcheck.engine op: not run under torch.func"
    return None


def _registration(case, info: dict) -> str | None:
    if not info.get("library"):
        return "not a torch.library op"
    return None


_WHY: dict[str, Callable[..., str | None]] = {
    "jacobian": _jacobian, "shapes": _shapes, "layout": _layout, "double": _double,
    "jvp": _jvp, "vmap": _vmap, "registration": _registration}


def why(check: str, case, info: dict) -> str:
    """Why ``check`` (a name of OP_CHECKS, ``"jvp"``) reported nothing for ``case``,
    whose op's process said ``info`` of it."""
    if f"op.{check}" in case.skip_checks:
        return SWITCHED_OFF
    rule = _WHY.get(check)
    return (rule(case, info) if rule else None) or NOTHING
