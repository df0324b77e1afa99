"""The interface every kind of symbolic reference shares, and the choice of kind.

``Reference(case)`` builds the kind that fits the case's formula (:func:`kind_of`); the
kinds register themselves by their :attr:`Reference.mode` as they are defined (the
package imports every kind, so all are registered before any is chosen).
"""

from __future__ import annotations

import abc
from typing import ClassVar, Iterator

import numpy as np

from ..base.evaluation import Evaluation
from ..rules import COMPARISON, ELEMENTWISE, RULES
from ..formula.tree import differentiable_names, elementwise_split, walk


def mode_of(case) -> str:
    """``"elementwise"`` for a formula that is elementwise (possibly under one final
    sum/mean); ``"tensor"`` for one that mixes elements through rows with a tensor
    column (every structural row of the table has one); ``"expanded"`` otherwise."""
    if elementwise_split(case.output) is not None:
        return "elementwise"
    return "tensor" if has_tensor_rules(case) else "expanded"


def has_tensor_rules(case) -> bool:
    """Whether every structural row of the formula has a tensor column."""
    return all(RULES[n.op].tensor is not None for n in walk(case.output)
               if n.op in RULES and RULES[n.op].family not in (ELEMENTWISE, COMPARISON))


def kind_of(case) -> type[Reference]:
    """The :class:`Reference` subclass that builds ``case``'s reference."""
    return Reference.kinds[mode_of(case)]


class Reference(abc.ABC):
    """The compiled symbolic reference of one case: ``Reference(case)`` is an instance of
    the subclass :func:`kind_of` picks.

    Attributes:
        case: the case.
        wrt: the names of the inputs that require a gradient and that a differentiable
            path reaches, in the case's order.
        unreached: the inputs that require a gradient that no differentiable path
            reaches: PyTorch leaves their ``.grad`` None, and so does the reference.

    Raises:
        UnsupportedOpError: the formula mixes elements and is too large to expand.
    """

    #: how the reference is built: ``"elementwise"`` or ``"expanded"``
    mode: ClassVar[str]
    #: the concrete kinds by mode
    kinds: ClassVar[dict[str, type[Reference]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "mode" in cls.__dict__:
            Reference.kinds[cls.mode] = cls

    def __new__(cls, *args, **kwargs):
        if cls is Reference:
            cls = kind_of(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, case):
        self.case = case
        reach = differentiable_names(case.output)
        self.wrt = [s.name for s in case.inputs if s.requires_grad and s.name in reach]
        self.unreached = [s.name for s in case.inputs
                          if s.requires_grad and s.name not in reach]

    # ------------------------------------------------------------------ what kinds give
    @property
    @abc.abstractmethod
    def sparsity(self) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
        """The Jacobian's structural non-zeros by input (and retained ``let``) name, as
        flat (output row, input element) index arrays; None for an elementwise formula
        (its Jacobian is diagonal up to broadcasting)."""

    @abc.abstractmethod
    def _evaluations(self, points: list, vs: list) -> Iterator[Evaluation]:
        """:meth:`evaluations` before the unreached inputs are added (``vs`` float)."""

    @abc.abstractmethod
    def _hvp(self, point, v, u, absolute: bool) -> dict[str, np.ndarray]:
        """:meth:`hvp`, with ``v`` and ``u`` already their magnitudes when ``absolute``."""

    @abc.abstractmethod
    def _jvp(self, point, u, absolute: bool) -> np.ndarray:
        """:meth:`jvp`, with ``u`` already its magnitude when ``absolute``."""

    def prepare_second(self) -> None:
        """Build what :meth:`hvp` and :meth:`jvp` are evaluated with now (for ``order =
        2``), so that a formula whose second derivatives cannot be built is refused
        before its op runs; a kind that needs nothing built does nothing.

        Raises:
            UnsupportedOpError: no exact second derivatives for this formula.
            BudgetError: building them would take more than their budget.
        """

    def formulas(self) -> dict[str, str]:
        """Each exact gradient as a formula, by quantity name (``"W.grad"``); a kind
        that does not print its gradients gives none."""
        return {}

    # ------------------------------------------------------------------ public
    def evaluate(self, point: dict[str, np.ndarray], v: np.ndarray) -> Evaluation:
        """Output value and exact vᵀJ at ``point`` (float64 arrays by input name)."""
        return next(self.evaluations([point], [v]))

    def evaluations(self, points: list[dict[str, np.ndarray]], vs: list[np.ndarray]):
        """:meth:`evaluate` at each point with its v, in order (a generator); small
        elementwise formulas are evaluated at all the points in one vectorized call."""
        vs = [np.asarray(v, dtype=float) for v in vs]
        results = self._evaluations(points, vs)
        while True:
            with np.errstate(all="ignore"):
                out = next(results, None)
            if out is None:
                return
            out.grads.update(dict.fromkeys(self.unreached))
            yield out

    def hvp(self, point: dict[str, np.ndarray], v: np.ndarray,
            u: dict[str, np.ndarray], absolute: bool = False) -> dict[str, np.ndarray]:
        """Exact Hessian-vector product of vᵀy: for each input x_i,
        Σ_j ∂²(vᵀy)/∂x_i∂x_j · u_j (what double backward computes).

        ``absolute``: the same sum of magnitudes (|v|, |u| and, elementwise, |∂²|), the
        size its rounding errors scale with."""
        if absolute:
            v, u = np.abs(v), {n: np.abs(a) for n, a in u.items()}
        with np.errstate(all="ignore"):   # (a branch where() does not take: NaN unread)
            return self._hvp(point, v, u, absolute)

    def jvp(self, point: dict[str, np.ndarray], u: dict[str, np.ndarray],
            absolute: bool = False) -> np.ndarray:
        """Exact J u: the derivative of the output along u (arrays by input name), which
        is what double backward gives for the gradient with respect to grad_output.
        ``absolute``: |J|·|u| instead, the size its rounding errors scale with."""
        if absolute:
            u = {n: np.abs(a) for n, a in u.items()}
        with np.errstate(all="ignore"):
            return self._jvp(point, u, absolute)
