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
from .compare import Tally, witness_tolerance
from .diagnose import Sample
from .dtypes import round_to
from .errors import CaseFileError, GradcheckError
from .result import ERROR, FAILED, PASSED, SKIPPED, CaseResult, RunResult
from .sampling import case_points, case_rng

DEFAULT_TIMEOUT = 300.0  # seconds one case (one dtype) may take

# CaseResult.error_kind beyond "case" (a bad case file or op import) and "internal" (a
# bug in gradcheck): an op that raised is a failure of that op, as a wrong gradient is
# (status failed, or caught for expect = "fail"); a case past its time limit is an error
# of its own kind, neither the case file's fault nor gradcheck's.
OP_RAISED, OP_CRASHED, TIMEOUT = "op raised", "op crashed", "timeout"


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


def _bounds_at(case: Case, point: dict, v: np.ndarray):
    """``dtype -> rounding-error bounds`` at one point, each computed once."""
    from .rounding import error_bounds

    found: dict = {}

    def bounds(dtype: str) -> dict:
        if dtype not in found:
            found[dtype] = error_bounds(case, point, v, dtype)
        return found[dtype]

    return bounds


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
            points = list(case_points(case, dtype))   # the bulk's, then the extremes
            vs = [cotangent(case, dtype, i) for i in range(len(points))]
            expectations = ref.evaluations([p.values for p in points], vs)
            for i, (point, v, expected) in enumerate(zip(points, vs, expectations)):
                notes.extend(point.notes)
                bounds = _bounds_at(case, point.values, v)
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
                    tallies[w].add(got, expected, i,
                                   witness_tolerance(dtype, bounds, got.error))
                    samples[w].append(Sample(i, 0, got.grads, expected.grads,
                                             values=point.values))
    except CaseTimeout as exc:
        return CaseResult(**base, status=ERROR, message=str(exc), error_kind=TIMEOUT,
                          seconds=time.perf_counter() - start)
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

            r = dataclasses.replace(r, diagnosis=summarize(samples[w], dtype,
                                                           reference=(case.output,)))
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

    from .backends.op import OpDtypeError

    try:
        results = run_op_case(case, dtype, cache)
    except OpDtypeError as exc:   # an engine op in float16/bfloat16: as its witness is
        return CaseResult(**base, status=SKIPPED, message=str(exc), mode="op",
                          seconds=time.perf_counter() - start)
    except GradcheckError:   # a time-out, an op that cannot be imported, a bad case
        raise
    except Exception as exc:
        if not _raised_by_op(exc):
            raise   # gradcheck's own checking code raised: an internal error
        tb = traceback.format_exc(limit=-3)
        return op_failure(case, base, f"the op raised {type(exc).__name__}: {exc}\n{tb}",
                          OP_RAISED, seconds=time.perf_counter() - start)
    status, message, kind = _verdict(case, results)
    return CaseResult(**base, status=status, witnesses=tuple(results), message=message,
                      seconds=time.perf_counter() - start, mode="op", error_kind=kind,
                      notes=tuple(dict.fromkeys(n for r in results for n in r.notes)))


# Where gradcheck's own code lives, and the parts of it an op runs on (the engine a
# gradcheck.engine.Function runs on, and the Runner that calls the op): an exception
# raised there may well be the op's doing (a backward returning too many gradients).
_PACKAGE = Path(__file__).resolve().parent
_OP_SIDE = (_PACKAGE / "engine", _PACKAGE / "backends" / "op.py")


def _raised_by_op(exc: BaseException) -> bool:
    """Whether ``exc`` came from the op (its code, or torch, NumPy or the engine running
    it) rather than from gradcheck's checking code: where it was raised, i.e. the file
    of the innermost frame of its traceback."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    if not frames:
        return True
    name = frames[-1][0].f_code.co_filename
    if name.startswith("<lambdifygenerated"):   # the reference's own compiled kernel
        return False
    where = Path(name)
    if not where.is_absolute():   # other generated code ("<string>", torch.fx's): the op's
        return True
    where = where.resolve()
    if not where.is_relative_to(_PACKAGE):
        return True
    return any(where == side or where.is_relative_to(side) for side in _OP_SIDE)


def op_failure(case: Case, base: dict, message: str, kind: str,
               seconds: float = 0.0) -> CaseResult:
    """The result of an op that raised (or crashed its process): the op's failure, or
    what ``expect = "fail"`` asked for."""
    if case.expect == "fail":
        return CaseResult(**base, status=PASSED, mode="op", error_kind=kind,
                          seconds=seconds, message=f"caught as expected: {message}")
    return CaseResult(**base, status=FAILED, mode="op", error_kind=kind, seconds=seconds,
                      message=message)


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
             witnesses: Iterable[str] | None = None, device: str | None = None,
             extreme_points: int | None = None, strict_shapes: bool | None = None) -> Case:
    """``case`` with the command line's overrides applied (itself when there are none)."""
    changes = {}
    if strict_shapes:   # --strict-shapes turns it on; without the flag each case says
        changes["strict_shapes"] = True
    if seed is not None:
        changes["seed"] = seed
    if points is not None:
        changes["points"] = points
    if extreme_points is not None:
        changes["extreme_points"] = extreme_points
    if device is not None:
        changes["device"] = device
    if witnesses:
        wanted = set(witnesses)
        changes["witnesses"] = tuple(w for w in case.witnesses if w in wanted)
    return dataclasses.replace(case, **changes) if changes else case


def select(cases: list[Case], *, keyword: str | None = None, dtype: str | None = None,
           seed: int | None = None, points: int | None = None,
           witnesses: Iterable[str] | None = None,
           device: str | None = None,
           extreme_points: int | None = None,
           strict_shapes: bool | None = None) -> list[tuple[Case, str]]:
    """Apply command-line overrides: the (case, dtype) runs to do, in order."""
    runs = []
    for case in cases:
        if keyword and keyword not in case.name:
            continue
        case = override(case, seed=seed, points=points, witnesses=witnesses, device=device,
                        extreme_points=extreme_points, strict_shapes=strict_shapes)
        for d in ([dtype] if dtype else case.dtypes):
            runs.append((case, d))
    return runs


def run(paths: Iterable[str | Path], *, keyword: str | None = None, dtype: str | None = None,
        seed: int | None = None, points: int | None = None,
        witnesses: Iterable[str] | None = None, timeout: float | None = DEFAULT_TIMEOUT,
        device: str | None = None,
        progress: Callable[[int, int, CaseResult], None] | None = None,
        jobs: int = 1, scheduler: str | None = None,
        extreme_points: int | None = None, strict_shapes: bool | None = None) -> RunResult:
    """Run every case under ``paths``.

    ``strict_shapes`` makes every op case's op.shapes fail what autograd accepts but
    changes, as the case-file key does.

    ``points`` and ``extreme_points`` (0: none) replace every case's counts of bulk and
    extreme points (see :func:`gradcheck.sampling.case_points`).

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
    overrides = dict(seed=seed, points=points, witnesses=witnesses, device=device,
                     extreme_points=extreme_points, strict_shapes=strict_shapes or None)
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
