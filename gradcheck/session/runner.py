"""Running a session: the cases under some paths, with the command line's overrides,
each in each of its dtypes, on an executor (:mod:`gradcheck.session.executors`: this process, a
pool of worker processes or a Dask cluster), into one :class:`~gradcheck.base.result.
RunResult`. How one case is checked is :mod:`gradcheck.checking.case` (not named
``gradcheck.check``: that is the library's ``check()``); a case that raises there becomes
an ``error`` result and the run goes on."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import signal
import time
from pathlib import Path
from typing import Callable, Iterable

from ..cases import Case, read_entries
# run_case and the helpers below are imported from here by callers of the runner that
# predate gradcheck.checking.case: they stay importable from this module
from ..checking.case import (OP_CRASHED, OP_RAISED, TIMEOUT, cotangent, file_error, op_failure,
                             preflight, run_case)
from ..base.errors import CaseFileError
from ..process.interrupts import Interrupted, stop_on
from .executors import executor
from ..base.result import CaseResult, RunResult
from ..process.timelimit import DEFAULT_TIMEOUT, CaseTimeout

__all__ = ["run", "select", "override", "run_case", "cotangent", "file_error",
           "op_failure", "CaseTimeout", "DEFAULT_TIMEOUT", "OP_RAISED", "OP_CRASHED",
           "TIMEOUT"]


def override(case: Case, *, seed: int | None = None, points: int | None = None,
             witnesses: Iterable[str] | None = None, device: str | None = None,
             extreme_points: int | None = None, strict_shapes: bool | None = None,
             allow_op_modules: Iterable[str] = (), strict: bool | None = None) -> Case:
    """``case`` with the command line's overrides applied (itself when there are none).
    ``allow_op_modules`` adds to the patterns of installed modules its op may come from
    (a single string is one pattern); ``strict`` (as ``strict_shapes``) turns the
    case's own on, never off."""
    changes = {}
    if allow_op_modules:
        given = [allow_op_modules] if isinstance(allow_op_modules, str) else allow_op_modules
        changes["allow_op_modules"] = tuple(dict.fromkeys((*case.allow_op_modules, *given)))
    if strict_shapes:   # --strict-shapes turns it on; without the flag each case says
        changes["strict_shapes"] = True
    if strict:   # --strict likewise: an approximate result fails
        changes["strict"] = True
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
           strict_shapes: bool | None = None,
           allow_op_modules: Iterable[str] = (),
           strict: bool | None = None) -> list[tuple[Case, str]]:
    """Apply command-line overrides: the (case, dtype) runs to do, in order."""
    runs = []
    for case in cases:
        if keyword and keyword not in case.name:
            continue
        case = override(case, seed=seed, points=points, witnesses=witnesses, device=device,
                        extreme_points=extreme_points, strict_shapes=strict_shapes,
                        allow_op_modules=allow_op_modules, strict=strict)
        for d in ([dtype] if dtype else case.dtypes):
            runs.append((case, d))
    return runs


def run(paths: Iterable[str | Path], *, keyword: str | None = None, dtype: str | None = None,
        seed: int | None = None, points: int | None = None,
        witnesses: Iterable[str] | None = None, timeout: float | None = DEFAULT_TIMEOUT,
        progress: Callable[[int, int, CaseResult], None] | None = None,
        device: str | None = None, jobs: int = 1, scheduler: str | None = None,
        extreme_points: int | None = None, strict_shapes: bool | None = None,
        allow_op_modules: Iterable[str] = (), isolate: bool = False,
        formulas: bool = True, strict: bool | None = None) -> RunResult:
    """Run every case under ``paths`` (one path, or several).

    ``isolate`` runs the cases in a worker process even with ``jobs=1``, as ``gradcheck
    run`` does: an op that crashes, exits or hangs costs only its own case. Without it
    (and ``jobs=1``) they run in this process: quicker to start, easier to debug.
    Ctrl-C raises :class:`~gradcheck.process.interrupts.Interrupted` (a KeyboardInterrupt)
    whose ``result`` holds the runs finished so far, marked incomplete.

    ``allow_op_modules``: patterns (``torch``, ``mypkg.*``) of installed modules an
    ``op`` may come from (see :mod:`gradcheck.checking.opcheck.loader`). ``strict_shapes`` makes
    every op case's op.shapes fail what autograd accepts but changes, and ``strict``
    every approximate result a failure, as the case-file keys do; ``formulas`` is :func:`~gradcheck.checking.case.run_case`'s (False: none for
    a case that passes).

    ``points`` and ``extreme_points`` (0: none) replace every case's counts of bulk and
    extreme points (see :func:`gradcheck.sampling.points.case_points`).

    ``jobs`` > 1 (0: one per CPU) runs the cases in that many worker processes,
    ``scheduler`` on the Dask cluster at that address (see :mod:`gradcheck.session.executors`);
    the result is the same as a serial run's, in the same order: file order, where a
    case-file error stands in the place of its case (or of its file, unreadable).
    ``progress(n, total, result)`` is called as each result comes in, and
    ``progress.started(case, dtype)``, where ``progress`` has that attribute, as each
    run begins (see :meth:`gradcheck.session.executors.Executor.map`); :func:`gradcheck.cli.progress.
    display` makes such a ``progress``.

    Raises:
        CaseFileError: a path does not exist or is not a case file.
        ParallelError: ``scheduler`` is given but Dask's distributed package is missing or
            the scheduler cannot be reached.
        ValueError: ``jobs`` is negative or over 1024 (:data:`gradcheck.process.limits.MAX_JOBS`).
    """
    start, began = time.perf_counter(), time.time()
    # a place for each result in file order (None until a run's comes in)
    done: list[CaseResult | None] = []
    try:
        # Interrupted, unlike a KeyboardInterrupt an op raises (gradcheck.session.tasks.guarded)
        with stop_on(signal.SIGINT, only_default=True):
            runs_of = functools.partial(
                select, keyword=keyword, dtype=dtype, seed=seed, points=points,
                witnesses=witnesses, device=device, extreme_points=extreme_points,
                strict_shapes=strict_shapes or None, allow_op_modules=allow_op_modules,
                strict=strict or None)
            runs, places = _lay_out(read_entries(paths), runs_of, keyword, done)
            _execute(executor(jobs, scheduler, isolate=isolate), runs, places, timeout,
                     progress, done, formulas)
    except Interrupted as stop:
        stop.result = RunResult(tuple(r for r in done if r is not None),
                                time.perf_counter() - start, interrupted=stop.name,
                                not_run=sum(r is None for r in done), started=began)
        raise
    return RunResult(tuple(done), time.perf_counter() - start, started=began)


def _lay_out(entries: list, runs_of, keyword: str | None,
             done: list) -> tuple[list[tuple[Case, str]], list[int]]:
    """The runs of the cases and errors in ``entries`` (file order), and where each
    run's result goes in ``done``; the errors' results are put in theirs, and a None
    for each run."""
    runs: list[tuple[Case, str]] = []
    places: list[int] = []
    for entry in entries:
        if isinstance(entry, CaseFileError):
            # a file that cannot be read at all (no case name) is reported whatever
            # -k says
            if not keyword or entry.case is None or keyword in entry.case:
                done.append(file_error(entry))
            continue
        for one in runs_of([entry]):
            places.append(len(done))
            runs.append(one)
            done.append(None)
    return runs, places


def _execute(on, runs: list[tuple[Case, str]], places: list[int], timeout: float | None,
             progress, done: list, formulas: bool = True) -> None:
    """The results of ``runs`` on the executor ``on``, each put in its place in ``done``
    (``places[i]`` for ``runs[i]``) as it comes in; ``progress`` told of each."""
    planned = getattr(progress, "planned", None)
    if planned is not None:   # the count, shown before the first run ends (workers start)
        planned(len(runs))
    # what can be refused unrun is answered here, before any worker is started
    answered = {i: preflight(case, dtype) for i, (case, dtype) in enumerate(runs)}
    rest = [i for i, result in answered.items() if result is None]
    n = 0
    for i, result in answered.items():
        if result is not None:
            done[places[i]] = result
            n += 1
            if progress is not None:
                progress(n, len(runs), result)
    if not rest:
        return
    began = getattr(progress, "started", None)
    started = None if began is None else (lambda k: began(*runs[rest[k]]))
    with contextlib.closing(on.map([runs[i] for i in rest], timeout=timeout,
                                   started=started, formulas=formulas)) as results:
        for n, (index, result) in enumerate(results, n + 1):
            done[places[rest[index]]] = result
            if progress is not None:
                progress(n, len(runs), result)
