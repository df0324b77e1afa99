"""Running a session: the cases under some paths, with the command line's overrides,
each in each of its dtypes, on an executor (:mod:`gradcheck.session.executors`: this process, a
pool of worker processes or a Dask cluster), into one :class:`~gradcheck.base.result.
RunResult`. How one case is checked is :mod:`gradcheck.checking.case` (not named
``gradcheck.check``: that is the library's ``check()``); a case that raises there becomes
an ``error`` result and the run goes on."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import time
from pathlib import Path
from typing import Callable, Iterable

from ..base.errors import CaseFileError
from ..base.result import CaseResult, RunResult
from ..cases import Case, read_entries
from ..checking.case import file_error, preflight
from ..process.interrupts import Interrupted, stop_on
from ..process.timelimit import DEFAULT_TIMEOUT
from .executors import executor

__all__ = ["RunOptions", "run", "select", "override"]


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What a caller (the command line, :func:`gradcheck.run`, the pytest plugin) sets
    for a run: which (case, dtype) runs there are, what of each case it overrides (None
    or empty: the case's own), and how the runs are executed. :func:`run`,
    :func:`select` and :func:`override` each read the fields they need."""

    # which runs: the cases whose name holds ``keyword``, each in ``dtype`` (None: in
    # each of its own dtypes)
    keyword: str | None = None
    dtype: str | None = None
    # what of each case is overridden: ``points`` and ``extreme_points`` (0: none)
    # replace its counts of bulk and extreme points (see
    # :func:`gradcheck.sampling.points.case_points`); ``witnesses`` keeps only these of
    # its witnesses; ``strict_shapes`` and ``strict`` turn the case's own on, never off,
    # as the case-file keys do; ``allow_op_modules`` adds to the patterns (``torch``,
    # ``mypkg.*``) of installed modules its op may come from (see
    # :mod:`gradcheck.checking.opcheck.loader`). A single string in either is one name.
    seed: int | None = None
    points: int | None = None
    extreme_points: int | None = None
    witnesses: tuple[str, ...] | None = None
    device: str | None = None
    strict_shapes: bool = False
    strict: bool = False
    allow_op_modules: tuple[str, ...] = ()
    # op checks switched off in every case, beside each case's own skip_checks
    skip_checks: tuple[str, ...] = ()
    # how they run: each case's time limit; ``jobs`` worker processes (0: one per CPU),
    # or the Dask cluster at ``scheduler``, or with ``isolate`` one worker process even
    # with ``jobs=1`` (see :func:`~gradcheck.session.executors.executor`); ``formulas``
    # is :func:`~gradcheck.checking.case.run_case`'s (False: none for a case that passes)
    timeout: float | None = DEFAULT_TIMEOUT
    jobs: int = 1
    scheduler: str | None = None
    isolate: bool = False
    formulas: bool = True

    def __post_init__(self):
        # frozen: the lists a caller gives are kept as tuples, a string as one name
        for name in ("witnesses", "allow_op_modules", "skip_checks"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name,
                                   (value,) if isinstance(value, str) else tuple(value))


def override(case: Case, options: RunOptions) -> Case:
    """``case`` with ``options``' overrides applied (itself when there are none)."""
    changes = {}
    if options.allow_op_modules:
        changes["allow_op_modules"] = tuple(dict.fromkeys((*case.allow_op_modules,
                                                           *options.allow_op_modules)))
    if options.skip_checks:
        changes["skip_checks"] = tuple(dict.fromkeys((*case.skip_checks,
                                                      *options.skip_checks)))
    if options.strict_shapes:   # --strict-shapes turns it on; without the flag each case says
        changes["strict_shapes"] = True
    if options.strict:   # --strict likewise: an approximate result fails
        changes["strict"] = True
    for name in ("seed", "points", "extreme_points", "device"):
        if getattr(options, name) is not None:
            changes[name] = getattr(options, name)
    if options.witnesses:
        wanted = set(options.witnesses)
        changes["witnesses"] = tuple(w for w in case.witnesses if w in wanted)
    return dataclasses.replace(case, **changes) if changes else case


def select(cases: list[Case], options: RunOptions = RunOptions()) -> list[tuple[Case, str]]:
    """The (case, dtype) runs ``options`` selects from ``cases``, each case overridden
    (:func:`override`), in order."""
    runs = []
    for case in cases:
        if options.keyword and options.keyword not in case.name:
            continue
        case = override(case, options)
        for d in ([options.dtype] if options.dtype else case.dtypes):
            runs.append((case, d))
    return runs


def run(paths: Iterable[str | Path], options: RunOptions = RunOptions(), *,
        progress: Callable[[int, int, CaseResult], None] | None = None,
        **changes) -> RunResult:
    """Run every case under ``paths`` (one path, or several) with ``options``, where
    each keyword of ``changes`` replaces the field of that name: ``run(paths, jobs=4,
    seed=1)`` is ``run(paths, RunOptions(jobs=4, seed=1))``.

    ``isolate`` runs the cases in a worker process even with ``jobs=1``, as ``gradcheck
    run`` does: an op that crashes, exits or hangs costs only its own case. Without it
    (and ``jobs=1``) they run in this process: quicker to start, easier to debug.
    Ctrl-C raises :class:`~gradcheck.process.interrupts.Interrupted` (a KeyboardInterrupt)
    whose ``result`` holds the runs finished so far, marked incomplete.

    ``jobs`` > 1 (0: one per CPU) runs the cases in that many worker processes,
    ``scheduler`` on the Dask cluster at that address (see :mod:`gradcheck.session.executors`);
    the result is the same as a serial run's, in the same order: file order, where a
    case-file error stands in the place of its case (or of its file, unreadable).
    ``progress(n, total, result)`` is called as each result comes in, and
    ``progress.started(case, dtype)``, where ``progress`` has that attribute, as each
    run begins (see :meth:`gradcheck.session.executors.Executor.map`); :func:`gradcheck.cli.progress.
    display` makes such a ``progress``.

    Raises:
        TypeError: a keyword of ``changes`` names no field of :class:`RunOptions`.
        CaseFileError: a path does not exist or is not a case file.
        ParallelError: ``scheduler`` is given but Dask's distributed package is missing or
            the scheduler cannot be reached.
        ValueError: ``jobs`` is negative or over 1024 (:data:`gradcheck.process.limits.MAX_JOBS`).
    """
    options = dataclasses.replace(options, **changes)
    start, began = time.perf_counter(), time.time()
    # a place for each result in file order (None until a run's comes in)
    done: list[CaseResult | None] = []
    try:
        # Interrupted, unlike a KeyboardInterrupt an op raises (gradcheck.session.tasks.guarded)
        with stop_on(signal.SIGINT, only_default=True):
            runs, places = _lay_out(read_entries(paths), options, done)
            _execute(executor(options.jobs, options.scheduler, isolate=options.isolate),
                     runs, places, options, progress, done)
    except Interrupted as stop:
        stop.result = RunResult(tuple(r for r in done if r is not None),
                                time.perf_counter() - start, interrupted=stop.name,
                                not_run=sum(r is None for r in done), started=began)
        raise
    return RunResult(tuple(done), time.perf_counter() - start, started=began)


def _lay_out(entries: list, options: RunOptions,
             done: list) -> tuple[list[tuple[Case, str]], list[int]]:
    """The runs ``options`` selects of the cases and errors in ``entries`` (file
    order), and where each run's result goes in ``done``; the errors' results are put
    in theirs, and a None for each run."""
    keyword = options.keyword
    runs: list[tuple[Case, str]] = []
    places: list[int] = []
    for entry in entries:
        if isinstance(entry, CaseFileError):
            # a file that cannot be read at all (no case name) is reported whatever
            # -k says
            if not keyword or entry.case is None or keyword in entry.case:
                done.append(file_error(entry))
            continue
        for one in select([entry], options):
            places.append(len(done))
            runs.append(one)
            done.append(None)
    return runs, places


def _execute(on, runs: list[tuple[Case, str]], places: list[int], options: RunOptions,
             progress, done: list) -> None:
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
    with contextlib.closing(on.map([runs[i] for i in rest], timeout=options.timeout,
                                   started=started, formulas=options.formulas)) as results:
        for n, (index, result) in enumerate(results, n + 1):
            done[places[rest[index]]] = result
            if progress is not None:
                progress(n, len(runs), result)
