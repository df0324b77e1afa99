"""Section (e)'s rows on the disk cache of compiled kernels (:mod:`gradcheck.kernelcache`):

- :func:`cache_rows`: ``gradcheck run`` on the bundled cases twice, each in a fresh
  process, over one ``GRADCHECK_CACHE_DIR`` that is empty before the first;
- :func:`symbolic_rows`: what the cache can save at all, the symbolic work of those cases
  (every reference built: SymPy's lowering, differentiation, printing and lambdify), in
  this process, cold (the disk cache off, SymPy's own cache cleared before each case) and
  again from a warm disk cache, against the first run's wall time.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .clirun import CLI_WALL, run_cli
from .config import TARGET_CACHE_SPEEDUP, Config, Row


def _bundled(cfg: Config) -> tuple[Path, str, list[str]]:
    """The path run twice, how the rows name it, and its ``gradcheck run`` arguments."""
    from .verdicts import BUNDLED

    path = BUNDLED / cfg.cache_cases if cfg.cache_cases else BUNDLED
    shown = "cases/" + cfg.cache_cases + (f" -k {cfg.cache_keyword}"
                                          if cfg.cache_keyword else "")
    args = [str(path)] + (["-k", cfg.cache_keyword] if cfg.cache_keyword else [])
    return path, shown, args


def cache_rows(cfg: Config, state: dict) -> list[Row]:
    """The bundled cases run twice over one fresh cache; the first run's seconds go to
    ``state["first_run"]`` for :func:`symbolic_rows`."""
    _, shown, args = _bundled(cfg)
    runs, files = [], []
    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-cache-") as cache:
        for _ in range(2):
            runs.append(run_cli(args, cache_dir=cache, timeout=4 * cfg.cli_cap,
                                cache=True))
            files.append(sum(1 for p in Path(cache).rglob("*") if p.is_file()))
    for r in runs:
        if r.report is None:
            raise RuntimeError(f"gradcheck run {shown} wrote no report "
                               f"(exit {r.returncode}, capped {r.capped}): {r.stderr}")
    state["first_run"] = runs[0].seconds
    sizes = {"n": len(runs[0].report["cases"]), "cases": len(runs[0].report["cases"])}
    rows = []
    for k, (r, when) in enumerate(zip(runs, ("first run, empty cache",
                                             "second run, same cache"))):
        s = r.report["summary"]
        rows.append(Row("tensor", f"gradcheck run {shown}: {when}", sizes, r.seconds,
                        f"the cases as they come (their dtypes, points, witnesses): "
                        f"{s['passed']} passed, {s.get('approximate', 0)} approximate, "
                        f"{s['failed']} failed, {s['errored']} "
                        f"errored, {s['skipped']} skipped; {CLI_WALL}", 1,
                        extra={"summary": s, "returncode": r.returncode,
                               "cache_files": files[k]}))
    ratio = runs[0].seconds / runs[1].seconds
    rows.append(Row("tensor", f"gradcheck run {shown}: first / second", sizes, None,
                    "the two runs above, one GRADCHECK_CACHE_DIR (fresh before the "
                    "first)", 1, ratio=ratio, ratio_of="first run's seconds / second's",
                    target=f">= {TARGET_CACHE_SPEEDUP:g}×",
                    met=ratio >= TARGET_CACHE_SPEEDUP if not cfg.quick else None,
                    extra={"cache_files": files}))
    return rows


@contextmanager
def _environment(**values: str | None):
    """Inside the block, the environment variables ``values`` set (None: unset); as
    they were after."""
    before = {k: os.environ.get(k) for k in values}
    try:
        _put(values)
        yield
    finally:
        _put(before)


def _put(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _build_all(cases: list, cold: bool) -> tuple[float, int]:
    """Seconds to build every reference of ``cases`` (with its printed formulas, as a
    run's results carry them), and how many; ``cold``: SymPy's cache cleared first."""
    import sympy

    from ..opcheck.exact import forward_references, references
    from ..reference import Reference

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
    """What the kernel cache can save of a run of the bundled cases: their references
    built cold, then from the disk cache that cold build filled, against the first run's
    wall time (:func:`cache_rows`)."""
    from ..cases import Case, read_entries

    path, shown, _ = _bundled(cfg)
    cases = [c for c in read_entries([path]) if isinstance(c, Case)
             and (not cfg.cache_keyword or cfg.cache_keyword in c.name)]
    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-symbolic-") as cache, \
            _environment(GRADCHECK_CACHE_DIR=cache, GRADCHECK_NO_CACHE=None):
        cold, count = _build_all(cases, cold=True)    # fills the cache
        gc.collect()   # the kernels it built, held weakly, are gone (as in a new process)
        warm, _ = _build_all(cases, cold=True)
    sizes = {"n": len(cases), "cases": len(cases), "references": count}
    what = (f"every symbolic reference of {shown}'s {len(cases)} cases ({count} "
            "references: SymPy's lowering and differentiation, lambdify, the printed "
            "formulas), in this process, SymPy's own cache cleared before each case")
    first = state.get("first_run")
    return [
        Row("tensor", f"{shown}: references built cold", sizes, cold,
            what + "; the disk cache empty", 1),
        Row("tensor", f"{shown}: references built from the disk cache", sizes, warm,
            what + "; the disk cache filled by the cold build", 1),
        Row("tensor", f"{shown}: the cold build's share of the first run", sizes, None,
            "what the cache can save of the first run: the cold build above against "
            "that run's wall time", 1, ratio=cold / first if first else None,
            ratio_of="references built cold, seconds / the first run's wall seconds",
            extra={"first_run_seconds": first, "cold_seconds": cold,
                   "warm_seconds": warm})]
