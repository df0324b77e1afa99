"""Checks of a user's custom op against the formula it claims to compute.

Each check is reported by name, as a witness result ``op.<check>``:

- ``op.forward``: the op's outputs against the reference's values;
- ``op.backward``: vᵀJ through autograd for random cotangents v, against the exact one;
- ``op.jacobian``: the same for every one-hot v (the whole Jacobian), for small outputs;
- ``op.zero``: a zero ``grad_output`` gives exact zeros (NaN and inf fail);
- ``op.determinism``: two backward calls with the same v agree (within ``nondet_tol``);
- ``op.shapes``: what the Function's own ``backward`` returns, by PyTorch's contract:
  what autograd rejects fails; what it accepts but changes (a gradient it sums back to
  its input's shape, trailing Nones, a gradient for an input that needs none) is a note,
  or a failure with ``strict_shapes``;
- ``op.inplace``: forward and backward leave every input and every ``grad_output``
  unchanged, and a second forward after a backward gives the same outputs;
- ``op.jvp``: the op's forward mode (forward-mode AD dual numbers) against the exact
  J u, for a random tangent at every point and one-hot tangents at the first; a note
  where the op does not do forward mode;
- ``op.layout``: the op given its inputs as non-contiguous views computes the same;
- ``op.contract`` (first point): grad_output strided, transposed and expanded, every
  subset of the inputs requiring grad, one tensor in two slots, each against the op's
  own call at the same values (:mod:`~gradcheck.checking.opcheck.contract`);
- ``op.compile`` (first point): the op's call under ``torch.compile`` (the case's
  ``compile_backend``, aot_eager by default), its outputs and vᵀJ against the exact
  values and its own eager call, one tensor in two slots; a graph break is a note
  (:mod:`~gradcheck.checking.opcheck.compiled`);
- ``op.double`` (``order = 2``): double backward against the exact second derivatives:
  d(vᵀJ u)/dx (the Hessian-vector product) and d(vᵀJ u)/dv (= J u), as gradgradcheck;
  the reference builds them (``prepare_second``) before the op runs, at tensor level,
  or element by element where ``second_order = "expanded"`` asks.

Tolerances are per element (the table in :mod:`gradcheck.bounds.tolerance`): the rounding-error
bound of a correct computation of the reference formula in the op's dtype, or twice
what PyTorch's own autograd of that formula errs by in the same dtype (the peer),
whichever is larger. A failing check carries a diagnosis (:mod:`gradcheck.checking.diagnose`).

The package: :mod:`~gradcheck.checking.opcheck.driver` calls the op at each point
(:class:`OpCheck`); :mod:`~gradcheck.checking.opcheck.checks` (forward, backward, jacobian,
zero, determinism, inplace), :mod:`~gradcheck.checking.opcheck.shapes`,
:mod:`~gradcheck.checking.opcheck.double` and :mod:`~gradcheck.checking.opcheck.jvp` are
the checks, each a function returning the outcomes its tally records;
:mod:`~gradcheck.checking.opcheck.exact` is the reference side and
:mod:`~gradcheck.checking.opcheck.tolerances` the per-point tolerances. A complex input
or output crosses into the op's process as a complex tensor and comes back in
``torch.view_as_real``'s layout (:class:`~gradcheck.checking.opcheck.replies.Complexity`),
so every check runs on complex ops unchanged.
"""

from __future__ import annotations

from .checks import JACOBIAN_LIMIT
from .driver import CHECKS, COTANGENTS, OpCheck, run_op_case
from .exact import exact as _exact  # noqa: F401  (tests build exact cotangent results)
from .exact import references

__all__ = ["CHECKS", "COTANGENTS", "JACOBIAN_LIMIT", "OpCheck", "references",
           "run_op_case"]
