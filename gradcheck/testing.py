"""Library calls for a project's own unit tests: check a custom op (or a formula) and
get a result, or assert and get a ``GradientMismatch`` that explains the failure.

The results these calls (and the pytest plugin's marker and fixture) give are
:class:`CheckedCase` and :class:`CheckedRun`: the result types with ``assert_passed()``,
which raises with the text report of what failed (:func:`assert_passed`).

An approximate result (a float64 check within float32's tolerance only) passes an
assertion with an :class:`~gradcheck.base.errors.ApproximateGradient` warning, unless the
call says ``strict=True`` (the case-file key), which makes it a failure."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping

import numpy as np

from .base.errors import ApproximateGradient, GradientMismatch
from .base.result import APPROXIMATE, PASSED, CaseResult, RunResult


class CheckedCase(CaseResult):
    """A :class:`~gradcheck.base.result.CaseResult` given to a test, with
    :meth:`assert_passed` (the base type is data, and renders nothing)."""

    @classmethod
    def of(cls, result: CaseResult) -> "CheckedCase":
        if isinstance(result, cls):
            return result
        return cls(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)})

    def assert_passed(self) -> "CheckedCase":
        """Raise :class:`GradientMismatch` (an ``AssertionError``) whose message is the
        case's text failure report unless it :attr:`passed`; see :func:`assert_passed`."""
        __tracebackhide__ = True
        return assert_passed(self)

    def __repr__(self) -> str:   # (pytest shows it in "where ... = <result>.passed")
        return f"<CaseResult {self.name}[{self.dtype}]: {self.status}>"


class CheckedRun(RunResult):
    """A :class:`~gradcheck.base.result.RunResult` given to a test (its cases
    :class:`CheckedCase`), with :meth:`assert_passed`."""

    @classmethod
    def of(cls, result: RunResult) -> "CheckedRun":
        fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
        fields["cases"] = tuple(CheckedCase.of(c) for c in result.cases)
        return cls(**fields)

    def assert_passed(self) -> "CheckedRun":
        """Raise :class:`GradientMismatch` with the text failure report of every case
        that did not pass; see :func:`assert_passed`."""
        __tracebackhide__ = True
        return assert_passed(self)

    def __repr__(self) -> str:
        return f"<RunResult of {len(self.cases)} case run(s): {self.summary}>"


def assert_passed(result):
    """``result`` (a :class:`CaseResult` or :class:`RunResult`) unless something in it
    did not pass; then :class:`GradientMismatch`, whose message is the text report's
    failure of each such case (:func:`gradcheck.report.text.failure_text`: its
    witnesses, worst elements and diagnosis, the table of its worst elements, a command
    that re-runs it). An approximate case passes with an :class:`ApproximateGradient`
    warning. A run with no case fails (a ``k`` that selects nothing)."""
    __tracebackhide__ = True
    from .report.text import failure_text

    run = isinstance(result, RunResult)
    cases = result.cases if run else (result,)
    bad = [c for c in cases if not c.passed]
    head = []
    if run and (bad or not cases or result.incomplete):
        from .report.details import counts, incomplete_line

        head = [f"{counts(result.summary)}" + ("" if cases else ": no case ran")]
        head += [incomplete_line(result)] if result.incomplete else []
    if head or bad:
        raise GradientMismatch("\n\n".join(["\n".join(head)] * bool(head)
                                            + [failure_text(c) for c in bad]))
    for c in cases:
        _warn_if_approximate(c, f"case {c.name}")
    return result


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
                spec = spec.detach().cpu().resolve_conj().numpy()
            if np.iscomplexobj(spec):   # a complex input: its [re, im] pairs
                value = np.asarray(spec, dtype=np.complex128)
                table[name] = {"shape": list(value.shape), "dtype": "complex", "value":
                               np.stack([value.real, value.imag], -1).tolist()}
                continue
            value = np.asarray(spec, dtype=np.float64)
            table[name] = {"shape": list(value.shape), "value": value.tolist()}
    return table


def check_op(op: Any, reference: Any, inputs: Mapping[str, Any], *,
             dtype: str = "float64", name: str | None = None, **options) -> CheckedCase:
    """Check a custom op against the formula it claims to compute.

    Args:
        op: a ``torch.autograd.Function`` subclass, a ``gradcheck.engine.Function``
            subclass, a callable on tensors, or a ``"module:Name"`` string.
        reference: the formula over ``inputs`` (a list for an op with several outputs),
            or a PyTorch function of them, traced to its formula (called with the
            inputs in order, or as ``reference_call="ref(x, w, eps=1e-6)"`` says).
        inputs: name -> shape (sampled in its domain), a table of case-file input keys,
            or a concrete NumPy array / torch tensor (used as given). In the op's
            argument order.
        dtype: "float64", "float32", "float16" or "bfloat16" (in the last two the
            engine and numeric witnesses are skipped, with the reason in the result).
        options: any other case-file key (points, extreme_points, seed, atol, rtol,
            gradient, args, order, second_order, device, nondet_tol, strict_shapes,
            strict), and
            ``allow_op_modules``: patterns of installed modules a ``"module:Name"`` op
            may come from (see :func:`gradcheck.run`).

    Raises:
        CaseFileError: the reference or an option is invalid.
    """
    from .cases import case_from_dict
    from .checking.case import run_case
    from .session.runner import RunOptions, override

    label = name or getattr(op, "__name__", "op")
    allowed = options.pop("allow_op_modules", ())
    raw = {"name": label, "op": op if isinstance(op, str) else "gradcheck:check_op",
           **_formula("reference", reference), "inputs": _input_table(inputs), **options}
    case = case_from_dict(raw, file="<check_op>")
    if not isinstance(op, str):
        case = dataclasses.replace(case, op=op)
    case = override(case, RunOptions(allow_op_modules=allowed))
    return CheckedCase.of(run_case(case, dtype, timeout=None))


def _formula(key: str, formula: Any) -> dict:
    """The case key of a formula given as text, or as a PyTorch function to trace (the
    caller's own code, in their own process: the case reader traces it here)."""
    if callable(formula) and not isinstance(formula, str):
        return {f"{key}_function": formula}
    return {key: formula}


def _label(formula: Any) -> str:
    return formula if isinstance(formula, str) else getattr(formula, "__name__",
                                                             repr(formula))


def check(expr: Any, inputs: Mapping[str, Any], *, dtype: str = "float64",
          name: str | None = None, **options) -> CheckedCase:
    """Check every witness's gradient of a formula against the exact derivative.

    Args:
        expr: the formula, e.g. ``"sum(tanh(x @ W + b) ** 2)"``, or a PyTorch function
            of the inputs, traced to its formula (called with the inputs in order, or
            as ``expr_call="f(x, approximate='tanh')"`` says).
        inputs: name -> shape (sampled in its domain), a table of case-file input keys
            (``{"shape": [3], "domain": "positive"}``), or a concrete NumPy array /
            torch tensor (used as given).
        dtype: "float64", "float32", "float16" or "bfloat16" (in the last two the
            engine and numeric witnesses are skipped, with the reason in the result).
        options: any other case-file key (let, gradient, retain_grad, points,
            extreme_points, seed, atol, rtol, witnesses, expect, strict).

    Raises:
        CaseFileError: the formula or an option is invalid.
    """
    from .cases import case_from_dict
    from .checking.case import run_case

    raw = {"name": name or _label(expr), **_formula("expr", expr),
           "inputs": _input_table(inputs), **options}
    return CheckedCase.of(run_case(case_from_dict(raw, file="<check>"), dtype, timeout=None))


def assert_gradients(expr: Any, inputs: Mapping[str, Any], **options) -> CheckedCase:
    """:func:`check`, raising :class:`GradientMismatch` unless every witness agrees.

    Raises:
        GradientMismatch: the message has pytest-approx's shape: mismatched elements,
            max absolute and relative difference, a table of the worst elements, the
            diagnosis, the seed and a call that reproduces the failure.
    """
    __tracebackhide__ = True
    result = check(expr, inputs, **options)
    if result.status not in (PASSED, APPROXIMATE):
        call = _call("check", _shown(expr), inputs, options, result)
        raise GradientMismatch(mismatch_message(
            f"gradients of {_shown(expr)} disagree with the exact derivative", result,
            call))
    _warn_if_approximate(result, f"gradients of {_shown(expr)}")
    return result


def assert_op(op: Any, reference: Any, inputs: Mapping[str, Any],
              **options) -> CheckedCase:
    """:func:`check_op`, raising :class:`GradientMismatch` unless every check passes.

    Raises:
        GradientMismatch: a check failed; the message names the check, the worst
            element, the diagnosis and a call that reproduces the failure.
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not this helper
    result = check_op(op, reference, inputs, **options)
    label = op if isinstance(op, str) else getattr(op, "__name__", repr(op))
    if result.status not in (PASSED, APPROXIMATE):
        call = _call("check_op", f"{label}, {_shown(reference)}", inputs, options, result)
        raise GradientMismatch(mismatch_message(
            f"op {label} does not match {_shown(reference)}", result, call))
    _warn_if_approximate(result, f"op {label}")
    return result


def _shown(formula: Any) -> str:
    """A formula's text quoted, or a function's name."""
    return repr(formula) if isinstance(formula, (str, list)) else _label(formula)


def _warn_if_approximate(result: CaseResult, what: str) -> None:
    """An :class:`ApproximateGradient` warning for an approximate ``result`` (at the
    caller of the assertion)."""
    if result.status == APPROXIMATE:
        warnings.warn(ApproximateGradient(
            f"{what} ({result.dtype}, seed {result.seed}) is {result.message} (pass "
            "strict=True to make this a failure)"), stacklevel=3)


def _call(fn: str, first: str, inputs, options, result: CaseResult) -> str:
    """A one-line call that reproduces ``result`` (same seed and dtype)."""
    shown = dict(options)
    shown.setdefault("seed", result.seed)
    shown.setdefault("dtype", result.dtype)
    shapes = {k: (tuple(v) if isinstance(v, (list, tuple)) else
                  {"shape": list(np.shape(v))} if hasattr(v, "shape") else v)
              for k, v in inputs.items()}
    args = ", ".join(f"{k}={v!r}" for k, v in shown.items())
    return f"gradcheck.{fn}({first}, {shapes!r}, {args})"


def mismatch_message(title: str, result: CaseResult, call: str) -> str:
    """A failure explained as pytest's ``approx`` does: per failing witness the
    mismatched elements, max differences and the diagnosis
    (:meth:`gradcheck.report.mismatch.Mismatch.summary`), an aligned table of the worst
    elements (:func:`gradcheck.report.mismatch.table`), and how to reproduce it."""
    from .report.mismatch import describe, table

    lines = [f"{title} ({result.dtype}, seed {result.seed}): {result.status}"]
    if not result.witnesses and result.message:
        lines.append(f"  {result.message}")
    # a skipped witness is listed with its reason: the test's author may expect it to run
    mismatches = [describe(w) for w in result.witnesses if w.status != PASSED]
    for m in mismatches:
        lines += m.summary()
    lines += table(mismatches)
    lines.append(f"  reproduce: {call}")
    return "\n".join(lines)
