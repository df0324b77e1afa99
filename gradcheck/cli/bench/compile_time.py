"""Section (c), ``compile``: building and evaluating the symbolic reference
(``Reference``) against formula size, and plain ``sympy.diff`` + ``lambdify`` of the same
expression, each in a fresh process under a time cap (:mod:`gradcheck.cli.bench.jobs`)."""

from __future__ import annotations

from typing import Callable

from .child import run_child
from .config import (FORMULA_INPUTS, TARGET_DEPTH, TARGET_DEPTH_SECONDS, TARGET_LARGE_SECONDS,
                     Config, Row, Workload)
from .formulas import depth_for, formula_of_size, size_goal


def compile_workloads(cfg: Config) -> list[Workload]:
    formulas = [(d, *formula_of_size(d, size_goal(d)), False) for d in cfg.depths]
    large_depth = depth_for(cfg.large_ops)
    formulas.append((large_depth, *formula_of_size(large_depth, cfg.large_ops, 0.1), True))
    measured: dict[tuple[str, str], dict] = {}  # the sympy row's ratio reads Reference's
    out = []
    for depth, expr, ops, seed, is_large in formulas:
        sizes = {"depth": depth, "ops": ops, "inputs": FORMULA_INPUTS, "seed": seed}
        tag = f"[depth {depth}, {ops} ops{' (large)' if is_large else ''}]"
        for job, label in (("reference", "Reference"), ("sympy", "sympy.diff + lambdify")):
            out.append(Workload("compile", f"{label} {tag}",
                                _compile_run(job, expr, sizes, is_large, cfg, measured)))
    return out


def _compile_target(sizes: dict, is_large: bool) -> tuple[str | None, float | None]:
    if is_large:
        return f"< {TARGET_LARGE_SECONDS:g} s for ~1000 ops", TARGET_LARGE_SECONDS
    if sizes["depth"] == TARGET_DEPTH:
        return f"< {TARGET_DEPTH_SECONDS:g} s at depth {TARGET_DEPTH}", TARGET_DEPTH_SECONDS
    return None, None


def _compile_run(job: str, expr: str, sizes: dict, is_large: bool, cfg: Config,
                 measured: dict) -> Callable[[], list[Row]]:
    def run() -> list[Row]:
        got = run_child({"job": job, "expr": expr, "cap": cfg.cap}, timeout=cfg.cap + 60)
        measured[(job, expr)] = got
        extra = {"formula": expr, "large": is_large, "cap_seconds": cfg.cap,
                 "capped": bool(got.get("capped"))}
        if job == "reference":
            return [_reference_row(got, sizes, is_large, cfg, extra)]
        return [_sympy_row(got, measured.get(("reference", expr), {}), sizes, cfg, extra)]

    return run


def _reference_row(got: dict, sizes: dict, is_large: bool, cfg: Config,
                   extra: dict) -> Row:
    target, limit = _compile_target(sizes, is_large)
    met = None
    if limit is not None and not cfg.quick:
        met = not extra["capped"] and got["seconds"] < limit
    return Row("compile", "Reference (gradcheck.reference)", sizes,
               got.get("seconds"), "builds the exact gradient (all 8 partial "
               "derivatives) and evaluates value and gradient at one point",
               1, target=target, met=met, extra=extra)


def _sympy_row(got: dict, ours: dict, sizes: dict, cfg: Config, extra: dict) -> Row:
    """The plain-SymPy row; ``ours``: the same formula's Reference answer, if measured."""
    ratio = None
    if ours.get("seconds") and not extra["capped"]:
        ratio = got["seconds"] / ours["seconds"]
        extra["agrees"] = _close(got["grads"], ours["grads"])
    elif ours.get("seconds"):
        extra["ratio_at_least"] = cfg.cap / ours["seconds"]
    return Row("compile", "sympy.diff + lambdify(cse=True)", sizes, got.get("seconds"),
               "the same gradient by sympy.diff of the lowered expression w.r.t. each "
               "of the 8 inputs, lambdify(cse=True), evaluated at the same point",
               1, ratio=ratio, ratio_of="sympy seconds / Reference seconds",
               extra=extra)


def _close(a: list[float], b: list[float]) -> bool:
    return all(abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y)) for x, y in zip(a, b))
