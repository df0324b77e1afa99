"""Runs cases: samples points, evaluates the reference and every witness, and tallies
the comparisons into results. One case that raises becomes an ``error`` result and the
run goes on."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .backends import skip_reason, witness
from .cases import Case, read_paths
from .compare import Tally
from .dtypes import round_to
from .errors import CaseFileError, GradcheckError
from .result import ERROR, FAILED, PASSED, SKIPPED, CaseResult, RunResult
from .sampling import case_rng, sample

DEFAULT_TIMEOUT = 300.0  # seconds one case (one dtype) may take


class CaseTimeout(GradcheckError):
    """A case ran past its time limit."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Raise CaseTimeout in the running code after ``seconds``: by SIGALRM in the main
    thread, by an asynchronous exception in any other (a Dask worker's thread). Either
    takes effect between two bytecodes."""
    if not seconds:
        yield
        return
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not \
            threading.main_thread():
        with _thread_time_limit(seconds):
            yield
        return

    def expire(signum, frame):
        raise CaseTimeout(f"the case ran past its time limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _thread_time_limit(seconds: float):
    import ctypes

    message = f"the case ran past its time limit of {seconds:g} s"

    class Expired(CaseTimeout):  # raised by class: the message comes from here
        def __init__(self, *args):
            super().__init__(*(args or (message,)))

    target = ctypes.c_ulong(threading.get_ident())
    lock, state = threading.Lock(), ["running"]

    def expire() -> None:
        with lock:
            if state[0] == "running":
                state[0] = "fired"
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(Expired))

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    try:
        timer.start()
        yield
    finally:
        timer.cancel()
        with lock:
            if state[0] == "fired":   # raised too late to land: take it back
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)
            state[0] = "done"


def cotangent(case: Case, dtype: str, index: int) -> np.ndarray:
    """The v of ``y.backward(v)`` at point ``index`` (1 for a scalar case)."""
    shape = case.output.shape
    if isinstance(case.gradient, np.ndarray):
        v = case.gradient
    elif case.gradient == "random":
        v = case_rng(case, dtype, index, "gradient").standard_normal(shape)
    else:  # "scalar" or "ones"
        v = np.ones(shape)
    return round_to(v, dtype)   # the v the witness's tensor holds, exactly


def _reference(case: Case, cache: dict):
    from .symbolic import Reference

    if id(case) not in cache:
        cache[id(case)] = Reference(case)
    return cache[id(case)]


def run_case(case: Case, dtype: str, *, cache: dict | None = None,
             timeout: float | None = DEFAULT_TIMEOUT) -> CaseResult:
    """Check ``case`` in ``dtype``: every witness against the symbolic reference."""
    start = time.perf_counter()
    base = dict(name=case.name, file=case.file, line=case.line, dtype=dtype,
                expect=case.expect, points=case.points, seed=case.seed)
    cache = {} if cache is None else cache
    witnesses = [w for w in case.witnesses if w != "symbolic"]
    tallies = {w: Tally(w, dtype, case.atol, case.rtol) for w in witnesses}
    errors: dict[str, str] = {}
    # witnesses that do not run in this dtype: reported as skipped, with the reason
    skipped = {w: r for w in witnesses if (r := skip_reason(w, dtype)) is not None}
    notes: list[str] = []
    samples: dict[str, list] = {w: [] for w in witnesses}  # for the diagnosis
    if case.device != "cpu" and not _device_present(case.device):
        return CaseResult(**base, status=SKIPPED, seconds=time.perf_counter() - start,
                          message=f"device = {case.device!r}, but no such device is "
                                  "present here")
    try:
        with _time_limit(timeout):
            if case.op is not None:
                return _op_result(case, dtype, cache, base, start)
            ref = _reference(case, cache)
            points = [sample(case, dtype, i) for i in range(case.points)]
            vs = [cotangent(case, dtype, i) for i in range(case.points)]
            expectations = ref.evaluations([p.values for p in points], vs)
            for i, (point, v, expected) in enumerate(zip(points, vs, expectations)):
                notes.extend(point.notes)
                for w in witnesses:
                    if w in errors or w in skipped:
                        continue
                    try:
                        # finite differences group their perturbations by the
                        # reference's sparsity pattern
                        hints = {"sparsity": ref.sparsity} if w == "numeric" else {}
                        got = witness(w)(case, point.values, v, dtype, **hints)
                    except CaseTimeout:
                        raise
                    except Exception as exc:  # a witness that raises is that witness's error
                        errors[w] = f"{type(exc).__name__}: {exc}"
                        continue
                    tallies[w].add(got, expected, i)
                    samples[w].append((got.grads, expected.grads, None))
    except GradcheckError as exc:
        return CaseResult(**base, status=ERROR, message=str(exc), error_kind="case",
                          seconds=time.perf_counter() - start)
    except Exception as exc:
        tb = traceback.format_exc(limit=-3)
        return CaseResult(**base, status=ERROR, error_kind="internal",
                          message=f"{type(exc).__name__}: {exc}\n{tb}",
                          seconds=time.perf_counter() - start)
    results = []
    for w in witnesses:
        r = tallies[w].result()
        if w in skipped:
            r = dataclasses.replace(r, status=SKIPPED, message=skipped[w])
        elif w in errors:
            r = dataclasses.replace(r, status=ERROR, message=errors[w])
        elif r.status == FAILED:
            from .diagnose import summarize

            r = dataclasses.replace(r, diagnosis=summarize(samples[w], dtype))
        results.append(r)
    results = _grad_fn_parity(results)
    status, message, kind = _verdict(case, results)
    return CaseResult(**base, status=status, witnesses=tuple(results), message=message,
                      seconds=time.perf_counter() - start, mode=ref.mode,
                      notes=tuple(dict.fromkeys(notes)), error_kind=kind)


def _device_present(device: str) -> bool:
    import torch

    return device == "cuda" and torch.cuda.is_available()


def _op_result(case: Case, dtype: str, cache: dict, base: dict, start: float) -> CaseResult:
    from .opcheck import run_op_case

    try:
        results = run_op_case(case, dtype, cache)
    except CaseTimeout:
        raise
    except GradcheckError:
        raise
    except Exception as exc:  # the user's op raised: that is the case's error
        tb = traceback.format_exc(limit=-3)
        return CaseResult(**base, status=ERROR, error_kind="case", mode="op",
                          message=f"the op raised {type(exc).__name__}: {exc}\n{tb}",
                          seconds=time.perf_counter() - start)
    status, message, kind = _verdict(case, results)
    return CaseResult(**base, status=status, witnesses=tuple(results), message=message,
                      seconds=time.perf_counter() - start, mode="op", error_kind=kind)


def _grad_fn_parity(results: list) -> list:
    """The engine promises PyTorch's graph: a ``grad_fn`` graph that differs from torch's
    (names, order, AccumulateGrad leaves) fails the engine witness. Only a passed engine
    is compared: a skipped one (float16, bfloat16) recorded no graph."""
    by = {r.witness: r for r in results}
    engine, torch = by.get("engine"), by.get("torch")
    if (engine is None or torch is None or engine.status != PASSED
            or None in (engine.grad_fn, torch.grad_fn) or engine.grad_fn == torch.grad_fn):
        return results
    message = ("grad_fn graph differs from torch's: engine " + " <- ".join(engine.grad_fn)
               + " | torch " + " <- ".join(torch.grad_fn))
    failed = dataclasses.replace(engine, status=FAILED, message=message)
    return [failed if r is engine else r for r in results]


def _verdict(case: Case, results) -> tuple[str, str, str]:
    # A skipped witness (one that does not run in the dtype) counts for nothing; a run in
    # which every witness was skipped checked nothing, so it is skipped, not passed.
    if results and all(r.status == SKIPPED for r in results):
        return SKIPPED, "; ".join(f"{r.witness}: {r.message}" for r in results), ""
    errored = [r for r in results if r.status == ERROR]
    failed = [r for r in results if r.status == FAILED]
    if errored:
        return ERROR, "; ".join(f"{r.witness}: {r.message}" for r in errored), "internal"
    def explain(r) -> str:
        return f"{r.witness}: {r.message}" + (f" ({r.diagnosis})" if r.diagnosis else "")

    if case.expect == "fail":
        if failed:
            return PASSED, "caught as expected: " + "; ".join(map(explain, failed)), ""
        return FAILED, "expected a mismatch (expect = \"fail\"), but every witness agreed", ""
    if failed:
        return FAILED, "; ".join(map(explain, failed)), ""
    return PASSED, "", ""


def file_error(exc: CaseFileError) -> CaseResult:
    """A case-file problem as a result, so the report keeps it."""
    return CaseResult(name=exc.case or Path(exc.file or "?").name, file=exc.file or "",
                      line=exc.line, dtype="-", status=ERROR, message=str(exc),
                      error_kind="case")


def override(case: Case, *, seed: int | None = None, points: int | None = None,
             witnesses: Iterable[str] | None = None, device: str | None = None) -> Case:
    """``case`` with the command line's overrides applied (itself when there are none)."""
    changes = {}
    if seed is not None:
        changes["seed"] = seed
    if points is not None:
        changes["points"] = points
    if device is not None:
        changes["device"] = device
    if witnesses:
        wanted = set(witnesses)
        changes["witnesses"] = tuple(w for w in case.witnesses if w in wanted)
    return dataclasses.replace(case, **changes) if changes else case


def select(cases: list[Case], *, keyword: str | None = None, dtype: str | None = None,
           seed: int | None = None, points: int | None = None,
           witnesses: Iterable[str] | None = None,
           device: str | None = None) -> list[tuple[Case, str]]:
    """Apply command-line overrides: the (case, dtype) runs to do, in order."""
    runs = []
    for case in cases:
        if keyword and keyword not in case.name:
            continue
        case = override(case, seed=seed, points=points, witnesses=witnesses, device=device)
        for d in ([dtype] if dtype else case.dtypes):
            runs.append((case, d))
    return runs


def run(paths: Iterable[str | Path], *, keyword: str | None = None, dtype: str | None = None,
        seed: int | None = None, points: int | None = None,
        witnesses: Iterable[str] | None = None, timeout: float | None = DEFAULT_TIMEOUT,
        device: str | None = None,
        progress: Callable[[int, int, CaseResult], None] | None = None,
        jobs: int = 1, scheduler: str | None = None) -> RunResult:
    """Run every case under ``paths``.

    ``jobs`` > 1 (0: one per CPU) runs the cases in that many worker processes,
    ``scheduler`` on the Dask cluster at that address (see :mod:`gradcheck.parallel`);
    the result is the same as a serial run's, in the same order. ``progress(n, total,
    result)`` is called as each result comes in.

    Raises:
        CaseFileError: a path does not exist or is not a case file.
        ParallelError: ``scheduler`` is given but Dask's distributed package is missing or
            the scheduler cannot be reached.
        ValueError: ``jobs`` is negative.
    """
    start = time.perf_counter()
    cases, errors = read_paths(paths)
    # A file that cannot be read at all (no case name) is reported whatever -k says.
    results = [file_error(e) for e in errors
               if not keyword or e.case is None or keyword in e.case]
    overrides = dict(seed=seed, points=points, witnesses=witnesses, device=device)
    runs = select(cases, keyword=keyword, dtype=dtype, **overrides)
    if jobs != 1 or scheduler:
        from .parallel import run_parallel

        results += run_parallel(runs, overrides, timeout=timeout, jobs=jobs,
                                scheduler=scheduler, progress=progress)
        return RunResult(tuple(results), time.perf_counter() - start)
    cache: dict = {}
    for n, (case, d) in enumerate(runs, 1):
        result = run_case(case, d, cache=cache, timeout=timeout)
        results.append(result)
        if progress is not None:
            progress(n, len(runs), result)
    return RunResult(tuple(results), time.perf_counter() - start)
