"""What every executor of :mod:`gradcheck.session.executors` shares: the :class:`Task` a worker
receives, :func:`execute` (a task's run in a worker), :func:`guarded` (one case run that
an op cannot end: the serial executor's and the workers' alike) and :func:`lost` (the
result of a case whose worker could not give one)."""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
import time
import traceback
import uuid

from ..cases import Case
from ..checking.case import OP_CRASHED, OP_RAISED, case_base, op_failure, run_case
from ..base.errors import GradcheckError, describe_exception
from ..process.interrupts import Interrupted, ctrl_c_is_ours
from ..process.peak_memory import PeakMemory
from ..base.result import ERROR, CaseResult
from ..witnesses.registry import modules

__all__ = ["Task", "tasks_of", "execute", "guarded", "lost", "died", "ParallelError"]


class ParallelError(GradcheckError):
    """A parallel or distributed run cannot start: Dask's distributed package is not
    installed, the scheduler cannot be reached, or worker processes off a POSIX system."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One (case, dtype) run, as a worker needs it."""

    run_id: str                  # worker-side caches live for one run
    index: int                   # position in the run list
    key: int                     # which case of the run: its dtypes share a reference
    case: Case                   # overridden; its file absolute (ops are found from it)
    file: str                    # the case file as the serial run names it (the report's)
    dtype: str
    timeout: float | None
    grace: float = 0.0           # seconds past the timeout before a stuck case is killed
    formulas: bool = True        # run_case's: the gradients' formulas of a case that passed


def tasks_of(runs: list[tuple[Case, str]], timeout: float | None,
             grace: float = 0.0, formulas: bool = True) -> list[Task]:
    """The tasks of ``runs``, each case sent once per run id with its file absolute."""
    run_id = uuid.uuid4().hex
    keys: dict[int, tuple[int, Case]] = {}   # id(case) -> (key, the case as sent)
    tasks = []
    for index, (case, dtype) in enumerate(runs):
        if id(case) not in keys:
            # the worker's folder may differ: an op module is looked up from the case
            # file's folder, so the file travels absolute
            sent = dataclasses.replace(case, file=os.path.abspath(case.file))
            keys[id(case)] = (len(keys), sent)
        key, sent = keys[id(case)]
        tasks.append(Task(run_id, index, key, sent, case.file, dtype, timeout, grace,
                          formulas))
    return tasks


def died(how: str) -> str:
    return (f"the worker process died while running this case ({how}); the other cases "
            "ran on")


def _ended(case: Case, base: dict, message: str, kind: str = "",
           seconds: float = 0.0) -> CaseResult:
    """A case that ended without its check's result: ``kind`` when known, else a crash
    (of the op, for a case with one)."""
    if kind:
        return CaseResult(**base, status=ERROR, message=message, error_kind=kind,
                          seconds=seconds)
    if case.op is not None:
        # a process dying inside a user's op (a segfault in its extension, an
        # os._exit) is most likely the op's doing: its failure, as a raise would be
        return op_failure(case, base, message, OP_CRASHED, seconds=seconds)
    return CaseResult(**base, status=ERROR, message=message, seconds=seconds,
                      error_kind="internal")   # anywhere else, gradcheck's


def lost(task: Task, message: str, kind: str = "", seconds: float = 0.0) -> CaseResult:
    """The result of a task whose worker could not give one (see :func:`_ended`), after
    ``seconds``."""
    return _ended(task.case, dict(case_base(task.case, task.dtype), file=task.file),
                  message, kind, seconds)


def guarded(case: Case, dtype: str, *, cache: dict, timeout: float | None,
            formulas: bool = True) -> CaseResult:
    """:func:`gradcheck.checking.case.run_case`, where a ``SystemExit``, ``KeyboardInterrupt``
    or other ``BaseException`` raised while the case runs (an op calling ``sys.exit``,
    raising KeyboardInterrupt) is that case's result rather than the end of the run.
    Only :class:`Interrupted` (a signal the run is stopped by) goes through, and a
    KeyboardInterrupt that may be a real Ctrl-C: in the main thread of a process that
    is no worker, where someone else's SIGINT handler holds (a notebook's)."""
    start = time.perf_counter()
    try:
        return run_case(case, dtype, cache=cache, timeout=timeout, formulas=formulas)
    except Interrupted:
        raise
    except KeyboardInterrupt as exc:
        if not (_STATE.get("worker") or ctrl_c_is_ours()
                or threading.current_thread() is not threading.main_thread()):
            raise
        return _raised_itself(case, dtype, start, exc)
    except BaseException as exc:   # the Exceptions are run_case's; the rest are these
        return _raised_itself(case, dtype, start, exc)


def _raised_itself(case: Case, dtype: str, start: float, exc: BaseException) -> CaseResult:
    """The result of a case whose run raised ``exc`` (being handled)."""
    what = f"{type(exc).__name__}({', '.join(map(repr, exc.args))})"
    tb = traceback.format_exc(limit=-3)
    base, seconds = case_base(case, dtype), time.perf_counter() - start
    if case.op is not None:
        return op_failure(case, base, f"the op raised {what}, which would have ended "
                                      f"the run; the other cases ran on\n{tb}",
                          OP_RAISED, seconds=seconds)
    return _ended(case, base, f"{what} was raised while running this case\n{tb}",
                  seconds=seconds)


def _task_error(task: Task, message: str, kind: str) -> CaseResult:
    return CaseResult(name=task.case.name, file=task.file, line=task.case.line,
                      dtype=task.dtype, status=ERROR, message=message, error_kind=kind)


# --------------------------------------------------------------------------- in a worker

_LOCK = threading.Lock()   # Dask runs tasks in threads
_STATE: dict = {"run": None}


def _worker_case(task: Task) -> tuple[Case, dict]:
    """The case of ``task`` as this worker first received it in this run (its other
    dtypes then reuse its reference), and the reference cache that goes with it. The
    cases are kept for the run: the cache is keyed by their identity."""
    with _LOCK:
        if _STATE["run"] != task.run_id:   # a new run: forget the last one's cases
            _STATE.update(run=task.run_id, cases={}, refs={})
        case = _STATE["cases"].setdefault(task.key, task.case)
        return case, _STATE["refs"]


#: gradcheck's own modules nearly every case imports (with SymPy, through the reference),
#: besides the witnesses' modules, which their registry names
#: (:func:`gradcheck.witnesses.registry.modules`; torch comes with the torch witness's)
_PRELOAD = ("gradcheck.reference", "gradcheck.checking.opcheck", "gradcheck.bounds.model")


def as_worker() -> None:
    """Mark this process as a worker's: no Ctrl-C reaches it (its own session), so a
    KeyboardInterrupt here is a case's own doing (:func:`guarded`)."""
    _STATE["worker"] = True


def preload() -> None:
    """Import what nearly every case needs, once per process, before the first case's
    time limit starts (a serial run pays this inside its first case, under a limit of
    minutes; here it would eat a short limit in every new worker). A module that fails
    to import is left for the cases that need it to report.

    Raises:
        ModuleNotFoundError: a name here or in the witness registry names no module (a
            mistake in gradcheck or a plugin, not something a case can report).
    """
    if _STATE.get("preloaded"):
        return
    for module in _PRELOAD:
        _load(module, "gradcheck's preload list")
    for name, module in modules().items():
        _load(module, f"the {name} witness")
    try:
        # a kernel's first compile imports SymPy's printers and reads NumPy's names
        # (gradcheck.reference.kernelnames): once here, so a case process forked from this one
        # starts warm. SciPy is not imported: only a kernel that calls one of its
        # functions (erf, expit) imports it, half a second a process otherwise spends
        import sympy

        from ..reference.kernelnames import lambdify
        from ..reference.derivatives import MODULES

        lambdify([sympy.Symbol("x")], sympy.Symbol("x") + 1, modules=MODULES)
    except Exception:
        pass
    _STATE["preloaded"] = True


def _load(module: str, what: str) -> None:
    """Import ``module``, named by ``what``. An error raised while it is imported (a
    broken dependency) is left for the cases that need the module to report; a name
    that finds no module raises here."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # exc.name is the module not found: this one or a package above it names a
        # module that does not exist; anything else is a dependency the module imports
        if exc.name is not None and (module + ".").startswith(exc.name + "."):
            raise ModuleNotFoundError(f"{what} names the module {module!r}, which does "
                                      "not exist", name=module) from exc
    except Exception:
        pass


def execute(task: Task) -> CaseResult:
    """Run one task here (in a worker): :func:`guarded` on its case."""
    try:
        preload()
        case, refs = _worker_case(task)
        # (in our own workers, a case at a time; a Dask worker runs cases in threads)
        memory = PeakMemory() if _STATE.get("worker") else None
        # the time limit holds in a Dask worker's thread too (see gradcheck.process.timelimit)
        result = guarded(case, task.dtype, cache=refs, timeout=task.timeout,
                         formulas=task.formulas)
    except Exception as exc:
        return _task_error(task, f"{describe_exception(exc)}\n"
                                 f"{traceback.format_exc(limit=-3)}", "internal")
    # (a message located in the case file, an op's that cannot be imported, names it
    # as the run was given it, not as it travelled)
    sent = f"{task.case.file}:"
    message = (task.file + result.message[len(sent) - 1:]
               if result.message.startswith(sent) else result.message)
    return dataclasses.replace(result, file=task.file, message=message,
                               peak_memory=memory.above() if memory else None)
