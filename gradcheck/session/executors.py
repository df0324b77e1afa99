"""Where the runs of a session run: in worker processes (:class:`Pool`, of
:mod:`gradcheck.session.pool`: one by default on the command line, ``--jobs N`` for more), in
this process (:class:`Serial`: ``--in-process``, and the library's ``gradcheck.run``
by default) or on a Dask distributed cluster (``--scheduler ADDRESS``, :class:`Dask`).
Each is an :class:`Executor`: ``map(runs, timeout=..., started=...)`` yields ``(index,
result)`` for each (case, dtype) run as it completes, calling ``started(index)`` as
each begins (what a progress display shows running), and :func:`gradcheck.session.runner.run`
puts the results back in the runs' order, so every executor gives the report a serial
run gives.

What travels to a worker is a :class:`~gradcheck.session.tasks.Task` holding the validated
:class:`~gradcheck.cases.Case` itself (pickled; its formula DAG is written out
iteratively, so a deep formula pickles too), with the run's overrides already applied:
workers never read a case file. Each calls :func:`gradcheck.session.tasks.guarded` (around
:func:`gradcheck.checking.case.run_case`, the one definition of how a case is run). Points and
cotangents derive from (seed, case, dtype, index) only, so a case gives the same result
whichever process runs it. A case's op is named by ``"module:attr"`` and imported in the
worker from the folder of the case file, so the op modules must be importable at the
same path there.

Only a worker process isolates a case: in this process an op that crashes, calls
``os._exit`` or blocks SIGALRM takes the run with it (an op raising ``SystemExit`` or
``KeyboardInterrupt`` is still only its case's failure, see :func:`~gradcheck.session.tasks.
guarded`).
"""

from __future__ import annotations

from typing import Callable, Generator, Iterator, Protocol

from ..cases import Case
from .pool import Pool
from ..base.result import CaseResult
from .tasks import ParallelError, Task, died, execute, guarded, lost, tasks_of

__all__ = ["Executor", "Serial", "Pool", "Dask", "executor", "Task", "ParallelError",
           "execute"]

CONNECT_TIMEOUT = "10s"   # to reach a Dask scheduler


class Executor(Protocol):
    """Runs (case, dtype) pairs; what :func:`gradcheck.session.runner.run` hands its runs to."""

    def map(self, runs: list[tuple[Case, str]], *, timeout: float | None,
            started: Callable[[int], None] | None = None, formulas: bool = True
            ) -> Generator[tuple[int, CaseResult], None, None]:
        """``(index in runs, result)`` for every run, each as it completes; ``timeout``
        (seconds, None: none) is each run's time limit, ``formulas`` run_case's.
        ``started(index)`` is called, in the caller's thread, as a run begins (as near
        that as the executor can tell). Closing the generator early stops what is still
        running (the workers are killed)."""
        ...


def executor(jobs: int = 1, scheduler: str | None = None, *,
             isolate: bool = False) -> Executor:
    """The executor of ``jobs`` worker processes (0: one per CPU; 1: this process,
    unless ``isolate``: one worker process), or of the Dask cluster at ``scheduler``.
    More workers than the machine runs at once (its cores, its memory at
    :data:`~gradcheck.process.limits.WORKER_BYTES` a worker) are lowered to that, with a
    ``RuntimeWarning`` that says so (the CLI lowers them first, with a note).

    Raises:
        ValueError: ``jobs`` is negative or over :data:`~gradcheck.process.limits.MAX_JOBS`.
    """
    from ..process.limits import cap_jobs, jobs_problem

    problem = jobs_problem(jobs)
    if problem:
        raise ValueError(problem)
    if scheduler:
        return Dask(scheduler)
    if jobs == 1 and not isolate:
        return Serial()
    workers, note = cap_jobs(jobs)
    if note:
        import warnings

        warnings.warn(note, RuntimeWarning, stacklevel=3)
    return Pool(workers)


class Serial:
    """In this process, one run after the other; a case's reference is built once for
    all its dtypes."""

    def map(self, runs, *, timeout, started=None, formulas=True):
        cache: dict = {}
        for index, (case, dtype) in enumerate(runs):
            if started is not None:
                started(index)
            yield index, guarded(case, dtype, cache=cache, timeout=timeout,
                                 formulas=formulas)


# --------------------------------------------------------------------------- Dask

class Dask:
    """The Dask distributed cluster whose scheduler is at ``address``."""

    def __init__(self, address: str):
        self.address = address

    def map(self, runs, *, timeout, started=None, formulas=True):
        tasks = tasks_of(runs, timeout, formulas=formulas)
        if not tasks:
            return
        distributed, client = _connect(self.address)
        try:
            yield from _dask_results(distributed, client, tasks, started)
        finally:
            client.close()


def _connect(address: str):
    """Dask's distributed module and a client of the scheduler at ``address``."""
    try:
        import distributed
    except ImportError:
        raise ParallelError("--scheduler needs Dask's distributed package: "
                            "pip install 'gradcheck[distributed]'") from None
    try:
        # a malformed address or unknown host fails here at once (the Client would
        # leave a half-made client behind that hangs on exit)
        distributed.comm.resolve_address(address)
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except Exception as exc:
        raise ParallelError(f"cannot reach the Dask scheduler at {address!r}: "
                            f"{type(exc).__name__}: {exc}") from None
    return distributed, client


def _dask_results(distributed, client, tasks: list[Task],
                  started: Callable[[int], None] | None = None
                  ) -> Iterator[tuple[int, CaseResult]]:
    def gather(future, task: Task) -> CaseResult:
        try:
            return future.result()
        except distributed.KilledWorker:
            raise
        except Exception as exc:
            return lost(task, f"the Dask task failed: {type(exc).__name__}: {exc}",
                         "internal")
        finally:
            future.release()   # forget it: a later worker death must not recompute it

    futures = {}
    for t in tasks:
        future = client.submit(execute, t, key=f"gradcheck-{t.run_id}-{t.index}",
                               pure=False)
        futures[future.key] = (future, t)
        # A run starts here as far as a display can tell: when a Dask worker takes it up
        # is the scheduler's business (a plugin on it would tell, at the cost of a
        # round trip per task), so queued runs show as running too.
        if started is not None:
            started(t.index)
    # KilledWorker: the workers that ran the task died, as many times as the scheduler's
    # allowed-failures setting allows. It may also hit a case that was merely queued on
    # a dying worker, so each such case runs again afterwards, alone on the cluster,
    # where a death can only be its own.
    suspects = []
    for future in distributed.as_completed([f for f, _ in futures.values()],
                                           loop=client.loop):
        _, task = futures.pop(future.key)
        try:
            result = gather(future, task)
        except distributed.KilledWorker:
            suspects.append(task)
            continue
        yield task.index, result
    for task in suspects:
        future = client.submit(execute, task, pure=False,
                               key=f"gradcheck-{task.run_id}-{task.index}-alone")
        try:
            result = gather(future, task)
        except distributed.KilledWorker:
            result = lost(task, died("Dask's KilledWorker: it was run alone and its "
                                       "worker died"))
        yield task.index, result
