"""Section (e)'s rows on compiling the reference's kernels (:mod:`gradcheck.reference.kernelcache`,
a memo within each process; there is no disk cache):

- :func:`cache_rows`: ``gradcheck run`` on the bundled cases once, in a fresh process,
  as a user runs it (the memo on);
- :func:`symbolic_rows`: what compiling costs of that run, the symbolic work of those
  cases (every reference built: SymPy's lowering, differentiation, printing and
  lambdify), in this process, cold (the memo off, SymPy's own cache cleared before each
  case) and again with the memo that a first build filled, against the run's wall time.
"""

from __future__ import annotations

import time
from pathlib import Path

from .clirun import CLI_WALL, run_cli
from .config import Config, Row


def _bundled(cfg: Config) -> tuple[Path, str, list[str]]:
    """The path run, how the rows name it, and its ``gradcheck run`` arguments."""
    from .verdicts import BUNDLED

    path = BUNDLED / cfg.cache_cases if cfg.cache_cases else BUNDLED
    shown = "cases/" + cfg.cache_cases + (f" -k {cfg.cache_keyword}"
                                          if cfg.cache_keyword else "")
    args = [str(path)] + (["-k", cfg.cache_keyword] if cfg.cache_keyword else [])
    return path, shown, args


def cache_rows(cfg: Config, state: dict) -> list[Row]:
    """The bundled cases run once; its seconds go to ``state["first_run"]`` for
    :func:`symbolic_rows`."""
    _, shown, args = _bundled(cfg)
    r = run_cli(args, timeout=4 * cfg.cli_cap, cache=True)
    if r.report is None:
        raise RuntimeError(f"gradcheck run {shown} wrote no report "
                           f"(exit {r.returncode}, capped {r.capped}): {r.stderr}")
    state["first_run"] = r.seconds
    sizes = {"n": len(r.report["cases"]), "cases": len(r.report["cases"])}
    s = r.report["summary"]
    return [Row("tensor", f"gradcheck run {shown}: one run", sizes, r.seconds,
                f"the cases as they come (their dtypes, points, witnesses): "
                f"{s['passed']} passed, {s.get('approximate', 0)} approximate, "
                f"{s['failed']} failed, {s['errored']} errored, {s['skipped']} skipped; "
                f"kernels memoised within each process; {CLI_WALL}", 1,
                extra={"summary": s, "returncode": r.returncode})]


def _build_all(cases: list, cold: bool) -> tuple[float, int]:
    """Seconds to build every reference of ``cases`` (with its printed formulas, as a
    run's results carry them), and how many; ``cold``: SymPy's cache cleared first."""
    import sympy

    from ...checking.opcheck.exact import forward_references, references
    from ...reference import Reference

    seconds, count = 0.0, 0
    for case in cases:
        if cold:
            sympy.core.cache.clear_cache()
        start = time.perf_counter()
        if case.op is None:
            built = [Reference(case)]
        else:
            built = references(case, {}) + (forward_references(case, {}) or [])
        for ref in built:
            ref.formulas()
        seconds += time.perf_counter() - start
        count += len(built)
    return seconds, count


def symbolic_rows(cfg: Config, state: dict) -> list[Row]:
    """What compiling costs of a run of the bundled cases: their references built cold
    (every kernel compiled), then again with the memo filled, against the run's wall
    time (:func:`cache_rows`)."""
    from ...reference import kernelcache
    from ...cases import Case, read_entries

    path, shown, _ = _bundled(cfg)
    cases = [c for c in read_entries([path]) if isinstance(c, Case)
             and (not cfg.cache_keyword or cfg.cache_keyword in c.name)]
    with kernelcache.turned_off():
        cold, count = _build_all(cases, cold=True)
    kernelcache.clear()
    with kernelcache.turned_off(False):
        _build_all(cases, cold=True)                  # fills the memo
        warm, _ = _build_all(cases, cold=True)
    kernelcache.clear()
    sizes = {"n": len(cases), "cases": len(cases), "references": count}
    what = (f"every symbolic reference of {shown}'s {len(cases)} cases ({count} "
            "references: SymPy's lowering and differentiation, lambdify, the printed "
            "formulas), in this process, SymPy's own cache cleared before each case")
    first = state.get("first_run")
    return [
        Row("tensor", f"{shown}: references built cold", sizes, cold,
            what + "; every kernel compiled (the memo off)", 1),
        Row("tensor", f"{shown}: references built again, kernels from the memo",
            sizes, warm, what + "; the kernels from this process's memo", 1),
        Row("tensor", f"{shown}: the cold build's share of the run", sizes, None,
            "what compiling costs of the run: the cold build above against that "
            "run's wall time", 1, ratio=cold / first if first else None,
            ratio_of="references built cold, seconds / the run's wall seconds",
            extra={"run_seconds": first, "cold_seconds": cold, "warm_seconds": warm})]
