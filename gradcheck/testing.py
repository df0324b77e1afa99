"""Library calls for a project's own unit tests: check a custom op (or a formula) and
get a result, or assert and get a ``GradientMismatch`` that explains the failure."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from .errors import GradientMismatch
from .result import PASSED, CaseResult


def _input_table(inputs: Mapping[str, Any]) -> dict:
    """{name: shape | table | array | tensor} -> case-file input tables."""
    table = {}
    for name, spec in inputs.items():
        if isinstance(spec, dict):
            table[name] = dict(spec)
        elif isinstance(spec, (tuple, list)) and all(isinstance(n, int) for n in spec):
            table[name] = {"shape": list(spec)}
        else:  # a concrete array or tensor: used as given
            if hasattr(spec, "detach"):
                spec = spec.detach().cpu().numpy()
            value = np.asarray(spec, dtype=np.float64)
            table[name] = {"shape": list(value.shape), "value": value.tolist()}
    return table


def check_op(op: Any, reference: str | list[str], inputs: Mapping[str, Any], *,
             dtype: str = "float64", name: str | None = None, **options) -> CaseResult:
    """Check a custom op against the formula it claims to compute.

    Args:
        op: a ``torch.autograd.Function`` subclass, a ``gradcheck.engine.Function``
            subclass, a callable on tensors, or a ``"module:Name"`` string.
        reference: the formula over ``inputs`` (a list for an op with several outputs).
        inputs: name -> shape (sampled in its domain), a table of case-file input keys,
            or a concrete NumPy array / torch tensor (used as given). In the op's
            argument order.
        dtype: "float64" or "float32".
        options: any other case-file key (points, seed, atol, rtol, gradient, args,
            order, device, nondet_tol).

    Raises:
        CaseFileError: the reference or an option is invalid.
    """
    from .cases import case_from_dict
    from .runner import run_case

    label = name or getattr(op, "__name__", "op")
    raw = {"name": label, "op": op if isinstance(op, str) else "gradcheck:check_op",
           "reference": reference, "inputs": _input_table(inputs), **options}
    case = case_from_dict(raw, file="<check_op>")
    if not isinstance(op, str):
        case = dataclasses.replace(case, op=op)
    return run_case(case, dtype, timeout=None)


def assert_op(op: Any, reference: str | list[str], inputs: Mapping[str, Any],
              **options) -> CaseResult:
    """:func:`check_op`, raising :class:`GradientMismatch` unless every check passes.

    Raises:
        GradientMismatch: a check failed; the message names the check, the worst
            element, the diagnosis and a call that reproduces the failure.
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not this helper
    result = check_op(op, reference, inputs, **options)
    if result.status != PASSED:
        raise GradientMismatch(_explain(op, reference, inputs, options, result))
    return result


def _explain(op, reference, inputs, options, result: CaseResult) -> str:
    label = op if isinstance(op, str) else getattr(op, "__name__", repr(op))
    lines = [f"op {label} does not match {reference!r} ({result.dtype}): {result.status}"]
    for w in result.witnesses:
        if w.status == PASSED:
            continue
        lines.append(f"  {w.witness}: {w.message or w.status}")
        if w.diagnosis:
            lines.append(f"    diagnosis: {w.diagnosis}")
    if not result.witnesses and result.message:
        lines.append(f"  {result.message}")
    shown = {k: v for k, v in options.items()}
    shown.setdefault("seed", result.seed)
    args = ", ".join(f"{k}={v!r}" for k, v in shown.items())
    shapes = {k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in inputs.items()
              if not hasattr(v, "shape")}
    lines.append(f"  reproduce: gradcheck.check_op({label}, {reference!r}, "
                 f"{shapes or '...'}{', ' + args if args else ''})")
    return "\n".join(lines)
