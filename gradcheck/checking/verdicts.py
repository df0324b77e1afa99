"""A case's verdict from its witnesses' (or op checks') results: passed, approximate,
failed, error or skipped, and the message that says why (:func:`verdict`); a strict
case's approximate checks made failures (:func:`strictly`); the engine's promise of
PyTorch's ``grad_fn`` graph (:func:`grad_fn_parity`)."""

from __future__ import annotations

import dataclasses

from ..base.result import APPROXIMATE, ERROR, FAILED, INCONCLUSIVE, PASSED, SKIPPED


def grad_fn_parity(results: list) -> list:
    """The engine promises PyTorch's graph: a ``grad_fn`` graph that differs from torch's
    (names, order, AccumulateGrad leaves) fails the engine witness. Only a passed engine
    is compared: a skipped one (float16, bfloat16) recorded no graph."""
    by = {r.witness: r for r in results}
    engine, torch = by.get("engine"), by.get("torch")
    if (engine is None or torch is None or engine.status not in (PASSED, APPROXIMATE)
            or None in (engine.grad_fn, torch.grad_fn) or engine.grad_fn == torch.grad_fn):
        return results
    message = ("grad_fn graph differs from torch's: engine " + " <- ".join(engine.grad_fn)
               + " | torch " + " <- ".join(torch.grad_fn))
    failed = dataclasses.replace(engine, status=FAILED, message=message)
    return [failed if r is engine else r for r in results]


#: what an approximate result's message begins with
APPROXIMATE_HEAD = "approximate: "
#: and what a strict case adds where that makes it a failure
STRICT_TAIL = " (strict: an approximation is a failure)"


def verdict(case, results) -> tuple[str, str, str]:
    """The case's (status, message, error_kind) from its witnesses' (or op checks')
    results. A check within float32's tolerance in a float64 run (``approximate``)
    passes with that said, fails a strict case, and counts as caught for ``expect =
    "fail"`` (the message says it is approximate)."""
    # A skipped witness (one that does not run in the dtype) counts for nothing; a run in
    # which every witness was skipped checked nothing, so it is skipped, not passed.
    if results and all(r.status in (SKIPPED, INCONCLUSIVE) for r in results):
        return SKIPPED, "; ".join(f"{r.witness}: {r.message}" for r in results), ""
    errored = [r for r in results if r.status == ERROR]
    failed = [r for r in results if r.status == FAILED]
    near = [r for r in results if r.status == APPROXIMATE]
    if errored:
        return ERROR, "; ".join(f"{r.witness}: {r.message}" for r in errored), "internal"

    def explain(r) -> str:
        return f"{r.witness}: {r.message}" + (f" ({r.diagnosis})" if r.diagnosis else "")

    if case.expect == "fail":
        if failed or near:
            caught = ("caught as expected: " if failed else
                      "caught as expected (approximate: within float32's tolerance): ")
            return PASSED, caught + "; ".join(map(explain, failed + near)), ""
        return FAILED, "expected a mismatch (expect = \"fail\"), but every witness agreed", ""
    if failed:
        return FAILED, "; ".join(map(explain, failed + near)), ""
    if near:
        message = APPROXIMATE_HEAD + "; ".join(map(explain, near))
        if case.strict:
            return FAILED, message + STRICT_TAIL, ""
        return APPROXIMATE, message, ""
    return PASSED, "", ""


def strictly(case, results: list) -> list:
    """``results`` as a strict case reports them: an approximate witness failed (its
    message kept); as they are otherwise."""
    if not case.strict or case.expect == "fail":
        return results
    return [dataclasses.replace(r, status=FAILED) if r.status == APPROXIMATE else r
            for r in results]
