"""The registry of witnesses: every way of computing a case's gradient that is compared
with the symbolic reference, in one table.

Each :class:`Witness` names its run function, of the one signature
``run(case, point, v, dtype, reference) -> Evaluation``, the module that holds it, the
dtypes it runs in, the rule that gives its tolerance and a line saying what it is.
Everything that lists witness names (the command line's ``--witness``, a case file's
``witnesses = [...]`` and its default, the checking code) or their modules (a worker's
imports before its first case) reads them from here when it needs them.

Importing this module imports no witness: torch, the engine and the rounding model are
imported when a witness is first run, so ``gradcheck --help`` stays instant.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

__all__ = ["Witness", "REGISTRY", "REFERENCE", "OP", "names", "case_names",
           "formula_names", "modules", "witness", "entry", "skip_reason"]

#: The symbolic reference: it always runs, and every witness is compared with it.
REFERENCE = "symbolic"
#: The checks of a custom op (:mod:`gradcheck.checking.opcheck`): a case with ``op`` runs them
#: instead of the formula witnesses.
OP = "op"


@dataclass(frozen=True)
class Witness:
    """One formula witness."""

    name: str
    #: ``run(case, point, v, dtype, reference) -> Evaluation``: the case's output and
    #: vᵀJ at ``point``; ``reference`` is the case's :class:`gradcheck.reference.Reference`.
    run: Callable
    #: the dtypes it runs in; None: every dtype. In the others it is reported as skipped,
    #: with the reason, which never fails a case.
    runs_in: tuple[str, ...] | None
    #: ``tolerance(dtype, bounds, own_error) -> {quantity: allowed error}``
    tolerance: Callable
    description: str
    #: it evaluates the formula at nearby points (finite differences): at a point that
    #: stays near a kink its disagreement is a note, not a mismatch (a difference across
    #: a kink measures no derivative)
    perturbs: bool = False
    #: its run takes ``step`` (a relative step): where it disagrees, it measures the
    #: point again at finer steps (:mod:`gradcheck.checking.refinement`)
    refines: bool = False
    #: the module whose ``run`` it calls, imported at its first call (see
    #: :func:`_lazy_run`); None: ``run`` is loaded already (a test's or a plugin's
    #: function). A worker imports these before its first case (:func:`modules`).
    module: str | None = None
    #: its run takes ``at``, the point's :class:`gradcheck.bounds.point.PointBounds`:
    #: it reads the forward bound the tolerance's rounding model took at the point
    reads_bounds: bool = False


def _lazy_run(module: str) -> Callable:
    """The ``run`` of ``module``, imported at each call (the import is cached by Python):
    importing the registry must not import torch, and a test that patches the module's
    ``run`` is seen by every caller."""
    def run(case, point, v, dtype, reference=None, **options):
        return importlib.import_module(module).run(case, point, v, dtype, reference,
                                                   **options)

    run.__qualname__ = run.__name__ = f"run[{module}]"
    return run


def _lazy(name: str, module: str, runs_in: tuple[str, ...] | None, description: str,
          **flags) -> Witness:
    """The witness ``name`` that runs ``module``'s ``run``, imported at its first call;
    its tolerance is the rounding model's (:func:`formula_tolerance`)."""
    return Witness(name, _lazy_run(module), runs_in, formula_tolerance, description,
                   module=module, **flags)


def formula_tolerance(dtype: str, bounds, own_error) -> dict:
    """:func:`gradcheck.bounds.tolerance.witness_tolerance`, imported on first use (it pulls in
    the rounding model, which ``--help`` has no use for)."""
    from ..bounds.tolerance import witness_tolerance

    return witness_tolerance(dtype, bounds, own_error)


# The engine's kernels are NumPy code written and tested in float64 and float32 only.
# The numeric witness differentiates the float64 forward at the rounded point whatever
# the run's dtype: in a float16 or bfloat16 run it would check no arithmetic in that
# dtype, only the formula again, so it is kept to the dtypes it has been validated in
# rather than reported as if it had checked the low dtype.
_LOW_PRECISION_UNTESTED = ("float64", "float32")

#: name -> :class:`Witness`, in the order results list them.
REGISTRY: dict[str, Witness] = {w.name: w for w in (
    _lazy("engine", "gradcheck.witnesses.engine", _LOW_PRECISION_UNTESTED,
          "gradcheck's own reverse-mode engine, driven as PyTorch autograd is"),
    _lazy("torch", "gradcheck.witnesses.torch", None,
          "PyTorch autograd on the same formula (y.backward(v), retain_grad())"),
    _lazy("numeric", "gradcheck.witnesses.numeric", _LOW_PRECISION_UNTESTED,
          "central finite differences in float64, with their own error estimate",
          perturbs=True, refines=True, reads_bounds=True),
)}

# The lists of names are read from the registry when asked for, so that an entry added
# to it (a test's, a plugin's) is one everywhere.

def names() -> tuple[str, ...]:
    """The formula witnesses' names, in the registry's order (what ``--witness``
    accepts)."""
    return tuple(REGISTRY)


def formula_names() -> tuple[str, ...]:
    """What a formula case runs unless its file says otherwise: the reference and every
    formula witness."""
    return (REFERENCE, *REGISTRY)


def case_names() -> tuple[str, ...]:
    """Every name a case file's ``witnesses = [...]`` may hold, in the order they run."""
    return (REFERENCE, *REGISTRY, OP)


def modules() -> dict[str, str]:
    """witness name -> the module its ``run`` is imported from, for the witnesses that
    import theirs at first call (what a worker imports before its first case)."""
    return {w.name: w.module for w in REGISTRY.values() if w.module is not None}


def entry(name: str) -> Witness:
    """The registry's entry for ``name``.

    Raises:
        KeyError: no formula witness has that name.
    """
    return REGISTRY[name]


def witness(name: str) -> Callable:
    """The run function of the witness ``name`` (its module imported on first call)."""
    return REGISTRY[name].run


def skip_reason(name: str, dtype: str) -> str | None:
    """Why the witness ``name`` does not run in ``dtype``, or None when it does; the
    checking code reports such a witness as skipped with this reason, which fails no
    case."""
    found = REGISTRY.get(name)
    dtypes = found.runs_in if found is not None else None
    if dtypes is None or dtype in dtypes:
        return None
    return f"the {name} witness runs in {' and '.join(dtypes)} only"
