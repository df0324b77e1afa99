"""The rounding model's one dispatch by family: each family of rows
(:data:`gradcheck.rules.row.FAMILIES`, read off :attr:`gradcheck.rules.row.Rule.family`)
to the module that bounds it, and what the model needs to know of it. Nothing else in
:mod:`gradcheck.bounds` asks which family a row is in.

Every handler takes the model (:class:`gradcheck.bounds.model.RoundingModel`) first
and reads it only through its public protocol (see the class):

- ``value(model, node, rule, args, errs) -> (t, E(t))``: the node's value from its
  arguments' values ``args`` and bounds ``errs``;
- ``cotangent(model, node, rule, k, g, ge) -> (c, E(c))``: the VJP into argument ``k``
  at the cotangent ``g`` (bound ``ge``); None where no cotangent flows (comparisons);
- ``many(model, node, rule, k, g, t, args)``: the VJP at many cotangents along ``g``'s
  axis 0 (``model.lead``), each as it would be alone;
- ``own_code``: its bounds read every value of the node and its arguments, not only
  what the engine's VJP loads (:func:`gradcheck.bounds.kept.kept` keeps them all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..rules.row import (BILINEAR, COMPARISON, COMPOSITE, ELEMENTWISE, POOLING, REDUCTION,
                         STRUCTURE)
from . import bilinear, composite, elementwise, pooling, structure


@dataclass(frozen=True)
class Family:
    """How the rounding model bounds one family of rows (see the module docstring)."""

    value: Callable
    cotangent: Callable | None
    many: Callable
    own_code: bool


def _together(model, node, rule, k, g, t, args):
    """All cotangents in one call of the VJP
    (:meth:`gradcheck.bounds.model.RoundingModel.together`)."""
    return model.together(node, rule, k, g, t, args)


#: family -> its handler: the one place a row's family picks its bounds
HANDLERS: dict[str, Family] = {
    ELEMENTWISE: Family(elementwise.elementwise_value, elementwise.elementwise_cotangent,
                        _together, own_code=False),
    REDUCTION: Family(elementwise.reduction_value, elementwise.elementwise_cotangent,
                      _together, own_code=False),
    COMPARISON: Family(elementwise.comparison_value, None, _together, own_code=False),
    BILINEAR: Family(bilinear.value, bilinear.cotangent, bilinear.many, own_code=True),
    STRUCTURE: Family(structure.value, structure.cotangent, structure.many,
                      own_code=True),
    POOLING: Family(pooling.value, pooling.cotangent, pooling.many, own_code=True),
    COMPOSITE: Family(composite.value, composite.cotangent, _together, own_code=True),
}


def family(rule) -> Family:
    """The handler of ``rule``'s family."""
    return HANDLERS[rule.family]
